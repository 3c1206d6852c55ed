"""`parley chat`'s terminal view: a session's updates as a person reads them.

The answer goes to stdout as it arrives, and nothing else does: thoughts (dimmed on a
terminal), tool activity, a command's output as it runs, the turn's notices and its summary
go to stderr; each line of a thought or of a command's output is in the gutter (`│ `), so
no line a model or a child writes on stderr starts where Parley's own lines do. `--json`
prints every update as one JSON line instead; `--quiet` keeps stderr to what went wrong
(warning and error notices, Parley's own errors).

A tool call is shown once: `→ Title`, then its input only where it adds something the title
does not say (code, a long command, an argument the title leaves out); an edit's diff instead
of its texts, and only when the permission question did not already show it; then the
result's first lines (`✓`/`✗`; an edit's summary line alone, without the excerpt the model
gets). The display rules are docs/display.md's (`parley/display.py`). Everything written
passes `terminal_text` (docs/display.md, what reaches the terminal): the answer and thoughts
without any escape sequence, a command's output with its colours on a terminal.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO

from parley.display import (
    error_line,
    escape_controls,
    format_tool_input,
    summarize_tool_result,
)
from parley.terminal_text import TerminalStream, painted, terminal_text

DONE = ("completed", "failed")  # a tool call's final statuses
STARTED = ("in_progress", *DONE)  # past the question: the call runs, or has run
# How a notice is marked at its level, and its SGR colour on a terminal (info: plain).
NOTICE_MARKS = {"warning": ("⚠ ", "33"), "error": ("✗ ", "31")}
QUIET_LEVELS = ("warning", "error")  # what --quiet still shows: what went wrong
# SGR colours of a diff's lines on a terminal, by their first character.
DIFF_COLOURS = {"-": "31", "+": "32", "@": "36"}
GUTTER = "│ "  # starts each line Parley did not write: a thought, a command's output
LINE_STARTS = re.compile(r"\n(?!\Z)")  # where a line follows
# An edit's result continues its summary line with the excerpt the model gets
# (tools/edits.py `changed_lines`): its heading ends the line, its lines follow.
EXCERPT_HEADING = re.compile(
    r"\s+(?:It now reads(?: \(all \d+ lines?\))?|Lines \d+-\d+ of \d+ now read):$"
)


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
        text = escape_controls(line[: len(line) - len(ending)], one_line=True)
        if ending == "" and line[:1] in "+- ":
            text += "  (no newline at end of file)"
        code = "1" if line.startswith(("---", "+++")) else DIFF_COLOURS.get(line[:1])
        lines.append(painted(text, code) if colour and code else text)
    if not lines:
        lines.append(f"(no change to {escape_controls(path, one_line=True)})")
    return lines


def diffs_of(update: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ACP `diff` items of a tool call's content."""
    content = update.get("content") if isinstance(update.get("content"), list) else []
    return [c for c in content if isinstance(c, dict) and c.get("type") == "diff"]


def tool_name(update: Mapping[str, Any]) -> str:
    """The tool's own name (for its code argument): Parley's `_meta.parley.tool`, else the
    title when it is one word."""
    meta = update.get("_meta") if isinstance(update.get("_meta"), dict) else {}
    name = (meta.get("parley") or {}).get("tool") if isinstance(meta, dict) else None
    if isinstance(name, str):
        return name
    title = str(update.get("title") or "")
    return title if " " not in title else ""


def said_by_title(value: Any, title: str) -> bool:
    """Whether the title already shows `value` in full, as a word of its own (a path, a short
    pattern, a one-line command; not `a` inside `made`); a text with a newline never is."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if not text.strip() or "\n" in text:
        return False
    return re.search(rf"(?<!\w){re.escape(text)}(?!\w)", title) is not None


def input_worth_showing(
    raw_input: Any, title: str, has_diff: bool = False
) -> dict[str, Any] | None:
    """The arguments of a call that add something to its title, or None for none: an edit's
    diff shows its texts (and the title its file), so an edit shows none."""
    if has_diff:
        return None
    if not isinstance(raw_input, dict):
        return (
            None if raw_input is None or said_by_title(raw_input, title) else {"input": raw_input}
        )
    left = {name: value for name, value in raw_input.items() if not said_by_title(value, title)}
    return left or None


def shown_input(tool: str, raw_input: Any, title: str, has_diff: bool = False) -> str | None:
    """The input lines to show under the call's title (code as code), or None."""
    worth = input_worth_showing(raw_input, title, has_diff)
    if worth is None:
        return None
    return format_tool_input(tool, worth["input"] if list(worth) == ["input"] else worth)


def result_summary(text: str, error: str | None, is_edit: bool) -> list[str]:
    """A result's first lines (docs/display.md); an edit's summary line alone, without the
    excerpt the model is shown."""
    lines = summarize_tool_result(text, error).splitlines()
    if is_edit and error is None:
        return [EXCERPT_HEADING.sub("", lines[0])]
    return lines


def colours(stream: TextIO) -> bool:
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
        diffs = diffs_of(update)
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
        if update.get("status") in DONE:
            call["done"] = update["status"] == "completed"

    def paths(self) -> list[str]:
        """In the order they were first edited, each once."""
        edited: list[str] = []
        for call in self._calls.values():
            if call["edit"] and call["done"]:
                edited += [path for path in call["paths"] if path not in edited]
        return edited


class ToolCallSeen:
    """What the view knows of one tool call, gathered from its updates."""

    def __init__(self, update: Mapping[str, Any]) -> None:
        self.name = tool_name(update)  # the first update's title is the tool's name
        self.title = "a tool"
        self.raw_input: Any = None
        self.is_edit = False
        self.announced = False

    def see(self, update: Mapping[str, Any]) -> None:
        if update.get("title"):
            self.title = escape_controls(str(update["title"]), one_line=True)
        if "rawInput" in update:
            self.raw_input = update["rawInput"]
        if update.get("kind") == "edit" or diffs_of(update):
            self.is_edit = True


class AnswerStream(Protocol):
    """How the answer's pieces become terminal text: `feed` a piece, `finish` at its end."""

    def feed(self, text: str) -> str: ...

    def finish(self) -> str: ...


class TerminalView:
    """Shows a session's updates the way a person reads them in a terminal.

    A stream whose reader went away (a closed pipe) is silenced; when it is stdout,
    `on_output_closed` is told, so the turn can end: nobody reads the answer any more.
    `asked`: the calls whose permission question showed their input (and diff) already.
    `answer_stream`: how the answer is drawn (default: as it comes, as plain text); one that
    holds text back (Markdown drawn block by block) gives it before anything else is shown.
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        as_json: bool,
        cwd: Path | None = None,
        quiet: bool = False,
        answer_stream: AnswerStream | None = None,
    ) -> None:
        self.out, self.err, self.as_json, self.cwd, self.quiet = out, err, as_json, cwd, quiet
        self.edits = EditedFiles()
        self.asked: set[str] = set()
        self.on_output_closed: Callable[[], None] = lambda: None
        self.output_closed = False
        self.stopped = False  # the turn is being cancelled: what it still sends is not shown
        self._message_id: str | None = None
        self._calls: dict[str, ToolCallSeen] = {}
        self._streamed: set[str] = set()  # calls whose output was shown as it came
        # The model's text: no escape sequence at all.
        self._answer_text: AnswerStream = answer_stream or TerminalStream()
        self._holds_blocks = answer_stream is not None
        self._thought_text = TerminalStream()
        self._outputs: dict[str, TerminalStream] = {}  # a command's output: its colours
        self._open_output: str | None = None  # the call whose output left the line open
        # The last write, to either stream, left its line open (they may share a terminal).
        self._mid_line = False
        self.out_mid_line = False  # stdout's own last line is open
        self._thinking = False  # the last thing shown on stderr is a thought
        self.colour = colours(err)

    def show(self, session_id: str, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in ("tool_call", "tool_call_update"):
            self.edits.see(update)
        if self.as_json:
            self.answer(json.dumps({"sessionId": session_id, "update": update}) + "\n")
            return
        if self.stopped:
            return
        notice = update.get("_meta", {}).get("parley", {}).get("notice")
        if kind == "agent_message_chunk" and isinstance(notice, dict):
            # Parley speaking about the turn, not the answer: stderr (docs/display.md, notices).
            self._end_thought()
            self._notice(str(notice.get("level")), update["content"].get("text", ""))
        elif kind == "agent_message_chunk":
            self._answer_chunk(update)
        elif self.quiet:
            return
        elif kind == "agent_thought_chunk":
            self._thought(update["content"].get("text", ""))
        elif kind in ("tool_call", "tool_call_update"):
            self._end_thought()
            self._show_tool(update)
            delta = update.get("_meta", {}).get("parley", {}).get("commandOutput", {}).get("append")
            if isinstance(delta, str):  # a command's output as it runs: colours on a terminal
                call_id = str(update.get("toolCallId"))
                self._streamed.add(call_id)
                stream = self._outputs.setdefault(call_id, TerminalStream(self.colour))
                self._output(call_id, stream.feed(delta))

    def _answer_chunk(self, update: dict[str, Any]) -> None:
        new_message = self._message_id not in (None, update.get("messageId"))
        self._end_thought(blank_line=not new_message)  # a new message adds its own
        replaces = update.get("_meta", {}).get("parley", {}).get("replaces")
        if new_message or replaces:
            self.answer(self._answer_text.finish())  # what the last message held back
        if replaces:
            if not self.quiet:
                self.note("(the model revised its text; the revision follows)")
            self.answer("\n")
        elif new_message:
            self.answer("\n\n")  # a new message: a new paragraph
        self._message_id = update.get("messageId")
        self.answer(self._answer_text.feed(update["content"]["text"]))

    def _notice(self, level: str, text: str) -> None:
        """A notice at its level: a warning marked `⚠` (yellow on a terminal), an error `✗`
        (red); info as it is. With --quiet, only warnings and errors."""
        if self.quiet and level not in QUIET_LEVELS:
            return
        mark, colour = NOTICE_MARKS.get(level, ("", ""))
        shown = mark + escape_controls(text)
        self.note(painted(shown, colour) if self.colour and colour else shown)

    def _thought(self, text: str) -> None:
        """Thoughts on lines of their own on stderr, in the gutter (dimmed on a terminal)."""
        text = self._thought_text.feed(text)
        if not text:
            return
        if not self._thinking:
            self._write(self.err, ("\n" if self._mid_line else "") + "\n")  # a blank line
            self._thinking = True
        for index, piece in enumerate(text.split("\n")):
            if index:
                self._write(self.err, "\n")
            if piece:
                start = "" if self._mid_line else GUTTER
                self._write(self.err, self._dim(start + piece))

    def _end_thought(self, blank_line: bool = False) -> None:
        """After thoughts: their line ends (and a blank line follows, before the answer)."""
        self._thought(self._thought_text.finish())
        if self._thinking:
            self._write(self.err, ("\n" if self._mid_line else "") + ("\n" if blank_line else ""))
            self._thinking = False

    def _output(self, call_id: str, shown: str) -> None:
        """A command's output as it comes, each of its lines in the gutter."""
        if not shown:
            return
        continues = self._mid_line and self._open_output == call_id
        start = "" if continues else ("\n" if self._mid_line else "") + GUTTER
        self._write(self.err, start + LINE_STARTS.sub("\n" + GUTTER, shown))
        self._open_output = call_id if self._mid_line else None  # (any other write clears it)

    def finish(self) -> None:
        """The turn is over: what the streams held back (an unfinished escape) is shown."""
        self.answer(self._answer_text.finish())
        self._end_thought()
        for call_id, stream in self._outputs.items():
            self._output(call_id, stream.finish())

    def _show_tool(self, update: dict[str, Any]) -> None:
        """A call once it runs (past its question): `→ Title` and the input the title does
        not say; then its result's first lines (`✓`/`✗`) and an edit's diffs, each once."""
        call_id = str(update.get("toolCallId"))
        call = self._calls.get(call_id)
        if call is None:
            call = self._calls[call_id] = ToolCallSeen(update)
        call.see(update)
        status = update.get("status")
        asked = call_id in self.asked  # the question showed the input and the diff
        if not call.announced and status in STARTED:
            call.announced = True
            self.note(f"→ {call.title}")
            shown = (
                None if asked else shown_input(call.name, call.raw_input, call.title, call.is_edit)
            )
            if shown:
                self.block(shown)
        if status not in DONE:
            return
        if call_id in self._outputs:
            self._output(call_id, self._outputs.pop(call_id).finish())
        items = [c for c in update.get("content") or () if isinstance(c, dict)]
        text = "\n".join(
            c["content"].get("text", "")
            for c in items
            if c.get("type") == "content" and isinstance(c.get("content"), dict)
        )
        error = error_line(text, update.get("rawOutput")) if status == "failed" else None
        lines = result_summary(text, error, call.is_edit and status == "completed")
        if call_id in self._streamed and error is None:  # its output was shown as it came
            lines = [text.rstrip().rsplit("\n", 1)[-1] or lines[0]]  # `Exit code: 0 · 1.2 s`
        mark = "✓" if status == "completed" else "✗"
        self.line(f"{mark} {call.title}: {escape_controls(lines[0])}")
        for more in lines[1:]:
            self.line(f"  {escape_controls(more)}")
        if not asked:
            for diff in diffs_of(update):
                self.block("\n".join(diff_lines(diff, self.cwd, self.colour)), safe=True)

    def answer(self, text: str) -> None:
        """Text for stdout: the answer (or, with --json, JSON lines) and nothing else."""
        if not self.output_closed and text:
            self._write(self.out, text)
            self.out_mid_line = not text.endswith("\n")

    def end_line(self) -> None:
        """Ends a line left open (on stderr: the terminal both streams usually share)."""
        self._answer_held_back()
        if self._mid_line:
            self._write(self.err, "\n")

    def note(self, text: str) -> None:
        """A note for the person watching, on stderr, set off by a blank line."""
        self._write(self.err, ("\n" if self._mid_line else "") + f"\n{text}\n")

    def line(self, text: str) -> None:
        """One line on stderr, on a line of its own."""
        self._write(self.err, ("\n" if self._mid_line else "") + text + "\n")

    def block(self, text: str, safe: bool = False) -> None:
        """Lines on stderr, indented by two spaces (a tool's input, a diff)."""
        for line in text.splitlines() or [""]:
            self.line("  " + (line if safe else escape_controls(line)))

    def _dim(self, text: str) -> str:
        return painted(text, "2") if self.colour else text

    def _answer_held_back(self) -> None:
        """What the answer's stream holds back (an unfinished block), shown now: it came
        before what is shown next."""
        if self._holds_blocks:
            self._holds_blocks = False  # (showing it writes)
            self.answer(self._answer_text.finish())
            self._holds_blocks = True

    def _write(self, stream: TextIO, text: str) -> None:
        if stream is self.err:
            self._answer_held_back()
        text = terminal_text(text, self.colour)  # whatever the text, nothing drives the terminal
        self._open_output = None  # what continues an output's open line is in it no more
        if text and not (stream is self.out and self.output_closed):
            self._mid_line = not text.endswith("\n")
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            silence(stream)
            if stream is self.out and not self.output_closed:
                self.output_closed = True
                self.on_output_closed()


def silence(stream: TextIO) -> None:
    """Points a stream whose reader has gone at /dev/null, so that later writes, and the
    interpreter's final flush, do not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
