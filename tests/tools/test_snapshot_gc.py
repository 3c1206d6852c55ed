"""The snapshot store's collection (`agent/snapshot_gc.py`): what no turn of any stored
session can restore any more is removed, never what a record still names, and never while a
snapshot or a restore holds the store. Over the wire (a session deleted through
`session/delete`, `parley serve` a subprocess, the model scripted by the fake LLM), and
in-process over random sets of snapshots and deletions (Hypothesis)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent import snapshot_gc
from parley.agent.snapshot_gc import Collected, collect_garbage, collect_soon
from parley.agent.snapshot_store import SnapshotStore, roots_key
from parley.agent.snapshots import take_snapshot
from parley.config import load_settings
from parley.fakellm import FakeLLM
from test_snapshots import tree_state, undo_to
from test_undo_everything import command_turn, started


def object_path(home: Path, content: bytes) -> Path:
    digest = hashlib.sha256(content).hexdigest()
    return home / "snapshots" / "objects" / digest[:2] / digest[2:]


async def test_a_deleted_sessions_content_goes_and_what_another_names_stays(
    start_server: Callable[..., Any], fake: FakeLLM, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    mark = uuid.uuid4().hex
    only_a, shared = f"only in A's turn {mark}".encode(), f"in both {mark}".encode()
    workspace_a, workspace_b = tmp_path / "wa", tmp_path / "wb"
    workspace_a.mkdir()
    workspace_b.mkdir()
    (workspace_a / "a.txt").write_bytes(only_a)
    (workspace_a / "s.txt").write_bytes(shared)
    (workspace_b / "s.txt").write_bytes(shared)
    client = await started(start_server, tmp_path)
    session_a = await client.new_session(str(workspace_a))
    fake.set_script(command_turn("printf changed > a.txt && rm s.txt"))
    await client.prompt(session_a, "Change a, remove s.", timeout=60)
    session_b = await client.new_session(str(workspace_b))
    fake.set_script(command_turn("printf new > b.txt"))
    await client.prompt(session_b, "Add b.", timeout=60)
    b_before = tree_state(workspace_b)
    assert object_path(home, only_a).exists() and object_path(home, shared).exists()

    await client.request("session/delete", {"sessionId": session_a})
    for _ in range(200):  # collected in a thread after the delete's answer
        if not object_path(home, only_a).exists():
            break
        await asyncio.sleep(0.05)
    assert not object_path(home, only_a).exists()  # only A's turn could restore it
    assert object_path(home, shared).exists()  # B's turn still can
    assert object_path(home, b"changed").exists()  # wa's latest snapshot (the next's cache)

    await client.prompt(session_b, "/undo", timeout=60)
    assert tree_state(workspace_b) == {k: v for k, v in b_before.items() if k != "b.txt"}
    assert (workspace_b / "s.txt").read_bytes() == shared


def test_nothing_is_collected_while_a_snapshot_or_restore_holds_the_store(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("one")
    store = SnapshotStore(tmp_path / "home")
    take_snapshot(store, (root,), None)
    (root / "f").write_text("two")
    take_snapshot(store, (root,), None)  # "one" is named by no record nor `latest/` now
    with store.in_use():
        assert collect_garbage(store, keep_days=30) is None
        assert object_path(tmp_path / "home", b"one").exists()
    assert stat.S_IMODE(os.stat(store.folder / "lock").st_mode) == 0o600  # as the store's files
    collected = collect_garbage(store, keep_days=30)
    assert collected is not None and collected.objects == 1 and collected.manifests == 1
    assert not object_path(tmp_path / "home", b"one").exists()
    assert object_path(tmp_path / "home", b"two").exists()


def test_records_past_the_retention_go_and_their_content_with_them(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("old")
    store = SnapshotStore(tmp_path / "home")
    before = take_snapshot(store, (root,), None)
    (root / "f").write_text("new")
    after = take_snapshot(store, (root,), before)
    store.put_turn_record("sess_1", 1, {"before": before.manifest_id, "after": after.manifest_id})
    assert collect_garbage(store, keep_days=30) == Collected(0, 0, 0, 0)  # a new record
    assert collect_garbage(store, keep_days=0, now=time.time() + 10**9) == Collected(0, 0, 0, 0)
    assert object_path(tmp_path / "home", b"old").exists()  # 0: kept until deleted
    collected = collect_garbage(store, keep_days=30, now=time.time() + 31 * 86_400)
    assert collected == Collected(records=2, manifests=2, objects=2, object_bytes=6)
    assert not object_path(tmp_path / "home", b"old").exists()  # the record and `latest/`
    assert not object_path(tmp_path / "home", b"new").exists()  # went: nothing names them
    assert store.turns("sess_1") == []


def test_an_unreadable_manifest_keeps_every_object(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("one")
    store = SnapshotStore(tmp_path / "home")
    first = take_snapshot(store, (root,), None)
    (root / "f").write_text("two")
    second = take_snapshot(store, (root,), None)
    store.put_turn_record("sess_1", 1, {"before": first.manifest_id, "after": second.manifest_id})
    manifest = store.folder / "manifests" / second.manifest_id[:2] / second.manifest_id[2:]
    manifest.write_bytes(b"damaged")
    (root / "f").write_text("three")
    take_snapshot(store, (root,), None)  # "three" named by `latest/` alone; "one", "two" too
    os.unlink(store.folder / "latest" / roots_key((root,)))
    collected = collect_garbage(store, keep_days=30)
    assert collected == Collected(records=0, manifests=1, objects=0, object_bytes=0)
    for content in (b"one", b"two", b"three"):
        assert object_path(tmp_path / "home", content).exists()


# --- Hypothesis: random snapshots, records and deletions; every record left restores ---------

FILES = st.dictionaries(
    st.sampled_from(["a", "b", "c", "sub/d", "sub/e"]),
    st.sampled_from([b"", b"one", b"two", b"three", b"\x00\xff"]),
    max_size=5,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    trees=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), FILES), min_size=1, max_size=6),
    deleted=st.sets(st.integers(0, 2)),
    expired=st.sets(st.integers(0, 5)),
)
def test_after_collection_every_remaining_record_restores_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    trees: list[tuple[int, int, dict[str, bytes]]],
    deleted: set[int],
    expired: set[int],
) -> None:
    """Turns of three sessions in three workspaces, each a snapshot before and after random
    writes (sharing content across sessions); some sessions deleted, some records past the
    retention; after collection, each record left undoes its turn exactly."""
    base = tmp_path_factory.mktemp("gc")
    store = SnapshotStore(base / "home")
    turns: list[tuple[int, int, Path, dict[str, Any], dict[str, Any]]] = []
    for number, (session, place, files) in enumerate(trees):
        root = base / f"ws{place}"
        root.mkdir(exist_ok=True)
        before = take_snapshot(store, (root,), None)
        state_before = tree_state(root)
        for name, content in files.items():
            (root / name).parent.mkdir(exist_ok=True)
            (root / name).write_bytes(content)
        after = take_snapshot(store, (root,), None)
        record = {"before": before.manifest_id, "after": after.manifest_id}
        store.put_turn_record(f"sess_{session}", number, record)
        if number in expired:
            path = store._session(f"sess_{session}") / "turns" / f"{number}.json"
            os.utime(path, (time.time() - 40 * 86_400,) * 2)
        else:
            turns.append((session, number, root, state_before, tree_state(root)))
    for session in deleted:
        store.forget_session(f"sess_{session}")

    assert collect_garbage(store, keep_days=30) is not None

    for session, number, root, state_before, state_after in reversed(turns):
        if session in deleted:
            continue
        record = store.turn_record(f"sess_{session}", number)
        assert record is not None
        _set_tree(root, store, record["after"], state_after)
        assert undo_to(store, root, record["before"], record["after"]) == []
        assert tree_state(root) == state_before


def _set_tree(root: Path, store: SnapshotStore, after_id: str, state: dict[str, Any]) -> None:
    """The root as the turn left it (later turns changed it since): put back from `after`."""
    now = take_snapshot(store, (root,), None)
    if tree_state(root) != state:
        undo_to(store, root, after_id, now.manifest_id)
    assert tree_state(root) == state


def test_a_home_without_snapshots_is_left_as_it_is(tmp_path: Path) -> None:
    """A server that never took a snapshot collects nothing and makes no store."""
    store = SnapshotStore(tmp_path / "home")
    assert collect_garbage(store, keep_days=30) == Collected(0, 0, 0, 0)
    assert not (tmp_path / "home").exists()


def test_an_unreadable_record_keeps_everything(tmp_path: Path) -> None:
    """A record that cannot be read may name any manifest: nothing is removed."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("one")
    store = SnapshotStore(tmp_path / "home")
    take_snapshot(store, (root,), None)
    (root / "f").write_text("two")
    take_snapshot(store, (root,), None)  # "one" is named by nothing readable
    store.put_turn_record("sess_1", 1, {"before": "x", "after": "x"})
    (store._session("sess_1") / "turns" / "2.json").mkdir()  # read: IsADirectoryError
    assert collect_garbage(store, keep_days=30) == Collected(0, 0, 0, 0)
    assert object_path(tmp_path / "home", b"one").exists()


def test_every_unnamed_object_goes_and_every_named_one_stays(tmp_path: Path) -> None:
    """600 objects over the 256 folders of `objects/`: named and unnamed side by side."""
    root = tmp_path / "ws"
    root.mkdir()
    for number in range(300):
        (root / f"f{number}").write_text(f"old {number}")
    store = SnapshotStore(tmp_path / "home")
    take_snapshot(store, (root,), None)
    for number in range(300):
        (root / f"f{number}").write_text(f"new {number}")
    after = take_snapshot(store, (root,), None)
    collected = collect_garbage(store, keep_days=30)
    assert collected is not None and (collected.objects, collected.manifests) == (300, 1)
    for number in range(300):
        assert not object_path(tmp_path / "home", f"old {number}".encode()).exists()
        assert object_path(tmp_path / "home", f"new {number}".encode()).exists()
    assert store.manifest(after.manifest_id)["entries"]


async def test_a_collection_asked_for_twice_runs_once_off_the_loop(tmp_path: Path) -> None:
    """`collect_soon` (after a session's delete): in a thread; asked again while it runs, it
    does not start a second one."""
    settings = load_settings(
        {"PARLEY_HOME": str(tmp_path / "home"), "PARLEY_CONFIG": str(tmp_path / "none.toml")}
    )
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("one")
    store = SnapshotStore(settings.home)
    take_snapshot(store, (root,), None)
    (root / "f").write_text("two")
    take_snapshot(store, (root,), None)
    collect_soon(settings)
    running = snapshot_gc._running[store.folder]
    collect_soon(settings)
    assert snapshot_gc._running[store.folder] is running
    await running
    assert not object_path(settings.home, b"one").exists()
    assert object_path(settings.home, b"two").exists()


def test_a_record_an_undo_dropped_no_longer_keeps_its_content(tmp_path: Path) -> None:
    """An undo drops its turns' records (`keep_for_redo`): what only they named goes."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("before")
    store = SnapshotStore(tmp_path / "home")
    before = take_snapshot(store, (root,), None)
    (root / "f").write_text("after")
    after = take_snapshot(store, (root,), before)
    store.put_turn_record("sess_1", 1, {"before": before.manifest_id, "after": after.manifest_id})
    assert collect_garbage(store, keep_days=30) == Collected(0, 0, 0, 0)
    store.drop_turn_record("sess_1", 1)
    store.drop_turn_record("sess_1", 2)  # none: nothing to drop, no error
    assert store.turns("sess_1") == []
    assert collect_garbage(store, keep_days=30) == Collected(0, 1, 1, len(b"before"))


async def test_a_collection_that_fails_says_so_and_raises_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(
        {"PARLEY_HOME": str(tmp_path / "home"), "PARLEY_CONFIG": str(tmp_path / "none.toml")}
    )
    (settings.home / "snapshots" / "lock").mkdir(parents=True)  # the lock cannot be opened
    collect_soon(settings)
    await snapshot_gc._running[settings.home / "snapshots"]  # no exception
    assert "Collecting the snapshot store failed" in caplog.text
