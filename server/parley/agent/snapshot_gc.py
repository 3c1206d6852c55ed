"""Collecting the snapshot store's garbage: what no turn of any stored session can restore.

A session's records go when it is deleted (`SnapshotStore.forget_session`); a turn's record,
a session's restores (what a redo puts back) and the last snapshot of a set of roots go
`[checkpoints] keep_days` after they were written (0: never by age). Then every manifest no
remaining record, restore or `latest/` names is removed, and every object no remaining
manifest names. It runs in a thread, after a session is deleted and a while after the
server starts, holding the store's lock exclusively: never while a snapshot or a restore
runs (it is skipped then, and runs the next time), so nothing being written or about to be
named by a record is removed. A manifest that is named but cannot be read keeps every object.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import attrs

from parley.agent.snapshot_store import SnapshotStore
from parley.agent.snapshots import FILE
from parley.config import Settings

logger = logging.getLogger(__name__)

DAY_SECONDS = 86_400
# After the server starts, the collection waits this long (the start and the first prompt
# go first).
START_DELAY_SECONDS = 60.0


@attrs.frozen
class Collected:
    """What one collection removed."""

    records: int  # turn records, restores and `latest/` past the retention
    manifests: int
    objects: int
    object_bytes: int


def collect_garbage(
    store: SnapshotStore, keep_days: int, now: float | None = None
) -> Collected | None:
    """Remove what no record can restore any more (blocking). None: a snapshot or a restore
    holds the store (nothing removed)."""
    if not store.folder.is_dir():
        return Collected(0, 0, 0, 0)
    descriptor = store.hold(exclusive=True, wait=False)
    if descriptor is None:
        return None
    try:
        cutoff = (time.time() if now is None else now) - keep_days * DAY_SECONDS
        records = _drop_expired(store, cutoff) if keep_days else 0
        try:
            manifests = _named_manifests(store)
        except _Unreadable as unreadable:
            logger.warning("Snapshot record %s unreadable: nothing collected", unreadable)
            return Collected(records, 0, 0, 0)
        objects = _named_objects(store, manifests)
        removed_manifests, _ = _sweep(store.folder / "manifests", manifests)
        removed_objects, freed = (
            (0, 0) if objects is None else _sweep(store.folder / "objects", objects)
        )
    finally:
        os.close(descriptor)
    return Collected(records, removed_manifests, removed_objects, freed)


def _drop_expired(store: SnapshotStore, cutoff: float) -> int:
    """Records and restores last written before `cutoff`; a session left with none goes."""
    dropped = 0
    for session in _listed(store.folder / "sessions"):
        for record in [*_listed(session / "turns"), session / "restores.json"]:
            if _older(record, cutoff):
                record.unlink()
                dropped += 1
        if not _listed(session / "turns") and not (session / "restores.json").exists():
            shutil.rmtree(session, ignore_errors=True)
    for latest in _listed(store.folder / "latest"):
        if _older(latest, cutoff):
            latest.unlink()
            dropped += 1
    return dropped


def _named_manifests(store: SnapshotStore) -> set[str]:
    """The manifests a turn record, a restore or `latest/` names."""
    named: set[str] = set()
    for session in _listed(store.folder / "sessions"):
        for record in _listed(session / "turns"):
            if not record.name.startswith(".tmp-"):  # a write cut short: named nothing
                named |= _manifest_ids(_read_record(record))
        named |= _manifest_ids(_read_record(session / "restores.json"))
    for latest in _listed(store.folder / "latest"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            named.add(latest.read_text("ascii").strip())
    return named


def _manifest_ids(value: Any) -> set[str]:
    """Every `before` and `after` in a record, a restore or the records a restore holds."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("before", "after") and isinstance(inner, str):
                found.add(inner)
            else:
                found |= _manifest_ids(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _manifest_ids(inner)
    return found


def _named_objects(store: SnapshotStore, manifests: set[str]) -> set[str] | None:
    """The objects the manifests name; None when one of them cannot be read (then no
    object is removed: what it names is unknown)."""
    objects: set[str] = set()
    for manifest_id in manifests:
        try:
            entries = store.manifest(manifest_id)["entries"]
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("Snapshot manifest %s unreadable: no object collected", manifest_id)
            return None
        objects.update(entry[6] for entry in entries.values() if entry[0] == FILE)
    return objects


def _sweep(folder: Path, kept: set[str]) -> tuple[int, int]:
    """Remove the files of `folder/ab/cdef…` not named in `kept`, and the temporary files a
    write cut short left; how many, and their bytes."""
    removed = freed = 0
    for fan in _listed(folder):
        for path in _listed(fan):
            if fan.name + path.name in kept:
                continue
            with contextlib.suppress(FileNotFoundError):
                size = path.lstat().st_size
                path.unlink()
                removed, freed = removed + 1, freed + size
    return removed, freed


def _listed(folder: Path) -> list[Path]:
    try:
        return [folder / name for name in sorted(os.listdir(folder))]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _older(path: Path, cutoff: float) -> bool:
    try:
        return path.lstat().st_mtime < cutoff
    except FileNotFoundError:
        return False


def _read_record(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        # A record that cannot be read may name anything: keep every manifest and object.
        raise _Unreadable(path) from None


class _Unreadable(Exception):
    pass


# --- when it runs ---------------------------------------------------------------------------

_running: dict[Path, asyncio.Task[None]] = {}


def collect_soon(settings: Settings) -> None:
    """A collection of `settings.home`'s store, in a thread, unless one is running."""
    store = SnapshotStore(settings.home)
    task = _running.get(store.folder)
    if task is None or task.done():
        _running[store.folder] = asyncio.get_running_loop().create_task(
            _collect(store, settings.checkpoints.keep_days)
        )


def collect_after_start(settings: Settings) -> None:
    """A collection `START_DELAY_SECONDS` after the server started."""
    asyncio.get_running_loop().call_later(START_DELAY_SECONDS, collect_soon, settings)


async def _collect(store: SnapshotStore, keep_days: int) -> None:
    try:
        collected = await asyncio.to_thread(collect_garbage, store, keep_days)
    except OSError as error:
        logger.warning("Collecting the snapshot store failed: %s", error)
        return
    if collected is None:
        logger.info("Snapshot store busy (a snapshot or a restore): not collected this time")
    else:
        logger.info("Snapshot store collected: %s", collected)
