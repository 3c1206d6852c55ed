"""Sessions read straight from the store, for `parley sessions` and `parley export`: the
list (a table in local time, or JSON), a session named by id, unique id prefix or `last`,
and its transcript (Markdown or JSON, `agent/export.py`)."""

from __future__ import annotations

import json

from parley.display import format_time
from parley.store import Store, StoredSession

ID_PREFIX = "sess_"  # every session id's; a prefix may leave it out


NO_SESSIONS = "No sessions yet."


def sessions_table(store: Store, limit: int = 50, header: bool = True) -> str:
    """One line per session, newest first (local times); `header`: the columns' names first
    (for a person: a script reading `parley sessions | head -1` gets the newest session).
    "" when there is none."""
    rows = store.list_sessions(limit=limit)
    lines = [f"{'session':<26} {'updated':<17} {'model':<28} title"] if header and rows else []
    for session in rows:
        updated = format_time(session.updated_at)
        lines.append(
            f"{session.id:<26} {updated:<17} {session.settings.model:<28} {session.title or ''}"
        )
    return "\n".join(lines)


def sessions_json(store: Store, limit: int = 50) -> str:
    """The newest sessions as a JSON array: id, title, times (as stored: ISO 8601, UTC), the
    workspace, model, turns and usage (a `UsageTotals`, cost included)."""
    listed = [
        {
            "id": session.id,
            "title": session.title,
            "createdAt": session.created_at,
            "updatedAt": session.updated_at,
            "cwd": session.cwd,
            "model": session.settings.model,
            "turns": session.turns,
            "usage": store.usage_totals(session.id).to_wire(),
        }
        for session in store.list_sessions(limit=limit)
    ]
    return json.dumps(listed, indent=2, ensure_ascii=False)


class UnknownSession(LookupError):
    """No session, or more than one, answers to what the user typed; the message says which."""


def find_session(store: Store, wanted: str) -> StoredSession:
    """The session `wanted` names: its id, `last` (the newest), or a prefix of one id only
    (with or without `sess_`). Raises `UnknownSession` saying what matched."""
    if wanted == "last":
        newest = store.list_sessions(limit=1)
        if not newest:
            raise UnknownSession("there are no sessions yet")
        return newest[0]
    exact = store.session(wanted)
    if exact is not None:
        return exact
    prefix = wanted if wanted.startswith(ID_PREFIX) else ID_PREFIX + wanted
    shown = 10
    candidates = store.sessions_with_id_prefix(prefix, limit=shown + 1)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise UnknownSession(f"no session {wanted!r} (see `parley sessions`)")
    lines = [
        f"  {c.id}  {format_time(c.updated_at)}  {c.title or 'Untitled'}"
        for c in candidates[:shown]
    ]
    more = ["  …"] if len(candidates) > shown else []
    raise UnknownSession(
        "\n".join([f"{wanted!r} is the start of several sessions' ids:", *lines, *more])
        + "\n(type more of the id)"
    )
