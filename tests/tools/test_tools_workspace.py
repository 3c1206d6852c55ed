"""read_file, list_directory, search_files: confined to the workspace, following .gitignore."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from parley.tools.base import ToolContext, ToolResult
from parley.tools.workspace import (
    ListDirectoryTool,
    ReadFileTool,
    SearchFilesTool,
    workspace_files,
)

GEOMETRY = '''\
"""Shapes and their measures."""


def area(width, height):
    """Area of a width-by-height rectangle."""
    return width * height
'''


def make_sample_workspace(root: Path, git: bool = True) -> Path:
    (root / "geometry").mkdir()
    (root / "geometry" / "__init__.py").write_text(GEOMETRY)
    (root / "geometry" / "report.py").write_text("from geometry import area\nprint(area(2, 3))\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "generated.py").write_text("print(area(1, 2))\n")
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "site.py").write_text("area = 1\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(200))
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_sample_workspace(tmp_path)


async def call(tool: Any, **arguments: Any) -> ToolResult:
    context = ToolContext(session_id="s1", tool_call_id="t1", cwd=Path("."))
    return await tool.run(arguments, context)


# --- read_file ----------------------------------------------------------------------------


async def test_read_a_file_with_line_numbers(workspace: Path) -> None:
    result = await call(ReadFileTool(workspace), path="geometry/__init__.py")
    assert not result.is_error
    assert result.content.splitlines()[:2] == [
        "geometry/__init__.py (lines 1-6 of 6):",
        '     1\t"""Shapes and their measures."""',
    ]
    assert "     4\tdef area(width, height):" in result.content


async def test_read_a_range_of_lines(workspace: Path) -> None:
    result = await call(
        ReadFileTool(workspace), path="geometry/__init__.py", startLine=4, endLine=5
    )
    assert result.content == (
        "geometry/__init__.py (lines 4-5 of 6):\n"
        "     4\tdef area(width, height):\n"
        '     5\t    """Area of a width-by-height rectangle."""\n'
    )


async def test_a_long_file_is_cut_with_a_note(workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 5001)))
    result = await call(ReadFileTool(workspace), path="long.txt")
    assert result.content.startswith("long.txt (lines 1-2000 of 5000):\n")
    assert result.content.endswith(
        "[… lines 2001-5000 not shown (output limit); call read_file with startLine=2001 for "
        "more]\n"
    )


async def test_reading_past_the_end_or_a_directory_or_nothing(workspace: Path) -> None:
    tool = ReadFileTool(workspace)
    past = await call(tool, path="geometry/report.py", startLine=50)
    assert past.is_error and past.content == (
        "geometry/report.py has 2 lines; there is nothing at line 50."
    )
    directory = await call(tool, path="geometry")
    assert directory.content == "geometry is a directory; use list_directory."
    missing = await call(tool, path="nope.py")
    assert missing.content == "No such file in the workspace: nope.py"
    assert (await call(tool, path="geometry", startLine=0)).is_error


async def test_a_binary_file_is_refused(workspace: Path) -> None:
    result = await call(ReadFileTool(workspace), path="logo.png")
    assert result.is_error
    assert result.content == "logo.png is a binary file (216 bytes); only text files can be read."


@pytest.mark.parametrize("escape", ["../outside.txt", "/etc/passwd", "geometry/../../x", "~"])
async def test_paths_outside_the_workspace_are_refused(workspace: Path, escape: str) -> None:
    result = await call(ReadFileTool(workspace), path=escape)
    assert result.is_error
    assert result.content == (
        f"{escape!r} is outside the workspace ({workspace.resolve()}); "
        "only paths inside it can be used."
    )


async def test_a_symlink_leading_out_is_refused(workspace: Path) -> None:
    (workspace / "etc").symlink_to("/etc")
    (workspace / "passwd").symlink_to("/etc/passwd")
    (workspace / "inside").symlink_to(workspace / "geometry")
    read = await call(ReadFileTool(workspace), path="etc/passwd")
    assert read.is_error and "is outside the workspace" in read.content
    assert (await call(ReadFileTool(workspace), path="passwd")).is_error
    listing = await call(ListDirectoryTool(workspace), path="etc")
    assert listing.is_error and "is outside the workspace" in listing.content
    # A link that stays inside is fine.
    assert not (await call(ReadFileTool(workspace), path="inside/report.py")).is_error


async def test_an_absolute_path_inside_the_workspace_is_fine(workspace: Path) -> None:
    path = str(workspace / "geometry" / "report.py")
    result = await call(ReadFileTool(workspace), path=path)
    assert result.content.startswith("geometry/report.py (lines 1-2 of 2):")


# --- list_directory -----------------------------------------------------------------------


async def test_list_the_root_and_a_subdirectory(workspace: Path) -> None:
    (workspace / "passwd").symlink_to("/etc/passwd")
    result = await call(ListDirectoryTool(workspace))
    lines = result.content.splitlines()
    assert lines[0] == "./ (7 entries):"
    assert lines[1:5] == [".git/", ".venv/", "build/", "geometry/"]  # directories first
    assert "logo.png  (216 bytes)" in lines
    assert ".gitignore  (7 bytes)" in lines
    assert "passwd -> (outside the workspace)" in lines

    result = await call(ListDirectoryTool(workspace), path="geometry")
    size = len(GEOMETRY.encode())
    assert result.content == (
        f"geometry/ (2 entries):\n__init__.py  ({size} bytes)\nreport.py  (44 bytes)"
    )


async def test_listing_a_file_or_a_missing_directory(workspace: Path) -> None:
    tool = ListDirectoryTool(workspace)
    file = await call(tool, path="logo.png")
    assert file.is_error and file.content == "logo.png is a file; use read_file."
    missing = await call(tool, path="nothing")
    assert missing.is_error and missing.content == "nothing is not found."
    escape = await call(tool, path="..")
    assert escape.is_error and "is outside the workspace" in escape.content


# --- search_files -------------------------------------------------------------------------


async def test_search_respects_gitignore_and_skips_venvs(workspace: Path) -> None:
    result = await call(SearchFilesTool(workspace), pattern=r"area\(")
    assert result.content.splitlines() == [
        "geometry/__init__.py:4:def area(width, height):",
        "geometry/report.py:2:print(area(2, 3))",
    ]


async def test_search_without_git_still_skips_venvs_and_hidden_dirs(tmp_path: Path) -> None:
    workspace = make_sample_workspace(tmp_path, git=False)
    (workspace / ".cache").mkdir()
    (workspace / ".cache" / "x.py").write_text("area(0, 0)\n")
    result = await call(SearchFilesTool(workspace), pattern=r"area\(")
    # Without git, .gitignore is not read, so build/ is searched.
    assert result.content.splitlines() == [
        "build/generated.py:1:print(area(1, 2))",
        "geometry/__init__.py:4:def area(width, height):",
        "geometry/report.py:2:print(area(2, 3))",
    ]


async def test_search_with_a_glob(workspace: Path) -> None:
    (workspace / "notes.md").write_text("the area of a square\n")
    tool = SearchFilesTool(workspace)
    markdown = await call(tool, pattern="area", glob="*.md")
    assert markdown.content == "notes.md:1:the area of a square"
    nested = await call(tool, pattern="area", glob="geometry/*.py")
    assert len(nested.content.splitlines()) == 3
    anywhere = await call(tool, pattern="(?i)SHAPES", glob="**/*.py")
    assert anywhere.content == 'geometry/__init__.py:1:"""Shapes and their measures."""'


async def test_search_without_a_match_or_with_a_bad_pattern(workspace: Path) -> None:
    tool = SearchFilesTool(workspace)
    none = await call(tool, pattern="volume")
    assert not none.is_error
    assert none.content == "No match for 'volume' in 3 files."  # logo.png is binary
    bad = await call(tool, pattern="(")
    assert bad.is_error and bad.content.startswith("'(' is not a valid regular expression")


async def test_search_hits_are_bounded(workspace: Path) -> None:
    (workspace / "many.txt").write_text("needle\n" * 500)
    result = await call(SearchFilesTool(workspace), pattern="needle")
    lines = result.content.splitlines()
    assert len(lines) == 201
    assert lines[-1] == "[… 300 more matches not shown; narrow the search]"


async def test_search_skips_symlinks_leading_out(workspace: Path) -> None:
    (workspace / "passwd").symlink_to("/etc/passwd")
    result = await call(SearchFilesTool(workspace), pattern="root")
    assert "passwd" not in result.content


def test_workspace_files_lists_untracked_and_tracked_but_not_ignored(workspace: Path) -> None:
    subprocess.run(["git", "add", "geometry/__init__.py"], cwd=workspace, check=True)
    assert workspace_files(workspace) == [
        ".gitignore",
        "geometry/__init__.py",
        "geometry/report.py",
        "logo.png",
    ]


def test_workspace_files_in_a_subdirectory_of_a_repository(workspace: Path) -> None:
    # The workspace may be a folder inside a larger repository: paths stay relative to it.
    assert workspace_files(workspace / "geometry") == ["__init__.py", "report.py"]
    os.remove(workspace / "geometry" / "report.py")
    assert workspace_files(workspace / "geometry") == ["__init__.py"]


def test_workspace_files_follow_nested_gitignores_and_info_exclude(workspace: Path) -> None:
    (workspace / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (workspace / "debug.log").write_text("x\n")
    (workspace / "keep.log").write_text("x\n")
    (workspace / "geometry" / ".gitignore").write_text("report.py\n")
    (workspace / "geometry" / "deep").mkdir()
    (workspace / "geometry" / "deep" / "report.py").write_text("x\n")
    (workspace / "geometry" / "deep" / ".gitignore").write_text("!report.py\n")
    (workspace / "scratch.py").write_text("x\n")
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "exclude").write_text("scratch.py\n")
    assert workspace_files(workspace) == [
        ".gitignore",
        "geometry/.gitignore",
        "geometry/__init__.py",
        "geometry/deep/.gitignore",
        "geometry/deep/report.py",  # re-included by the deeper .gitignore
        "keep.log",
        "logo.png",
    ]


def test_a_subdirectory_workspace_follows_the_gitignore_above_it(workspace: Path) -> None:
    (workspace / ".gitignore").write_text("build/\ngeometry/report.py\n")
    assert workspace_files(workspace / "geometry") == ["__init__.py"]


def test_workspace_files_runs_no_git_and_lists_no_symlinks(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "alias.py").symlink_to("geometry/report.py")
    monkeypatch.setenv("PATH", "")  # no git to be found, were it looked for
    assert "alias.py" not in workspace_files(workspace)
    assert "geometry/report.py" in workspace_files(workspace)


async def test_a_very_long_line_is_cut_and_the_next_line_still_read(workspace: Path) -> None:
    (workspace / "wide.txt").write_text("x" * 50_000 + "\nafter\n" + "y" * 2_100 + "\n")
    result = await call(ReadFileTool(workspace), path="wide.txt")
    lines = result.content.splitlines()
    assert lines[0] == "wide.txt (lines 1-3 of 3):"
    assert lines[1] == "     1\t" + "x" * 2000 + " [… over 6,000 cut]"
    assert lines[2] == "     2\tafter"
    assert lines[3] == "     3\t" + "y" * 2000 + " [… 100 cut]"
