"""`parley chat` and `parley demo`: one prompt from the command line, the answer streamed.

The answer goes to stdout as it arrives, and nothing else does: thoughts (each line marked
`│ `, dimmed on a terminal), tool activity (the call, its input with code as code, a command's
output as it runs, the first lines of its result, an edit's diff), why the turn stopped and
the turn's summary go to stderr, so `parley chat "…" > answer.md` keeps only the answer.
`--json` prints every update as one JSON line instead, and nothing else. The display rules are
docs/display.md's (`parley/display.py`).

A tool that needs permission is asked about on the controlling terminal (`/dev/tty`), or on
stderr when stdin is a terminal and there is no `/dev/tty`; with no way to ask, the call is
rejected (`--yes` allows every call, but never a restore over the user's own changes).
A prompt that starts with a slash command (`/undo`) runs it only when it comes from a
terminal (stdin is one) or with `--command`: text piped in is sent as text. An edit is
shown as a unified diff (red and green when the question goes to a terminal and `NO_COLOR`
is not set); the summary names the files the turn edited. Ctrl-C cancels the turn with one
line on stderr and exits 130; a second Ctrl-C exits at once. When stdout's reader goes away
(`| head`), the turn is cancelled and the command exits 141 (128 + SIGPIPE, like
`yes | head`), quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import os
import signal
import sys
import tempfile
import termios
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from parley.config import Settings
from parley.display import (
    error_line,
    format_tool_input,
    summarize_tool_result,
    turn_summary,
)
from parley.tools.command_output import only_colours, strip_ansi

if TYPE_CHECKING:  # imported when the server is already starting (it takes a second)
    from parley.client import ParleyClient

DEMO_MODEL = "demo:scripted"
DEMO_PROMPT = "What does geometry.area compute, and is it right for a 3 by 4 rectangle?"

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE, what `yes | head` reports
CANCEL_GRACE_SECONDS = 10.0  # how long a cancelled turn may take to answer before we leave
CANCELLED = {"outcome": {"outcome": "cancelled"}}
DONE = ("completed", "failed")  # a tool call's final statuses
# How a notice is marked at its level, and its SGR colour on a terminal (info: plain).
NOTICE_MARKS = {"warning": ("⚠ ", "33"), "error": ("✗ ", "31")}


class TerminalView:
    """Shows a session's updates the way a person reads them in a terminal.

    A stream whose reader went away (a closed pipe) is silenced; when it is stdout,
    `on_output_closed` is told, so the turn can end: nobody reads the answer any more.
    """

    THOUGHT_MARK = "│ "

    def __init__(self, out: TextIO, err: TextIO, as_json: bool, cwd: Path | None = None) -> None:
        self.out, self.err, self.as_json, self.cwd = out, err, as_json, cwd
        self.edits = EditedFiles()
        self.on_output_closed: Callable[[], None] = lambda: None
        self.output_closed = False
        self.stopped = False  # the turn is being cancelled: what it still sends is not shown
        self._message_id: str | None = None
        self._titles: dict[str, str] = {}  # toolCallId → its latest title
        self._names: dict[str, str] = {}  # toolCallId → the tool's name
        self._announced: set[str] = set()  # the calls whose `→` line is shown
        # The last write, to either stream, left its line open (they may share a terminal).
        self._mid_line = False
        self._out_mid_line = False  # stdout's own last line is open
        self._thinking = False  # the last thing shown on stderr is a thought
        self.colour = _colours(err)

    def show(self, session_id: str, update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            self.edits.see(update)
        if self.stopped and not self.as_json:
            return
        if self.as_json:
            self.answer(json.dumps({"sessionId": session_id, "update": update}) + "\n")
            return
        kind = update.get("sessionUpdate")
        notice = update.get("_meta", {}).get("parley", {}).get("notice")
        if kind == "agent_message_chunk" and isinstance(notice, dict):
            # Parley speaking about the turn, not the answer: stderr (docs/display.md, notices).
            self._end_thought()
            self._notice(str(notice.get("level")), update["content"].get("text", ""))
        elif kind == "agent_message_chunk":
            new_message = self._message_id not in (None, update.get("messageId"))
            self._end_thought(blank_line=not new_message)  # a new message adds its own
            if update.get("_meta", {}).get("parley", {}).get("replaces"):
                self.note("(the model revised its text; the revision follows)")
                self.answer("\n")
            elif new_message:
                self.answer("\n\n")  # a new message: a new paragraph
            self._message_id = update.get("messageId")
            self.answer(update["content"]["text"])
        elif kind == "agent_thought_chunk":
            self._thought(update["content"].get("text", ""))
        elif kind in ("tool_call", "tool_call_update"):
            self._end_thought()
            self._show_tool(update)
            delta = update.get("_meta", {}).get("parley", {}).get("commandOutput", {}).get("append")
            if isinstance(delta, str):  # a command's output as it runs: colours on a terminal
                self._write(self.err, only_colours(delta) if self.colour else strip_ansi(delta))

    def _notice(self, level: str, text: str) -> None:
        """A notice at its level: a warning marked `⚠` (yellow on a terminal), an error `✗`
        (red); info as it is."""
        mark, colour = NOTICE_MARKS.get(level, ("", ""))
        shown = mark + terminal_safe(text)
        self.note(f"\x1b[{colour}m{shown}\x1b[0m" if self.colour and colour else shown)

    def _thought(self, text: str) -> None:
        """Thoughts on lines of their own on stderr, each marked (and dimmed on a terminal)."""
        if not text:
            return
        if not self._thinking:
            self._write(self.err, ("\n" if self._mid_line else "") + "\n")  # a blank line
            self._thinking = True
        for index, piece in enumerate(text.split("\n")):
            if index:
                self._write(self.err, "\n")
            if piece:
                start = "" if self._mid_line else self.THOUGHT_MARK
                self._write(self.err, self._dim(start + piece))

    def _end_thought(self, blank_line: bool = False) -> None:
        """After thoughts: their line ends (and a blank line follows, before the answer)."""
        if self._thinking:
            self._write(self.err, ("\n" if self._mid_line else "") + ("\n" if blank_line else ""))
            self._thinking = False

    def _show_tool(self, update: dict[str, Any]) -> None:
        """A call once its input is known (`→ Title` and the input, code as code), then its
        result's first lines (`✓`/`✗`) and an edit's diffs."""
        call_id = str(update.get("toolCallId"))
        if call_id not in self._names:  # the first update's title is the tool's name
            self._names[call_id] = _tool_name(update)
        if update.get("title"):
            self._titles[call_id] = terminal_safe(str(update["title"]))
        title = self._titles.get(call_id, "a tool")
        status = update.get("status")
        if call_id not in self._announced and ("rawInput" in update or status in DONE):
            self._announced.add(call_id)
            self.note(f"→ {title}")
            if "rawInput" in update:
                self.block(format_tool_input(self._names[call_id], update["rawInput"]))
        if status not in DONE:
            return
        items = [c for c in update.get("content") or () if isinstance(c, dict)]
        text = "\n".join(
            c["content"].get("text", "")
            for c in items
            if c.get("type") == "content" and isinstance(c.get("content"), dict)
        )
        error = error_line(text, update.get("rawOutput")) if status == "failed" else None
        lines = summarize_tool_result(text, error).splitlines()
        mark = "✓" if status == "completed" else "✗"
        self.line(f"{mark} {title}: {terminal_safe(lines[0])}")
        for more in lines[1:]:
            self.line(f"  {terminal_safe(more)}")
        for diff in (c for c in items if c.get("type") == "diff"):
            self.block("\n".join(diff_lines(diff, self.cwd, self.colour)), safe=True)

    def answer(self, text: str) -> None:
        """Text for stdout: the answer (or, with --json, JSON lines) and nothing else."""
        if not self.output_closed and text:
            self._write(self.out, text)
            self._out_mid_line = not text.endswith("\n")

    def note(self, text: str) -> None:
        """A note for the person watching, on stderr, set off by a blank line."""
        self._write(self.err, ("\n" if self._mid_line else "") + f"\n{text}\n")

    def line(self, text: str) -> None:
        """One line on stderr, on a line of its own."""
        self._write(self.err, ("\n" if self._mid_line else "") + text + "\n")

    def block(self, text: str, safe: bool = False) -> None:
        """Lines on stderr, indented by two spaces (a tool's input, a diff)."""
        for line in text.splitlines() or [""]:
            self.line("  " + (line if safe else terminal_safe(line)))

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.colour else text

    def _write(self, stream: TextIO, text: str) -> None:
        if text and not (stream is self.out and self.output_closed):
            self._mid_line = not text.endswith("\n")
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            _silence(stream)
            if stream is self.out and not self.output_closed:
                self.output_closed = True
                self.on_output_closed()


def _tool_name(update: dict[str, Any]) -> str:
    """The tool's own name (for its code argument): Parley's `_meta.parley.tool`, else the
    title when it is one word."""
    meta = update.get("_meta") if isinstance(update.get("_meta"), dict) else {}
    name = (meta.get("parley") or {}).get("tool") if isinstance(meta, dict) else None
    if isinstance(name, str):
        return name
    title = str(update.get("title") or "")
    return title if " " not in title else ""


def _colours(stream: TextIO) -> bool:
    """Colour on `stream`: a terminal, and the user did not ask for none (NO_COLOR)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return stream.isatty() and not os.environ.get("NO_COLOR")
    return False


class EditedFiles:
    """The files a turn's tool calls edited: calls of kind `edit`, or whose content holds a
    diff, that completed; their paths from the diffs, else from their locations."""

    def __init__(self) -> None:
        self._calls: dict[str, dict[str, Any]] = {}

    def see(self, update: dict[str, Any]) -> None:
        call = self._calls.setdefault(
            str(update.get("toolCallId")), {"edit": False, "paths": [], "done": False}
        )
        content = update.get("content") if isinstance(update.get("content"), list) else []
        diffs = [c for c in content if isinstance(c, dict) and c.get("type") == "diff"]
        if update.get("kind") == "edit" or diffs:
            call["edit"] = True
        paths = [str(d.get("path")) for d in diffs if d.get("path")]
        if not paths and isinstance(update.get("locations"), list):
            paths = [
                str(w["path"]) for w in update["locations"] if isinstance(w, dict) and "path" in w
            ]
        for path in paths:
            if path not in call["paths"]:
                call["paths"].append(path)
        if update.get("status") in ("completed", "failed"):
            call["done"] = update["status"] == "completed"

    def paths(self) -> list[str]:
        """In the order they were first edited, each once."""
        edited: list[str] = []
        for call in self._calls.values():
            if call["edit"] and call["done"]:
                edited += [path for path in call["paths"] if path not in edited]
        return edited


def _silence(stream: TextIO) -> None:
    """Points a stream whose reader has gone at /dev/null, so that later writes, and the
    interpreter's final flush, do not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


# --- the permission question ------------------------------------------------------------

ANSWER_KINDS = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
}


def terminal_safe(text: str) -> str:
    """`text` with control and format characters (escape sequences, bidi overrides) shown
    escaped, so a hostile tool input cannot redraw the question or hide code from the user."""
    return "".join(
        ch
        if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf")
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def asked_action(tool_call: dict[str, Any]) -> str:
    """What a call would do, to follow "asks to": its title ("Run Python" → "run Python"),
    or "run NAME" when the title is only the tool's name."""
    title = terminal_safe(str(tool_call.get("title") or "a tool"))
    return title[0].lower() + title[1:] if " " in title else f"run {title}"


# SGR colours of a diff's lines on a terminal, by their first character.
DIFF_COLOURS = {"-": "31", "+": "32", "@": "36"}


def shown_path(path: str, cwd: Path | None) -> str:
    """A path relative to the workspace when it is inside it."""
    if cwd is not None:
        with contextlib.suppress(ValueError):
            return str(Path(path).relative_to(cwd))
    return path


def diff_lines(diff: dict[str, Any], cwd: Path | None = None, colour: bool = False) -> list[str]:
    """An ACP `diff` content item as a unified diff (`oldText` null: a new file), each line
    terminal-safe, coloured when `colour`."""
    path = shown_path(str(diff.get("path") or "?"), cwd)
    old, new = diff.get("oldText"), diff.get("newText")
    old_lines = old.splitlines(keepends=True) if isinstance(old, str) else []
    new_lines = new.splitlines(keepends=True) if isinstance(new, str) else []
    unified = difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile=f"a/{path}" if isinstance(old, str) else "/dev/null",
        tofile=f"b/{path}",
    )
    lines = []
    for line in unified:
        ending = "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""
        text = terminal_safe(line[: len(line) - len(ending)])
        if ending == "" and line[:1] in "+- ":
            text += "  (no newline at end of file)"
        code = "1" if line.startswith(("---", "+++")) else DIFF_COLOURS.get(line[:1])
        lines.append(f"\x1b[{code}m{text}\x1b[0m" if colour and code else text)
    if not lines:
        lines.append(f"(no change to {terminal_safe(path)})")
    return lines


def permission_question(
    tool_call: dict[str, Any], *, colour: bool = False, cwd: Path | None = None
) -> str:
    """The question for one tool call: the tool, then each argument in full, code as code;
    an edit's diffs instead of the texts it replaces (its other arguments stay)."""
    lines = [f"\nParley asks to {asked_action(tool_call)}:"]
    content = tool_call.get("content") if isinstance(tool_call.get("content"), list) else []
    diffs = [c for c in content if isinstance(c, dict) and c.get("type") == "diff"]
    raw_input = tool_call.get("rawInput")
    arguments = raw_input if isinstance(raw_input, dict) else {"input": raw_input}
    for name, value in arguments.items():
        name = terminal_safe(str(name))
        if diffs and isinstance(value, str) and ("\n" in value or len(value) > 60):
            continue  # a text the diff shows
        if isinstance(value, str) and ("\n" in value or name == "code"):
            lines.append(f"  {name}:")
            lines += [f"    {line}" for line in terminal_safe(value).splitlines() or [""]]
        else:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"  {name}: {terminal_safe(shown)}")
    for diff in diffs:
        lines += [f"  {line}" for line in diff_lines(diff, cwd, colour)]
    lines.append("Allow it? [y] once, [a] always in this session, [n] no: ")
    return "\n".join(lines)


HOW_TO_OVERWRITE = (
    "to overwrite your own changes, run the command in a terminal without --yes "
    "and answer its question"
)


def overwrites_user_changes(params: dict[str, Any]) -> bool:
    """Whether the question is a restore's, before it overwrites the user's own changes."""
    tool_call = params.get("toolCall")
    meta = tool_call.get("_meta") if isinstance(tool_call, dict) else None
    parley = meta.get("parley") if isinstance(meta, dict) else None
    return isinstance(parley, dict) and parley.get("tool") == "restore"


def allow_all_but_overwrites(view: TerminalView) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """`--yes`: every call is allowed, but never a restore over the user's own changes."""

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        if overwrites_user_changes(params):
            view.line(f"parley: --yes does not overwrite your own changes: {HOW_TO_OVERWRITE}.")
            return _selected(params, "reject_once")
        return _selected(params, "allow_once")

    return answer


def _selected(params: dict[str, Any], kind: str) -> dict[str, Any]:
    """The answer choosing the request's option of this kind (ACP options carry a kind)."""
    options = params.get("options") if isinstance(params.get("options"), list) else []
    option_id = next(
        (o.get("optionId") for o in options if isinstance(o, dict) and o.get("kind") == kind),
        kind,
    )
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class _Terminal:
    """Where the question is asked: the controlling terminal, else stdin/stderr when stdin
    is a terminal. Lines are read through the event loop, so a pending question never blocks
    a thread that Ctrl-C could not end."""

    def __init__(self, read_fd: int, writer: TextIO, owned: bool) -> None:
        self.read_fd, self.writer, self.owned = read_fd, writer, owned

    @classmethod
    def open(cls) -> _Terminal | None:
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:  # no controlling terminal (a pipeline, cron, a CI job)
            if sys.stdin.isatty():
                return cls(sys.stdin.fileno(), sys.stderr, owned=False)
            return None
        writer = open(fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        return cls(fd, writer, owned=True)

    def forget_typeahead(self) -> None:
        """Drops what was typed before the question (a `y` and Enter meant for something
        else must not answer it)."""
        with contextlib.suppress(termios.error, OSError):
            termios.tcflush(self.read_fd, termios.TCIFLUSH)

    def colours(self) -> bool:
        """Colour the question: a terminal, and the user did not ask for none (NO_COLOR)."""
        with contextlib.suppress(OSError, ValueError):
            return self.writer.isatty() and not os.environ.get("NO_COLOR")
        return False

    def write(self, text: str) -> None:
        self.writer.write(text)
        self.writer.flush()

    def read_line(self, answer: asyncio.Future[str | None]) -> None:
        """Resolves `answer` with the next line typed (None at end of input)."""
        loop = asyncio.get_running_loop()
        typed = bytearray()

        def readable() -> None:
            try:
                chunk = os.read(self.read_fd, 1024)
            except OSError:
                chunk = b""
            typed.extend(chunk)
            if not answer.done() and (not chunk or b"\n" in typed):
                line = typed.split(b"\n")[0].decode(errors="replace") if chunk else None
                answer.set_result(line)

        loop.add_reader(self.read_fd, readable)
        answer.add_done_callback(lambda _: self._close())

    def _close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.read_fd)
        if self.owned:
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

    async def ask(self, params: dict[str, Any]) -> dict[str, Any]:
        async with self._one_at_a_time:
            if self.cancelled:
                return CANCELLED
            tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
            terminal = _Terminal.open()
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
                return _selected(params, "reject_once")
            self._answer = asyncio.get_running_loop().create_future()
            terminal.forget_typeahead()
            terminal.read_line(self._answer)
            try:
                terminal.write(
                    permission_question(tool_call, colour=terminal.colours(), cwd=self.cwd)
                )
            except OSError:
                self._answer.set_result(None)
            line = await self._answer
        if self.cancelled:
            return CANCELLED
        return _selected(params, ANSWER_KINDS.get((line or "").strip().lower(), "reject_once"))

    def cancel(self) -> None:
        """Ends a pending question (ACP: a cancelled turn's permission answer is `cancelled`)."""
        self.cancelled = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(None)


# --- ending a turn early ----------------------------------------------------------------


class TurnStopper:
    """Ends the turn early: on Ctrl-C (one line on stderr, exit 130; a second Ctrl-C exits at
    once) or when stdout's reader has gone (quietly, exit 141). The turn is cancelled over the
    protocol, so the server settles its history as it does for an editor's Stop."""

    def __init__(self, client: ParleyClient, asker: PermissionAsker, view: TerminalView) -> None:
        self.client, self.asker, self.view = client, asker, view
        self.exit_code: int | None = None
        self.session_id: str | None = None  # while a prompt runs
        self._main: asyncio.Task[Any] | None = asyncio.current_task()
        self._grace: asyncio.TimerHandle | None = None
        self._interrupts = 0

    def interrupt(self) -> None:
        self._interrupts += 1
        if self._interrupts > 1:
            os._exit(EXIT_INTERRUPTED)  # the server sees its stdin close and exits itself
        self.view.line("Cancelled.")
        self._stop(EXIT_INTERRUPTED)

    def output_closed(self) -> None:
        self._stop(EXIT_OUTPUT_CLOSED)

    def finish(self) -> None:
        """The work is done (or abandoned): nothing is left to cancel."""
        self.session_id, self._main = None, None
        if self._grace is not None:
            self._grace.cancel()

    def _stop(self, exit_code: int) -> None:
        first = self.exit_code is None
        self.exit_code = exit_code
        if not first:
            return
        self.view.stopped = True
        self.asker.cancel()
        if self.session_id is not None:
            self.client.cancel(self.session_id)
            # A server that does not answer the cancelled prompt is not waited for forever.
            if self._main is not None:
                self._grace = asyncio.get_running_loop().call_later(
                    CANCEL_GRACE_SECONDS, self._main.cancel
                )
        elif self._main is not None:
            self._main.cancel()  # nothing runs yet: stop setting up


async def _start_server(env: dict[str, str] | None) -> ParleyClient:
    from parley.protocol.framing import MAX_FRAME_BYTES

    # The server starts first, and this process imports the client (pygls, a second of
    # imports) while the server imports its own. In a session of its own: Ctrl-C at the
    # terminal reaches only this process (which cancels the turn over the protocol), and
    # nothing the server runs can open our terminal.
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "parley",
        "serve",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=MAX_FRAME_BYTES,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    from parley.client import ParleyClient

    client = ParleyClient()
    client.attach(server)
    return client


def _server_env(env: dict[str, str] | None, model: str | None) -> dict[str, str] | None:
    """The server preloads its default model's SDK (a second of imports) while it starts:
    make that the model this turn will use, not one it won't."""
    return {**(env or {}), "PARLEY_MODEL": model} if model else env


async def chat(
    prompt: str,
    *,
    model: str | None,
    cwd: Path,
    session_id: str | None = None,
    as_json: bool = False,
    allow_all: bool = False,
    tool_policy: str | None = None,
    env: dict[str, str] | None = None,
    session_model: str | None = None,
    commands: bool = False,
) -> int:
    """`session_model`: the model of the session `session_id` (when the caller knows it);
    `commands`: a prompt that starts with a slash command runs it (else it is plain text)."""
    view = TerminalView(sys.stdout, sys.stderr, as_json, cwd)
    asker = PermissionAsker(view, cwd)
    client = await _start_server(_server_env(env, model or session_model))
    from pygls.exceptions import JsonRpcException

    stopper = TurnStopper(client, asker, view)
    view.on_output_closed = stopper.output_closed
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stopper.interrupt)
    client.permission_handler = allow_all_but_overwrites(view) if allow_all else asker.ask
    try:
        session_id = await _open_session(client, view, cwd, model, session_id, tool_policy)
        if session_id is None:
            return 2
        client.on_update = view.show  # after the replay of a loaded session: only the answer
        stopper.session_id = session_id
        result = await client.prompt(session_id, prompt, literal=not commands)
    except JsonRpcException as error:
        if stopper.exit_code is not None:
            return stopper.exit_code
        view.line(f"parley: {error.message}")
        return 1
    except asyncio.CancelledError:
        if stopper.exit_code is None:
            raise
        return stopper.exit_code
    finally:
        stopper.finish()
        await client.stop()
        loop.remove_signal_handler(signal.SIGINT)  # only now: Ctrl-C while stopping exits at once
    return _finish(view, result, session_id, stopper.exit_code)


async def _open_session(
    client: ParleyClient,
    view: TerminalView,
    cwd: Path,
    model: str | None,
    session_id: str | None,
    tool_policy: str | None,
) -> str | None:
    """Initialize the server and open the session: a new one with the chosen model (else
    the server's default), or `session_id` loaded. None: the model is not available (said)."""
    info = await client.initialize()
    chosen = model or info["_meta"]["parley"]["defaultModel"]
    known = {m["id"]: m for m in info["_meta"]["parley"]["models"]}
    if chosen in known and not known[chosen]["available"]:
        view.line(f"parley: {known[chosen]['reason']}")
        return None
    if session_id is not None:
        await client.load_session(session_id, str(cwd))
        return session_id
    settings: dict[str, Any] = {"model": chosen}
    if tool_policy:
        settings["toolPolicy"] = tool_policy
    return await client.new_session(str(cwd), **settings)


def _finish(
    view: TerminalView, result: dict[str, Any], session_id: str, exit_code: int | None
) -> int:
    """After the answer: the result (with --json), else the turn's summary and the files it
    edited on stderr (why it stopped, the notice said); the exit code."""
    if view.as_json:
        view.answer(json.dumps({"sessionId": session_id, "result": result}) + "\n")
    elif view._out_mid_line:
        view.answer("\n")
    if exit_code is not None:
        return exit_code
    if not view.as_json:
        view.line("")
        view.line(_summary(result, session_id))
        edited = [shown_path(path, view.cwd) for path in view.edits.paths()]
        if edited:
            view.line(f"Edited: {', '.join(terminal_safe(path) for path in edited)}")
    return 0 if result["stopReason"] in ("end_turn", "max_tokens") else 1


def _summary(result: dict[str, Any], session_id: str) -> str:
    """The turn in one line (docs/display.md's turn summary), and the session to continue."""
    parley = result.get("_meta", {}).get("parley", {})
    return f"{turn_summary(parley.get('turn', {}), parley.get('usage', {}))} · session {session_id}"


def read_prompt(prompt: str) -> str | None:
    """The prompt: `-` reads it from stdin (all of it); None when that is empty."""
    if prompt != "-":
        return prompt
    if sys.stdin.isatty():
        print("parley: type the prompt, then Ctrl-D on a line of its own.", file=sys.stderr)
    text = sys.stdin.read()
    return text if text.strip() else None


def is_slash_command(text: str) -> bool:
    """Whether the server would run `text` as a slash command."""
    from parley.agent.commands import parse_command
    from parley.core.conversation import TextBlock

    return text.lstrip().startswith("/") and parse_command((TextBlock(text),)) is not None


class NotACommand(ValueError):
    """`--command` with a prompt that is no slash command."""


def runs_commands(prompt: str, explicit: bool, typed: bool) -> bool:
    """Whether a slash command in the prompt runs: with `--command` (`explicit`: then the
    prompt must be one, else `NotACommand`), or when the prompt comes from a terminal
    (`typed`: stdin is one); never from text piped in."""
    if explicit:
        if is_slash_command(prompt):
            return True
        shown = terminal_safe(prompt.strip()[:60])
        raise NotACommand(
            f"--command runs a slash command (/undo, /compact, /cost, /model), not {shown!r}"
        )
    return typed


def run_chat(args: argparse.Namespace, settings: Settings) -> int:
    cwd = Path(args.cwd or os.getcwd()).resolve()
    prompt = read_prompt(args.prompt)
    if prompt is None:
        print("parley: the prompt on stdin is empty", file=sys.stderr)
        return 2
    try:
        commands = runs_commands(prompt, getattr(args, "slash_command", False), sys.stdin.isatty())
    except NotACommand as error:
        print(f"parley: {error}", file=sys.stderr)
        return 2
    if not commands and is_slash_command(prompt):
        print(
            "parley: the prompt is sent to the model as text: slash commands run only from a "
            "terminal, or with --command.",
            file=sys.stderr,
        )
    if args.model == "demo":
        return run_demo(prompt=prompt, as_json=args.json)
    return asyncio.run(
        chat(
            prompt,
            model=args.model,
            cwd=cwd,
            session_id=args.session,
            as_json=args.json,
            allow_all=args.yes,
            tool_policy=args.tool_policy,
            session_model=getattr(args, "session_model", None),
            commands=commands,
        )
    )


def run_demo(prompt: str = DEMO_PROMPT, as_json: bool = False) -> int:
    """A full hybrid turn, offline: the fake LLM plays a scripted model in a sample project."""
    from parley.fakellm import FakeLLM
    from parley.fakellm.demo import demo_script, write_demo_workspace

    print(
        "parley demo: the model here is SCRIPTED (Parley's built-in fake LLM, no network).\n"
        "Everything else is real: the server, the hybrid streaming policy, the tools.\n",
        file=sys.stderr,
    )
    with (
        tempfile.TemporaryDirectory(prefix="parley-demo-") as home,
        FakeLLM(script=demo_script()) as fake,
    ):
        workspace = write_demo_workspace(Path(home) / "project")
        env = {
            "PARLEY_DEMO_BASE_URL": fake.openai_base_url,
            "PARLEY_HOME": str(Path(home) / "data"),
        }
        print(f"> {prompt}\n", file=sys.stderr)
        print(
            "(The demo allows the scripted model's tool calls without asking.)\n", file=sys.stderr
        )
        code = asyncio.run(
            chat(prompt, model=DEMO_MODEL, cwd=workspace, as_json=as_json, allow_all=True, env=env)
        )
        with contextlib.suppress(Exception):
            requests = fake.requests
            kinds = ", ".join(
                f"{'stream' if r.stream else 'sync'}"
                + (" (closed early)" if r.client_hung_up else "")
                for r in requests
            )
            print(f"What the scripted model was asked: {kinds}.", file=sys.stderr)
        return code
