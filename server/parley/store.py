"""Sessions in SQLite: settings, the ordered conversation, and every counted usage.

Each completed step (a prompt, an assistant message, a tool result, a counted call) is
committed as it completes, so a killed server loses at most the step in flight. WAL and a
busy timeout let two servers (two editors) share one database. Nothing secret is written:
the store never sees an API key.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import attrs

from parley.core.conversation import Message
from parley.core.session_settings import SessionSettings, from_stored, stored_form
from parley.core.usage import CostBreakdown, Usage, UsageTotals
from parley.store_checkpoint import Checkpointer
from parley.store_connection import GuardedConnection
from parley.store_messages import decode_message, encode_message, load_body
from parley.store_schema import MIGRATIONS

DATABASE_NAME = "parley.db"
BUSY_TIMEOUT_MS = 10_000


# Above any message's seq: `upto` when it is not given (SQLite's largest integer).
_LAST_SEQ = 2**63 - 1
# How many stored messages one statement reads (`Store.iter_messages`).
_MESSAGES_PAGE = 512


class StoreUnavailable(Exception):
    """The data folder can't hold the database (missing and uncreatable, read-only ...)."""


class ConversationRewritten(Exception):
    """A session's last turn was dropped while its messages were read (`iter_messages`)."""


class SessionGone(Exception):
    """The session is not in the store (never was, or another window deleted it)."""


@attrs.frozen
class Lease:
    """Who runs a turn in a session (see `Store.take_lease`)."""

    holder: str
    pid: int
    expires_at: float


class SessionBusy(Exception):
    """Another server runs a turn in the session."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(f"held by {lease.holder} (pid {lease.pid})")
        self.lease = lease


@attrs.frozen
class Checkpoint:
    """A file as it was before a turn first wrote it (`content` None: it did not exist)."""

    turn: int
    path: str  # absolute
    root: str  # the workspace the turn ran in
    content: bytes | None
    mode: int | None
    written: str | None  # sha256 hex of what Parley last wrote; "" absent; None unknown


@attrs.frozen
class StoredNotice:
    """A notice kept with a session: said after its first `after` messages."""

    after: int
    level: str
    text: str


@attrs.frozen
class StoredSession:
    id: str
    cwd: str
    title: str | None
    settings: SessionSettings
    approvals: dict[str, list[str]]  # workspace root (resolved) → the tools always allowed there
    turns: int
    rounds: int
    created_at: str
    updated_at: str


class Store:
    def __init__(self, path: Path) -> None:
        """Open (create, migrate) the database; `StoreUnavailable` says why it can't be."""
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit: every statement is its own transaction unless `_transaction` says so.
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as error:
            raise StoreUnavailable(_unusable(path.parent, error)) from error
        connection.row_factory = sqlite3.Row
        # Text another program (or an old server) wrote badly is shown mended, never fatal.
        connection.text_factory = lambda data: data.decode("utf-8", "replace")
        # Used from the loop and the pool's threads: one thread at a time (store_connection.py).
        self._db = GuardedConnection(connection)
        try:
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")  # durable at each checkpoint; fast
            # Checkpoints (the log written into the database, and both synced: a second on a
            # disk under load) are the checkpointer's, in its thread; never a commit's, which
            # runs on the server's event loop.
            self._db.execute("PRAGMA wal_autocheckpoint = 0")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.Error as error:
            self._db.close()
            raise StoreUnavailable(_unusable(path.parent, error)) from error
        self._checkpointer = Checkpointer(path, BUSY_TIMEOUT_MS)

    @classmethod
    def open_in(cls, home: Path) -> Store:
        return cls(home / DATABASE_NAME)

    def close(self) -> None:
        """Close, writing the log into the database (a checkpoint: call it off the loop)."""
        self._checkpointer.stop()
        self._db.close()

    def _transaction(self) -> AbstractContextManager[GuardedConnection]:
        return self._db.transaction()

    def _migrate(self) -> None:
        with self._transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    # --- sessions -----------------------------------------------------------------------

    def save_session(self, session: StoredSession) -> None:
        """Create the session, or update its settings and title. The approvals given replace
        those of the same workspaces; other workspaces' stay."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT approvals FROM sessions WHERE id = ?", (session.id,)
            ).fetchone()
            approvals = {**(json.loads(row["approvals"]) if row else {}), **session.approvals}
            db.execute(
                """
                INSERT INTO sessions (id, cwd, title, settings, approvals, created_at,
                                      updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    title = COALESCE(excluded.title, title), settings = excluded.settings,
                    approvals = excluded.approvals, updated_at = excluded.updated_at
                """,
                (
                    session.id,
                    session.cwd,
                    session.title,
                    json.dumps(stored_form(session.settings)),
                    json.dumps({cwd: sorted(names) for cwd, names in approvals.items() if names}),
                    session.created_at,
                    session.updated_at,
                ),
            )

    def session(self, session_id: str) -> StoredSession | None:
        row = self._db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return _stored_session(row) if row else None

    def list_sessions(
        self, cwd: str | None = None, offset: int = 0, limit: int = 50
    ) -> list[StoredSession]:
        """Newest first."""
        where, args = ("WHERE cwd = ?", [cwd]) if cwd else ("", [])
        rows = self._db.execute(
            f"SELECT * FROM sessions {where} ORDER BY updated_at DESC, id LIMIT ? OFFSET ?",
            (*args, limit, offset),
        ).fetchall()
        return [_stored_session(row) for row in rows]

    def session_costs(self, session_ids: Sequence[str]) -> dict[str, float]:
        """What each of the sessions cost so far (USD), for a listing; a session with no
        priced call is left out."""
        if not session_ids:
            return {}
        marks = ", ".join("?" * len(session_ids))
        rows = self._db.execute(
            f"SELECT session_id, SUM(cost) FROM usage WHERE session_id IN ({marks}) "
            "GROUP BY session_id",
            tuple(session_ids),
        ).fetchall()
        return {row[0]: row[1] for row in rows if row[1] is not None}

    def sessions_with_id_prefix(self, prefix: str, limit: int = 10) -> list[StoredSession]:
        """The sessions whose id starts with `prefix`, newest first (`parley export 1a2b`)."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db.execute(
            "SELECT * FROM sessions WHERE id LIKE ? ESCAPE '\\' "
            "ORDER BY updated_at DESC, id LIMIT ?",
            (pattern, limit),
        ).fetchall()
        return [_stored_session(row) for row in rows]

    def delete_session(self, session_id: str, holder: str) -> bool:
        """Delete the session unless another server holds its lease (`SessionBusy`)."""
        with self._transaction() as db:
            busy = self._live_lease_of_another(session_id, holder)
            if busy is not None:
                raise SessionBusy(busy)
            cursor = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return cursor.rowcount > 0

    # --- leases: one turn at a time per session, across servers -------------------------

    def take_lease(self, session_id: str, holder: str, seconds: float) -> None:
        """Hold the session for a turn of `holder` (this process). Raises `SessionBusy` when
        another live server holds it, `SessionGone` when the session is not stored. A lease
        whose holder died, or that was not renewed in time, is taken over."""
        with self._transaction() as db:  # BEGIN IMMEDIATE: the check and the take are one
            if db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise SessionGone(session_id)
            busy = self._live_lease_of_another(session_id, holder)
            if busy is not None:
                raise SessionBusy(busy)
            db.execute(
                """
                INSERT INTO leases (session_id, holder, pid, expires_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (session_id) DO UPDATE SET
                    holder = excluded.holder, pid = excluded.pid, expires_at = excluded.expires_at
                """,
                (session_id, holder, os.getpid(), time.time() + seconds),
            )

    def renew_lease(self, session_id: str, holder: str, seconds: float) -> None:
        self._db.execute(
            "UPDATE leases SET expires_at = ? WHERE session_id = ? AND holder = ?",
            (time.time() + seconds, session_id, holder),
        )

    def release_lease(self, session_id: str, holder: str) -> None:
        self._db.execute(
            "DELETE FROM leases WHERE session_id = ? AND holder = ?", (session_id, holder)
        )

    def _live_lease_of_another(self, session_id: str, holder: str) -> Lease | None:
        row = self._db.execute(
            "SELECT holder, pid, expires_at FROM leases WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None or row["holder"] == holder:
            return None
        lease = Lease(row["holder"], row["pid"], row["expires_at"])
        return lease if lease.expires_at > time.time() and _alive(lease.pid) else None

    def count_turn(self, session_id: str, updated_at: str) -> None:
        self._db.execute(
            "UPDATE sessions SET turns = turns + 1, updated_at = ? WHERE id = ?",
            (updated_at, session_id),
        )

    def count_round(self, session_id: str) -> None:
        self._db.execute("UPDATE sessions SET rounds = rounds + 1 WHERE id = ?", (session_id,))

    # --- the conversation ---------------------------------------------------------------

    def append_message(self, session_id: str, message: Message, created_at: str) -> None:
        role, body = encode_message(message)
        with self._transaction() as db:
            db.execute(
                """
                INSERT INTO messages (session_id, seq, role, body, created_at)
                VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?),
                        ?, ?, ?)
                """,
                (session_id, session_id, role, json.dumps(body), created_at),
            )
            db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (created_at, session_id))

    def messages(self, session_id: str, after: int = 0, upto: int | None = None) -> list[Message]:
        """The conversation in order; `after`: skip the first so many messages; `upto`: stop
        after the first so many."""
        return list(self.iter_messages(session_id, after, upto))

    def iter_messages(
        self, session_id: str, after: int = 0, upto: int | None = None
    ) -> Iterator[Message]:
        """`messages`, decoded one at a time, read a page at a time: a replay streams them,
        never holding the conversation whole. `ConversationRewritten` when its last turn is
        dropped while it is read (a retry, in another window): a page read after it would
        follow those before it with another conversation's messages."""
        # The seqs of a session's messages are 1, 2, 3…: the nth message has seq n.
        last = _LAST_SEQ if upto is None else upto
        rewrites = self.rewrites(session_id)
        while after < last:
            rows = self._db.execute(
                "SELECT seq, role, body FROM messages WHERE session_id = ? AND seq > ? "
                "AND seq <= ? ORDER BY seq LIMIT ?",
                (session_id, after, last, _MESSAGES_PAGE),
            ).fetchall()
            if self.rewrites(session_id) != rewrites:  # (a count that only grows)
                raise ConversationRewritten(
                    f"The session {session_id} was changed while it was read (its last turn "
                    "was replaced, in another window): load it again."
                )
            for seq, role, body in rows:
                after = seq
                yield decode_message(role, load_body(body))
            if len(rows) < _MESSAGES_PAGE:
                return

    def message_count(self, session_id: str) -> int:
        row = self._db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        return int(row[0])

    def last_exchange(self, session_id: str, upto: int) -> list[Message]:
        """The first `upto` messages' tail from the last prompt or assistant message on (the
        results that follow it): what `agent/replay.unanswered_calls` looks at."""
        row = self._db.execute(
            "SELECT seq FROM messages WHERE session_id = ? AND seq <= ? AND role != 'tool' "
            "ORDER BY seq DESC LIMIT 1",
            (session_id, upto),
        ).fetchone()
        return self.messages(session_id, after=0 if row is None else row[0] - 1, upto=upto)

    def add_notice(
        self, session_id: str, after: int, level: str, text: str, created_at: str
    ) -> None:
        self._db.execute(
            "INSERT INTO notices (session_id, place, level, text, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (session_id, after, level, text, created_at),
        )

    def notices(self, session_id: str, after: int = 0) -> list[StoredNotice]:
        """The session's notices said after its first `after` messages or later, in order
        (from 0: all of them). Few: read at once."""
        rows = self._db.execute(
            "SELECT place, level, text FROM notices WHERE session_id = ? AND place >= ? "
            "ORDER BY place, id",
            (session_id, after),
        ).fetchall()
        return [StoredNotice(row["place"], row["level"], row["text"]) for row in rows]

    def add_compaction(self, session_id: str, covers: int, summary: str, created_at: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO compactions (session_id, covers, summary, created_at) "
                "VALUES (?, ?, ?, ?)",
                (session_id, covers, summary, created_at),
            )

    def compaction(self, session_id: str) -> tuple[int, str] | None:
        """The latest compaction: (the messages it covers, its summary), or None."""
        row = self._db.execute(
            "SELECT covers, summary FROM compactions WHERE session_id = ? "
            "ORDER BY covers DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        return None if row is None else (row["covers"], row["summary"])

    # --- context windows learned from providers -----------------------------------------

    def learn_window(
        self, base_url: str, model: str, tokens: int, source: str, learned_at: str
    ) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO learned_windows (base_url, model, tokens, source, learned_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (base_url, model, tokens, source, learned_at),
        )

    def learned_window(self, base_url: str, model: str) -> int | None:
        """The window learned for the model at that base URL, in tokens, or None."""
        row = self._db.execute(
            "SELECT tokens FROM learned_windows WHERE base_url = ? AND model = ?",
            (base_url, model),
        ).fetchone()
        return None if row is None else row["tokens"]

    # --- "allow always" for commands, per workspace -------------------------------------

    def add_command_rule(self, workspace: str, prefix: str, created_at: str) -> None:
        """Always allow commands that start with `prefix` in `workspace` (once is enough)."""
        self._db.execute(
            "INSERT OR IGNORE INTO command_rules (workspace, prefix, created_at) VALUES (?, ?, ?)",
            (workspace, prefix, created_at),
        )

    def command_rules(self, workspace: str) -> frozenset[str]:
        """The command prefixes always allowed in `workspace`."""
        rows = self._db.execute(
            "SELECT prefix FROM command_rules WHERE workspace = ?", (workspace,)
        ).fetchall()
        return frozenset(row["prefix"] for row in rows)

    # --- checkpoints: what a turn's edits overwrote -----------------------------------------

    def keep_checkpoint(
        self,
        session_id: str,
        turn: int,
        root: str,
        path: str,
        content: bytes | None,
        mode: int | None,
        created_at: str,
    ) -> bool:
        """Keep a file's bytes before `turn` writes it; only the turn's first write of a
        path is kept (False: the turn had kept that path already)."""
        cursor = self._db.execute(
            """
            INSERT OR IGNORE INTO checkpoints
                (session_id, turn, path, root, content, mode, created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            (session_id, turn, path, root, content, mode, created_at),
        )
        return cursor.rowcount > 0

    def mark_written(self, session_id: str, turn: int, path: str, written: str) -> None:
        """How the turn left the file (see `Checkpoint.written`)."""
        self._db.execute(
            "UPDATE checkpoints SET written = ? WHERE session_id = ? AND turn = ? AND path = ?",
            (written, session_id, turn, path),
        )

    def checkpoints(self, session_id: str, from_turn: int) -> list[Checkpoint]:
        """The checkpoints of `from_turn` and every later turn, newest turn first."""
        rows = self._db.execute(
            """
            SELECT turn, path, root, content, mode, written
            FROM checkpoints WHERE session_id = ? AND turn >= ? ORDER BY turn DESC, path
            """,
            (session_id, from_turn),
        ).fetchall()
        return [
            Checkpoint(
                row["turn"], row["path"], row["root"], row["content"], row["mode"], row["written"]
            )
            for row in rows
        ]

    def last_checkpointed_turn(self, session_id: str) -> int | None:
        row = self._db.execute(
            "SELECT MAX(turn) FROM checkpoints WHERE session_id = ?", (session_id,)
        ).fetchone()
        return row[0]

    def drop_checkpoints(self, session_id: str, from_turn: int) -> None:
        """Forget the checkpoints of `from_turn` on (their turns are undone)."""
        self._db.execute(
            "DELETE FROM checkpoints WHERE session_id = ? AND turn >= ?", (session_id, from_turn)
        )

    def add_restore_note(self, session_id: str, note: str) -> None:
        """A note for the model's next prompt (after any not yet given)."""
        self._db.execute(
            """
            UPDATE sessions SET restore_note =
                CASE WHEN restore_note IS NULL THEN ? ELSE restore_note || char(10) || ? END
            WHERE id = ?
            """,
            (note, note, session_id),
        )

    def mark_cut_off(self, session_id: str, turn_start: int) -> None:
        """The session's last turn, starting after message `turn_start`, was cut off (Stop,
        an error): a retry may replace it until anything else changes the session."""
        self._db.execute(
            "UPDATE sessions SET cut_off_at = ? WHERE id = ?", (turn_start, session_id)
        )

    def take_cut_off(self, session_id: str) -> int | None:
        """Where the cut-off last turn starts, once (cleared: whatever comes next, a retry
        or not, makes it no longer the last thing that happened)."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT cut_off_at FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None or row["cut_off_at"] is None:
                return None
            db.execute("UPDATE sessions SET cut_off_at = NULL WHERE id = ?", (session_id,))
        return int(row["cut_off_at"])

    def drop_turn(self, session_id: str, turn_start: int) -> Message | None:
        """Remove the session's last turn, the messages after the first `turn_start`, with
        its notices (a command said after it stays, moved before its place) and any
        compaction made in it; its usage stays (it was billed). Returns its prompt."""
        prompt = self.messages(session_id, after=turn_start, upto=turn_start + 1)
        with self._transaction() as db:
            db.execute(
                "DELETE FROM messages WHERE session_id = ? AND seq > ?", (session_id, turn_start)
            )
            db.execute(
                "DELETE FROM notices WHERE session_id = ? AND place > ? "
                "AND level NOT IN ('command', 'command_reply', 'command_reply_warning')",
                (session_id, turn_start),
            )
            db.execute(
                "UPDATE notices SET place = ? WHERE session_id = ? AND place > ?",
                (turn_start, session_id, turn_start),
            )
            db.execute(
                "DELETE FROM compactions WHERE session_id = ? AND covers > ?",
                (session_id, turn_start),
            )
            db.execute(
                "UPDATE sessions SET turns = MAX(turns - 1, 0), rewrites = rewrites + 1 "
                "WHERE id = ?",
                (session_id,),
            )
        return prompt[0] if prompt else None

    def rewrites(self, session_id: str) -> int:
        """How many of the session's turns were replaced (`drop_turn`), 0 for none."""
        row = self._db.execute(
            "SELECT rewrites FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        return 0 if row is None else int(row["rewrites"])

    def take_restore_note(self, session_id: str) -> str | None:
        """The notes for the model not yet given, once: they are cleared."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT restore_note FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None or row["restore_note"] is None:
                return None
            db.execute("UPDATE sessions SET restore_note = NULL WHERE id = ?", (session_id,))
        return row["restore_note"]

    # --- usage --------------------------------------------------------------------------

    def record_usage(
        self,
        session_id: str,
        call: str,
        model: str,
        usage: Usage,
        cost: float | None,
        created_at: str,
        breakdown: CostBreakdown | None = None,
    ) -> None:
        """One counted call; `breakdown` splits its `cost` (None with an unknown price)."""
        parts = (
            (None,) * 4
            if breakdown is None
            else (
                breakdown.uncached_input,
                breakdown.cache_reads,
                breakdown.cache_writes,
                breakdown.output,
            )
        )
        self._db.execute(
            """
            INSERT INTO usage (session_id, call, model, input_tokens, output_tokens,
                               thought_tokens, cached_read_tokens, cached_write_tokens,
                               cost, created_at, cost_uncached_input, cost_cache_reads,
                               cost_cache_writes, cost_output, thoughts_uncounted)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            (
                session_id,
                call,
                model,
                usage.input_tokens,
                usage.output_tokens,
                usage.thought_tokens or 0,
                usage.cached_read_tokens,
                usage.cached_write_tokens,
                cost,
                created_at,
                *parts,
                usage.thought_tokens is None,
            ),
        )

    def spent_since(self, since: str) -> float:
        """What every session's counted calls cost from `since` (an ISO time in UTC, as
        `created_at` holds it) on; calls of unknown price count nothing."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(cost), 0) FROM usage WHERE created_at >= ?", (since,)
        ).fetchone()
        return float(row[0])

    def usage_totals(self, session_id: str | None = None) -> UsageTotals:
        """Totals of one session, or of every session in the store."""
        where, args = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        row = self._db.execute(
            f"""
            SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                   COALESCE(SUM(thought_tokens), 0), COALESCE(SUM(cached_read_tokens), 0),
                   COALESCE(SUM(cached_write_tokens), 0), SUM(cost), COUNT(*) - COUNT(cost),
                   COALESCE(SUM(cost_uncached_input), 0), COALESCE(SUM(cost_cache_reads), 0),
                   COALESCE(SUM(cost_cache_writes), 0), COALESCE(SUM(cost_output), 0),
                   COALESCE(MAX(thoughts_uncounted), 0), COALESCE(SUM(call = 'estimate'), 0)
            FROM usage {where}
            """,
            args,
        ).fetchone()
        counts = self._db.execute(
            f"SELECT COALESCE(SUM(turns), 0), COALESCE(SUM(rounds), 0) FROM sessions "
            f"{where.replace('session_id', 'id')}",
            args,
        ).fetchone()
        return UsageTotals(
            usage=Usage(row[0], row[1], None if row[11] else row[2], row[3], row[4]),
            cost=row[5],
            cost_complete=row[6] == 0,
            turns=counts[0],
            rounds=counts[1],
            cost_breakdown=None if row[5] is None else CostBreakdown(*row[7:11]),
            estimated_calls=row[12],
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def _unusable(home: Path, error: Exception) -> str:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return f"the data folder {home} (PARLEY_HOME) can't be used: {reason}"


def _stored_session(row: sqlite3.Row) -> StoredSession:
    return StoredSession(
        id=row["id"],
        cwd=row["cwd"],
        title=row["title"],
        settings=from_stored(_json_object(row["settings"])),
        approvals=json.loads(row["approvals"]),
        turns=row["turns"],
        rounds=row["rounds"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _json_object(text: str) -> dict[str, Any]:
    """A stored JSON object; anything else (written by another program) as none."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
