"""Where snapshots are kept: a content-addressed object store under Parley's data folder.

`PARLEY_HOME/snapshots/` (outside every root; the sandbox hides Parley's data from every
child, `sandbox_policy.parley_places`) holds

- `objects/ab/cdef…`: a file's bytes, named by their sha256, written once (shared by every
  session and workspace: a file kept by one snapshot is never stored again);
- `manifests/ab/cdef…`: a snapshot's manifest (every path of the roots with what it was),
  zlib-compressed JSON, named by the sha256 of that JSON;
- `latest/<roots>`: the manifest last taken of a set of roots (the stat cache of the next);
- `sessions/<id>/turns/<n>.json`: a turn's snapshots (before its first writing call, after
  its last), and `sessions/<id>/restores.json`: the restores that may be redone, newest last.

Everything is written atomically (a temporary file renamed over the name), mode 0600 in
0700 folders. `lock` is the store's lock (`flock`, across threads and processes): shared by
every snapshot and restore while it runs, exclusive for the collector (`snapshot_gc.py`),
which so never removes what one of them is writing or about to refer to.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from parley.core.off_loop import off_loop


class SnapshotStore:
    """The snapshot folder of one data folder (`Settings.home`)."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "snapshots"

    # --- the lock -------------------------------------------------------------------------

    def hold(self, *, exclusive: bool = False, wait: bool = True) -> int | None:
        """The store's lock, held until the descriptor returned is closed; None when `wait`
        is False and it is not free. Blocking: off the loop."""
        path = self.folder / "lock"
        _make_folders(self.folder)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            how = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            fcntl.flock(descriptor, how if wait else how | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """The lock, shared, for a snapshot or a restore in a thread."""
        descriptor = self.hold()
        try:
            yield
        finally:
            os.close(descriptor)  # type: ignore[arg-type]

    # --- objects --------------------------------------------------------------------------

    def has_object(self, digest: str) -> bool:
        return self._object_path(digest).exists()

    def put_object(self, digest: str, data: bytes) -> None:
        """Keep `data` as `digest` (its sha256), once."""
        path = self._object_path(digest)
        if not path.exists():
            _write_atomically(path, data)

    def object(self, digest: str) -> bytes:
        data = self._object_path(digest).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:  # a damaged store never restores
            raise OSError(f"the snapshot's copy of it is damaged ({digest[:12]})")
        return data

    def _object_path(self, digest: str) -> Path:
        return self.folder / "objects" / digest[:2] / digest[2:]

    # --- manifests ------------------------------------------------------------------------

    def put_manifest(self, manifest: dict[str, Any]) -> str:
        """Keep a manifest; its id."""
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("ascii")
        digest = hashlib.sha256(text).hexdigest()
        path = self.folder / "manifests" / digest[:2] / digest[2:]
        if not path.exists():
            _write_atomically(path, zlib.compress(text, 1))
        return digest

    def manifest(self, digest: str) -> dict[str, Any]:
        path = self.folder / "manifests" / digest[:2] / digest[2:]
        try:
            loaded: dict[str, Any] = json.loads(zlib.decompress(path.read_bytes()))
        except zlib.error as error:  # a ValueError, as JSON's, for every caller
            raise ValueError(f"the snapshot's manifest is damaged ({digest[:12]})") from error
        return loaded

    def latest(self, roots_key: str) -> str | None:
        """The id of the manifest last taken of these roots, if any."""
        try:
            return (self.folder / "latest" / roots_key).read_text("ascii").strip() or None
        except OSError:
            return None

    def set_latest(self, roots_key: str, manifest_id: str) -> None:
        _write_atomically(self.folder / "latest" / roots_key, manifest_id.encode("ascii"))

    # --- a session's records --------------------------------------------------------------

    def turn_record(self, session_id: str, turn: int) -> dict[str, Any] | None:
        return _read_json(self._session(session_id) / "turns" / f"{turn}.json")

    def put_turn_record(self, session_id: str, turn: int, record: dict[str, Any]) -> None:
        path = self._session(session_id) / "turns" / f"{turn}.json"
        _write_atomically(path, json.dumps(record).encode("ascii"))

    def drop_turn_record(self, session_id: str, turn: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self._session(session_id) / "turns" / f"{turn}.json").unlink()

    def turns(self, session_id: str) -> list[int]:
        """The turns with a record, oldest first."""
        folder = self._session(session_id) / "turns"
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        return sorted(int(name[:-5]) for name in names if name[:-5].isdigit())

    def restores(self, session_id: str) -> list[dict[str, Any]]:
        return _read_json(self._session(session_id) / "restores.json") or []  # type: ignore[return-value]

    def put_restores(self, session_id: str, restores: list[dict[str, Any]]) -> None:
        path = self._session(session_id) / "restores.json"
        _write_atomically(path, json.dumps(restores).encode("ascii"))

    def forget_session(self, session_id: str) -> None:
        """Drop a session's records (its objects stay: other snapshots may share them)."""
        shutil.rmtree(self._session(session_id), ignore_errors=True)

    def _session(self, session_id: str) -> Path:
        # An id is the server's own (`sess_…`); hashed anyway, so no id names another place.
        return self.folder / "sessions" / hashlib.sha256(session_id.encode()).hexdigest()[:32]


def roots_key(roots: tuple[Path, ...]) -> str:
    """A set of roots' name in `latest/`."""
    return hashlib.sha256("\0".join(map(str, roots)).encode("utf-8", "surrogateescape")).hexdigest()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


@contextlib.asynccontextmanager
async def store_in_use(store: SnapshotStore) -> AsyncIterator[None]:
    """The store's lock, shared, for as long as a restore runs on the loop (its question may
    wait on the user); taken off the loop, and released even when the wait is cancelled."""
    taking = asyncio.ensure_future(off_loop(store.hold))
    try:
        descriptor = await asyncio.shield(taking)
    except asyncio.CancelledError:
        taking.add_done_callback(_release_when_taken)
        raise
    try:
        yield
    finally:
        os.close(descriptor)  # type: ignore[arg-type]


def _release_when_taken(taking: asyncio.Future[int | None]) -> None:
    if not taking.cancelled() and taking.exception() is None and taking.result() is not None:
        os.close(taking.result())  # type: ignore[arg-type]


def _make_folders(path: Path) -> None:
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):  # each one 0700 (`makedirs` gives only the last its mode)
        folder.mkdir(mode=0o700, exist_ok=True)


def _write_atomically(path: Path, data: bytes) -> None:
    _make_folders(path.parent)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
