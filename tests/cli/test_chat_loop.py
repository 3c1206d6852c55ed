"""`parley chat` with no prompt, on a terminal (issue 42, point 4): a conversation.

`parley chat` runs with a pty as its controlling terminal and as its stdin, stdout and
stderr, as in a terminal emulator (which answers the line editor's cursor-position
question); the model is the fake LLM over HTTP, the server a real `parley serve`. What the
user sees is read from the screen's text, escape sequences left out (the answer's Markdown
drawn: bullets, no `**`), and from the bytes where what reaches the terminal is the point.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import server_env
from parley.chat_input import HISTORY_FILE
from parley.chat_loop import QUIT_HINT
from parley.fakellm import FakeLLM, Pacing, Reply
from parley.terminal_text import ALLOWED_SGR, sgr_groups
from test_cli import QUESTION_END, eval_writing, run_parley

CURSOR_POSITION_QUESTION = b"\x1b[6n"
ANY_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|.)")
PROMPT_SHOWN = "\x1b[?2004h"  # the line editor turns bracketed paste on as it waits
PROMPT_DONE = "\x1b[?2004l"  # and off as a line is sent
SUMMARY = re.compile(r"openai:gpt-4\.1-mini · \d+ rounds?")
MARKDOWN_ANSWER = Reply(
    text="# Plan\n\nUse **rich** for `Markdown`.\n\n- first item\n- second item\n"
)
# Paragraphs, streamed slowly: the first blocks are drawn long before the answer ends.
SLOW_PARAGRAPHS = Reply(
    text="word word word.\n\n" * 300, chunk_size=8, pacing=Pacing(chunks_per_second=20)
)


def screen_text(shown: str) -> str:
    """What the screen shows as text: escape sequences out, `\\r\\n` as `\\n`."""
    return ANY_ESCAPE.sub("", shown).replace("\r", "")


class ChatTerminal:
    """A pty of 24 lines of 100 columns that `parley chat ARGS` runs in, as at a shell."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))

        def take_terminal() -> None:  # in the child, after setsid: what a shell does
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.chat = subprocess.Popen(
            [sys.executable, "-m", "parley", "chat", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**os.environ, **env},
            start_new_session=True,
            preexec_fn=take_terminal,
        )
        os.close(slave)
        self.shown = ""  # every byte so far, decoded
        self.seen_up_to = 0  # where the last `expect` matched

    def _read(self, wait: float) -> str | None:
        """What the chat wrote within `wait` seconds ("" for nothing); None once it has
        closed the terminal."""
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return ""
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the chat has ended and closed the terminal
            return None
        if CURSOR_POSITION_QUESTION in chunk:  # a terminal answers it
            os.write(self.master, b"\x1b[1;1R")
        self.shown += chunk.decode(errors="replace")
        return chunk.decode(errors="replace") if chunk else None

    def expect(self, text: str, timeout: float = 60) -> str:
        """Waits for `text` on the screen after the last one expected; the screen's text
        from there to it."""
        deadline = time.monotonic() + timeout
        while True:
            screen = screen_text(self.shown[self.seen_up_to :])
            if text in screen:
                raw_end = self._raw_end_of(text)
                self.seen_up_to = raw_end
                return screen[: screen.index(text) + len(text)]
            if time.monotonic() > deadline or self._read(0.2) is None:
                pytest.fail(f"{text!r} never shown; the screen:\n{screen_text(self.shown)}")

    def expect_prompt(self, timeout: float = 60) -> None:
        """Waits for the line editor to wait for a line (after the last thing expected)."""
        deadline = time.monotonic() + timeout
        while PROMPT_SHOWN not in self.shown[self.seen_up_to :]:
            if time.monotonic() > deadline or self._read(0.2) is None:
                pytest.fail(f"no prompt; the screen:\n{screen_text(self.shown)}")
        self.seen_up_to = self.shown.index(PROMPT_SHOWN, self.seen_up_to) + len(PROMPT_SHOWN)

    def _raw_end_of(self, text: str) -> int:
        """The offset in `shown` just after `text` first appears (on the screen) after
        `seen_up_to` (a bisection: once on the screen, it stays)."""
        low, high = self.seen_up_to, len(self.shown)
        while low < high:
            middle = (low + high) // 2
            if text in screen_text(self.shown[self.seen_up_to : middle]):
                high = middle
            else:
                low = middle + 1
        return low

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def ended(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.chat.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.1):  # what it wrote last
            pass
        if self.chat.poll() is None:
            pytest.fail(f"the chat did not end; the screen:\n{screen_text(self.shown)}")
        return self.chat.returncode

    def close(self) -> None:
        if self.chat.poll() is None:
            self.chat.kill()
            self.chat.wait()
        os.close(self.master)


@pytest.fixture
def terminals() -> Iterator[list[ChatTerminal]]:
    started: list[ChatTerminal] = []
    yield started
    for terminal in started:
        terminal.close()


def user_texts(fake: FakeLLM) -> list[str]:
    """The user's messages in the model's last request."""
    return [str(m["content"]) for m in fake.requests[-1].body["messages"] if m["role"] == "user"]


def test_a_conversation_on_the_terminal(
    fake: FakeLLM,
    tmp_path: Path,
    workspace: Path,
    terminals: list[ChatTerminal],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Type a prompt and see its Markdown drawn; Ctrl-C a streaming turn and get the prompt
    back; Tab completes a slash command, which runs; Alt-Enter makes a prompt of two lines;
    Ctrl-C twice at an empty prompt quits, the session kept; `--session last` resumes it,
    the history of what was typed kept."""
    monkeypatch.delenv("NO_COLOR", raising=False)  # colours: the bold is drawn as bold
    env = server_env(fake, tmp_path / "home")
    fake.set_script([MARKDOWN_ANSWER, SLOW_PARAGRAPHS, Reply(text="Got both lines.")])
    terminal = ChatTerminal("--cwd", str(workspace), env=env)
    terminals.append(terminal)
    terminal.expect("a new session")
    terminal.expect_prompt()

    terminal.type(b"Explain the plan\r")
    answer = terminal.expect("• second item")
    assert "Plan" in answer and "# Plan" not in answer  # a heading, drawn
    assert "Use rich for Markdown." in answer and "**" not in answer and "`" not in answer
    assert "• first item" in answer
    raw = terminal.shown[terminal.shown.rindex(PROMPT_DONE) :]
    assert "\x1b[1mrich\x1b[0m" in raw  # bold, on a terminal
    terminal.expect("1 round")  # the turn's summary line

    terminal.expect_prompt()
    terminal.type(b"Talk slowly\r")
    terminal.expect("word word word.\n\nword word word.")  # streaming, block by block
    terminal.type(b"\x03")  # Ctrl-C: the terminal sends SIGINT to the chat
    terminal.expect("Cancelled.")
    terminal.expect_prompt(timeout=20)
    assert terminal.chat.poll() is None  # still chatting
    deadline = time.monotonic() + 10  # the fake LLM notices at its next write
    while not fake.requests[-1].client_hung_up and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fake.requests[-1].client_hung_up  # the model's stream was closed

    terminal.type(b"/cos\t")  # Tab: `/cost ` (`/cos` alone would go to the model)
    terminal.type(b"\r")
    terminal.expect("This session so far:")
    assert len(fake.requests) == 2  # a command: no model call

    terminal.expect_prompt()
    terminal.type(b"line one\x1b\rline two\r")  # Alt-Enter (Esc, Enter): a second line
    terminal.expect("Got both lines.")
    assert user_texts(fake)[-1] == "line one\nline two"

    # Ctrl-C twice, each as soon as it can be: each a signal (the prompt not yet reading
    # keys) or a key, as it comes. (Not in one write: two signals at once are one.)
    terminal.expect("1 round")  # the turn has ended; the prompt may not read keys yet
    terminal.type(b"\x03")
    terminal.expect(QUIT_HINT)
    terminal.type(b"\x03")
    assert terminal.ended() == 0
    closing = terminal.expect("continues it.")
    assert "kept: `parley chat --session last`" in closing
    history = (tmp_path / "home" / HISTORY_FILE).read_text()
    assert "Explain the plan" in history and "/cost" in history

    fake.set_script([Reply(text="Still here.")])
    again = ChatTerminal("--session", "last", "--cwd", str(workspace), env=env)
    terminals.append(again)
    again.expect("continuing sess_")
    again.expect("(Explain the plan)")  # its title
    again.expect_prompt()
    again.type(b"\x1b[A")  # Up: the last prompt typed, from the history
    again.expect("line two")
    again.type(b"\x03")  # Ctrl-C drops the line; the prompt stays
    again.type(b"And now?\r")
    again.expect("Still here.")
    assert user_texts(fake)[0] == "Explain the plan"  # the whole conversation, resumed
    assert user_texts(fake)[-1] == "And now?"
    again.expect_prompt()
    again.type(b"\x04")  # Ctrl-D quits too
    assert again.ended() == 0


HOSTILE = (
    "# Title \x1b]0;owned\x07\n\n"
    "Click [here \x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\](http://x) "
    "or copy \x1b]52;c;cm0gLXJmIH4=\x07 this. \x1b[2J\x1b[H cleared?\n\n"
    "- item \u202eevil\u202c and \x9b31m C1 and\rover-written\n"
    "- \x1b[8mhidden\x1b[0m \x1b[5;7;41mblink\x1b[0m\n\n"
    "```sh\nrm -rf / \x1b[1A\x1b[2K\x1b[?1049h\n```\n"
)


def test_no_control_sequence_of_the_models_reaches_the_terminal(
    fake: FakeLLM, tmp_path: Path, workspace: Path, terminals: list[ChatTerminal]
) -> None:
    """ESC sequences, OSC 8 links and OSC 52 clipboard writes, bidi controls, CR and C1 in
    the answer: drawn as Markdown, none of them reaches the terminal (only SGR colours)."""
    fake.set_script([Reply(text=HOSTILE, chunk_size=3)])
    terminal = ChatTerminal("--cwd", str(workspace), env=server_env(fake, tmp_path / "home"))
    terminals.append(terminal)
    terminal.expect_prompt()
    terminal.type(b"Go\r")
    screen = terminal.expect("rm -rf /")
    terminal.expect("1 round")
    raw = terminal.shown[terminal.shown.rindex(PROMPT_DONE) + len(PROMPT_DONE) :]
    answer = raw[: SUMMARY.search(raw).start()]  # type: ignore[union-attr]
    assert "\x1b]" not in answer and "\x9b" not in answer and "\u202e" not in answer
    assert "\r" not in answer.replace("\r\n", "")
    for sequence in re.findall(r"\x1b(?:\[[^m]*m|.)", answer):  # every escape is an SGR ...
        assert re.fullmatch(r"\x1b\[[0-9;]*m", sequence), repr(sequence)
        groups = sgr_groups(sequence[2:-1])  # ... of colours and emphasis only
        assert all(g in ALLOWED_SGR or g.startswith("38;") for g in groups), sequence
        assert sequence == "\x1b[" + ";".join(groups) + "m", sequence  # none left out
    assert "\\u202e" in screen  # the bidi control shown, escaped
    assert "hidden" in screen and "over-written" in screen
    terminal.expect_prompt()
    terminal.type(b"\x04")
    assert terminal.ended() == 0


def test_with_no_prompt_and_no_terminal_it_says_what_to_give(fake: FakeLLM, tmp_path: Path) -> None:
    done = run_parley("chat", env=server_env(fake, tmp_path / "home"))
    assert done.returncode == 2
    assert "give a prompt (or - to read it from stdin)" in done.stderr


def test_a_question_in_the_chat_takes_one_key_and_ctrl_c_there_cancels_the_turn(
    fake: FakeLLM, tmp_path: Path, workspace: Path, terminals: list[ChatTerminal]
) -> None:
    first, second = workspace / "first", workspace / "second"
    fake.set_script(
        [
            Reply(tool_calls=(eval_writing(first),)),
            Reply(text="It is 42."),
            Reply(tool_calls=(eval_writing(second),)),
        ]
    )
    terminal = ChatTerminal("--cwd", str(workspace), env=server_env(fake, tmp_path / "home"))
    terminals.append(terminal)
    terminal.expect_prompt()
    terminal.type(b"Compute\r")
    asked = terminal.expect(QUESTION_END.decode())
    assert "Parley asks to run Python:" in asked
    terminal.type(b"y")  # one key, no Enter
    terminal.expect("It is 42.")
    assert first.read_text() == "ran"

    terminal.expect_prompt()
    terminal.type(b"Again\r")
    terminal.expect(QUESTION_END.decode())
    terminal.type(b"\x03")  # Ctrl-C at the question: the turn is cancelled, the call not run
    terminal.expect("Cancelled.")
    terminal.expect_prompt(timeout=20)
    assert not second.exists()
    terminal.type(b"\x04")
    assert terminal.ended() == 0
