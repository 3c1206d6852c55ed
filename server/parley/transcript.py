"""Sessions read straight from the store, for `parley sessions` and `parley export`: the
list (a table in local time, or JSON), a session named by id, unique id prefix or `last`,
and its transcript (Markdown or JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    ResourceBlock,
    ToolResultMessage,
    UserMessage,
    image_note,
)
from parley.display import format_cost, format_full_time, format_time, tool_input_parts
from parley.store import Store, StoredNotice, StoredSession, encode_message

ID_PREFIX = "sess_"  # every session id's; a prefix may leave it out


def sessions_table(store: Store, limit: int = 50) -> str:
    rows = store.list_sessions(limit=limit)
    if not rows:
        return "No sessions yet."
    lines = [f"{'session':<26} {'updated':<17} {'model':<28} title"]
    for session in rows:
        updated = format_time(session.updated_at)
        lines.append(f"{session.id:<26} {updated:<17} {session.model:<28} {session.title or ''}")
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
            "model": session.model,
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


def export_json(store: Store, session: StoredSession) -> str:
    messages = []
    for message in store.messages(session.id):
        role, body = encode_message(message)
        messages.append({"role": role, **body})
    document: dict[str, Any] = {
        "session": {
            "id": session.id,
            "title": session.title,
            "cwd": session.cwd,
            "model": session.model,
            "toolPolicy": session.tool_policy,
            "createdAt": session.created_at,
            "updatedAt": session.updated_at,
        },
        "usage": store.usage_totals(session.id).to_wire(),
        "messages": messages,
        # What Parley said (why a turn stopped...), each after its first `after` messages.
        "notices": [attrs.asdict(notice) for notice in store.notices(session.id)],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def export_markdown(store: Store, session: StoredSession) -> str:
    out = [f"# {session.title or 'Untitled'}", ""]
    out.append(f"*{session.model} · {session.cwd} · {format_full_time(session.created_at)}*")
    messages = store.messages(session.id)
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}
    notices = store.notices(session.id)
    for position, message in enumerate(messages):
        out += _notice_lines(notice for notice in notices if notice.after == position)
        if isinstance(message, UserMessage):
            out += _user_lines(message)
        elif isinstance(message, AssistantMessage):
            out += _assistant_lines(message, results)
    out += _notice_lines(notice for notice in notices if notice.after >= len(messages))
    usage = store.usage_totals(session.id)
    cost = format_cost(usage.cost)
    out += [
        "",
        "---",
        f"{usage.turns} turns · {usage.usage.input_tokens} tokens in / "
        f"{usage.usage.output_tokens} out · {cost}",
        "",
    ]
    return "\n".join(out)


def _notice_lines(notices: Iterable[StoredNotice]) -> list[str]:
    """Parley's notices, each a quoted line that names its level."""
    return [line for n in notices for line in ("", f"> **{n.level.title()}:** {n.text}")]


def _user_lines(message: UserMessage) -> list[str]:
    out = ["", "## You", ""]
    for block in message.content:
        if isinstance(block, ImageBlock):
            out.append(f"*{image_note(block, 'was attached')}*")
        elif isinstance(block, ResourceBlock):
            out += [f"<details><summary>{block.uri}</summary>", "", "```", block.text]
            out += ["```", "", "</details>"]
        else:
            out.append(block.text)
    return out


def _assistant_lines(message: AssistantMessage, results: dict[str, ToolResultMessage]) -> list[str]:
    """The answer: its thoughts folded, its text, each call with its input and result."""
    out = ["", "## Parley", ""]
    for thought in message.thinking:
        if thought.text:
            quoted = "\n".join(f"> {line}" for line in thought.text.splitlines())
            out += ["<details><summary>Thinking</summary>", "", quoted, "", "</details>", ""]
    if message.text:
        out.append(message.text)
    for call in message.tool_calls:
        result = results.get(call.id)
        status = "failed" if result is None or result.is_error else "done"
        out += ["", f"**Tool `{call.name}`** ({status})", ""]
        for language, text in tool_input_parts(call.name, call.arguments):
            out += [f"```{language}", text, "```"]
        if result is not None:
            out += ["", "```", result.content, "```"]
    return out
