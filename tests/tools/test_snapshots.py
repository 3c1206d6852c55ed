"""Snapshots of the roots, in-process (a real directory tree, a real snapshot store):
snapshot, change the tree anyhow, restore, and the tree is back byte for byte — content,
deletions, new files, modes, symlinks (as links), directories. The same through the server,
over the wire, is in `test_undo_everything.py`."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.snapshot_restore import apply_changes, not_kept, turn_changes, with_now
from parley.agent.snapshot_store import SnapshotStore
from parley.agent.snapshots import NOT_KEPT, take_snapshot
from parley.tools.confined import workspace_roots


def tree_state(root: Path) -> dict[str, tuple[Any, ...]]:
    """Everything a restore must give back: each path's kind, mode and bytes or target."""
    state: dict[str, tuple[Any, ...]] = {}
    for directory, folders, files, _ in os.fwalk(root, follow_symlinks=False):
        for name in folders + files:
            path = os.path.join(directory, name)
            status = os.lstat(path)
            relative = os.path.relpath(path, root)
            if stat.S_ISLNK(status.st_mode):
                state[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(status.st_mode):
                state[relative] = ("dir", stat.S_IMODE(status.st_mode))
            else:
                state[relative] = ("file", stat.S_IMODE(status.st_mode), Path(path).read_bytes())
    return state


def undo_to(store: SnapshotStore, root: Path, before_id: str, after_id: str) -> list[Any]:
    """Restore `root` to the snapshot `before_id` from the one `after_id` (the turn's
    result); the failures."""
    roots = workspace_roots(root)
    record = {"before": before_id, "after": after_id, "roots": [str(root)]}
    changes = turn_changes(store, [record], str(root))
    now = take_snapshot(store, roots.all, None)
    kept, missing = not_kept(with_now(changes, now.entries))
    assert missing == []
    return asyncio.run(apply_changes(store, kept, roots, None))


NAMES = st.sampled_from(["a", "b", "c.txt", "d d", "é", "sub/x", "sub/y", "sub/deep/z", "t/u"])
CONTENT = st.binary(max_size=64) | st.sampled_from([b"", b"same size 1", b"same size 2"])
FILE_MODES = st.sampled_from([0o644, 0o600, 0o755, 0o700, 0o640])
LINK_TARGETS = st.sampled_from(["a", "sub", "../outside", "/etc/passwd", "missing", "sub/x"])

OPERATIONS = st.one_of(
    st.tuples(st.just("write"), NAMES, CONTENT),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("rename"), NAMES, NAMES),
    st.tuples(st.just("chmod"), NAMES, FILE_MODES),
    st.tuples(st.just("symlink"), NAMES, LINK_TARGETS),
    st.tuples(st.just("mkdir"), NAMES),
    st.tuples(st.just("rmtree"), st.sampled_from(["sub", "t", "sub/deep"])),
)


def operate(root: Path, operation: tuple[Any, ...]) -> None:
    """One change of the tree, as a command might make it; one that cannot be made (its
    folder is a file, say) is skipped, as the command would have failed."""
    kind, name, *rest = operation
    path = root / name
    try:
        if kind in ("write", "symlink", "mkdir"):
            path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "write":
            with open(path, "wb") as file:  # in place, as `>` does: the same inode
                file.write(rest[0])
        elif kind == "delete":
            path.unlink()
        elif kind == "rename":
            target = root / rest[0]
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(path, target)
        elif kind == "chmod" and not path.is_symlink():
            path.chmod(rest[0])
        elif kind == "symlink":
            path.symlink_to(rest[0])
        elif kind == "mkdir":
            path.mkdir(mode=0o755)
        elif kind == "rmtree":
            import shutil

            shutil.rmtree(path)
    except OSError:
        pass


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(setup=st.lists(OPERATIONS, max_size=12), turn=st.lists(OPERATIONS, min_size=1, max_size=12))
def test_snapshot_then_restore_gives_the_tree_back_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    setup: list[tuple[Any, ...]],
    turn: list[tuple[Any, ...]],
) -> None:
    base = tmp_path_factory.mktemp("tree")
    root = base / "ws"
    root.mkdir()
    for operation in setup:
        operate(root, operation)
    store = SnapshotStore(base / "home")
    expected = tree_state(root)
    before = take_snapshot(store, (root,), None)
    for operation in turn:
        operate(root, operation)
    # The stat cache of the first snapshot is used: a same-size write just now is read again.
    after = take_snapshot(store, (root,), before)
    assert undo_to(store, root, before.manifest_id, after.manifest_id) == []
    assert tree_state(root) == expected
    # Redo: the turn's result, back from the snapshot taken after it.
    turned = take_snapshot(store, (root,), None)
    assert undo_to(store, root, after.manifest_id, turned.manifest_id) == []
    assert tree_state(root) == tree_state_of(store, after.entries, root)


def tree_state_of(store: SnapshotStore, entries: dict[str, Any], root: Path) -> dict[str, Any]:
    """A snapshot's entries as `tree_state` gives a tree."""
    state: dict[str, tuple[Any, ...]] = {}
    for path, entry in entries.items():
        if path == str(root):
            continue
        relative = os.path.relpath(path, root)
        if entry[0] == "l":
            state[relative] = ("link", entry[6])
        elif entry[0] == "d":
            state[relative] = ("dir", entry[1])
        else:
            state[relative] = ("file", entry[1], store.object(entry[6]))
    return state


def test_a_same_size_write_in_the_same_clock_tick_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_bytes(b"one")
    store = SnapshotStore(tmp_path / "home")
    first = take_snapshot(store, (root,), None)
    mtime = (root / "f").stat().st_mtime_ns
    (root / "f").write_bytes(b"two")
    os.utime(root / "f", ns=(mtime, mtime))  # the lstat the cache knows, but for ctime
    second = take_snapshot(store, (root,), first)
    assert store.object(second.entries[str(root / "f")][6]) == b"two"


def test_an_unchanged_tree_is_not_read_again(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for number in range(200):
        (root / "pkg" / f"m{number}.py").write_text(f"x = {number}\n")
    store = SnapshotStore(tmp_path / "home")
    first = take_snapshot(store, (root,), None)
    first.taken_ns = time.time_ns() + 10**10  # as if taken long after the files were written
    (root / "pkg" / "m0.py").chmod(0o600)  # the file's bytes are not read to see a mode change
    later = take_snapshot(store, (root,), first)
    assert later.entries[str(root / "pkg" / "m0.py")][1] == 0o600
    assert later.stored_bytes == 0


def test_ignore_rules_and_the_cap_leave_paths_out_and_name_them(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"\0" * 10)
    (root / ".gitignore").write_text("*.log\n")
    (root / "app.log").write_text("log")
    (root / "big.bin").write_bytes(b"x" * 4096)
    (root / "kept.txt").write_text("kept")
    store = SnapshotStore(tmp_path / "home")
    snapshot = take_snapshot(store, (root,), None, ignore=("build/",), byte_budget=1024)
    assert set(snapshot.ignored) == {".git/", "build/", "app.log"}
    assert str(root / "app.log") not in snapshot.entries
    assert snapshot.entries[str(root / "big.bin")][0] == NOT_KEPT
    assert "size cap" in snapshot.not_kept[str(root / "big.bin")]
    assert store.object(snapshot.entries[str(root / "kept.txt")][6]) == b"kept"


def test_the_store_is_not_walked_when_it_lies_in_a_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parley's data inside the workspace (PARLEY_HOME there) is a place the sandbox hides:
    the snapshot never copies it into itself."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a")
    home = root / "parley-home"
    monkeypatch.setenv("PARLEY_HOME", str(home))
    store = SnapshotStore(home)
    take_snapshot(store, (root,), None)
    again = take_snapshot(store, (root,), None)
    assert (home / "snapshots" / "objects").is_dir()
    assert not any(path.startswith(str(home)) for path in again.entries)


def test_a_restore_never_writes_through_a_symlink_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_text("old")
    outside = tmp_path / "outside"
    outside.mkdir()
    store = SnapshotStore(tmp_path / "home")
    before = take_snapshot(store, (root,), None)
    (root / "sub" / "f").write_text("new")
    after = take_snapshot(store, (root,), None)
    import shutil

    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(outside)  # swapped in after the turn
    ((change, why),) = undo_to(store, root, before.manifest_id, after.manifest_id)
    assert change.path == str(root / "sub" / "f") and "sub is a symbolic link now" in why
    assert list(outside.iterdir()) == []  # refused by the gate, never followed
