"""The store's one SQLite connection, used by one thread at a time.

The server uses the store from its event loop and from its pool's threads (a replay read
while the loop sends, an export rendered, the store closed at exit). Python's `sqlite3`
lets a connection made with `check_same_thread=False` be shared, but leaves the rest to its
user: a statement releases the GIL while SQLite works, so a `close()` in another thread
frees the database under it, and the statement then reads the freed handle (a segfault);
and one thread's statements land inside another's open transaction. So every statement is
run and read whole under one lock, a transaction holds it from `BEGIN` to `COMMIT`, and
`close()` waits for it: after it, a statement is a `sqlite3.ProgrammingError`, never a
crash. A statement's rows are read whole under the lock (a long read is paged by its
caller: `Store.iter_messages`), so no cursor outlives it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class Rows:
    """What one statement gave: its rows, read whole, and how many rows it changed."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class GuardedConnection:
    """A connection whose every use holds one lock (see the module's docstring)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._lock = threading.RLock()  # re-entered by the statements of a transaction

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Rows:
        with self._lock:
            cursor = self._connection.execute(sql, parameters)
            try:
                return Rows(cursor.fetchall(), cursor.rowcount)
            finally:
                cursor.close()

    @contextmanager
    def transaction(self) -> Iterator[GuardedConnection]:
        """`BEGIN IMMEDIATE` (the write lock taken now: no upgrade deadlock) to `COMMIT`, or
        `ROLLBACK` on any exception; no other thread's statement runs in between."""
        with self._lock:
            self.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self.execute("ROLLBACK")
                raise
            self.execute("COMMIT")

    def close(self) -> None:
        """Close once no statement runs; a statement after it raises `ProgrammingError`."""
        with self._lock:
            self._connection.close()
