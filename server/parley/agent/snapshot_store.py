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
0700 folders.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any


class SnapshotStore:
    """The snapshot folder of one data folder (`Settings.home`)."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "snapshots"

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
        loaded: dict[str, Any] = json.loads(zlib.decompress(path.read_bytes()))
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


def _write_atomically(path: Path, data: bytes) -> None:
    missing = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    for folder in reversed(missing):  # each one 0700 (`makedirs` gives only the last its mode)
        folder.mkdir(mode=0o700, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
