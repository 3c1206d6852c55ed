"""The file tools against a hostile workspace: a repository that configures a command, symlinks
and FIFOs swapped in while a file is read, hard links to outside files, a sparse file of
gigabytes, a catastrophic regex and names that are not UTF-8. First each tool called directly,
then `parley serve` driven over JSON-RPC as an editor drives it."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.base import ToolContext, ToolResult
from parley.tools.confined import Refused, open_confined
from parley.tools.python_tools import find_call_sites
from parley.tools.workspace import (
    ListDirectoryTool,
    ReadFileTool,
    SearchFilesTool,
    workspace_files,
)

OUTSIDE_SECRET = "OUTSIDE-SECRET-CONTENT"
INSIDE = "inside content\n"
GIGABYTES = 4 * 1024**3
NOT_UTF8 = b"bad\xff.py"


async def call(tool: Any, **arguments: Any) -> ToolResult:
    context = ToolContext(session_id="s1", tool_call_id="t1", cwd=Path("."))
    return await tool.run(arguments, context)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(OUTSIDE_SECRET + "\n")
    return secret


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A git repository whose config runs a command on `git status`-like calls
    (core.fsmonitor), with ignored files at every level."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "geometry.py").write_text("def area(w, h):\n    return w * h\n")
    (root / "report.py").write_text("from geometry import area\narea(1, 2)\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n!keep.log\n")
    (root / "build").mkdir()
    (root / "build" / "gen.py").write_text("area(3, 4)  # IGNORED-BUILD\n")
    (root / "debug.log").write_text("area IGNORED-LOG\n")
    (root / "keep.log").write_text("area kept\n")
    (root / "sub").mkdir()
    (root / "sub" / ".gitignore").write_text("secret_*.py\n")
    (root / "sub" / "secret_x.py").write_text("area(0, 0)  # IGNORED-NESTED\n")
    (root / "sub" / "open.py").write_text("area(5, 6)\n")
    (root / "local.py").write_text("area(7, 8)  # IGNORED-EXCLUDE\n")
    git = ["git", "-c", "core.fsmonitor=false"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "geometry.py"], cwd=root, check=True)  # an index
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("local.py\n")
    marker = tmp_path / "fsmonitor-ran"
    hook = f"touch {marker}; echo"
    subprocess.run(["git", "config", "core.fsmonitor", hook], cwd=root, check=True)
    return root


def fsmonitor_marker(root: Path) -> Path:
    return root.parent / "fsmonitor-ran"


class Swapper:
    """A thread that keeps changing the workspace (`step(n)` for n = 0, 1, 2, ...), as an
    attacker racing the tools would."""

    def __init__(self, step: Callable[[int], None]) -> None:
        self.step = step
        self.stopped = threading.Event()
        self.swaps = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.step(self.swaps)
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(5)


def replacing(path: Path, *makers: Callable[[Path], None]) -> Callable[[int], None]:
    """Replace `path` atomically (a rename) by what each maker makes, in turn."""
    spare = path.with_name(path.name + ".new")

    def step(n: int) -> None:
        if os.path.lexists(spare):
            os.unlink(spare)
        makers[n % len(makers)](spare)
        os.replace(spare, path)

    return step


def regular(path: Path) -> None:
    path.write_text(INSIDE)


def symlink_to(target: Path) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def fifo(path: Path) -> None:
    os.mkfifo(path)


# --- no subprocess a repository can configure ---------------------------------------------


async def test_listing_and_searching_never_run_the_repositorys_fsmonitor(hostile: Path) -> None:
    files = workspace_files(hostile)
    assert files == [
        ".gitignore",
        "geometry.py",
        "keep.log",
        "report.py",
        "sub/.gitignore",
        "sub/open.py",
    ]
    search = await call(SearchFilesTool(hostile), pattern="area")
    assert "IGNORED" not in search.content
    assert "sub/open.py:1:area(5, 6)" in search.content and "keep.log:1:area kept" in search.content
    sites, _ = find_call_sites(hostile, "area")
    assert {site.file for site in sites} == {"report.py", "sub/open.py"}
    assert not fsmonitor_marker(hostile).exists()


def test_the_fsmonitor_fixture_does_run_under_git(hostile: Path) -> None:
    # The premise: the repository really runs its command when git lists files.
    subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=hostile,
        capture_output=True,
        check=False,
    )
    assert fsmonitor_marker(hostile).exists()


# --- symlinks, FIFOs, devices, hard links -------------------------------------------------


async def test_a_symlink_swapped_in_during_reads_never_leads_out(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "swap.txt").write_text(INSIDE)
    tool = ReadFileTool(root)
    answers = set()
    with Swapper(replacing(root / "swap.txt", regular, symlink_to(outside))) as swapper:
        while swapper.swaps < 200:
            result = await call(tool, path="swap.txt")
            assert OUTSIDE_SECRET not in result.content
            answers.add(result.is_error)
    assert False in answers  # the regular file was read in between


async def test_a_directory_swapped_for_a_symlink_never_leads_out(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "secret.txt").write_text(INSIDE)

    docs, real, link = root / "docs", root / "docs.real", root / "docs.link"
    link.symlink_to(outside.parent)

    def step(n: int) -> None:  # docs is the real directory, then the symlink, in turn
        if n % 2 == 0:
            os.rename(docs, real)
            os.rename(link, docs)
        else:
            os.rename(docs, link)
            os.rename(real, docs)

    outside_size = f"({len(OUTSIDE_SECRET) + 1} bytes)"
    with Swapper(step) as swapper:
        while swapper.swaps < 200:
            result = await call(ReadFileTool(root), path="docs/secret.txt")
            assert OUTSIDE_SECRET not in result.content
            listing = await call(ListDirectoryTool(root), path="docs")
            assert outside_size not in listing.content


async def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / "pipe")
    (root / "code.py").write_text("needle\n")
    result = await asyncio.wait_for(call(ReadFileTool(root), path="pipe"), 10)
    assert result.is_error
    assert result.content == "pipe is a FIFO (named pipe); only regular files can be read."
    search = await asyncio.wait_for(call(SearchFilesTool(root), pattern="needle"), 10)
    assert search.content == "code.py:1:needle"


async def test_a_fifo_swapped_in_during_reads_never_blocks(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "swap.txt").write_text(INSIDE)
    with Swapper(replacing(root / "swap.txt", regular, fifo)) as swapper:
        while swapper.swaps < 200:
            result = await asyncio.wait_for(call(ReadFileTool(root), path="swap.txt"), 10)
            assert result.is_error or "inside content" in result.content


async def test_a_device_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    try:
        os.mknod(root / "null", 0o600 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs privileges")
    result = await asyncio.wait_for(call(ReadFileTool(root), path="null"), 10)
    assert result.content == "null is a device; only regular files can be read."


async def test_a_hard_link_to_an_outside_file_is_refused(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    os.link(outside, root / "linked.txt")
    result = await call(ReadFileTool(root), path="linked.txt")
    assert result.is_error
    assert result.content == (
        "linked.txt has 2 hard links; a file with another name elsewhere cannot be shown to "
        "be inside the workspace, so it is not read."
    )
    search = await call(SearchFilesTool(root), pattern="SECRET")
    assert OUTSIDE_SECRET not in search.content


async def test_symlinks_inside_the_workspace_are_resolved_by_the_walk(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "relative").symlink_to("src/pkg")
    (root / "absolute").symlink_to(root / "src")
    (root / "src" / "up").symlink_to("../src/pkg/mod.py")
    (root / "loop").symlink_to("loop")
    (root / "climb").symlink_to("src/../..")
    tool = ReadFileTool(root)
    for path in ["relative/mod.py", "absolute/pkg/mod.py", "src/up", "relative/../pkg/mod.py"]:
        result = await call(tool, path=path)
        assert result.content.startswith("src/pkg/mod.py (lines 1-1 of 1):"), path
    loop = await call(tool, path="loop")
    assert loop.is_error and "too many symbolic links" in loop.content
    climb = await call(tool, path="climb/outside/secret.txt")
    assert climb.is_error and "is outside the workspace" in climb.content
    listing = await call(ListDirectoryTool(root))
    assert "relative/ -> src/pkg" in listing.content
    assert "climb -> (outside the workspace)" in listing.content


def test_open_confined_answers_a_file_named_where_it_really_is(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.txt").write_text("B")
    (tmp_path / "link").symlink_to("a")
    with open_confined(tmp_path, "link/b.txt") as file:
        assert file.name == "a/b.txt" and file.read() == b"B"
    with pytest.raises(Refused):
        open_confined(tmp_path, "../x")


# --- huge files and catastrophic patterns -------------------------------------------------


@pytest.fixture
def sparse(tmp_path: Path) -> Path:
    """A file of 4 GB whose first 20 KB are text lines, then one line of NUL bytes (a
    hole), then a last line."""
    root = tmp_path / "ws"
    root.mkdir()
    path = root / "huge.txt"
    with path.open("wb") as file:
        file.write(b"".join(b"line %d\n" % n for n in range(1, 3001)))
        file.seek(GIGABYTES)
        file.write(b"\nthe end\n")
    return root


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def test_a_multi_gigabyte_file_is_read_in_bounded_memory(sparse: Path) -> None:
    before = peak_rss_bytes()
    started = time.monotonic()
    result = await call(ReadFileTool(sparse), path="huge.txt", startLine=2999, endLine=3001)
    assert result.content.startswith("huge.txt (lines 2999-3001 of a 4,294,967,305-byte file):")
    assert "  2999\tline 2999\n  3000\tline 3000\n  3001\t" in result.content
    assert "[… over 6,000 cut]" in result.content
    assert time.monotonic() - started < 10
    assert peak_rss_bytes() - before < 100 * 1024 * 1024
    search = await call(SearchFilesTool(sparse), pattern="line 7$")
    assert search.content == (
        "No match for 'line 7$' in 0 files.\n(1 files over 5,242,880 bytes skipped)"
    )
    assert peak_rss_bytes() - before < 100 * 1024 * 1024


async def test_a_catastrophic_pattern_stops_with_an_error(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("aaa found\n")
    (root / "b.txt").write_text("a" * 20_000 + "b\n")
    started = time.monotonic()
    result = await asyncio.wait_for(call(SearchFilesTool(root), pattern="(a+)+$"), 30)
    assert time.monotonic() - started < 15
    assert result.is_error
    assert result.content.startswith(
        "The pattern '(a+)+$' took too long (over 1 s on one line, b.txt:1), so the search "
        "stopped; simplify it"
    )


async def test_the_event_loop_keeps_running_during_a_slow_search(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "b.txt").write_text("a" * 20_000 + "b\n")
    search = asyncio.create_task(call(SearchFilesTool(root), pattern="(a+)+$"))
    ticks = 0
    while not search.done():
        await asyncio.sleep(0.02)
        ticks += 1
    assert search.result().is_error
    assert ticks >= 10  # the loop ran all along (20 ms ticks over the ≥ 1 s search)


# --- names that are not UTF-8 --------------------------------------------------------------


@pytest.fixture
def odd_names(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    raw_root = os.fsencode(root)
    descriptor = os.open(raw_root + b"/" + NOT_UTF8, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(descriptor, b"def area():\n    return 1\n")
    os.close(descriptor)
    os.mkdir(raw_root + b"/dir\xfe")
    return root


def encodable(text: str) -> bool:
    json.dumps(text, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    return True


async def test_names_that_are_not_utf8_are_shown_escaped_and_can_be_read(
    odd_names: Path,
) -> None:
    listing = await call(ListDirectoryTool(odd_names))
    assert listing.content.splitlines()[1:] == ["dir\\xfe/", "bad\\xff.py  (25 bytes)"]
    search = await call(SearchFilesTool(odd_names), pattern="def area")
    assert search.content == "bad\\xff.py:1:def area():"
    read = await call(ReadFileTool(odd_names), path="bad\\xff.py")
    assert read.content.startswith("bad\\xff.py (lines 1-2 of 2):\n     1\tdef area():")
    inner = await call(ListDirectoryTool(odd_names), path="dir\\xfe")
    assert inner.content == "dir\\xfe/ is empty."
    missing = await call(ReadFileTool(odd_names), path="bad\\xfe.py")
    assert missing.content == "No such file in the workspace: bad\\xfe.py"
    for result in (listing, search, read, inner, missing):
        assert encodable(result.content)


# --- over JSON-RPC ----------------------------------------------------------------------------


def tool_call(tool: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool, arguments)


async def run_turn(
    client: ParleyClient, fake: FakeLLM, cwd: Path, calls: list[ScriptedToolCall]
) -> tuple[str, list[str]]:
    """One turn making `calls`, one per round; its session and what the model got back."""
    fake.set_script([Reply(tool_calls=(c,)) for c in calls] + [Reply(text="Done.")])
    session = await client.new_session(str(cwd), toolPolicy="sync")
    result = await client.prompt(session, "Look around.", timeout=120)
    assert result["stopReason"] == "end_turn"
    return session, [r.body["messages"][-1]["content"] for r in fake.requests[1:]]


@pytest.fixture
async def client(start_server: Any) -> ParleyClient:
    started = await start_server()
    await started.initialize()  # rejects every permission request
    return started


async def test_over_rpc_a_configured_repository_runs_nothing(
    client: ParleyClient, fake: FakeLLM, hostile: Path
) -> None:
    _, results = await run_turn(
        client,
        fake,
        hostile,
        [
            tool_call("search_files", pattern="area"),
            tool_call("list_directory"),
            tool_call("python_who_calls", name="area"),
            tool_call("search_files", pattern="IGNORED"),
        ],
    )
    search, listing, callers, ignored = results
    assert "sub/open.py:1:area(5, 6)" in search and "IGNORED" not in search
    assert "geometry.py" in listing
    assert "report.py" in callers and "IGNORED" not in callers
    assert ignored.startswith("No match for 'IGNORED'")
    assert not fsmonitor_marker(hostile).exists()


async def test_over_rpc_swaps_fifos_hard_links_and_huge_files(
    client: ParleyClient, fake: FakeLLM, sparse: Path, outside: Path
) -> None:
    root = sparse
    os.mkfifo(root / "pipe")
    os.link(outside, root / "linked.txt")
    (root / "swap.txt").write_text(INSIDE)
    reads = [tool_call("read_file", path="swap.txt") for _ in range(20)]  # 25 rounds at most
    other = outside.with_name("other.txt")  # one name only: `outside` is hard-linked here
    other.write_text(OUTSIDE_SECRET + "\n")
    with Swapper(replacing(root / "swap.txt", regular, symlink_to(other), fifo)):
        _, results = await asyncio.wait_for(
            run_turn(
                client,
                fake,
                root,
                [
                    tool_call("read_file", path="pipe"),
                    tool_call("read_file", path="linked.txt"),
                    tool_call("read_file", path="huge.txt", startLine=3000, endLine=3000),
                    *reads,
                ],
            ),
            120,
        )
    pipe, linked, huge, *_ = results
    assert "FIFO" in pipe
    assert "hard links" in linked
    assert "  3000\tline 3000" in huge
    for result in results:
        assert OUTSIDE_SECRET not in result


async def test_over_rpc_other_sessions_are_answered_while_a_search_runs(
    client: ParleyClient, fake: FakeLLM, tmp_path: Path
) -> None:
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "b.txt").write_text("a" * 20_000 + "b\n")
    calm = tmp_path / "calm"
    calm.mkdir()
    (calm / "b.txt").write_text("nothing here\n")
    # Both sessions' first request get the search; the second, the text.
    fake.set_script(
        [Reply(tool_calls=(tool_call("search_files", pattern="(a+)+$"),)), Reply(text="Done.")]
    )
    session_a = await client.new_session(str(slow), toolPolicy="sync")
    prompt_a = asyncio.create_task(client.prompt(session_a, "Search.", timeout=120))
    await client.wait_for_update(session_a, lambda u: u.get("status") == "in_progress", timeout=60)
    started = time.monotonic()
    session_b = await asyncio.wait_for(client.new_session(str(calm), toolPolicy="sync"), 10)
    answered_new = time.monotonic() - started
    a_finished_before_b = any(
        u.get("status") in ("completed", "failed")
        for u in client.updates_of(session_a, "tool_call_update")
    )
    result_b = await asyncio.wait_for(client.prompt(session_b, "Hello."), 30)
    assert result_b["stopReason"] == "end_turn"
    assert client.text_of(session_b) == "Done."
    result_a = await prompt_a
    assert result_a["stopReason"] == "end_turn"
    (searched,) = [
        u for u in client.updates_of(session_a, "tool_call_update") if u.get("status") == "failed"
    ]
    assert "took too long" in json.dumps(searched)
    assert not a_finished_before_b, f"session/new took {answered_new:.1f} s"


async def test_over_rpc_names_that_are_not_utf8_keep_the_session_usable(
    client: ParleyClient, fake: FakeLLM, odd_names: Path
) -> None:
    session, results = await run_turn(
        client,
        fake,
        odd_names,
        [
            tool_call("list_directory"),
            tool_call("search_files", pattern="area"),
            tool_call("read_file", path="bad\\xff.py"),
        ],
    )
    listing, search, read = results
    assert "bad\\xff.py  (25 bytes)" in listing
    assert search == "bad\\xff.py:1:def area():"
    assert "     1\tdef area():" in read
    fake.set_script([Reply(text="Still here.")])
    again = await client.prompt(session, "And now?", timeout=60)
    assert again["stopReason"] == "end_turn"
    assert client.text_of(session).endswith("Still here.")
