"""The gate (`confined.open_in_workspace`): every path a model, a client or a restore names
becomes an opened file or directory inside the workspace, or a refusal the model is told.

Over the wire (`parley serve` as a subprocess, the scripted model over HTTP): escaped names
that once left the workspace (`\\x2e\\x2e`, `\\x2f`), and a workspace opened through a
symlinked path, edited and undone. In-process: the escape rule; property tests that send
thousands of hostile paths to every file tool and restore (below); and a scan of the
sources that fails on any file-system call by name outside the gate.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.checkpoints import TurnCheckpoints, restore_turn
from parley.agent.session import now_iso
from parley.client import ParleyClient, allow_all
from parley.core.session_settings import SessionSettings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.store import Store, StoredSession
from parley.tools.attachments import attach_link
from parley.tools.base import ToolContext
from parley.tools.confined import (
    Refused,
    Want,
    _unescaped,
    open_confined,
    open_in_workspace,
    printable_name,
    workspace_root,
)
from parley.tools.edits import EditFileTool, WriteFileTool
from parley.tools.file_ledger import FileLedger
from parley.tools.python_tools import PythonWhoCallsTool
from parley.tools.workspace import ListDirectoryTool, ReadFileTool, SearchFilesTool

SECRET = "SECRET-OF-THE-PARENT-DIRECTORY"


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name, arguments)


def one_round_each(*calls: ScriptedToolCall) -> list[Reply]:
    return [*(Reply(tool_calls=(c,)) for c in calls), Reply(text="Done.")]


def tool_results(fake: FakeLLM) -> list[str]:
    """The tool results the model was sent, in order (the longest request holds them all)."""
    body = max((r.body for r in fake.requests), key=lambda body: len(body["messages"]))
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.fixture
def secret(workspace: Path) -> Path:
    """A file in the workspace's parent directory, which no tool may read."""
    path = workspace.parent / "secret.txt"
    path.write_text(SECRET + "\n")
    return path


async def session_in(start_server: Any, cwd: Path) -> tuple[ParleyClient, str]:
    client: ParleyClient = await start_server()
    await client.initialize()
    return client, await client.new_session(str(cwd))


# --- escapes, over the wire ------------------------------------------------------------------


async def test_escaped_dots_and_slashes_never_read_outside(
    start_server: Any, fake: FakeLLM, workspace: Path, secret: Path
) -> None:
    hostname = Path("/etc/hostname")
    fake.set_script(
        one_round_each(
            call("read_file", path="\\x2fetc\\x2fhostname"),
            call("read_file", path="\\x2e\\x2e/secret.txt"),
            call("list_directory", path="\\x2e\\x2e"),
        )
    )
    client, session_id = await session_in(start_server, workspace)
    await client.prompt(session_id, "Read around.", timeout=60)
    results = tool_results(fake)
    assert len(results) == 3
    for result in results:
        assert "no file name in the workspace" in result  # told why, in a sentence
    sent = json.dumps([r.body for r in fake.requests])
    assert SECRET not in sent
    assert "secret.txt" not in results[2] and "workspace/" not in results[2]  # no listing
    if hostname.exists() and hostname.read_text().strip():
        assert f"1\\t{hostname.read_text().strip()}" not in sent
    assert client.permission_requests == []


async def test_escaped_writes_are_refused_before_any_question(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    planted = workspace.parent / "planted.txt"
    planted.write_text("the user's own file\n")
    fake.set_script(
        one_round_each(
            call("write_file", path="\\x2e\\x2e/planted.txt", content="PLANTED\n"),
            call("write_file", path="\\x2e\\x2e/new.txt", content="PLANTED\n"),
            call("read_file", path="\\x2e\\x2e/planted.txt"),
            call("edit_file", path="\\x2e\\x2e/planted.txt", old_text="own", new_text="PLANTED"),
        )
    )
    client, session_id = await session_in(start_server, workspace)
    client.permission_handler = allow_all  # whatever were asked, it would be allowed
    await client.prompt(session_id, "Plant it.", timeout=60)
    assert client.permission_requests == []
    assert planted.read_text() == "the user's own file\n"
    assert not (workspace.parent / "new.txt").exists()
    assert sorted(os.listdir(workspace.parent)) == ["home", "planted.txt", "workspace"]
    assert sorted(os.listdir(workspace)) == ["geometry.py"]  # no literal \x2e\x2e made
    for result in tool_results(fake):
        assert "no file name in the workspace" in result


# --- a workspace opened through a symlink ------------------------------------------------------


async def test_a_symlinked_workspace_edits_and_undoes(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    alias = workspace.parent / "alias"
    alias.symlink_to(workspace, target_is_directory=True)
    source = workspace / "geometry.py"
    before = source.read_bytes()
    fake.set_script(
        one_round_each(
            call("read_file", path="geometry.py"),
            call("edit_file", path="geometry.py", old_text="width * height", new_text="w * h"),
        )
    )
    client, session_id = await session_in(start_server, alias)
    client.permission_handler = allow_all
    await client.prompt(session_id, "Shorten it.", timeout=60)
    assert "Edited geometry.py" in tool_results(fake)[1]
    assert b"return w * h" in source.read_bytes()
    (asked,) = client.permission_requests
    assert asked["toolCall"]["title"] == "Edit geometry.py"
    assert asked["toolCall"]["locations"][0]["path"] == str(workspace / "geometry.py")

    await client.prompt(session_id, "/undo", timeout=30)
    assert "`geometry.py` restored" in client.text_of(session_id)
    assert source.read_bytes() == before


# --- titles name the file written --------------------------------------------------------------


async def test_the_question_names_the_file_really_written(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to("real", target_is_directory=True)
    fake.set_script(
        one_round_each(
            call("write_file", path="link/new/made.txt", content="made\n"),
            call("write_file", path="real/../top.txt", content="top\n"),
        )
    )
    client, session_id = await session_in(start_server, workspace)
    client.permission_handler = allow_all
    await client.prompt(session_id, "Make them.", timeout=60)
    made, top = client.permission_requests
    assert made["toolCall"]["title"] == "Create real/new/made.txt"
    assert made["toolCall"]["locations"] == [{"path": str(workspace / "real/new/made.txt")}]
    assert top["toolCall"]["title"] == "Create top.txt"
    assert (workspace / "real/new/made.txt").read_text() == "made\n"
    assert (workspace / "top.txt").read_text() == "top\n"


# --- the escape rule, in-process ---------------------------------------------------------------


@pytest.mark.parametrize(
    "component",
    ["\\x2e\\x2e", "\\x2e", "\\x2f", "a\\x2fb", "\\x00", "\\x41", "\\xFF", "\\xc3\\xa9"],
)
def test_an_escape_decodes_only_to_a_name_it_shows_as(component: str) -> None:
    assert _unescaped(component) is None


def test_a_name_that_is_not_utf8_is_found_by_how_it_is_shown(tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xff.py")
    (tmp_path / name).write_text("x = 1\n")
    assert printable_name(name) == "bad\\xff.py" and _unescaped("bad\\xff.py") == name
    opened = open_in_workspace(workspace_root(tmp_path), "bad\\xff.py", Want.FILE)
    assert opened.fd is not None
    os.close(opened.fd)
    assert opened.relative == name


@pytest.mark.parametrize(
    "path",
    ["\\x2e\\x2e/secret.txt", "\\x2fetc\\x2fpasswd", "a\\x00b", "a\0b", "../x", "/etc/passwd"],
)
def test_hostile_names_are_refused_in_a_sentence(tmp_path: Path, path: str) -> None:
    for want in Want:
        with pytest.raises(Refused) as refused:
            open_in_workspace(workspace_root(tmp_path), path, want)
        assert str(refused.value).startswith(repr(printable_name(path)))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("want", [Want.PARENT, Want.ENTRY])
def test_a_refused_path_makes_no_directory_on_the_way(tmp_path: Path, want: Want) -> None:
    for path in ["new/\\x2e\\x2e/x", "new/deeper/../../../x", "new/\\x2f/x"]:
        with pytest.raises(Refused):
            open_in_workspace(workspace_root(tmp_path), path, want, create=True)
    assert os.listdir(tmp_path) == []


# --- property tests: thousands of hostile paths against every file tool, in-process -------------
#
# A tree with canaries outside the workspace (their content, CANARY, and names only a listing
# of outside could show) and, inside, symlinks (inside→inside, →outside, absolute, dangling,
# loops), a hard link to an outside file, a name that is not UTF-8, and two entries a thread
# keeps swapping while the tools run: `swap` (a symlink turned to outside and back) and `flip`
# (a directory renamed away, a symlink to outside put in its place, then back). Each generated
# path goes to each tool: what is read or written lies inside the workspace, or nothing
# happened and the result says why; the outside tree is never changed; the title and location
# of an edit name the file really written.

CANARY = "CANARY-CONTENT-OUTSIDE"
FLIP_AWAY = ".flip-away-7f3a"  # where `flip` goes while a symlink stands in its place
OUTSIDE_ONLY_NAMES = ("listed-only-outside.txt", "PARENT-ONLY-NAME.txt")
INSIDE_FILES = {
    "a.txt": "inside a\n",
    "dir/b.txt": "inside b\n",
    "dir/sub/c.py": "inside c\ncaller()\n",
    "swap_real/f.txt": "inside f\n",
    "flip/f.txt": "inside flip\n",
    os.fsdecode(b"bad\xff.py"): "inside bad\n",
}
# What an edit replaces: inside text, or text only the outside files have (never echoed).
OLD_TEXTS = ["inside", "caller()  #", "caller()"]
SWAP_PAUSE = 0.0002  # seconds between swaps: often, but not hogging the interpreter
EXAMPLES = int(os.environ.get("GATE_EXAMPLES", "2000"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


class HostileTree:
    """base/outside (canaries), base/ws (the workspace: root), a swapping thread."""

    def __init__(self, base: Path) -> None:
        self.base = base
        outside = base / "outside"
        (outside / "dir").mkdir(parents=True)
        for name in ["canary.txt", "f.txt", "a.txt", "dir/b.txt", "canary.py", "hardlinked.txt"]:
            (outside / name).write_text(f"{CANARY}\ncaller()  # {CANARY}\n")
        (outside / OUTSIDE_ONLY_NAMES[0]).write_text(CANARY)
        (base / OUTSIDE_ONLY_NAMES[1]).write_text(CANARY)
        (base / "secret.txt").write_text(CANARY)
        ws = base / "ws"
        for relative, text in INSIDE_FILES.items():
            (ws / relative).parent.mkdir(parents=True, exist_ok=True)
            (ws / relative).write_text(text)
        self.root = workspace_root(ws)
        links = {
            "link_in": "dir",
            "link_file": "a.txt",
            "link_out": "../outside",
            "link_abs_out": str(outside),
            "link_abs_in": str(ws / "dir"),
            "link_dangling_in": "dir/missing",
            "link_dangling_out": "../outside/missing",
            "dir/sub/back_out": "../../../outside/canary.txt",
            "up": "..",
            "self": ".",
            "loop1": "loop2",
            "loop2": "loop1",
            "swap": "swap_real",
        }
        for name, target in links.items():
            (ws / name).symlink_to(target)
        os.link(outside / "hardlinked.txt", ws / "hard.txt")
        os.mkfifo(ws / "fifo")
        self.stopped = threading.Event()

    def reset(self) -> None:
        """The inside files' text as it was (an edit replaced it); the swapped ones are
        left to the swapping thread."""
        for relative, text in INSIDE_FILES.items():
            path = self.root / relative
            if relative.startswith(("flip/", "swap_real/")):
                continue
            if not path.is_file() or path.read_text() != text:  # a restore may remove it
                path.write_text(text)

    def outside(self) -> dict[str, tuple[int, ...]]:
        """Everything outside the workspace: each entry's inode, mode, size and modification
        time (a write, a replacement, a new or removed entry all change them; its link count
        does not count: the workspace's name for `hardlinked.txt` may be replaced)."""
        seen = {}
        for directory, dirs, files in os.walk(self.base):
            if Path(directory) == self.base:
                dirs[:] = [name for name in dirs if name not in ("ws", "home")]
            for name in [".", *dirs, *files]:
                status = os.lstat(os.path.join(directory, name))
                seen[os.path.join(directory, name)] = (
                    *(status.st_ino, status.st_mode, status.st_size, status.st_mtime_ns),
                )
        return seen

    def swap_once(self, out: bool) -> None:
        """`swap` and `flip` lead outside (`out`), or back inside."""
        spare = self.root / "swap.new"
        with contextlib.suppress(FileNotFoundError):
            spare.unlink()
        spare.symlink_to("../outside" if out else "swap_real")
        os.replace(spare, self.root / "swap")
        flip, away = self.root / "flip", self.root / FLIP_AWAY
        if out:
            shutil.rmtree(away, ignore_errors=True)
            with contextlib.suppress(OSError):  # a write made either meanwhile: not this time
                os.rename(flip, away)
                flip.symlink_to("../outside")
        elif flip.is_symlink():
            flip.unlink()
            for _ in range(100):  # a write made `flip` a directory meanwhile (inside: allowed)
                try:
                    os.rename(away, flip)
                    break
                except OSError:
                    shutil.rmtree(flip, ignore_errors=True)  # the tree's own goes back

    @contextlib.contextmanager
    def swapping(self) -> Iterator[None]:
        def run() -> None:
            out = False
            while not self.stopped.wait(SWAP_PAUSE):
                out = not out
                self.swap_once(out)
            if out:
                self.swap_once(False)

        self.stopped.clear()
        with ThreadPoolExecutor(1) as pool:
            swapped = pool.submit(run)
            try:
                yield
            finally:
                self.stopped.set()
                swapped.result(timeout=10)  # the swapping itself did not fail


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder in memory where there is one (/dev/shm): the writes fsync, thousands of
    times, and a disk would make that most of these tests' time."""
    if os.access("/dev/shm", os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="parley-gate-", dir="/dev/shm"))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("gate")


@pytest.fixture(scope="module")
def tree(scratch: Path) -> HostileTree:
    (scratch / "tree").mkdir()
    return HostileTree(scratch / "tree")


class InlineExecutor(ThreadPoolExecutor):
    """Runs what the tools hand to a thread (`asyncio.to_thread`) at once, in the caller's
    thread: the same code, without a thread hop per call (most of a call's time on a loaded
    machine). The swapping thread still races every call."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:
            future.set_exception(error)
        return future


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop:
        loop.get_loop().set_default_executor(InlineExecutor())
        yield loop


COMPONENTS = [
    *("..", ".", "", "...", " ", "~", "~root", "x" * 300, "é" * 200),
    *("\\x2e\\x2e", "\\x2e", "\\x2f", "\\x00", "\\x41", "\\xff", "\\xFF", "\\xc3\\xa9"),
    *("\\x2fetc\\x2fhostname", "\\x2e\\x2e\\x2fsecret.txt", "bad\\xff.py", "bad\\xfe.py"),
    *("\uff0f", "\u2215", "\u2024\u2024", "\uff0e\uff0e", "..\uff0f..", "\u2024", "\0", "a\0b"),
    *("a.txt", "dir", "sub", "c.py", "b.txt", "f.txt", "new", "made.txt", "hard.txt", "fifo"),
    *("link_in", "link_file", "link_out", "link_abs_out", "link_abs_in", "back_out"),
    *("link_dangling_in", "link_dangling_out", "up", "self", "loop1", "swap", "swap_real"),
    *("flip", FLIP_AWAY, "outside", "canary.txt", "canary.py", "secret.txt", "ws"),
]


@st.composite
def hostile_paths(draw: st.DrawFn, root: Path) -> str:
    base = root.parent
    prefix = draw(
        st.sampled_from(
            [
                *("", "", "", "/", f"{root}/", f"{base}/", f"{base}/outside/", "/etc/"),
                *("~/", f"{root}/../", f"{root}/dir/../../", "//", "./"),
            ]
        )
    )
    component = st.one_of(st.sampled_from(COMPONENTS), st.text(max_size=6))
    parts = draw(st.lists(component, min_size=1, max_size=6))
    return prefix + "/".join(parts) + draw(st.sampled_from(["", "", "/"]))


def tool_context(tree: HostileTree, journal: Any = None) -> ToolContext:
    return ToolContext("s", "c", tree.root, edit_journal=journal)


def assert_inside(tree: HostileTree, location: str) -> None:
    root = str(tree.root)
    assert location == root or location.startswith(root + "/"), location


def swapped(path: str) -> bool:
    """Whether `path` goes through what the swapping thread moves (where a file was
    written may have moved since)."""
    return any(name in path for name in ("swap", "flip", FLIP_AWAY))


def read_back(tree: HostileTree, relative: str) -> str:
    """A file's text, found as the gate finds the name it was shown by."""
    with open_confined(tree.root, relative) as file:
        return file.read().decode("utf-8", "replace")


def test_reads_lists_searches_and_attachments_stay_inside(
    tree: HostileTree, runner: asyncio.Runner
) -> None:
    """Each generated path goes to read_file, list_directory, a linked file and, as a glob,
    to search_files."""
    read, listing = ReadFileTool(tree.root, FileLedger()), ListDirectoryTool(tree.root)
    search, who_calls = SearchFilesTool(tree.root), PythonWhoCallsTool(tree.root)
    context = tool_context(tree)
    before = tree.outside()

    @PROPERTY
    @given(path=hostile_paths(tree.root))
    def check(path: str) -> None:
        for tool, arguments in ((read, {"path": path}), (listing, {"path": path})):
            result = runner.run(tool.run(arguments, context))
            assert result.content.strip()  # a listing, a file or a sentence saying why
            assert CANARY not in result.content
            assert not any(name in result.content for name in OUTSIDE_ONLY_NAMES)
            for location in tool.describe_call(arguments).locations:
                assert_inside(tree, location.path)
        assert CANARY not in str(attach_link(tree.root, path))
        found = runner.run(
            search.run({"pattern": "inside|CANARY-CONT[E]NT", "glob": path}, context)
        )
        assert CANARY not in found.content

    # python_who_calls takes no path: the tree and the swaps are its only hostile input.
    @settings(PROPERTY, max_examples=max(EXAMPLES // 10, 1))
    @given(name=st.sampled_from(["caller", "area", "x"]))
    def check_who_calls(name: str) -> None:
        calls = runner.run(who_calls.run({"name": name}, context))
        assert CANARY not in calls.content and "canary.py" not in calls.content

    with tree.swapping():
        check()
        check_who_calls()
    assert tree.outside() == before
    result = runner.run(search.run({"pattern": "inside"}, context))
    assert "a.txt:1:inside a" in result.content  # the search does find what is inside


def test_writes_edits_and_restores_stay_inside_and_say_where(
    tree: HostileTree, runner: asyncio.Runner, scratch: Path
) -> None:
    store = session_store(scratch, tree)
    ledger = FileLedger()
    read, write, edit = (
        ReadFileTool(tree.root, ledger),
        WriteFileTool(tree.root, ledger),
        EditFileTool(tree.root, ledger),
    )
    before = tree.outside()
    turns = iter(range(1, 100_000))

    def asked_then_run(tool: Any, arguments: dict[str, Any], journal: Any) -> None:
        """As a turn runs an edit: the precheck, the question (its view), the call."""
        context = tool_context(tree, journal)
        failure = runner.run(tool.precheck(arguments, context))
        if failure is not None:
            assert failure.is_error and failure.content.strip() and CANARY not in failure.content
            return
        view = tool.describe_call(arguments)
        result = runner.run(tool.run(arguments, context))
        journal.record_written()
        assert CANARY not in result.content
        if result.is_error:
            return
        (location,) = view.locations
        (diff,) = result.diffs
        assert diff.path == location.path  # the question named the file written
        assert_inside(tree, location.path)
        shown = location.path.removeprefix(str(tree.root) + "/")
        assert view.title.split(" ", 1)[1] == shown
        if not swapped(arguments["path"]):
            assert diff.new_text in read_back(tree, shown)

    def restore_planted(path: str, content: bytes | None) -> None:
        """A checkpoint naming `path` itself (as a tampered or old store could) restored:
        written or removed only inside the workspace."""
        tree.reset()
        turn = next(turns)
        stored = path if os.path.isabs(path) else str(tree.root / path)
        store.keep_checkpoint("sess_gate", turn, str(tree.root), stored, content, None, "now")
        store.mark_written("sess_gate", turn, stored, "changed")
        # Where the path leads before the restore: a restore replaces a symlink the path went
        # through (`self//self/self` writes `self`), so it is read back there, not by the path.
        # (The entry itself: a symlink at the end of the path is replaced, never followed.)
        try:
            entry = open_in_workspace(tree.root, path, Want.ENTRY)
            assert entry.fd is not None
            os.close(entry.fd)
            where: str | None = str(tree.root / entry.relative)
        except (OSError, ValueError):
            where = None
        result = runner.run(restore_turn(store, "sess_gate", turn, allow_everything))
        for _ in result.files:
            if content is not None and not swapped(path) and where is not None:
                assert read_back(tree, where) == "RESTORED\n"

    @PROPERTY
    @given(
        path=hostile_paths(tree.root),
        old=st.sampled_from(OLD_TEXTS),
        restored=st.sampled_from([None, b"RESTORED\n"]),
    )
    def check(path: str, old: str, restored: bytes | None) -> None:
        tree.reset()
        turn = next(turns)
        journal = TurnCheckpoints(store, "sess_gate", turn, tree.root)
        asked_then_run(write, {"path": path, "content": f"WRITTEN {turn}\n"}, journal)
        runner.run(read.run({"path": path}, tool_context(tree)))
        asked_then_run(edit, {"path": path, "old_text": old, "new_text": "EDITED"}, journal)
        for checkpoint in store.checkpoints("sess_gate", turn):
            assert CANARY.encode() not in (checkpoint.content or b"")
        runner.run(restore_turn(store, "sess_gate", turn, allow_everything))
        assert tree.outside() == before
        restore_planted(path, restored)
        assert tree.outside() == before

    with tree.swapping():
        check()
    store.close()


def session_store(scratch: Path, tree: HostileTree) -> Store:
    """A store holding the session "sess_gate" in the workspace, for its checkpoints."""
    store = Store.open_in(Path(tempfile.mkdtemp(dir=scratch)))
    now = now_iso()
    store.save_session(
        StoredSession(
            "sess_gate",
            str(tree.root),
            None,
            SessionSettings("openai:m", "hybrid"),
            {},
            0,
            0,
            now,
            now,
        )
    )
    return store


async def allow_everything(turn: int, changed: list[Any]) -> bool:
    return True


# --- nothing else opens a workspace path ------------------------------------------------------
#
# Every call that touches the file system by name, in the modules that handle workspace paths
# (the file tools and the checkpoints), must be the gate's (tools/confined.py) or be listed
# here with why it is safe: a new tool that opens a path itself fails this test.

SERVER = REPO / "server" / "parley"
FS_FUNCTIONS = {
    *("open", "io.open", "os.open", "os.stat", "os.lstat", "os.listdir", "os.scandir"),
    *("os.walk", "os.fwalk", "os.readlink", "os.mkdir", "os.makedirs", "os.unlink", "os.remove"),
    *("os.rmdir", "os.replace", "os.rename", "os.link", "os.symlink", "os.chmod", "os.truncate"),
    *("os.path.exists", "os.path.lexists", "os.path.isfile", "os.path.isdir", "os.path.islink"),
    *("os.path.realpath", "os.path.getsize", "shutil.rmtree", "shutil.copyfile", "shutil.move"),
}
FS_METHODS = {
    *("read_text", "read_bytes", "write_text", "write_bytes", "exists", "is_file", "is_dir"),
    *("is_symlink", "iterdir", "glob", "rglob", "resolve", "stat", "lstat", "unlink", "mkdir"),
    *("rmdir", "touch", "rename", "readlink", "symlink_to", "samefile", "walk", "open"),
}
# Modules of child processes (the kernel, MCP servers): what a child opens is the sandbox's
# matter (tools/kernel.py's launcher); the server opens nothing there for a model's path.
CHILD_MODULES = {"kernel.py", "kernel_main.py", "kernel_bench.py", "mcp.py"}
STATIC_SOURCES = (
    "module sources for the static Python tools, found on the kernel's import path: each "
    "place is resolved and checked inside the workspace, its virtualenv or the standard "
    "library, and regular, before griffe reads it (docs/security.md: limits)"
)
OPENED_BY_THE_GATE = "in a directory the gate opened, by descriptor, never followed"
JUPYTER_FILES = (
    "Jupyter's own files, never a workspace path: the connection file the user named (a "
    "regular file, bounded, parsed field by field) and Jupyter's runtime directory"
)
ALLOWED = {
    ("workspace.py", "repository_of", "os.path.lexists"): "a `.git` at or above the root",
    ("workspace.py", "workspace_files", "os.fwalk"): (
        "names only, from the resolved root, symlinks never followed (fwalk checks each "
        "directory it enters is the one it listed); each file is then opened by the gate"
    ),
    ("workspace.py", "workspace_files", "os.stat"): OPENED_BY_THE_GATE,
    ("workspace.py", "_list", "os.scandir"): OPENED_BY_THE_GATE,
    ("workspace.py", "_list", ".is_dir"): OPENED_BY_THE_GATE,
    ("workspace.py", "_describe", ".is_symlink"): OPENED_BY_THE_GATE,
    ("workspace.py", "_describe", ".is_dir"): OPENED_BY_THE_GATE,
    ("workspace.py", "_describe", ".stat"): OPENED_BY_THE_GATE,
    ("edits.py", "write_atomically", "os.stat"): OPENED_BY_THE_GATE,
    ("checkpoints.py", "_remove", "os.unlink"): OPENED_BY_THE_GATE,
    **{
        ("snapshot_restore.py", function, call): OPENED_BY_THE_GATE
        for function, call in [
            ("_remove", "os.rmdir"),
            ("_remove", "os.unlink"),
            ("_put", "os.symlink"),
            ("_put", "os.replace"),
            ("_put", "os.mkdir"),
            ("_chmod_at", "os.open"),
        ]
    },
    **{
        call: JUPYTER_FILES
        for call in [
            ("jupyter_link.py", "read_connection_file", "os.open"),
            ("jupyter_runtime.py", "running_kernels", ".is_file"),
            ("jupyter_runtime.py", "running_kernels", ".stat"),
            ("jupyter_runtime.py", "running_kernels", "os.scandir"),
            ("jupyter_runtime.py", "with_notebooks", ".glob"),
            ("jupyter_runtime.py", "with_notebooks", ".read_text"),
        ]
    },
    # Not a file: the link to the user's kernel (its sockets or websocket) opened.
    ("user_kernel.py", "_ensure_open", ".open"): "the kernel link's `open()`, not a file",
    # The entry `_chmod_at` opened (O_PATH, never a link), named by its descriptor.
    ("snapshot_restore.py", "_chmod_at", "os.chmod"): OPENED_BY_THE_GATE,
    **{
        ("static_python.py", function, call): STATIC_SOURCES
        for function, call in [
            ("site_packages_dirs", ".glob"),
            ("__init__", ".resolve"),
            ("_resolve", ".resolve"),
            ("_fingerprint", ".resolve"),
            ("_fingerprint", "os.lstat"),
            ("_fingerprint", ".stat"),
            ("_workspace_modules", ".iterdir"),
            ("_workspace_modules", ".is_dir"),
            ("_workspace_modules", ".exists"),
            ("_new_loader", ".resolve"),
            ("_pth_files_are_safe", ".glob"),
            ("_pth_files_are_safe", ".stat"),
            ("_source_files", ".is_dir"),
            ("_source_files", "os.walk"),
        ]
    },
}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def file_system_calls(path: Path) -> set[tuple[str, str, str]]:
    """(module, enclosing function, call) for each call that touches the file system by
    name: `os.open`, `open`, `Path.read_text`, `.exists()` ..."""
    found = set()

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            dotted = _dotted(node.func)
            if dotted in FS_FUNCTIONS:
                found.add((path.name, function, dotted))
            elif isinstance(node.func, ast.Attribute) and node.func.attr in FS_METHODS:
                found.add((path.name, function, "." + node.func.attr))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_only_the_gate_opens_workspace_paths() -> None:
    modules = [
        *(p for p in (SERVER / "tools").glob("*.py") if p.name not in CHILD_MODULES),
        SERVER / "agent" / "checkpoints.py",
        SERVER / "agent" / "snapshot_restore.py",
    ]
    calls = set().union(*(file_system_calls(p) for p in modules if p.name != "confined.py"))
    unexplained = sorted(call for call in calls if call not in ALLOWED)
    assert unexplained == [], "open workspace paths through tools/confined.py (the gate)"
    assert sorted(set(ALLOWED) - calls) == []  # the list names no call that is gone
    assert file_system_calls(SERVER / "tools" / "confined.py")  # the scan does see calls


def test_a_restore_replaces_a_symlink_to_outside_and_never_follows_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("outside")
    (root / "kept.txt").symlink_to(tmp_path / "outside.txt")  # put there after the edit
    entry = open_in_workspace(workspace_root(root), "kept.txt", Want.ENTRY, create=True)
    assert entry.fd is not None and entry.name == "kept.txt"
    os.close(entry.fd)
    with pytest.raises(Refused):
        open_in_workspace(workspace_root(root), "kept.txt", Want.PARENT, create=True)
    assert (tmp_path / "outside.txt").read_text() == "outside"


async def test_an_edit_writes_only_where_its_question_said(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "one").mkdir(parents=True)
    (root / "two").mkdir()
    (root / "link").symlink_to("one")
    tool = WriteFileTool(root, FileLedger())
    arguments = {"path": "link/new.txt", "content": "new\n"}
    assert tool.describe_call(arguments).title == "Create one/new.txt"
    (root / "link").unlink()
    (root / "link").symlink_to("two")  # after the question, before the call
    result = await tool.run(arguments, ToolContext("s", "c", root))
    assert result.is_error and "led to one/new.txt when the user was asked" in result.content
    assert not (root / "one" / "new.txt").exists() and not (root / "two" / "new.txt").exists()
    assert tool.describe_call(arguments).title == "Create two/new.txt"  # asked again
    assert not (await tool.run(arguments, ToolContext("s", "c", root))).is_error
    assert (root / "two" / "new.txt").read_text() == "new\n"
