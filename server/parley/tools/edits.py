"""The model changes the workspace's files: `edit_file` (an exact replacement) and
`write_file` (a whole file, created or overwritten).

Confined like `read_file`: every path is walked from the workspace root by `confined`, so
`..`, absolute paths elsewhere and symlinks leading out are refused, and only regular files
with one name are changed. An edit applies to the file's current text (the editor's buffer
when the editor offers `fs/read_text_file`, else the disk), and only when that is the text
the model last read or Parley last wrote (`FileLedger`): a file that changed since is
refused, and the model is told to read it again. The file's line endings and final newline
are kept. The new text goes to the editor (`fs/write_text_file`) when it offers that,
otherwise to the disk atomically (a temporary file in the same directory, renamed over it,
with the old file's mode). Each asks the user first, showing the diff.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from parley.core.call_view import CallView, Diff, Location
from parley.core.off_loop import off_loop
from parley.tools.arguments import InvalidArguments, argument, read_arguments
from parley.tools.base import ToolContext, ToolResult, declared_spec
from parley.tools.confined import (
    Refused,
    Roots,
    Want,
    open_confined,
    open_confined_parent,
    open_in_workspace,
    printable_name,
    replace_at,
)
from parley.tools.file_ledger import FileLedger
from parley.tools.workspace import (
    EDIT_MAX_BYTES,
    EDITOR_READ_SECONDS,
    EDITOR_WRITE_SECONDS,
    WorkspaceTool,
    looks_binary,
    requested_name,
)

logger = logging.getLogger(__name__)

# Lines of the file shown around a near match when old_text is not found, and at most how
# many near matches.
NEAR_MATCHES = 3
NEAR_MATCH_CUTOFF = 0.6
# Lines of the changed region shown to the model after an edit, at most.
SHOWN_LINES = 30
# The changed region is compared by difflib up to this many lines a side (a fraction of a
# second, off the event loop); a larger one is counted in linear time.
DIFF_MAX_LINES = 1000


class EditRefused(Exception):
    """An edit that is not made; `str()` is what the model is told."""


@attrs.frozen
class Target:
    """The file an edit is about: absolute, where it really is (symlinks resolved), and as
    the model is shown it."""

    path: str
    relative: str

    @property
    def shown(self) -> str:
        return printable_name(self.relative)

    @property
    def wire_path(self) -> str:
        """The absolute path as JSON can carry it (a name that is not UTF-8, escaped)."""
        return printable_name(self.path)


# --- text: line endings, final newline, matching ------------------------------------------


def newline_of(text: str) -> str:
    """The file's line ending: CRLF when most of its lines end so, else LF."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"


def with_newlines(text: str, newline: str) -> str:
    """The model's text with the file's line endings."""
    text = text.replace("\r\n", "\n")
    return text if newline == "\n" else text.replace("\n", newline)


def keeping_final_newline(original: str, text: str, newline: str) -> str:
    """`text` ending in a newline exactly when `original` did (a new or empty file: as is)."""
    if not original or not text:
        return text
    if original.endswith("\n") and not text.endswith("\n"):
        return text + newline
    if not original.endswith("\n") and text.endswith("\n"):
        return text[: -len(newline)] if text.endswith(newline) else text[:-1]
    return text


def line_at(text: str, offset: int) -> int:
    """The 1-based line number of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


def occurrences(text: str, old: str) -> list[int]:
    """Where `old` starts in `text`, occurrences not overlapping."""
    found, start = [], 0
    while (at := text.find(old, start)) != -1:
        found.append(at)
        start = at + len(old)
    return found


def _numbered_lines(lines: list[str], first: int) -> str:
    return "".join(f"{number:>6}\t{line}\n" for number, line in enumerate(lines, first))


def not_found(text: str, old: str, shown: str) -> str:
    """What the model is told when `old` is nowhere in `text`: the lines most like it."""
    old_lines = old.replace("\r\n", "\n").split("\n")
    anchor_index = next((i for i, line in enumerate(old_lines) if line.strip()), 0)
    anchor = old_lines[anchor_index].strip()
    lines = text.replace("\r\n", "\n").split("\n")
    starts = _most_like(anchor, [line.strip() for line in lines])
    message = f"old_text was not found in {shown}."
    if not starts:
        return (
            f"{message} No line of the file resembles its first line {anchor[:200]!r}; read the "
            "file again with read_file and copy old_text exactly from it."
        )
    shown_blocks = []
    for index in sorted(starts):
        first = max(0, index - anchor_index)
        block = lines[first : first + max(len(old_lines), 1)]
        shown_blocks.append(_numbered_lines(block, first + 1))
    return (
        f"{message} The closest lines in the file are:\n"
        + "   …\n".join(shown_blocks)
        + "old_text must match the file exactly, whitespace and indentation included "
        "(without the line numbers read_file shows); correct it and call edit_file again."
    )


def _most_like(anchor: str, lines: list[str]) -> list[int]:
    """The indexes of the lines most like `anchor` (NEAR_MATCHES at most, best first), each
    compared whole and cut to the anchor's length (a line the model quoted only in part)."""
    scored = []
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(anchor)
    for index, line in enumerate(lines):
        best = 0.0
        for candidate in {line, line[: len(anchor)]}:
            matcher.set_seq1(candidate)
            if (
                matcher.real_quick_ratio() >= NEAR_MATCH_CUTOFF
                and matcher.quick_ratio() >= NEAR_MATCH_CUTOFF
            ):
                best = max(best, matcher.ratio())
        if best >= NEAR_MATCH_CUTOFF:
            scored.append((-best, index))
    scored.sort()
    # Only the lines about as close as the closest: not three poor ones beside a near miss.
    return [index for score, index in scored[:NEAR_MATCHES] if score <= scored[0][0] + 0.1]


def replaced(
    text: str, old_text: str, new_text: str, replace_all: bool, shown: str, near: bool = True
) -> str:
    """`text` with `old_text` replaced by `new_text` (in the file's line endings, its final
    newline kept); raises `EditRefused` when old_text is not found (naming the nearest lines,
    with `near`), or found several times without `replace_all`."""
    newline = newline_of(text)
    old, new = with_newlines(old_text, newline), with_newlines(new_text, newline)
    found = occurrences(text, old)
    if not found and old != old_text and old_text in text:  # a file with mixed endings
        old, new = old_text, new_text
        found = occurrences(text, old)
    if not found:
        raise EditRefused(
            not_found(text, old_text, shown) if near else f"old_text was not found in {shown}."
        )
    if len(found) > 1 and not replace_all:
        lines = ", ".join(str(line_at(text, at)) for at in found[:50])
        raise EditRefused(
            f"old_text matches {len(found)} times in {shown} (at lines {lines}); include more "
            "of the surrounding lines to make it unique, or set replace_all to replace every "
            "one."
        )
    return keeping_final_newline(text, text.replace(old, new), newline)


def _line_counts(lines: list[str]) -> Counter[str]:
    """Each line's copies, counted a slice at a time: one C call over a whole big file
    would hold the GIL, and so the event loop, for as long as it takes."""
    counts: Counter[str] = Counter()
    for start in range(0, len(lines), DIFF_MAX_LINES):
        counts.update(lines[start : start + DIFF_MAX_LINES])
    return counts


@attrs.frozen
class Change:
    """Where two texts differ, by lines: the lines before and after that they share, and the
    lines added and removed between."""

    first: int  # 0-based index of the first line that differs
    old_end: int  # end (exclusive) of the changed lines in the old text
    new_end: int  # ... and in the new
    added: int
    removed: int


def change_between(before: str, after: str) -> Change:
    """The changed region of two texts: their common first and last lines trimmed (linear
    time), and the lines in between compared to count what was added and removed."""
    old_lines, new_lines = before.splitlines(), after.splitlines()
    first = 0
    limit = min(len(old_lines), len(new_lines))
    while first < limit and old_lines[first] == new_lines[first]:
        first += 1
    old_end, new_end = len(old_lines), len(new_lines)
    while old_end > first and new_end > first and old_lines[old_end - 1] == new_lines[new_end - 1]:
        old_end -= 1
        new_end -= 1
    added, removed = lines_added_and_removed(old_lines[first:old_end], new_lines[first:new_end])
    return Change(first, old_end, new_end, added, removed)


def lines_added_and_removed(old: list[str], new: list[str]) -> tuple[int, int]:
    """How many lines `new` adds to `old` and removes from it: by difflib up to
    DIFF_MAX_LINES a side; past that (difflib takes quadratic time where many short runs of
    lines match, as a `replace_all` over a big file makes) by counting each line's copies,
    in linear time (a line that only moved then counts as neither)."""
    if len(old) > DIFF_MAX_LINES or len(new) > DIFF_MAX_LINES:
        old_counts, new_counts = _line_counts(old), _line_counts(new)
        shared = old_counts.keys() & new_counts.keys()
        kept = sum(min(old_counts[line], new_counts[line]) for line in shared)
        return len(new) - kept, len(old) - kept
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old, new)
    for tag, old_from, old_to, new_from, new_to in matcher.get_opcodes():
        if tag != "equal":
            removed += old_to - old_from
            added += new_to - new_from
    return added, removed


def changed_lines(after: str, change: Change) -> str:
    """The edited region of `after` with line numbers (at most SHOWN_LINES), for the model
    to see what the file says now, headed by which lines of how many they are (an excerpt
    says it is one)."""
    new_lines = after.splitlines()
    first = max(0, change.first - 2)
    last = min(len(new_lines), max(change.new_end, change.first + 1) + 2)
    if last <= first:
        return ""
    cut = last - first > SHOWN_LINES
    block = new_lines[first : first + SHOWN_LINES] if cut else new_lines[first:last]
    shown_end = first + len(block)
    if first == 0 and shown_end == len(new_lines):
        heading = f"It now reads (all {len(new_lines)} lines):\n"
    else:
        heading = f"Lines {first + 1}-{shown_end} of {len(new_lines)} now read:\n"
    text = heading + _numbered_lines(block, first + 1)
    if cut:
        text += f"[… lines {shown_end + 1}-{last} of the change not shown]\n"
    return text


# --- the tools -----------------------------------------------------------------------------


class EditTool(WorkspaceTool):
    """What `edit_file` and `write_file` share: the target, its current text, the stale
    check, and the write (through the editor, or atomically on disk)."""

    def __init__(self, workspace: Roots | Path, ledger: FileLedger | None = None) -> None:
        super().__init__(workspace, ledger if ledger is not None else FileLedger())
        # Where each path led when the user was last shown a call on it (None: refused), so
        # a call writes only the file its question named.
        self._asked: dict[str, str | None] = {}

    @property
    def known(self) -> FileLedger:
        assert self.ledger is not None
        return self.ledger

    # --- finding and reading the file ---

    def target(self, path: str) -> Target:
        """Where `path` leads, as the gate resolves it (the file need not exist; a missing
        directory is fine: `write` makes it, walking the path again through the gate)."""
        asked = requested_name(self.roots, path)
        try:
            where = open_in_workspace(self.roots, path, Want.WHERE)
        except NotADirectoryError as exc:
            raise EditRefused(f"{asked}: a part of this path is a file, not a directory.") from exc
        status = where.status
        if where.relative == "." or (status is not None and stat.S_ISDIR(status.st_mode)):
            raise EditRefused(f"{printable_name(where.relative)} is a directory.")
        return Target(str(self.workspace / where.relative), where.relative)

    def asked_target(self, path: str) -> Target:
        """`target`, for the view the user is shown and asked about: remembered."""
        try:
            target = self.target(path)
        except BaseException:
            self._asked[path] = None
            raise
        self._asked[path] = target.relative
        return target

    def check_as_asked(self, path: str, target: Target) -> None:
        """Refuse a call whose path leads elsewhere than when the user was asked."""
        asked = self._asked.get(path, target.relative)
        if asked != target.relative:
            then = "outside what can be written" if asked is None else printable_name(asked)
            raise EditRefused(
                f"{printable_name(path)!r} led to {then} when the user was asked and leads to "
                f"{target.shown} now (a symlink or a directory changed); nothing was written. "
                "Call again to be asked about it."
            )

    def disk_text(self, target: Target) -> str | None:
        """The file's text on disk; None when it does not exist."""
        try:
            with open_confined(self.roots, target.relative) as file:
                size = os.fstat(file.fileno()).st_size
                if size > EDIT_MAX_BYTES:
                    raise EditRefused(
                        f"{target.shown} is too large to edit ({size:,} bytes; at most "
                        f"{EDIT_MAX_BYTES:,})."
                    )
                if looks_binary(file):
                    raise EditRefused(f"{target.shown} is a binary file; only text can be edited.")
                data = file.read(EDIT_MAX_BYTES + 1)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError as exc:
            raise EditRefused(f"{target.shown} is a directory.") from exc
        except OSError as exc:
            raise EditRefused(f"Could not read {target.shown}: {exc.strerror or exc}") from exc
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EditRefused(f"{target.shown} is not UTF-8 text, so it cannot be edited.") from exc

    def check_on_disk(self, target: Target) -> bool:
        """Raise as `disk_text` would for a file that is not a regular file with one name;
        whether the file is there."""
        try:
            open_confined(self.roots, target.relative).close()
        except (FileNotFoundError, NotADirectoryError):
            return False
        except IsADirectoryError as exc:
            raise EditRefused(f"{target.shown} is a directory.") from exc
        return True

    async def current_text(self, target: Target, context: ToolContext) -> str | None:
        """The file's text now: the editor's buffer when the editor offers it, else the
        disk; None when the file does not exist. An editor that offers it and cannot give
        it refuses the edit: its buffer may hold unsaved changes the disk lacks."""
        if context.client_files is not None and printable_name(target.relative) == target.relative:
            # What is on disk is checked as for a disk edit (a FIFO, a hard link: refused).
            on_disk = await asyncio.to_thread(self.check_on_disk, target)
            try:
                return await editor_buffer(context, target.path)
            except EditorUnreadable as exc:
                if not on_disk:
                    return None  # a new file: the editor has no text of it to give
                raise EditRefused(
                    f"The editor could not give the text of {target.shown} ({exc}), so the "
                    "edit was not made: its buffer may hold changes the disk lacks. Try again "
                    "later, or ask the user to save or close the file."
                ) from exc
        return await asyncio.to_thread(self.disk_text, target)

    def check_not_stale(self, target: Target, text: str) -> None:
        """Refuse an edit of a file the model has not read, or that changed since."""
        known = self.known.get(target.path)
        if known is None:
            raise EditRefused(
                f"{target.shown} has not been read in this session; read it with read_file "
                "first, then make the edit against its current text."
            )
        if not self.known.is_current(target.path, text):
            raise EditRefused(
                f"{target.shown} has changed since you last read it (on disk or in the "
                "editor), so the edit was not made. Read it again with read_file and redo the "
                "edit against its current text."
            )

    def view_text(self, target: Target) -> str | None:
        """The text an edit will apply to, for the diff the user approves: what the model
        last saw (the stale check refuses anything else), or the disk's."""
        known = self.known.get(target.path)
        if known is not None:
            return known.text
        return self.disk_text(target)

    # --- the call ---

    async def prepare(self, arguments: Any, context: ToolContext) -> tuple[Target, str | None, str]:
        """The file, its text now (None: new) and its text after the call; raises
        `EditRefused` (or `Refused`, `OSError`) for a call that cannot be made."""
        raise NotImplementedError

    def done(self, target: Target, before: str | None, after: str) -> str:
        """What the model is told once the file is written."""
        raise NotImplementedError

    async def precheck(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult | None:
        """The error the call would end in, found before the user is asked about it."""
        try:
            declared = read_arguments(self.Arguments, arguments)
        except InvalidArguments as exc:
            return ToolResult(str(exc), is_error=True)
        try:
            await self.prepare(declared, context)
        except Exception as exc:  # as `execute` words it
            return _refusal(exc, arguments.get("path"))
        return None

    async def execute(self, arguments: Any, context: ToolContext) -> ToolResult:
        try:
            target, before, after = await self.prepare(arguments, context)
            self.check_as_asked(arguments.path, target)
        except (EditRefused, ValueError, OSError) as exc:
            return _refusal(exc, arguments.path)
        try:
            target = await self.write(target, after, context)
        except EditRefused as exc:
            return ToolResult(str(exc), is_error=True)
        diff = Diff(target.wire_path, before, after)
        said = await off_loop(self.done, target, before, after)  # a diff of the whole file
        return ToolResult(said, diffs=(diff,))

    # --- writing ---

    async def write(self, target: Target, text: str, context: ToolContext) -> Target:
        """Write `text` as the file's whole text; where it went (a new file's directories
        resolved), or `EditRefused` saying why it could not be. The checkpoint journal
        hears of it first (its failure stops the write)."""
        try:
            relative = await asyncio.to_thread(make_parents, self.roots, target.relative)
        except (Refused, ValueError) as exc:
            raise EditRefused(str(exc)) from exc
        except OSError as exc:
            raise EditRefused(f"Could not write {target.shown}: {exc.strerror or exc}") from exc
        if relative != target.relative:  # a symlink or a directory changed meanwhile
            raise EditRefused(
                f"{target.shown} now leads to {printable_name(relative)}; nothing was written."
            )
        if context.edit_journal is not None:
            try:  # an edit that cannot be undone is not made
                context.edit_journal.before_write(Path(target.path))
            except (Refused, ValueError, OSError) as exc:  # changed meanwhile: a directory now
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                message = (
                    f"{target.shown} could not be kept for undo ({reason}); nothing was written."
                )
                raise EditRefused(message) from exc
        if context.client_writes is None or target.wire_path != target.path:
            # (A name that is not UTF-8 cannot travel to the editor: the disk is written.)
            try:
                await asyncio.to_thread(write_atomically, self.roots, relative, text)
            except (Refused, ValueError) as exc:
                raise EditRefused(str(exc)) from exc
            except OSError as exc:
                message = f"Could not write {target.shown}: {exc.strerror or exc}"
                raise EditRefused(message) from exc
        else:
            try:
                async with asyncio.timeout(EDITOR_WRITE_SECONDS):
                    await context.client_writes.write_text_file(
                        context.session_id, target.path, text
                    )
            except TimeoutError as exc:
                message = f"The editor did not write {target.shown} in time; it may be unchanged."
                raise EditRefused(message) from exc
            except Exception as error:  # the editor's JSON-RPC error
                reason = getattr(error, "message", None) or str(error) or type(error).__name__
                message = f"The editor could not write {target.shown}: {reason}"
                raise EditRefused(message) from error
        self.known.record(target.path, text)
        return target


class EditorUnreadable(Exception):
    """The editor offers `fs/read_text_file` but did not give a file's text: why."""


async def editor_buffer(context: ToolContext, path: str) -> str:
    """The editor's text of `path` (its buffer, saved or not); `EditorUnreadable` when it
    answers with an error, an answer without text, or not in time."""
    assert context.client_files is not None
    try:
        async with asyncio.timeout(EDITOR_READ_SECONDS):
            return await context.client_files.read_text_file(context.session_id, path)
    except TimeoutError as exc:
        raise EditorUnreadable(f"no answer in {EDITOR_READ_SECONDS:g} s") from exc
    except Exception as error:  # the editor's JSON-RPC error, or an answer without text
        reason = getattr(error, "message", None) or str(error) or type(error).__name__
        raise EditorUnreadable(reason) from error


def _refusal(error: Exception, path: Any) -> ToolResult:
    """An edit that cannot be made, as the model is told it."""
    if isinstance(error, (EditRefused, ValueError)):  # Refused is a ValueError
        return ToolResult(str(error), is_error=True)
    if isinstance(error, OSError):
        return ToolResult(f"Could not change {path}: {error.strerror or error}", is_error=True)
    raise error


def make_parents(workspace: Roots | Path, relative: str) -> str:
    """The directories of the file at `relative`, made where missing (inside its root);
    where the file really is (`Roots.shown`)."""
    directory_fd, _, real = open_confined_parent(workspace, relative, create=True)
    os.close(directory_fd)
    return real


def write_atomically(workspace: Roots | Path, relative: str, text: str) -> str:
    """`text` as the whole content of the file at `relative` (missing directories made):
    written to a temporary file in the same directory, then renamed over it, so a reader
    sees the old file or the new one, never part of one. An existing file keeps its mode.
    `relative` is where the gate resolved the file: refused when it now leads elsewhere."""
    data = text.encode("utf-8")
    directory_fd, name, leads_to = open_confined_parent(workspace, relative, create=True)
    try:
        if leads_to != relative:  # resolved already: a symlink or a directory changed since
            raise Refused(f"{printable_name(relative)} now leads to {printable_name(leads_to)}.")
        mode = None
        try:
            status = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
                raise Refused(
                    f"{printable_name(relative)} is not a regular file with one name; it is "
                    "not written."
                )
            mode = stat.S_IMODE(status.st_mode)
        replace_at(directory_fd, name, data, mode)
    finally:
        os.close(directory_fd)
    return relative


@attrs.frozen
class EditFileArguments:
    path: str = argument("Path relative to the workspace.")
    old_text: str = argument(
        "The exact text to replace, as in the file (whitespace and indentation included, "
        "without read_file's line numbers); it must occur once unless replace_all is set."
    )
    new_text: str = argument("The text to put in its place ('' deletes it).", blank=True)
    replace_all: bool | None = argument(
        "Replace every occurrence of old_text (default false).", default=None
    )


class EditFileTool(EditTool):
    Arguments = EditFileArguments
    spec = declared_spec(
        "edit_file",
        (
            "Edit a text file in the workspace by replacing old_text (exact, and found once, "
            "unless replace_all) with new_text. Read the file with read_file first: an edit "
            "of a file that changed since it was last read is refused. The file's line "
            "endings and final newline are kept. The user approves the diff."
        ),
        Arguments,
        kind="edit",
        needs_permission=True,
    )

    def view(self, arguments: EditFileArguments) -> CallView:
        title = f"Edit {requested_name(self.roots, arguments.path)}"
        try:
            target = self.asked_target(arguments.path)
        except (EditRefused, Refused, OSError, ValueError) as exc:
            return CallView(title, self.shown(arguments.path)[1], (str(exc),))
        title = f"Edit {target.shown}"
        try:
            before = self.view_text(target)
            if before is None:
                raise EditRefused(f"{target.shown} does not exist; use write_file to create it.")
            after = replaced(
                before,
                arguments.old_text,
                arguments.new_text,
                bool(arguments.replace_all),
                target.shown,
                near=False,  # cheap: the call's own answer names the nearest lines
            )
        except (EditRefused, OSError, ValueError) as exc:
            return CallView(title, (Location(target.wire_path),), (str(exc),))
        where = Location(target.wire_path, change_between(before, after).first + 1)
        return CallView(title, (where,), diffs=(Diff(target.wire_path, before, after),))

    async def prepare(
        self, arguments: EditFileArguments, context: ToolContext
    ) -> tuple[Target, str | None, str]:
        if arguments.old_text == arguments.new_text:
            raise EditRefused("old_text and new_text are the same: nothing to change.")
        target = await asyncio.to_thread(self.target, arguments.path)
        before = await self.current_text(target, context)
        if before is None:
            raise EditRefused(
                f"No such file in the workspace: {target.shown}; use write_file to create it."
            )
        self.check_not_stale(target, before)
        after = await asyncio.to_thread(  # a big file's nearest lines take a moment
            replaced,
            before,
            arguments.old_text,
            arguments.new_text,
            bool(arguments.replace_all),
            target.shown,
        )
        return target, before, after

    def done(self, target: Target, before: str | None, after: str) -> str:
        assert before is not None
        return _edited(target, before, after)


@attrs.frozen
class WriteFileArguments:
    path: str = argument("Path relative to the workspace; missing directories are made.")
    content: str = argument("The file's whole new text.", blank=True)


class WriteFileTool(EditTool):
    Arguments = WriteFileArguments
    spec = declared_spec(
        "write_file",
        (
            "Create a text file in the workspace, or replace the whole text of one (read it "
            "with read_file first: overwriting a file that changed since it was last read is "
            "refused). Missing directories are made. For a change to part of a file, use "
            "edit_file. The user approves the diff."
        ),
        Arguments,
        kind="edit",
        needs_permission=True,
    )

    def view(self, arguments: WriteFileArguments) -> CallView:
        title = f"Write {requested_name(self.roots, arguments.path)}"
        try:
            target = self.asked_target(arguments.path)
            before = self.view_text(target)
        except (EditRefused, Refused, OSError, ValueError) as exc:
            return CallView(title, self.shown(arguments.path)[1], (str(exc),))
        after = _as_written(before, arguments.content)
        title = f"{'Create' if before is None else 'Write'} {target.shown}"
        diff = Diff(target.wire_path, before, after)
        return CallView(title, (Location(target.wire_path),), diffs=(diff,))

    async def prepare(
        self, arguments: WriteFileArguments, context: ToolContext
    ) -> tuple[Target, str | None, str]:
        target = await asyncio.to_thread(self.target, arguments.path)
        before = await self.current_text(target, context)
        if before is not None:
            self.check_not_stale(target, before)
        return target, before, _as_written(before, arguments.content)

    def done(self, target: Target, before: str | None, after: str) -> str:
        count = len(after.splitlines())
        lines = f"{count} line" if count == 1 else f"{count} lines"
        if before is None:
            return f"Created {target.shown} ({lines})."
        if before == after:
            return f"{target.shown} already had this text; it is unchanged."
        return f"Wrote {target.shown} ({lines})."


def _as_written(before: str | None, content: str) -> str:
    """The model's content as the file gets it: in an existing file's line endings, with
    its final newline as it was."""
    if not before:
        return content
    newline = newline_of(before)
    return keeping_final_newline(before, with_newlines(content, newline), newline)


def _edited(target: Target, before: str, after: str) -> str:
    change = change_between(before, after)
    message = f"Edited {target.shown} (+{change.added} -{change.removed} lines)."
    shown = changed_lines(after, change)
    if shown:
        message += " " + shown
    return message


def edit_tools(workspace: Roots | Path, ledger: FileLedger) -> list[Any]:
    """edit_file and write_file for one workspace, sharing the session's `ledger` with
    read_file."""
    return [EditFileTool(workspace, ledger), WriteFileTool(workspace, ledger)]
