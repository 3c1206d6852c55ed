"""A stored session as a document: Markdown a person reads (the one export format of every
client: `parley export`, `_parley/session/export`, which Emacs and VS Code call) and JSON.

The Markdown nests what the model and the user wrote under the turn's own headings: a
session is `#`, each speaker `##`, so every heading inside a message is moved down two levels
(`#` becomes `###`, at most `######`), code blocks left alone. A reader's outline (and a
Markdown file's table of contents) then shows the turns, with each answer's sections under it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import attrs

from parley.agent.notices import COMMAND, COMMAND_REPLY
from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    ResourceBlock,
    TextBlock,
    ToolResultMessage,
    UserMessage,
    image_note,
)
from parley.display import format_cost, format_full_time, tool_input_parts
from parley.store import Store, StoredNotice, StoredSession, encode_message

# An ATX heading (up to three spaces, 1-6 `#`, then a space or the line's end), and a fence.
HEADING = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
NESTED_BY = 2  # levels below a speaker's `##`


def nested_headings(text: str) -> str:
    """`text` with each Markdown heading outside code fences moved down NESTED_BY levels."""
    lines = text.split("\n")
    fence: str | None = None
    for index, line in enumerate(lines):
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        heading = HEADING.match(line)
        if heading:
            level = min(6, len(heading.group(2)) + NESTED_BY)
            lines[index] = heading.group(1) + "#" * level + line[heading.end() :]
    return "\n".join(lines)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


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
            "model": session.settings.model,
            "toolPolicy": session.settings.tool_policy,
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
    out.append(
        f"*{session.settings.model} · {session.cwd} · {format_full_time(session.created_at)}*"
    )
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
        f"{plural(usage.turns, 'turn')} · {usage.usage.input_tokens} tokens in / "
        f"{usage.usage.output_tokens} out · {cost}",
        "",
    ]
    return "\n".join(out)


def _notice_lines(notices: Iterable[StoredNotice]) -> list[str]:
    """Parley's notices, each a quoted line that names its level; a slash command turn as
    the user's command and Parley's answer."""
    out: list[str] = []
    for notice in notices:
        if notice.level == COMMAND:
            out += ["", "## You", "", f"`{notice.text}`"]
        elif notice.level == COMMAND_REPLY:
            out += ["", "## Parley", "", nested_headings(notice.text)]
        else:
            out += ["", f"> **{notice.level.title()}:** {notice.text}"]
    return out


def _user_lines(message: UserMessage) -> list[str]:
    out = ["", "## You", ""]
    for block in message.content:
        if isinstance(block, ImageBlock):
            out.append(f"*{image_note(block, 'was attached')}*")
        elif isinstance(block, TextBlock) and block.for_model:
            continue  # Parley's note to the model (a restore): not the user's words
        elif isinstance(block, ResourceBlock):
            out += [f"<details><summary>{block.uri}</summary>", "", "```", block.text]
            out += ["```", "", "</details>"]
        else:
            out.append(nested_headings(block.text))
    return out


def _assistant_lines(message: AssistantMessage, results: dict[str, ToolResultMessage]) -> list[str]:
    """The answer: its thoughts folded, its text, each call with its input and result."""
    out = ["", "## Parley", ""]
    for thought in message.thinking:
        if thought.text:
            quoted = "\n".join(f"> {line}" for line in thought.text.splitlines())
            out += ["<details><summary>Thinking</summary>", "", quoted, "", "</details>", ""]
    if message.text:
        out.append(nested_headings(message.text))
    for call in message.tool_calls:
        result = results.get(call.id)
        status = "failed" if result is None or result.is_error else "done"
        out += ["", f"**Tool `{call.name}`** ({status})", ""]
        for language, text in tool_input_parts(call.name, call.arguments):
            out += [f"```{language}", text, "```"]
        if result is not None:
            out += ["", "```", result.content, "```"]
    return out
