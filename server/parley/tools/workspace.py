"""The workspace's files, for the model: read one, list a directory, search contents.

Every file is opened through `confined` (no symlink followed at any step, regular files with
one name only, checked after opening), so `..`, absolute paths elsewhere, symlinks that lead
out, FIFOs, devices and hard links are refused. Listing the workspace runs nothing: a walk
that follows `.gitignore` (inside a git repository) through `pathspec` and skips
virtualenvs, `node_modules` and hidden directories. Searches run in a thread, each line's
match under a time limit, so no pattern can hold the server.
"""

from __future__ import annotations

import asyncio
import fnmatch
import io
import logging
import os
import posixpath
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs

# pathspec and regex are imported where first used: `parley serve` imports this module at
# start, and the two cost about 18 ms there for sessions that may never search.
if TYPE_CHECKING:
    import pathspec
    import regex

from parley.core.call_view import CallView, Location
from parley.tools.arguments import argument
from parley.tools.base import DeclaredTool, ToolContext, ToolResult, declared_spec, quoted
from parley.tools.confined import (
    Refused,
    Roots,
    open_confined,
    open_confined_directory,
    open_regular_at,
    printable_name,
    resolve_confined,
    resolved_roots,
    workspace_root,
)
from parley.tools.file_ledger import FileLedger

logger = logging.getLogger(__name__)

# Directories never searched: environments and caches, not the project's own code.
SKIPPED_DIRECTORIES = frozenset(
    {".venv", "venv", "node_modules", "__pycache__", "site-packages", ".git"}
)
READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
LINE_MAX_CHARS = 2000
# A line is read this far (UTF-8 takes at most 4 bytes a character); the rest is skipped in
# pieces, so a multi-gigabyte line costs no memory.
LINE_HEAD_BYTES = LINE_MAX_CHARS * 4
LINE_SKIP_BYTES = 1 << 20
# Up to this size a file's lines are all counted for the header; beyond it reading stops
# after the lines asked for.
READ_COUNT_MAX_BYTES = 16 * 1024 * 1024
LIST_MAX_ENTRIES = 1000
SEARCH_MAX_HITS = 200
SEARCH_MAX_FILE_BYTES = 5 * 1024 * 1024
# One line's match may take this long (a catastrophic pattern stops here), a whole search
# this long (then it answers what it found).
SEARCH_MATCH_SECONDS = 1.0
SEARCH_BUDGET_SECONDS = 20.0
BINARY_SNIFF_BYTES = 8192
IGNORE_FILE_MAX_BYTES = 1024 * 1024
# Files up to this size can be edited; read_file keeps their text for the stale check.
EDIT_MAX_BYTES = 2 * 1024 * 1024
# How long read_file waits for the editor's buffer (fs/read_text_file) before it reads the disk.
EDITOR_READ_SECONDS = 10.0
# How long an edit or a restore waits for the editor to write one file (fs/write_text_file),
# and a restore for one buffer's text.
EDITOR_WRITE_SECONDS = 30.0


def requested_name(root: Roots | Path, path: str) -> str:
    """A path as the model asked for it, shown relative to the cwd's root (absolute when it
    is in another root), for messages about a file that could not be opened."""
    roots = resolved_roots(root)
    expanded = os.path.expanduser(path) if path else "."
    if os.path.isabs(expanded):
        expanded = posixpath.normpath(expanded)
        inside = roots.holding(expanded) is not None
        expanded = roots.shown(expanded) if inside else os.path.relpath(expanded, roots.cwd)
    return printable_name(posixpath.normpath(expanded))


def looks_binary(file: BinaryIO) -> bool:
    """A NUL byte in the first bytes; the file is left at its start."""
    binary = b"\0" in file.read(BINARY_SNIFF_BYTES)
    file.seek(0)
    return binary


def _skipped_directory(name: str) -> bool:
    return name in SKIPPED_DIRECTORIES or name.startswith(".")


# --- the workspace's files, as git would list them, without running git -----------------


class IgnoreRules:
    """The `.gitignore` rules that apply in a repository: `.git/info/exclude`, then each
    directory's `.gitignore` from the repository's top down; the last rule that matches a
    path decides, as in git."""

    def __init__(self, repository: Path, workspace: Path) -> None:
        # Paths are matched relative to the repository, which may hold the workspace.
        self.prefix = workspace.relative_to(repository).as_posix()
        self.rules: list[tuple[str, pathspec.GitIgnoreSpec]] = []
        self.sources: list[tuple[str, list[str]]] = []  # each rule's base and lines, as read
        self._add("", _ignore_lines(None, str(repository / ".git" / "info" / "exclude")))
        for directory in reversed([workspace, *workspace.parents]):
            if directory == workspace or not directory.is_relative_to(repository):
                continue
            base = directory.relative_to(repository).as_posix()
            self._add(base, _ignore_lines(None, str(directory / ".gitignore")))

    def _add(self, base: str, lines: list[str]) -> None:
        import pathspec

        if lines:
            self.sources.append((base, lines))
            self.rules.append(
                ("" if base == "." else base, pathspec.GitIgnoreSpec.from_lines(lines))
            )

    def add_directory(self, relative: str, directory_fd: int) -> None:
        """The `.gitignore` of a workspace directory (relative to the workspace)."""
        self._add(self._in_repository(relative), _ignore_lines(directory_fd, ".gitignore"))

    def _in_repository(self, relative: str) -> str:
        parts = [part for part in (self.prefix, relative) if part and part != "."]
        return "/".join(parts)

    def ignored(self, relative: str, directory: bool = False) -> bool:
        path = self._in_repository(relative) + ("/" if directory else "")
        decided = None
        for base, spec in self.rules:
            if base and not path.startswith(base + "/"):
                continue
            included = spec.check_file(path[len(base) + 1 :] if base else path).include
            if included is not None:
                decided = included
        return bool(decided)


# A `.gitignore` pattern pathspec is given at most (see `matchable`): stars in one segment
# of it (`*.min.*` has two; `**` is one of its own kind), and characters.
IGNORE_SEGMENT_MAX_STARS = 2
IGNORE_PATTERN_MAX_CHARS = 400


def _ignore_lines(directory_fd: int | None, name: str) -> list[str]:
    try:
        with open_regular_at(directory_fd, name) as file:
            data = file.read(IGNORE_FILE_MAX_BYTES)
    except (OSError, Refused):
        return []
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    return [line for line in lines if matchable(line)]


def matchable(pattern: str) -> bool:
    """Whether pathspec may match a `.gitignore` pattern in bounded time: its regular
    expression (the `re` module's, which holds the GIL) backtracks exponentially over
    `*a*a*a…*b`, so a pattern with more stars in one segment than real ones have, or a very
    long one, is left out (what it would have ignored is listed); so is one pathspec cannot
    read (`!` alone), which would fail the whole file's rules."""
    import pathspec

    if len(pattern) > IGNORE_PATTERN_MAX_CHARS:
        return False
    segments = (segment.replace("**", "") for segment in pattern.split("/"))
    if not all(segment.count("*") <= IGNORE_SEGMENT_MAX_STARS for segment in segments):
        return False
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except ValueError:  # pathspec's GitIgnorePatternError
        return False
    return True


def repository_of(root: Path) -> Path | None:
    """The git repository holding `root` (the nearest directory with a `.git`), if any."""
    for directory in [root, *root.parents]:
        if os.path.lexists(directory / ".git"):
            return directory
    return None


def workspace_files(root: Path) -> list[str]:
    """The workspace's regular files, relative and `/`-separated, sorted.

    A walk that never follows a symlink (symlinks are not listed; the files they lead to are,
    under their own names, when inside). Inside a git repository, what `.gitignore` files
    (those above the workspace in the repository too) and `.git/info/exclude` exclude stays
    out, tracked or not. Virtualenvs, `node_modules` and hidden directories are skipped.
    Names that are not UTF-8 are surrogate-escaped (show them with `printable_name`).
    """
    root = workspace_root(root)
    repository = repository_of(root)
    rules = IgnoreRules(repository, root) if repository else None
    listed = []
    for directory, subdirectories, files, directory_fd in os.fwalk(root, follow_symlinks=False):
        relative = os.path.relpath(directory, root)
        if rules is not None:
            rules.add_directory(relative, directory_fd)
        base = "" if relative == "." else relative + "/"
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not _skipped_directory(name)
            and not (rules and rules.ignored(base + name, directory=True))
        )
        for name in files:
            if rules is not None and rules.ignored(base + name):
                continue
            try:
                mode = os.stat(name, dir_fd=directory_fd, follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode):
                listed.append(base + name)
    return sorted(listed)


def files_in_roots(workspace: Roots | Path) -> list[str]:
    """`workspace_files` of every root: the cwd's root's relative, then those of the other
    roots absolute (`Roots.shown`), each file once where roots nest."""
    roots = resolved_roots(workspace)
    listed: dict[str, None] = {}
    for root in roots.all:
        for relative in workspace_files(root):
            listed.setdefault(roots.shown(posixpath.join(str(root), relative)))
    return list(listed)


def _matches_glob(relative: str, glob: str) -> bool:
    """`*.py` matches at any depth; `src/*.py` and `**/*.py` match the whole path."""
    if "/" not in glob:
        return fnmatch.fnmatch(PurePosixPath(relative).name, glob)
    if fnmatch.fnmatch(relative, glob):
        return True
    return glob.startswith("**/") and fnmatch.fnmatch(relative, glob[3:])


def _lines(file: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Each line's head (at most LINE_HEAD_BYTES) and whether that is the whole line. The
    rest of a longer line is skipped, in bounded pieces, only when the next line is asked
    for."""
    while True:
        head = file.readline(LINE_HEAD_BYTES)
        if not head:
            return
        whole = head.endswith(b"\n") or len(head) < LINE_HEAD_BYTES
        yield head, whole
        while not whole:
            rest = file.readline(LINE_SKIP_BYTES)
            whole = not rest or rest.endswith(b"\n")


def _numbered(number: int, head: bytes, whole: bool) -> str:
    text = head.decode("utf-8", "replace").rstrip("\r\n")
    if not whole:
        text = text[:LINE_MAX_CHARS] + f" [… over {len(text) - LINE_MAX_CHARS:,} cut]"
    elif len(text) > LINE_MAX_CHARS:
        text = text[:LINE_MAX_CHARS] + f" [… {len(text) - LINE_MAX_CHARS:,} cut]"
    return f"{number:>6}\t{text}\n"


class WorkspaceTool(DeclaredTool):
    """A tool on the workspace's files, all of them opened through `confined`. `ledger`
    (shared by a session's file tools) keeps the text of each file the model read, for the
    edit tools' stale check."""

    def __init__(self, workspace: Roots | Path, ledger: FileLedger | None = None) -> None:
        self.roots = resolved_roots(workspace)  # as the session resolved them
        self.workspace = self.roots.cwd  # where relative paths start
        self.ledger = ledger

    def forget_file_texts(self) -> None:
        """The model no longer knows what it read (`ToolRegistry.forget_file_texts`)."""
        if self.ledger is not None:
            self.ledger.clear()

    def forget_files(self, paths: Iterable[str]) -> None:
        """The model no longer knows these files as they are (`ToolRegistry.forget_files`)."""
        if self.ledger is not None:
            for path in paths:
                self.ledger.forget(path)

    def shown(self, path: str | None) -> tuple[str, tuple[Location, ...]]:
        """How a call on `path` is shown: where the gate says it leads (relative to the
        root) and its location for an editor (absolute); the path as asked, without a
        location, when the gate refuses it. Nothing at the path's end is opened."""
        try:
            relative = resolve_confined(self.roots, path or ".")
        except (OSError, ValueError):  # Refused is a ValueError
            return requested_name(self.roots, path or "."), ()
        absolute = self.workspace if relative == "." else self.workspace / relative
        return printable_name(relative), (Location(printable_name(str(absolute))),)


@attrs.frozen
class ReadFileArguments:
    path: str = argument("Path relative to the workspace.")
    start_line: int | None = argument(wire_name="startLine", minimum=1, default=None)
    end_line: int | None = argument(wire_name="endLine", minimum=1, default=None)


class ReadFileTool(WorkspaceTool):
    Arguments = ReadFileArguments
    spec = declared_spec(
        "read_file",
        (
            "Read a text file in the workspace, with line numbers; optionally only lines "
            "startLine to endLine (1-based, inclusive)."
        ),
        Arguments,
        kind="read",
    )

    def view(self, arguments: ReadFileArguments) -> CallView:
        start, end = arguments.start_line, arguments.end_line
        lines = f":{start or 1}-{end}" if end else f" from line {start}" if start else ""
        shown, locations = self.shown(arguments.path)
        where = tuple(attrs.evolve(location, line=start) for location in locations)
        return CallView(f"Read {shown}{lines}", where)

    async def execute(self, arguments: ReadFileArguments, context: ToolContext) -> ToolResult:
        path, start, end = arguments.path, arguments.start_line or 1, arguments.end_line
        if start < 1 or (end is not None and end < start):
            return ToolResult("startLine must be ≥ 1 and endLine ≥ startLine.", is_error=True)
        if context.client_files is not None:
            target = await asyncio.to_thread(self._editor_target, path)
            if target is not None:
                text = await editor_text(context, target[0])
                if text is not None:
                    if self.ledger is not None:
                        self.ledger.record(target[0], text)
                    encoded = text.encode("utf-8", "replace")
                    return _read_lines(io.BytesIO(encoded), target[1], len(encoded), start, end)
        return await asyncio.to_thread(self._read, path, start, end)

    def _editor_target(self, path: str) -> tuple[str, str] | None:
        """The absolute path to ask the editor for (and the name to show), when its buffer
        may answer: a text file inside the workspace, or one not on disk (yet). None: the
        disk answers — a path refused (outside the workspace: the editor is never asked), a
        directory, a binary file, one too large to count its lines."""
        try:
            with open_confined(self.roots, path) as file:
                if os.fstat(file.fileno()).st_size > READ_COUNT_MAX_BYTES or looks_binary(file):
                    return None
                relative = file.name
        except (FileNotFoundError, NotADirectoryError):
            try:
                relative = resolve_confined(self.roots, path)
            except (OSError, Refused, ValueError):
                return None
        except (OSError, Refused, ValueError):
            return None
        if relative == "." or printable_name(relative) != relative:
            return None  # a name that is not UTF-8 cannot travel in JSON
        return str(self.workspace / relative), relative

    def _read(self, path: str, start: int, end: int | None) -> ToolResult:
        asked = requested_name(self.roots, path)
        try:
            with open_confined(self.roots, path) as file:
                name = printable_name(file.name)
                size = os.fstat(file.fileno()).st_size
                if looks_binary(file):
                    return ToolResult(
                        f"{name} is a binary file ({size:,} bytes); only text files can be read.",
                        is_error=True,
                    )
                if self.ledger is not None and size <= EDIT_MAX_BYTES:
                    # Kept whole, so an edit can tell whether the file changed since.
                    data = file.read(EDIT_MAX_BYTES + 1)
                    self._remember(file.name, data)
                    return _read_lines(io.BytesIO(data), name, len(data), start, end)
                return _read_lines(file, name, size, start, end)
        except (Refused, ValueError) as exc:  # ValueError: a name no file system can hold
            return ToolResult(str(exc), is_error=True)
        except IsADirectoryError:
            return ToolResult(f"{asked} is a directory; use list_directory.", is_error=True)
        except (FileNotFoundError, NotADirectoryError):
            return ToolResult(f"No such file in the workspace: {asked}", is_error=True)
        except OSError as exc:
            return ToolResult(f"Could not read {asked}: {exc.strerror or exc}", is_error=True)

    def _remember(self, relative: str, data: bytes) -> None:
        """The model has read the file (relative to the root) as `data`: a UTF-8 text is
        recorded for the edit tools; other bytes cannot be edited, so they are not."""
        assert self.ledger is not None
        path = str(self.workspace / relative)
        try:
            self.ledger.record(path, data.decode("utf-8"))
        except UnicodeDecodeError:
            self.ledger.forget(path)


async def editor_text(context: ToolContext, path: str) -> str | None:
    """The editor's text of `path`; None (read the disk) when it errs or is silent."""
    assert context.client_files is not None
    try:
        async with asyncio.timeout(EDITOR_READ_SECONDS):
            return await context.client_files.read_text_file(context.session_id, path)
    except TimeoutError:
        # The tool reads the disk instead and says nothing wrong happened to the model: for an
        # operator only (an ACP client shows stderr's warnings to its user as errors).
        logger.info("The editor did not answer fs/read_text_file in time; read %s", path)
    except Exception as error:  # the editor's JSON-RPC error, or an answer without text
        message = getattr(error, "message", None) or str(error) or type(error).__name__
        logger.info("The editor could not read %s (%s); read the disk", path, message)
    return None


def _read_lines(file: BinaryIO, name: str, size: int, start: int, end: int | None) -> ToolResult:
    """The numbered lines start..end within the caps, read line by line; a file up to
    READ_COUNT_MAX_BYTES is read to its end to count its lines."""
    shown_lines: list[str] = []
    characters = 0
    stopped_early = False  # a cap stopped the lines asked for
    counting = size <= READ_COUNT_MAX_BYTES
    total = 0
    reached_end = True
    for number, (head, whole) in enumerate(_lines(file), start=1):
        total = number
        if number < start:
            continue
        if not stopped_early and (end is None or number <= end):
            numbered = _numbered(number, head, whole)
            if len(shown_lines) >= READ_MAX_LINES or characters + len(numbered) > READ_MAX_CHARS:
                stopped_early = True
            else:
                shown_lines.append(numbered)
                characters += len(numbered)
        # Past the lines asked for, a big file is not read on only to count its lines.
        if not counting and (stopped_early or number == end):
            reached_end = False
            break
    if not shown_lines:
        if total == 0:
            return ToolResult(f"{name} is empty.")
        return ToolResult(
            f"{name} has {total} lines; there is nothing at line {start}.", is_error=True
        )
    last_shown = start + len(shown_lines) - 1
    of = f"of {total}" if reached_end else f"of a {size:,}-byte file"
    text = f"{name} (lines {start}-{last_shown} {of}):\n" + "".join(shown_lines)
    if stopped_early:
        wanted_end = min(end or total, total) if reached_end else end
        if wanted_end is None or last_shown < wanted_end:
            rest = f"lines {last_shown + 1}-{wanted_end}" if wanted_end else "more lines"
            text += (
                f"[… {rest} not shown (output limit); "
                f"call read_file with startLine={last_shown + 1} for more]\n"
            )
    return ToolResult(text)


@attrs.frozen
class ListDirectoryArguments:
    path: str | None = argument("Relative to the workspace; '.'.", default=None)


class ListDirectoryTool(WorkspaceTool):
    Arguments = ListDirectoryArguments
    spec = declared_spec(
        "list_directory",
        (
            "List a directory in the workspace (default: its root): subdirectories end in '/', "
            "files show their size."
        ),
        Arguments,
        kind="read",
    )

    def view(self, arguments: ListDirectoryArguments) -> CallView:
        shown, locations = self.shown(arguments.path)
        title = "List the workspace" if shown == "." else f"List {shown.rstrip('/')}/"
        return CallView(title, locations)

    async def execute(self, arguments: ListDirectoryArguments, context: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self._list, arguments.path or ".")

    def _list(self, path: str) -> ToolResult:
        asked = requested_name(self.roots, path)
        try:
            directory_fd, relative = open_confined_directory(self.roots, path)
        except (Refused, ValueError) as exc:
            return ToolResult(str(exc), is_error=True)
        except NotADirectoryError:
            return ToolResult(f"{asked} is a file; use read_file.", is_error=True)
        except FileNotFoundError:
            return ToolResult(f"{asked} is not found.", is_error=True)
        except OSError as exc:
            return ToolResult(f"Could not list {asked}: {exc.strerror or exc}", is_error=True)
        name = printable_name(relative)
        try:
            with os.scandir(directory_fd) as scanned:
                entries = sorted(
                    scanned,
                    key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.lower()),
                )
            lines = [
                self._describe(relative, entry, directory_fd)
                for entry in entries[:LIST_MAX_ENTRIES]
            ]
        except OSError as exc:
            return ToolResult(f"Could not list {name}: {exc.strerror or exc}", is_error=True)
        finally:
            os.close(directory_fd)
        if len(entries) > LIST_MAX_ENTRIES:
            lines.append(f"[… {len(entries) - LIST_MAX_ENTRIES:,} more entries not shown]")
        if not lines:
            return ToolResult(f"{name}/ is empty.")
        return ToolResult(f"{name}/ ({len(entries)} entries):\n" + "\n".join(lines))

    def _describe(self, directory: str, entry: os.DirEntry[str], directory_fd: int) -> str:
        name = printable_name(entry.name)
        if entry.is_symlink():
            try:
                target = resolve_confined(self.roots, posixpath.join(directory, entry.name))
            except Refused:
                return f"{name} -> (outside the workspace)"
            except OSError:
                return f"{name} -> (unreadable)"
            target_fd = None
            try:  # only to add '/' to a directory's name
                target_fd, _ = open_confined_directory(self.roots, target)
                suffix = "/"
            except (OSError, Refused):
                suffix = ""
            finally:
                if target_fd is not None:
                    os.close(target_fd)
            return f"{name}{suffix} -> {printable_name(target)}"
        if entry.is_dir(follow_symlinks=False):
            return name + "/"
        try:
            return f"{name}  ({entry.stat(follow_symlinks=False).st_size:,} bytes)"
        except OSError:
            return name


@attrs.frozen
class SearchFilesArguments:
    pattern: str = argument("A Python regular expression.")
    glob: str | None = argument("Only files matching, e.g. '*.py'.", default=None)


class SearchFilesTool(WorkspaceTool):
    Arguments = SearchFilesArguments
    spec = declared_spec(
        "search_files",
        (
            "Search the workspace's text files for a regular expression (Python syntax; "
            "case-sensitive unless it starts with (?i)); optional glob such as '*.py'. "
            "Answers file:line:text; follows .gitignore."
        ),
        Arguments,
        kind="search",
    )

    def view(self, arguments: SearchFilesArguments) -> CallView:
        title = f"Search for {quoted(arguments.pattern)}"
        shown = arguments.pattern
        if arguments.glob:
            title += f" in {arguments.glob}"
            shown += f"\n(in files matching {arguments.glob})"
        return CallView(title, content=(shown,))

    async def execute(self, arguments: SearchFilesArguments, context: ToolContext) -> ToolResult:
        import regex

        try:
            compiled = regex.compile(arguments.pattern)
        except regex.error as exc:
            message = f"{arguments.pattern!r} is not a valid regular expression: {exc}"
            return ToolResult(message, is_error=True)
        glob = arguments.glob
        # In a thread: the `regex` module lets go of the GIL while it matches, so the server
        # keeps answering other sessions.
        return await asyncio.to_thread(self._search, compiled, glob)

    def _search(self, pattern: regex.Pattern[str], glob: str | None) -> ToolResult:
        files = [f for f in files_in_roots(self.roots) if not glob or _matches_glob(f, glob)]
        return _Search(self.roots, pattern, glob).run(files)


class _Search:
    """One search: the lines that match so far, and what was searched or skipped."""

    def __init__(self, root: Roots, pattern: regex.Pattern[str], glob: str | None) -> None:
        self.root = root
        self.pattern = pattern
        self.glob = glob
        self.hits: list[str] = []
        self.total = 0
        self.files_searched = 0
        self.skipped_large = 0

    def run(self, files: list[str]) -> ToolResult:
        deadline = time.monotonic() + SEARCH_BUDGET_SECONDS
        for index, relative in enumerate(files):
            if time.monotonic() > deadline:
                return self.answer(
                    f"[the search stopped after {SEARCH_BUDGET_SECONDS:.0f} s; "
                    f"{len(files) - index:,} files not searched; narrow it with a glob]"
                )
            text = self._text_of(relative)
            if text is None:
                continue
            self.files_searched += 1
            shown = printable_name(relative)
            for number, line in enumerate(text.splitlines(), start=1):
                try:
                    matched = self.pattern.search(line, timeout=SEARCH_MATCH_SECONDS)
                except TimeoutError:
                    return self.too_slow(f"{shown}:{number}")
                if matched:
                    self.total += 1
                    if len(self.hits) < SEARCH_MAX_HITS:
                        self.hits.append(f"{shown}:{number}:{line.strip()[:300]}")
        return self.answer()

    def _text_of(self, relative: str) -> str | None:
        """A file's text; None for one that is binary, over the size cap (counted, and not
        read at all) or can't be opened."""
        try:
            with open_confined(self.root, relative) as file:
                if os.fstat(file.fileno()).st_size > SEARCH_MAX_FILE_BYTES:
                    self.skipped_large += 1
                    return None
                if looks_binary(file):
                    return None
                return file.read(SEARCH_MAX_FILE_BYTES).decode("utf-8", "replace")
        except (OSError, Refused):
            return None

    def too_slow(self, where: str) -> ToolResult:
        text = (
            f"The pattern {self.pattern.pattern!r} took too long (over "
            f"{SEARCH_MATCH_SECONDS:g} s on one line, {where}), so the search stopped; "
            "simplify it (nested repeats such as (a+)+ can take exponential time)."
        )
        if self.hits:
            text += "\nMatches found before it stopped:\n" + "\n".join(self.hits)
        return ToolResult(text, is_error=True)

    def answer(self, stopped: str | None = None) -> ToolResult:
        where = f"{self.files_searched} files" + (f" matching {self.glob!r}" if self.glob else "")
        if not self.hits:
            text = f"No match for {self.pattern.pattern!r} in {where}."
        else:
            text = "\n".join(self.hits)
            if self.total > len(self.hits):
                more = self.total - len(self.hits)
                text += f"\n[… {more:,} more matches not shown; narrow the search]"
        if self.skipped_large:
            text += f"\n({self.skipped_large} files over {SEARCH_MAX_FILE_BYTES:,} bytes skipped)"
        if stopped:
            text += "\n" + stopped
        return ToolResult(text)


def workspace_tools(workspace: Roots | Path, ledger: FileLedger | None = None) -> list[Any]:
    """read_file, list_directory, search_files for one workspace (its roots); `read_file`
    records what it reads in `ledger` (the session's, shared with the edit tools)."""
    return [
        ReadFileTool(workspace, ledger),
        ListDirectoryTool(workspace),
        SearchFilesTool(workspace),
    ]
