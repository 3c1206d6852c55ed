"""A stored session copied as a new one (ACP `session/fork`): its conversation, the notices
said in it, its compaction summary, its settings, as one transaction.

Not copied, so that the fork is independent and nothing is counted twice: its usage, cost,
turn and round counts (the fork's count from the fork on; the parent's calls stay the
parent's in `_parley/usage`), its checkpoints (the fork's `/undo` undoes the fork's own
turns, never the parent's), its "always allow" approvals (the fork asks again), its lease,
and a retry's cut-off mark. A restore note still waiting for the parent's model waits for
the fork's too: the files were restored in the workspace they share.

Kept apart from store.py (which holds the tables' other queries) for its size.
"""

from __future__ import annotations

from parley.store import Store

# The sessions columns the fork takes as they are; the rest are its own (see above).
_COPIED_COLUMNS = "cwd, settings, restore_note"


def fork_stored(store: Store, parent_id: str, fork_id: str, title: str, now: str) -> bool:
    """Copy the stored session `parent_id` as `fork_id`, titled `title`, created `now`;
    False when there is no such session."""
    with store._transaction() as db:  # the store's one write transaction
        copied = db.execute(
            f"INSERT INTO sessions (id, title, created_at, updated_at, {_COPIED_COLUMNS}) "
            f"SELECT ?, ?, ?, ?, {_COPIED_COLUMNS} FROM sessions WHERE id = ?",
            (fork_id, title, now, now, parent_id),
        ).rowcount
        if not copied:
            return False
        for table, columns in (
            ("messages", "seq, role, body, created_at"),
            ("notices", "place, level, text, created_at"),
            ("compactions", "covers, summary, created_at"),
        ):
            db.execute(
                f"INSERT INTO {table} (session_id, {columns}) "
                f"SELECT ?, {columns} FROM {table} WHERE session_id = ? ORDER BY rowid",
                (fork_id, parent_id),
            )
    return True
