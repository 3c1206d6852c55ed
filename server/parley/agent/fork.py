"""ACP `session/fork` (the session-fork RFD): a new session with the parent's history,
model, mode and settings, in the roots the request names, independent from then on (what
is and is not copied: store_fork.py). It answers like `session/new` and replays nothing:
the client shows the parent's conversation already.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from parley.agent.session import Session, new_id, now_iso
from parley.agent.sessions import Sessions, UnknownSession
from parley.core.session_settings import SessionOptions
from parley.store_fork import fork_stored

# How a fork's title says what it is, after its parent's (a session picker shows it so).
FORK_MARK = " (fork)"


def fork_title(parent: str | None) -> str:
    return f"{parent or 'Untitled'}{FORK_MARK}"


async def fork_session(
    sessions: Sessions, parent_id: str, cwd: Path, additional: Sequence[Path] = ()
) -> Session:
    """Fork `parent_id` into a new session open in `cwd` with the `additional` roots. A
    stored parent is copied under its lease (no turn of it runs meanwhile, here or in
    another window: `SessionInUse`); one never prompted has only its settings to give."""
    if sessions.is_unprompted(parent_id):
        return _fork_unstored(sessions, sessions.get(parent_id), cwd, additional)
    fork_id = new_id("sess")
    async with sessions.leased(parent_id, "fork"):
        parent = sessions.store.session(parent_id)
        title = fork_title(parent.title if parent is not None else None)
        if not fork_stored(sessions.store, parent_id, fork_id, title, now_iso()):
            raise UnknownSession(f"Unknown session {parent_id!r}")
    return await sessions.load(fork_id, cwd, replay=False, additional=additional)


def _fork_unstored(
    sessions: Sessions, parent: Session, cwd: Path, additional: Sequence[Path]
) -> Session:
    """A fork of a session that had no prompt: a new session with its settings (stored, as
    it, from its first prompt on). Its approvals are not taken: the fork asks again."""
    fork = sessions.new(cwd, SessionOptions(attrs.evolve(parent.settings)), additional)
    return fork  # titled by its first prompt, as the parent would have been
