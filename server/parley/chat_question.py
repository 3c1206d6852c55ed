"""`parley chat`'s permission question, asked on the terminal and answered by one key.

The question goes to the controlling terminal (`/dev/tty`), or to stderr when stdin is a
terminal and there is no `/dev/tty`; with no way to ask, the call is rejected (`--yes` allows
every call, but never a restore over the user's own changes). It shows what the call would
do (its title, its directory, the input the title does not say, an edit's diff, a warning
the server adds such as UNSANDBOXED) and offers one key per option the server's request
offers: `y` once, `a` always (a tool), `1`…`9` always for a shell command's prefixes, `n`
no; Enter alone is the default, no. The key is read in cbreak mode (no Enter needed), and
the terminal's mode is restored whatever happens (an answer, Ctrl-C, end of input).

No earlier output can hide or imitate it: it starts on a fresh line, after a reset of the
terminal's attributes; on a colour terminal its first line and its keys are marked in
reverse video, which nothing a model or a child writes may set (`terminal_text`); what it
quotes of the call is shown with its controls escaped (`escape_controls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import termios
import tty
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from parley.chat_view import TerminalView, diff_lines, diffs_of, shown_input
from parley.display import escape_controls
from parley.protocol.permission import ALLOW_PREFIX  # then the prefix: a command's "always"
from parley.terminal_text import RESET, painted, terminal_text

CANCELLED = {"outcome": {"outcome": "cancelled"}}
MAX_PREFIX_KEYS = 9  # keys 1-9
# Where a key is listed: once, always (the tool; then the prefixes, 2, in order), no.
KEY_RANK = {"y": 0, "a": 1, "n": 3}
ENTER = ("\r", "\n")
FENCED_BLOCK = re.compile(r"(`{3,})[^\n`]*\n(.*)\n\1", re.DOTALL)
# Marks the question's first line and its keys: reverse video, which no output may set.
QUESTION_MARK = f"\x1b[1;7m ? {RESET} "
END_OF_INPUT = "\x04"  # Ctrl-D: in cbreak mode a key like any other
HOW_TO_OVERWRITE = (
    "to overwrite your own changes, run the command in a terminal without --yes "
    "and answer its question"
)


class Choice(NamedTuple):
    """One answer to the question: the key that gives it, the option it selects."""

    key: str
    option_id: str
    label: str


def choices(options: Any) -> list[Choice]:
    """A key for each option the request offers (none invented), in this order: `y` allow
    once, `a` always allow (the tool), `1`-`9` always allow a command's prefix, `n` reject."""
    found: list[Choice] = []
    prefixes = 0
    for option in options if isinstance(options, list) else ():
        if not isinstance(option, dict) or not isinstance(option.get("optionId"), str):
            continue
        option_id, kind = option["optionId"], option.get("kind")
        if kind == "allow_once":
            found.append(Choice("y", option_id, "once"))
        elif kind == "allow_always" and option_id.startswith(ALLOW_PREFIX):
            prefixes += 1
            if prefixes <= MAX_PREFIX_KEYS:
                prefix = escape_controls(option_id.removeprefix(ALLOW_PREFIX), one_line=True)
                found.append(Choice(str(prefixes), option_id, f"always `{prefix}` here"))
        elif kind == "allow_always":
            found.append(Choice("a", option_id, "always in this session"))
        elif kind == "reject_once":
            found.append(Choice("n", option_id, "no"))
    keys: set[str] = set()
    unique = [c for c in found if not (c.key in keys or keys.add(c.key))]  # a key answers once
    return sorted(unique, key=lambda c: KEY_RANK.get(c.key, 2))


def key_line(offered: list[Choice]) -> str:
    """`Allow it? [y] once  [1] always `pytest` here  [n/Enter] no: `."""
    shown = [
        f"[{c.key}/Enter] {c.label}" if c.key == "n" else f"[{c.key}] {c.label}" for c in offered
    ]
    if not any(c.key == "n" for c in offered):
        shown.append("[Enter] no")
    return "Allow it? " + "  ".join(shown) + ": "


def asked_action(tool_call: dict[str, Any]) -> str:
    """What a call would do, to follow "asks to": its title ("Run Python" → "run Python"),
    or "run NAME" when the title is only the tool's name."""
    title = escape_controls(str(tool_call.get("title") or "a tool"), one_line=True)
    return title[0].lower() + title[1:] if " " in title else f"run {title}"


def _tool_of(tool_call: dict[str, Any]) -> str:
    meta = tool_call.get("_meta")
    parley = meta.get("parley") if isinstance(meta, dict) else None
    name = parley.get("tool") if isinstance(parley, dict) else None
    return name if isinstance(name, str) else str(tool_call.get("title") or "")


def _unfenced(text: str) -> str:
    """A text without the code fence around it, if it is one fenced block."""
    block = FENCED_BLOCK.fullmatch(text.strip())
    return block.group(2) if block else text


def _added_text(tool_call: dict[str, Any]) -> list[str]:
    """The view's text content but for what only repeats an argument (the code, the command
    in a fence): a warning such as "This command runs UNSANDBOXED: …" is always shown."""
    raw_input = tool_call.get("rawInput")
    values = (
        {v.strip() for v in raw_input.values() if isinstance(v, str)}
        if isinstance(raw_input, dict)
        else set()
    )
    content = tool_call.get("content") if isinstance(tool_call.get("content"), list) else []
    texts = []
    for item in content:
        inner = item.get("content") if isinstance(item, dict) else None
        text = inner.get("text") if isinstance(inner, dict) else None
        if isinstance(text, str) and text.strip() and _unfenced(text).strip() not in values:
            texts.append(text)
    return texts


def _directory(tool_call: dict[str, Any]) -> str | None:
    """Where a shell command runs: its location (the view names the directory)."""
    locations = tool_call.get("locations")
    first = locations[0] if isinstance(locations, list) and locations else None
    path = first.get("path") if isinstance(first, dict) else None
    return escape_controls(str(path), one_line=True) if path else None


def permission_question(
    params: dict[str, Any], *, colour: bool = False, cwd: Path | None = None
) -> str:
    """The question about one tool call: what it would do (its title; a command's directory;
    the input its title does not say, code as code; an edit's diffs; what the server adds,
    such as UNSANDBOXED) and the keys of the options the request offers; its first line and
    its keys marked (`colour`)."""
    tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
    title = str(tool_call.get("title") or "")
    diffs = diffs_of(tool_call)
    lines = [f"Parley asks to {asked_action(tool_call)}:"]
    if _tool_of(tool_call) == "run_command" and _directory(tool_call):
        lines.append(f"  in {_directory(tool_call)}")
    shown = shown_input(_tool_of(tool_call), tool_call.get("rawInput"), title, bool(diffs))
    if shown:
        lines += [f"  {line}" for line in escape_controls(shown).splitlines()]
    for text in _added_text(tool_call):
        warning = [f"  {line}" for line in escape_controls(text).splitlines()]
        lines += [painted(line, "1;31") for line in warning] if colour else warning
    for diff in diffs:
        lines += [f"  {line}" for line in diff_lines(diff, cwd, colour)]
    lines.append(key_line(choices(params.get("options"))))
    shown = terminal_text("\n".join(lines), colour).split("\n")
    if colour:
        shown[0], shown[-1] = QUESTION_MARK + shown[0], QUESTION_MARK + shown[-1]
    return "\n" + "\n".join(shown)


def overwrites_user_changes(params: dict[str, Any]) -> bool:
    """Whether the question is a restore's, before it overwrites the user's own changes."""
    tool_call = params.get("toolCall")
    return isinstance(tool_call, dict) and _tool_of(tool_call) == "restore"


def selected(params: dict[str, Any], kind: str) -> dict[str, Any]:
    """The answer choosing the request's option of this kind (ACP options carry a kind)."""
    options = params.get("options") if isinstance(params.get("options"), list) else []
    option_id = next(
        (o.get("optionId") for o in options if isinstance(o, dict) and o.get("kind") == kind),
        kind,
    )
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def allow_all_but_overwrites(view: TerminalView) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """`--yes`: every call is allowed, but never a restore over the user's own changes."""

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        if overwrites_user_changes(params):
            view.line(f"parley: --yes does not overwrite your own changes: {HOW_TO_OVERWRITE}.")
            return selected(params, "reject_once")
        return selected(params, "allow_once")

    return answer


def first_answer(typed: str, keys: set[str]) -> str | None:
    """The answer in what was typed: the first of `keys` (either case), `\n` for Enter,
    None at the end of input (nothing, or Ctrl-D); "" for none yet. An escape sequence (an
    arrow key) and what follows it in the same read are ignored."""
    if not typed:
        return None
    for key in typed.split("\x1b")[0]:
        if key == END_OF_INPUT:
            return None
        if key in ENTER:
            return "\n"
        if key.lower() in keys:
            return key.lower()
    return ""


class QuestionTerminal:
    """Where the question is asked: the controlling terminal, else stdin/stderr when stdin
    is a terminal. Keys are read through the event loop, so a pending question never blocks
    a thread that Ctrl-C could not end; in cbreak mode while it waits (one key, no Enter;
    Ctrl-C still interrupts), the terminal's mode restored after."""

    def __init__(self, read_fd: int, writer: TextIO, owned: bool) -> None:
        self.read_fd, self.writer, self.owned = read_fd, writer, owned
        self._saved_mode: list[Any] | None = None

    @classmethod
    def open(cls) -> QuestionTerminal | None:
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:  # no controlling terminal (a pipeline, cron, a CI job)
            if sys.stdin.isatty():
                return cls(sys.stdin.fileno(), sys.stderr, owned=False)
            return None
        writer = open(fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        return cls(fd, writer, owned=True)

    def forget_typeahead(self) -> None:
        """Drops what was typed before the question (a `y` meant for something else must
        not answer it)."""
        with contextlib.suppress(termios.error, OSError):
            termios.tcflush(self.read_fd, termios.TCIFLUSH)

    def one_key_at_a_time(self) -> None:
        """cbreak mode: each key as it is typed, not echoed; signals (Ctrl-C) kept."""
        with contextlib.suppress(termios.error, OSError):
            saved = termios.tcgetattr(self.read_fd)
            tty.setcbreak(self.read_fd, termios.TCSANOW)
            self._saved_mode = saved

    def restore(self) -> None:
        """The terminal's mode as it was before the question (idempotent)."""
        saved, self._saved_mode = self._saved_mode, None
        if saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.read_fd, termios.TCSANOW, saved)

    def is_terminal(self) -> bool:
        with contextlib.suppress(OSError, ValueError):
            return self.writer.isatty()
        return False

    def colours(self) -> bool:
        """Colour the question: a terminal, and the user did not ask for none (NO_COLOR)."""
        return self.is_terminal() and not os.environ.get("NO_COLOR")

    def write(self, text: str) -> None:
        self.writer.write(text)
        self.writer.flush()

    def read_key(self, answer: asyncio.Future[str | None], keys: set[str]) -> None:
        """Resolves `answer` with the first of `keys` typed, `\\n` for Enter, None at the end
        of input (Ctrl-D); other keys are ignored (`first_answer`)."""
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                chunk = os.read(self.read_fd, 1024).decode(errors="replace")
            except OSError:
                chunk = ""
            if not answer.done():
                key = first_answer(chunk, keys)
                if key != "":
                    answer.set_result(key)

        loop.add_reader(self.read_fd, readable)
        answer.add_done_callback(lambda _: self._stop_reading())

    def _stop_reading(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self.read_fd)

    def close(self) -> None:
        """Reading stopped, the terminal's mode restored, the terminal closed (idempotent)."""
        self._stop_reading()
        self.restore()
        if self.owned:
            self.owned = False
            with contextlib.suppress(OSError):
                self.writer.close()
                os.close(self.read_fd)


class PermissionAsker:
    """Asks the user about tool calls, one at a time, on the terminal — never on stdout."""

    def __init__(self, view: TerminalView, cwd: Path | None = None) -> None:
        self.view = view
        self.cwd = cwd  # paths in the question are shown relative to it
        self.cancelled = False
        self._one_at_a_time = asyncio.Lock()
        self._answer: asyncio.Future[str | None] | None = None
        self._terminal: QuestionTerminal | None = None

    async def ask(self, params: dict[str, Any]) -> dict[str, Any]:
        async with self._one_at_a_time:
            if self.cancelled:
                return CANCELLED
            tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
            terminal = QuestionTerminal.open()
            if terminal is None:
                how = (
                    HOW_TO_OVERWRITE
                    if overwrites_user_changes(params)
                    else "use --yes to allow every tool call"
                )
                self.view.line(
                    f"parley: did not {asked_action(tool_call)}: there is no terminal to ask on "
                    f"({how})."
                )
                return selected(params, "reject_once")
            offered = choices(params.get("options"))
            chosen = await self._ask_on(terminal, params, offered)
        if self.cancelled:
            return CANCELLED
        by_key = {c.key: c for c in offered}
        if chosen in by_key:
            return {"outcome": {"outcome": "selected", "optionId": by_key[chosen].option_id}}
        return selected(params, "reject_once")  # Enter, the end of input: the default, no

    async def _ask_on(
        self, terminal: QuestionTerminal, params: dict[str, Any], offered: list[Choice]
    ) -> str | None:
        """The key typed at the question (None: the end of input, or cancelled)."""
        self._terminal = terminal
        self._answer = asyncio.get_running_loop().create_future()
        tool_call = params.get("toolCall")
        if isinstance(tool_call, dict) and tool_call.get("toolCallId") is not None:
            self.view.asked.add(str(tool_call["toolCallId"]))  # the view shows it no more
        try:
            terminal.forget_typeahead()
            terminal.one_key_at_a_time()
            terminal.read_key(self._answer, {c.key for c in offered})
            self.view.end_line()
            # A reset first: no attribute an earlier output left on can hide the question.
            opening = RESET if terminal.is_terminal() else ""
            question = permission_question(params, colour=terminal.colours(), cwd=self.cwd)
            try:
                terminal.write(opening + question)
            except OSError:
                self._answer.set_result(None)
            key = await self._answer
            with contextlib.suppress(OSError):
                said = next((c.label for c in offered if c.key == key), "no")
                terminal.write(("cancelled" if self.cancelled else said) + "\n")
            return key
        finally:
            terminal.close()
            self._terminal = None

    def restore_terminal(self) -> None:
        """The terminal's mode back as it was, now (before an immediate exit)."""
        if self._terminal is not None:
            self._terminal.restore()

    def cancel(self) -> None:
        """Ends a pending question (ACP: a cancelled turn's permission answer is `cancelled`)."""
        self.cancelled = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(None)
