"""`parley chat` in a day's use (issue 26, the command line): text piped in after the prompt,
throwaway runs (`--no-store`, `[chat] store`), one key answers the question (a shell
command's prefixes among the keys), each tool input shown once, `--quiet` for scripts.

`parley chat` runs as a subprocess with its own `parley serve`, the scripted model over HTTP;
the terminal is a pty made the controlling terminal (what a shell does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import server_env
from hypothesis import given
from hypothesis import strategies as st
from parley.chat_prompt import BACKTICK_RUNS, with_piped_text
from parley.chat_question import choices, first_answer, key_line
from parley.chat_view import input_worth_showing
from parley.config import SandboxSettings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import sandbox_status
from parley.store import Store
from parley.transcript import sessions_json
from test_cli import (
    QUESTION_END,
    SLOW_ANSWER,
    _take_terminal,
    read_until,
    run_parley,
    start_chat,
)

_here = sandbox_status(SandboxSettings())
needs_sandbox = pytest.mark.skipif(
    not _here.sandboxed, reason=f"commands cannot run sandboxed here: {_here.reason}"
)


def sent_prompt(fake: FakeLLM) -> str:
    """The user's last message in the model's last request."""
    users = [m for m in fake.requests[-1].body["messages"] if m["role"] == "user"]
    return str(users[-1]["content"])


def chat_with_stdin(
    *args: str, stdin: str | int, env: dict[str, str]
) -> subprocess.CompletedProcess:
    """`parley chat ARGS` with `stdin` piped in (text) or given as a descriptor."""
    piped = isinstance(stdin, str)
    return subprocess.run(
        [sys.executable, "-m", "parley", "chat", *args],
        input=stdin if piped else None,
        stdin=None if piped else stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        start_new_session=True,
    )


def listed_sessions(env: dict[str, str]) -> list[dict]:
    """What `parley sessions --json` lists (read here, in this process)."""
    store = Store.open_in(Path(env["PARLEY_HOME"]))
    try:
        return json.loads(sessions_json(store))
    finally:
        store.close()


class Terminal:
    """A pty; `chat` starts `parley chat ARGS` with it as its controlling terminal."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.started: list[subprocess.Popen[bytes]] = []

    def chat(self, *args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        slave = self.slave
        # stdin the terminal too, as at a shell: nobody types into it, it is not read.
        chat = start_chat(
            *args,
            env=env,
            stdin=slave,
            preexec_fn=lambda: _take_terminal(slave),
            pass_fds=(slave,),
        )
        self.started.append(chat)
        return chat

    def asked(self) -> str:
        """What the terminal shows up to the end of the question."""
        return read_until(self.master, QUESTION_END).decode().replace("\r\n", "\n")

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def cooked(self) -> bool:
        """Whether the terminal reads lines and echoes (not in cbreak mode)."""
        flags = termios.tcgetattr(self.slave)[3]
        return bool(flags & termios.ICANON) and bool(flags & termios.ECHO)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    pty = Terminal()
    try:
        yield pty
    finally:
        for chat in pty.started:  # one that never got its answer
            if chat.poll() is None:
                chat.kill()
                chat.wait()
        os.close(pty.slave)
        os.close(pty.master)


# --- 1. text piped in follows the prompt ----------------------------------------------------


def test_piped_text_follows_the_prompt_as_a_stdin_block(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = server_env(fake, tmp_path / "home")
    fake.set_script([Reply(text="Looks fine.")])
    code = "def f():\n    return 1\n"
    done = chat_with_stdin("Review this", "--cwd", str(workspace), stdin=code, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Looks fine.\n"
    assert sent_prompt(fake) == "Review this\n\n```stdin\ndef f():\n    return 1\n```"
    # (Nothing piped, stdin at its end at once: the words alone, as every run_parley test
    # sends; `-`: test_cli.py's test_chat_dash_reads_the_prompt_from_stdin.)


@given(
    words=st.text(min_size=1, max_size=40),
    piped=st.lists(
        st.sampled_from(["`", "~", "\n", "\r", "a", " ", "```", "````", "stdin", "é", "\x00"]),
        max_size=30,
    ).map("".join)
    | st.text(max_size=60),
)
def test_piped_text_is_fenced_so_nothing_in_it_closes_the_block(words: str, piped: str) -> None:
    prompt = with_piped_text(words, piped)
    assert prompt.startswith(words + "\n\n")
    opening, _, rest = prompt[len(words) + 2 :].partition("\n")
    fence = opening.removesuffix("stdin")
    assert opening == fence + "stdin" and set(fence) == {"`"} and len(fence) >= 3
    # No run of backticks in the text is as long as the fence (CommonMark: it cannot close it).
    assert all(len(run) < len(fence) for run in BACKTICK_RUNS.findall(piped))
    body = rest.removesuffix(fence)
    assert rest.endswith("\n" + fence) and body == (piped if piped.endswith("\n") else piped + "\n")


# --- 2. throwaway runs ----------------------------------------------------------------------


def test_no_store_keeps_no_session_and_says_so(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = server_env(fake, tmp_path / "home")
    fake.set_script([Reply(text="Gone soon.")])
    done = run_parley("chat", "Throwaway", "--no-store", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Gone soon.\n"
    assert "session not kept (--no-store)" in done.stderr.splitlines()[-1]

    # Nor after Ctrl-C.
    fake.set_script([SLOW_ANSWER])
    chat = start_chat("Talk.", "--no-store", "--cwd", str(workspace), env=env)
    assert chat.stdout is not None
    read_until(chat.stdout.fileno(), b"word word")
    chat.send_signal(signal.SIGINT)
    _, stderr = chat.communicate(timeout=60)
    assert chat.returncode == 130, stderr
    assert listed_sessions(env) == []

    # A session kept already stays kept: --no-store cannot continue one.
    refused = run_parley("chat", "More", "--no-store", "--session", "last", env=env)
    assert refused.returncode == 2 and "--no-store starts a new session" in refused.stderr


def test_the_config_default_keeps_no_chat_and_store_overrides_it(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = server_env(fake, tmp_path / "home")
    config = tmp_path / "config.toml"
    env["PARLEY_CONFIG"] = str(config)
    config.write_text("[chat]\nstore = false\n")
    fake.set_script([Reply(text="One.")])
    assert run_parley("chat", "Not kept", "--cwd", str(workspace), env=env).returncode == 0
    assert listed_sessions(env) == []
    fake.set_script([Reply(text="Two.")])
    assert run_parley("chat", "Kept", "--store", "--cwd", str(workspace), env=env).returncode == 0
    assert [s["title"] for s in listed_sessions(env)] == ["Kept"]

    config.write_text("[chat]\nstor = false\n")  # a typo is refused, not ignored
    done = run_parley("chat", "Typo", "--cwd", str(workspace), env=env)
    assert done.returncode == 2 and "chat" in done.stderr and "stor" in done.stderr


# --- 3. one key answers; 6. a shell command's question ----------------------------------------
# (one key and the terminal's mode restored: test_an_input_asked_about_is_not_shown_again;
# after Ctrl-C at the question: test_cli.py's test_ctrl_c_at_the_question_cancels_…)


@needs_sandbox
def test_a_command_question_offers_the_servers_prefixes(
    fake: FakeLLM, tmp_path: Path, workspace: Path, terminal: Terminal
) -> None:
    env = server_env(fake, tmp_path / "home")
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("run_command", {"command": "echo hello"}),)),
            Reply(text="Said hello."),
        ]
    )
    chat = terminal.chat("Greet.", "--cwd", str(workspace), env=env)
    asked = terminal.asked()
    terminal.type(b"2")  # always `echo` here
    stdout, stderr = chat.communicate(timeout=60)
    assert "Parley asks to run `echo hello`:\n" in asked
    assert f"\n  in {workspace}\n" in asked
    assert "[y] once  [1] always `echo hello` here  [2] always `echo` here  [n/Enter] no: " in asked
    assert "[a]" not in asked and "UNSANDBOXED" not in asked
    assert chat.returncode == 0, stderr.decode()
    assert stdout == b"Said hello.\n" and "hello" in stderr.decode()

    # The rule holds: another `echo` in this workspace runs unasked, with no terminal at all.
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("run_command", {"command": "echo again"}),)),
            Reply(text="Again."),
        ]
    )
    done = run_parley("chat", "Again.", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert "no terminal to ask on" not in done.stderr and "✓ Run `echo again`" in done.stderr


def test_an_unsandboxed_command_question_says_so_and_offers_no_always(
    fake: FakeLLM, tmp_path: Path, workspace: Path, terminal: Terminal
) -> None:
    env = {**server_env(fake, tmp_path / "home"), "PARLEY_SANDBOX": "off"}
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("run_command", {"command": "touch made"}),)),
            Reply(text="Not run."),
        ]
    )
    chat = terminal.chat("Make it.", "--cwd", str(workspace), env=env)
    asked = terminal.asked()
    terminal.type(b"a1\r")  # `a`, `1`: not offered, ignored; Enter: the default, no
    stdout, stderr = chat.communicate(timeout=60)
    assert "Runs UNSANDBOXED: PARLEY_SANDBOX=off" in asked
    assert asked.rstrip().endswith("Allow it? [y] once  [n/Enter] no:")
    assert chat.returncode == 0, stderr.decode()
    assert stdout == b"Not run.\n"
    assert not (workspace / "made").exists()
    assert "rejected" in json.dumps(fake.requests[-1].body)


# --- 4. each tool input once; 5. --quiet ------------------------------------------------------

ADDED_LINE = "    # width times height\n"


def three_calls(fake: FakeLLM, code: str) -> None:
    """A read, an edit of geometry.py, an eval of `code`; then the answer."""
    edit = {
        "path": "geometry.py",
        "old_text": "    return width * height\n",
        "new_text": ADDED_LINE + "    return width * height\n",
    }
    fake.set_script(
        [
            Reply(
                thinking="Look first.",
                tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),),
            ),
            Reply(tool_calls=(ScriptedToolCall("edit_file", edit),)),
            Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": code}),)),
            Reply(text="Commented."),
        ]
    )


def test_each_tool_input_is_shown_once(fake: FakeLLM, tmp_path: Path, workspace: Path) -> None:
    code = "import geometry\ngeometry.area(3, 4)"
    three_calls(fake, code)
    done = run_parley(
        "chat",
        "Comment it.",
        "--yes",
        "--cwd",
        str(workspace),
        env=server_env(fake, tmp_path / "home"),
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr
    # The title says it all: no arguments as JSON.
    assert "→ Read geometry.py\n✓ Read geometry.py: " in err
    assert '"path"' not in err and "old_text" not in err
    # The edit: its title, its summary line without the excerpt, the diff once.
    assert "→ Edit geometry.py\n✓ Edit geometry.py: Edited geometry.py (+1 -0 lines).\n" in err
    assert "now read" not in err
    assert err.count("+" + ADDED_LINE) == 1 and "--- a/geometry.py" in err
    # The code once, as code.
    assert err.count("geometry.area(3, 4)") == 1
    assert "→ Run Python\n  ```python\n  import geometry\n  geometry.area(3, 4)\n  ```" in err


def test_an_input_asked_about_is_not_shown_again(
    fake: FakeLLM, tmp_path: Path, workspace: Path, terminal: Terminal
) -> None:
    """Each question answered by one key (no Enter); the code and the diff shown in the
    question, and not again on stderr."""
    code = "import geometry\ngeometry.area(3, 4)"
    three_calls(fake, code)
    env = {**server_env(fake, tmp_path / "home"), "NO_COLOR": "1"}  # lines compared as text
    chat = terminal.chat("Comment it.", "--cwd", str(workspace), env=env)
    edit_question = terminal.asked()
    terminal.type(b"y")  # one key, no Enter
    eval_question = terminal.asked()
    terminal.type(b"y")
    stdout, stderr = chat.communicate(timeout=60)
    assert terminal.cooked()  # the questions' cbreak mode is gone with them
    assert "[y] once  [a] always in this session  [n/Enter] no: " in edit_question
    assert sent_prompt(fake) == "Comment it."  # stdin, a terminal, added nothing
    err = stderr.decode()
    assert chat.returncode == 0, err
    assert stdout == b"Commented.\n"
    assert edit_question.count("+" + ADDED_LINE) == 1  # the diff, in the question
    assert "+" + ADDED_LINE not in err  # and not again after it
    assert "✓ Edit geometry.py: Edited geometry.py (+1 -0 lines).\n" in err
    assert eval_question.count("geometry.area(3, 4)") == 1
    assert "geometry.area(3, 4)" not in err
    assert "\n→ Run Python\n✓ Run Python: value: 12\n" in err


def test_quiet_leaves_stderr_to_what_went_wrong(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = server_env(fake, tmp_path / "home")
    three_calls(fake, "6 * 7")
    done = run_parley("chat", "Comment it.", "--yes", "--quiet", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Commented.\n"
    assert done.stderr == ""

    # A turn that stops short says why, and only that.
    config = tmp_path / "config.toml"
    config.write_text("max_turn_requests = 1\n")
    env["PARLEY_CONFIG"] = str(config)
    three_calls(fake, "6 * 7")
    done = run_parley("chat", "Again.", "--yes", "-q", "--cwd", str(workspace), env=env)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["⚠ Stopped: the turn reached its limit of 1 model request."]


# --- the question's keys: what is typed, what the request offers (properties) ----------------

OPTION = st.fixed_dictionaries(
    {
        "optionId": st.sampled_from(["allow_once", "allow_always", "reject_once"])
        | st.text(max_size=12).map(lambda prefix: f"allow_always:{prefix}")
        | st.text(max_size=12),
        "kind": st.sampled_from(["allow_once", "allow_always", "reject_once", "reject_always"])
        | st.text(max_size=8),
    }
)


@given(options=st.lists(OPTION | st.integers() | st.none(), max_size=14))
def test_every_key_selects_an_option_the_request_offers(options: list) -> None:
    offered = choices(options)
    ids = {o["optionId"] for o in options if isinstance(o, dict)}
    assert all(choice.option_id in ids for choice in offered)  # none invented
    assert len({choice.key for choice in offered}) == len(offered)  # a key answers once
    kinds = {"y": {"allow_once"}, "n": {"reject_once"}}
    for choice in offered:  # `a`, or a digit for a command's prefix: an "always" offered
        wanted = kinds.get(choice.key, {"allow_always"})
        assert any(
            isinstance(o, dict) and o["optionId"] == choice.option_id and o["kind"] in wanted
            for o in options
        )
        if choice.key.isdigit():
            assert choice.option_id.startswith("allow_always:")
    line = key_line(offered)
    assert line.startswith("Allow it? ") and line.endswith(" no: ")


@given(typed=st.text(max_size=12), keys=st.sets(st.sampled_from(["y", "a", "n", "1", "2"])))
def test_only_an_offered_key_or_enter_answers(typed: str, keys: set[str]) -> None:
    answer = first_answer(typed, keys)
    assert answer in ({None, "", "\n"} | keys)
    before_escape = typed.split("\x1b")[0]
    if answer in keys:  # the first key that means something, typed before any escape
        assert answer in before_escape.lower()
    if typed.startswith("\x1b"):  # an arrow key, a function key: never an answer
        assert answer == ""
    if typed and typed[0] in "\r\n":
        assert answer == "\n"


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(
    raw_input=st.dictionaries(st.text(max_size=6), JSON_VALUE, max_size=5),
    title=st.text(max_size=40),
)
def test_an_argument_left_out_is_one_the_title_shows_in_full(raw_input: dict, title: str) -> None:
    worth = input_worth_showing(raw_input, title) or {}
    for name, value in raw_input.items():
        if name not in worth:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            assert text.strip() and "\n" not in text and text in title
    assert input_worth_showing(raw_input, title, has_diff=True) is None  # the diff shows it
