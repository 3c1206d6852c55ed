"""The workspace's files, for the model: read one, list a directory, search contents.

Every path is confined to the workspace root: `..`, absolute paths elsewhere, and symlinks
that lead out are refused. Searches follow `.gitignore` when the workspace is a git repository
and skip virtualenvs, `node_modules` and hidden directories in any case.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

from parley.tools.arguments import optional_int, optional_string, required_string
from parley.tools.base import ToolContext, ToolResult, ToolSpec

# Directories never searched: environments and caches, not the project's own code.
SKIPPED_DIRECTORIES = frozenset(
    {".venv", "venv", "node_modules", "__pycache__", "site-packages", ".git"}
)
READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
LINE_MAX_CHARS = 2000
LIST_MAX_ENTRIES = 1000
SEARCH_MAX_HITS = 200
SEARCH_MAX_FILE_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192


class OutsideWorkspace(ValueError):
    """A path that resolves outside the workspace root."""


def resolve_in_workspace(root: Path, path: str) -> Path:
    """`path` (relative to the root, or absolute) resolved, symlinks included; refused when
    it lands outside the root."""
    root = root.resolve()
    candidate = Path(path).expanduser() if path else root
    resolved = (root / candidate).resolve()  # an absolute candidate replaces root
    if not resolved.is_relative_to(root):
        raise OutsideWorkspace(
            f"{path!r} is outside the workspace ({root}); only paths inside it can be used."
        )
    return resolved


def shown(root: Path, path: Path) -> str:
    """A path as the model sees it: relative to the workspace root, with `/`."""
    relative = path.relative_to(root.resolve())
    return relative.as_posix() if relative.parts else "."


def is_binary(path: Path) -> bool:
    with path.open("rb") as file:
        return b"\0" in file.read(BINARY_SNIFF_BYTES)


def _skipped(relative: str) -> bool:
    parts = PurePosixPath(relative).parts[:-1]
    return any(part in SKIPPED_DIRECTORIES or part.startswith(".") for part in parts)


def workspace_files(root: Path) -> list[str]:
    """The workspace's files, relative and `/`-separated, sorted.

    In a git repository: tracked files plus untracked ones not ignored (what `.gitignore`
    keeps out stays out). Elsewhere: a walk of the tree. Either way, virtualenvs,
    `node_modules` and hidden directories are skipped, and symlinks leading out are dropped.
    """
    root = root.resolve()
    listed = _git_files(root)
    if listed is None:
        listed = []
        for directory, subdirectories, files in os.walk(root):
            subdirectories[:] = sorted(
                name
                for name in subdirectories
                if name not in SKIPPED_DIRECTORIES and not name.startswith(".")
            )
            base = Path(directory).relative_to(root)
            listed.extend((base / name).as_posix() for name in files)
    kept = []
    for relative in sorted(set(listed)):
        if _skipped(relative):
            continue
        path = root / relative
        if not path.is_file():  # deleted since it was committed, or a dangling link
            continue
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            continue
        kept.append(relative)
    return kept


def _git_files(root: Path) -> list[str] | None:
    try:
        completed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if completed.returncode != 0:
        return None  # not a repository (or no git): walk instead
    names = completed.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [name for name in names if name]


def _matches_glob(relative: str, glob: str) -> bool:
    """`*.py` matches at any depth; `src/*.py` and `**/*.py` match the whole path."""
    if "/" not in glob:
        return fnmatch.fnmatch(PurePosixPath(relative).name, glob)
    if fnmatch.fnmatch(relative, glob):
        return True
    return glob.startswith("**/") and fnmatch.fnmatch(relative, glob[3:])


class ReadFileTool:
    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file in the workspace, with line numbers; optionally only lines "
            "startLine to endLine (1-based, inclusive)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the workspace."},
                "startLine": {"type": "integer", "minimum": 1},
                "endLine": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        kind="read",
    )

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            path_argument = required_string(arguments, "path")
            start = optional_int(arguments, "startLine") or 1
            end = optional_int(arguments, "endLine")
            path = resolve_in_workspace(self.workspace, path_argument)
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        if start < 1 or (end is not None and end < start):
            return ToolResult("startLine must be ≥ 1 and endLine ≥ startLine.", is_error=True)
        return await asyncio.to_thread(self._read, path, start, end)

    def _read(self, path: Path, start: int, end: int | None) -> ToolResult:
        name = shown(self.workspace, path)
        if path.is_dir():
            return ToolResult(f"{name} is a directory; use list_directory.", is_error=True)
        if not path.is_file():
            return ToolResult(f"No such file in the workspace: {name}", is_error=True)
        try:
            if is_binary(path):
                size = path.stat().st_size
                return ToolResult(
                    f"{name} is a binary file ({size:,} bytes); only text files can be read.",
                    is_error=True,
                )
            shown_lines, total_lines, stopped_early = self._numbered_lines(path, start, end)
        except OSError as exc:
            return ToolResult(f"Could not read {name}: {exc.strerror or exc}", is_error=True)
        if not shown_lines:
            if total_lines == 0:
                return ToolResult(f"{name} is empty.")
            return ToolResult(
                f"{name} has {total_lines} lines; there is nothing at line {start}.",
                is_error=True,
            )
        last_shown = start + len(shown_lines) - 1
        header = f"{name} (lines {start}-{last_shown} of {total_lines}):"
        text = header + "\n" + "".join(shown_lines)
        wanted_end = min(end or total_lines, total_lines)
        if stopped_early and last_shown < wanted_end:
            text += (
                f"[… lines {last_shown + 1}-{wanted_end} not shown (output limit); "
                f"call read_file with startLine={last_shown + 1} for more]\n"
            )
        return ToolResult(text)

    @staticmethod
    def _numbered_lines(path: Path, start: int, end: int | None) -> tuple[list[str], int, bool]:
        """The numbered lines start..end, within the caps; the file's line count; whether a
        cap stopped them."""
        shown_lines: list[str] = []
        characters = 0
        stopped_early = False
        total = 0
        with path.open("r", encoding="utf-8", errors="replace", newline="") as file:
            for number, line in enumerate(file, start=1):
                total = number
                if number < start or (end is not None and number > end) or stopped_early:
                    continue
                text = line.rstrip("\r\n")
                if len(text) > LINE_MAX_CHARS:
                    text = text[:LINE_MAX_CHARS] + f" [… {len(text) - LINE_MAX_CHARS:,} cut]"
                numbered = f"{number:>6}\t{text}\n"
                if len(shown_lines) >= READ_MAX_LINES or characters + len(numbered) > (
                    READ_MAX_CHARS
                ):
                    stopped_early = True
                    continue
                shown_lines.append(numbered)
                characters += len(numbered)
        return shown_lines, total, stopped_early


class ListDirectoryTool:
    spec = ToolSpec(
        name="list_directory",
        description=(
            "List a directory in the workspace (default: its root): subdirectories end in '/', "
            "files show their size."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the workspace; '.'."},
            },
            "additionalProperties": False,
        },
        kind="read",
    )

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            path_argument = optional_string(arguments, "path") or "."
            path = resolve_in_workspace(self.workspace, path_argument)
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        name = shown(self.workspace, path)
        if not path.is_dir():
            what = "a file; use read_file" if path.is_file() else "not found"
            return ToolResult(f"{name} is {what}.", is_error=True)
        try:
            entries = sorted(os.scandir(path), key=lambda e: (not e.is_dir(), e.name.lower()))
        except OSError as exc:
            return ToolResult(f"Could not list {name}: {exc.strerror or exc}", is_error=True)
        lines = [self._describe(entry) for entry in entries[:LIST_MAX_ENTRIES]]
        if len(entries) > LIST_MAX_ENTRIES:
            lines.append(f"[… {len(entries) - LIST_MAX_ENTRIES:,} more entries not shown]")
        if not lines:
            return ToolResult(f"{name}/ is empty.")
        return ToolResult(f"{name}/ ({len(entries)} entries):\n" + "\n".join(lines))

    def _describe(self, entry: os.DirEntry[str]) -> str:
        if entry.is_symlink():
            target = Path(entry.path).resolve()
            if not target.is_relative_to(self.workspace):
                return f"{entry.name} -> (outside the workspace)"
            suffix = "/" if target.is_dir() else ""
            return f"{entry.name}{suffix} -> {shown(self.workspace, target)}"
        if entry.is_dir():
            return entry.name + "/"
        try:
            return f"{entry.name}  ({entry.stat().st_size:,} bytes)"
        except OSError:
            return entry.name


class SearchFilesTool:
    spec = ToolSpec(
        name="search_files",
        description=(
            "Search the workspace's text files for a regular expression (Python syntax; "
            "case-sensitive unless it starts with (?i)); optional glob such as '*.py'. "
            "Answers file:line:text; follows .gitignore."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "A Python regular expression."},
                "glob": {"type": "string", "description": "Only files matching, e.g. '*.py'."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        kind="search",
    )

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            pattern = required_string(arguments, "pattern")
            glob = optional_string(arguments, "glob")
            regex = re.compile(pattern)
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        except re.error as exc:
            message = f"{pattern!r} is not a valid regular expression: {exc}"
            return ToolResult(message, is_error=True)
        return await asyncio.to_thread(self._search, regex, glob)

    def _search(self, regex: re.Pattern[str], glob: str | None) -> ToolResult:
        hits: list[str] = []
        total = 0
        files_searched = 0
        skipped_large = 0
        for relative in workspace_files(self.workspace):
            if glob and not _matches_glob(relative, glob):
                continue
            path = self.workspace / relative
            try:
                if path.stat().st_size > SEARCH_MAX_FILE_BYTES:
                    skipped_large += 1
                    continue
                if is_binary(path):
                    continue
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            files_searched += 1
            for number, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    total += 1
                    if len(hits) < SEARCH_MAX_HITS:
                        hits.append(f"{relative}:{number}:{line.strip()[:300]}")
        where = f"{files_searched} files" + (f" matching {glob!r}" if glob else "")
        if not hits:
            text = f"No match for {regex.pattern!r} in {where}."
        else:
            text = "\n".join(hits)
            if total > len(hits):
                text += f"\n[… {total - len(hits):,} more matches not shown; narrow the search]"
        if skipped_large:
            text += f"\n({skipped_large} files over {SEARCH_MAX_FILE_BYTES:,} bytes skipped)"
        return ToolResult(text)


def workspace_tools(workspace: Path) -> list[Any]:
    """read_file, list_directory, search_files for one workspace."""
    return [ReadFileTool(workspace), ListDirectoryTool(workspace), SearchFilesTool(workspace)]
