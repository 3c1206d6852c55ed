"""Sessions read straight from the store, for `parley sessions` and `parley export`."""

from __future__ import annotations

import json
from typing import Any

from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    ResourceBlock,
    ToolResultMessage,
    UserMessage,
    image_note,
)
from parley.store import Store, StoredSession, encode_message


def sessions_table(store: Store, limit: int = 50) -> str:
    rows = store.list_sessions(limit=limit)
    if not rows:
        return "No sessions yet."
    lines = [f"{'session':<26} {'updated':<20} {'model':<28} title"]
    for session in rows:
        updated = session.updated_at[:19].replace("T", " ")
        lines.append(f"{session.id:<26} {updated:<20} {session.model:<28} {session.title or ''}")
    return "\n".join(lines)


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
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def export_markdown(store: Store, session: StoredSession) -> str:
    out = [f"# {session.title or 'Untitled'}", ""]
    out.append(f"*{session.model} · {session.cwd} · {session.created_at[:19]}*")
    messages = store.messages(session.id)
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}
    for message in messages:
        if isinstance(message, UserMessage):
            out += ["", "## You", ""]
            for block in message.content:
                if isinstance(block, ImageBlock):
                    out.append(f"*{image_note(block, 'was attached')}*")
                elif isinstance(block, ResourceBlock):
                    out += [f"<details><summary>{block.uri}</summary>", "", "```", block.text]
                    out += ["```", "", "</details>"]
                else:
                    out.append(block.text)
        elif isinstance(message, AssistantMessage):
            out += ["", "## Parley", ""]
            for thought in message.thinking:
                if thought.text:
                    quoted = "\n".join(f"> {line}" for line in thought.text.splitlines())
                    out += [
                        "<details><summary>Thinking</summary>",
                        "",
                        quoted,
                        "",
                        "</details>",
                        "",
                    ]
            if message.text:
                out.append(message.text)
            for call in message.tool_calls:
                result = results.get(call.id)
                status = "failed" if result is None or result.is_error else "done"
                out += ["", f"**Tool `{call.name}`** ({status})", "", "```json"]
                out += [json.dumps(call.arguments, indent=2, ensure_ascii=False), "```"]
                if result is not None:
                    out += ["", "```", result.content, "```"]
    usage = store.usage_totals(session.id)
    cost = f"${usage.cost:.4f}" if usage.cost is not None else "cost unknown"
    out += [
        "",
        "---",
        f"{usage.turns} turns · {usage.usage.input_tokens} tokens in / "
        f"{usage.usage.output_tokens} out · {cost}",
        "",
    ]
    return "\n".join(out)
