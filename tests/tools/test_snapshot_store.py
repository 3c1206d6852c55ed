"""The snapshot store's own rules, in-process on a real folder: its lock (shared by the
snapshots and restores, exclusive for the collection, across threads), a session's records,
and a turn's snapshots recorded as `TurnSnapshots` records them."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from parley.agent import snapshots
from parley.agent.snapshot_store import SnapshotStore
from parley.agent.snapshots import TurnSnapshots, load_snapshot
from parley.config import CheckpointsTable


def test_the_lock_is_shared_by_snapshots_and_exclusive_for_the_collection(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "home")
    first = store.hold()
    second = store.hold(wait=False)  # two snapshots at once hold it together
    assert first is not None and second is not None
    assert store.hold(exclusive=True, wait=False) is None  # no collection under them
    os.close(first)
    os.close(second)
    collecting = store.hold(exclusive=True, wait=False)
    assert collecting is not None
    assert store.hold(wait=False) is None  # no snapshot under the collection
    entered: list[float] = []

    def snapshot() -> None:
        with store.in_use():  # waits for the collection to end
            entered.append(time.monotonic())

    waiting = threading.Thread(target=snapshot)
    waiting.start()
    time.sleep(0.3)
    released = time.monotonic()
    os.close(collecting)
    waiting.join(timeout=10)
    assert entered and entered[0] >= released


def test_a_sessions_records_are_listed_in_order_and_a_damaged_one_reads_as_none(
    tmp_path: Path,
) -> None:
    store = SnapshotStore(tmp_path / "home")
    for turn in (10, 2, 1):
        store.put_turn_record("sess_1", turn, {"before": "b", "after": "a"})
    assert store.turns("sess_1") == [1, 2, 10]
    assert store.turns("sess_other") == []
    (store._session("sess_1") / "turns" / "2.json").write_text("{not json")
    assert store.turn_record("sess_1", 2) is None
    store.put_restores("sess_1", [{"turn": 1}])
    assert store.restores("sess_1") == [{"turn": 1}]
    (store._session("sess_1") / "restores.json").write_bytes(b"\xff")
    assert store.restores("sess_1") == []


async def test_a_turn_records_its_snapshots_and_drops_what_a_redo_would_put_back(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("before")
    store = SnapshotStore(tmp_path / "home")
    store.put_restores("sess_1", [{"turn": 1, "before": "x", "after": "y"}])
    turn = TurnSnapshots(store, "sess_1", 2, (root,), CheckpointsTable())
    await turn.before_call("read", "read_file")  # cannot write: no snapshot
    assert store.turn_record("sess_1", 2) is None
    await turn.before_call("execute", "run_command")
    assert store.restores("sess_1") == []  # a new change: the last restore is not redone
    (root / "f").write_text("after")
    await turn.after_call()
    await turn.settled()  # the snapshot after runs in the background
    record = store.turn_record("sess_1", 2)
    assert record is not None and record["ran"] == ["run_command"]
    assert record["kinds"] == ["execute"]
    before = load_snapshot(store, record["before"]).entries[str(root / "f")]
    after = load_snapshot(store, record["after"]).entries[str(root / "f")]
    assert store.object(before[6]) == b"before" and store.object(after[6]) == b"after"


def test_every_file_of_the_store_is_the_users_alone(tmp_path: Path) -> None:
    """Kept content may be a secret of the workspace: folders 0700, files 0600."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "secret.env").write_text("TOKEN=1")
    store = SnapshotStore(tmp_path / "home")
    turn = TurnSnapshots(store, "sess_1", 1, (root,), CheckpointsTable())

    async def one_call() -> None:
        await turn.before_call("edit", "write_file")
        await turn.after_call()
        await turn.settled()

    asyncio.run(one_call())
    modes = {path: stat.S_IMODE(path.lstat().st_mode) for path in (tmp_path / "home").rglob("*")}
    assert modes and all(
        mode == (0o700 if path.is_dir() else 0o600) for path, mode in modes.items()
    ), modes


async def test_the_snapshot_after_a_call_runs_while_the_turn_goes_on_and_the_next_call_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`after_call` returns before the walk ends (the call's result and the model's next
    request need not wait for it); the next call of any tool, and the turn's end
    (`settled`), wait for it, so it sees the roots as the call left them."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("before")
    store = SnapshotStore(tmp_path / "home")
    turn = TurnSnapshots(store, "sess_1", 1, (root,), CheckpointsTable())
    await turn.before_call("execute", "run_command")
    walking, may_end = threading.Event(), threading.Event()
    real_take = snapshots.take_snapshot

    def held_walk(*args: Any, **kwargs: Any) -> snapshots.Snapshot:
        walking.set()
        assert may_end.wait(timeout=30)
        return real_take(*args, **kwargs)

    monkeypatch.setattr(snapshots, "take_snapshot", held_walk)
    (root / "f").write_text("after")
    await asyncio.wait_for(turn.after_call(), timeout=5)  # returns with the walk under way
    assert await asyncio.to_thread(walking.wait, 10)
    record = store.turn_record("sess_1", 1)
    assert record is not None and record["after"] == record["before"]  # not recorded yet
    # The next call waits for it, even one of a tool that says it only reads.
    next_call = asyncio.ensure_future(turn.before_call("read", "an_mcp_tool"))
    await asyncio.sleep(0.3)
    assert not next_call.done()
    may_end.set()
    await asyncio.wait_for(next_call, timeout=30)
    record = store.turn_record("sess_1", 1)
    assert record is not None
    after = load_snapshot(store, record["after"]).entries[str(root / "f")]
    assert store.object(after[6]) == b"after"
    await turn.before_call("edit", "write_file")
    await turn.after_call()
    await asyncio.wait_for(turn.settled(), timeout=30)
    assert turn._pending is None
