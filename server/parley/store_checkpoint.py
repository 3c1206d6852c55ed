"""The store's checkpoints, off the event loop: the write-ahead log written into the database.

A checkpoint copies what the log holds into the database and syncs both files: on a disk
under load a sync can take a second. SQLite runs one inside whichever commit finds the log
past its size, and the server commits on its event loop; so the store's connection has them
off (`PRAGMA wal_autocheckpoint = 0`) and a thread of its own runs them instead.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

# How often the checkpointer looks whether the log was written since its last checkpoint.
CHECKPOINT_SECONDS = 1.0

logger = logging.getLogger(__name__)


class Checkpointer:
    """Writes the write-ahead log into the database, in a thread of its own with a
    connection of its own, about once a second while the log is being written (SQLite's
    automatic checkpoint, off on the store's connection, would run inside a commit, on the
    event loop). A passive checkpoint: writers and readers never wait for it."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._log = Path(f"{path}-wal")
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        db: sqlite3.Connection | None = None
        checkpointed = _written_at(self._log)
        try:
            while not self._stopping.wait(CHECKPOINT_SECONDS):
                written = _written_at(self._log)
                if written == checkpointed:
                    continue
                if db is None:
                    db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                    db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                checkpointed = written
        except sqlite3.Error as error:  # the store's own connection checkpoints at its close
            logger.warning("Stopped checkpointing %s: %s", self._path, error)
        finally:
            if db is not None:
                db.close()


def _written_at(path: Path) -> tuple[int, int] | None:
    """When the file was last written, and its size (None: there is none)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size
