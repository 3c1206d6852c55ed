"""A stored session as a document: Markdown a person reads (the one export format of every
client: `parley export`, `_parley/session/export`, which Emacs and VS Code call) and JSON.

The Markdown nests what the model and the user wrote under the turn's own headings: a
session is `#`, each speaker `##` (one `## Parley` per turn, however many model rounds its
tool calls took), so every heading inside a message is moved down two levels (`#` becomes
`###`, at most `######`), code blocks left alone. A reader's outline (and a Markdown file's
table of contents) then shows the turns, with each answer's sections under it. An edit is
shown as its diff (numbered from the line the edit was shown at), not as its arguments.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any

import attrs

from parley.agent.notices import COMMAND, COMMAND_REPLY, COMMAND_REPLY_WARNING
from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    ResourceBlock,
    TextBlock,
    ToolResultMessage,
    UserMessage,
    image_note,
)
from parley.display import fence_for, format_cost, format_full_time, tool_input_parts
from parley.store import Store, StoredNotice, StoredSession
from parley.store_messages import encode_message

# An ATX heading (up to three spaces, 1-6 `#`, then a space or the line's end), and a fence.
HEADING = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
NESTED_BY = 2  # levels below a speaker's `##`
PARLEY_HEADING = "## Parley"
EDIT_TOOL = "edit_file"  # its `old_text` and `new_text` are shown as a diff
HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@$")


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
    answering = False  # the document ends in the answer of a turn (under `## Parley`)
    for position, message in enumerate(messages):
        said = _notice_lines(notice for notice in notices if notice.after == position)
        out += said
        if isinstance(message, UserMessage):
            out += _user_lines(message)
        elif isinstance(message, AssistantMessage):
            # A turn's later rounds continue its answer, under the turn's one heading.
            out += _assistant_lines(message, results, heading=bool(said) or not answering)
        answering = isinstance(message, AssistantMessage | ToolResultMessage) and (
            answering or isinstance(message, AssistantMessage)
        )
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
        elif notice.level in (COMMAND_REPLY, COMMAND_REPLY_WARNING):
            out += ["", PARLEY_HEADING, "", nested_headings(notice.text)]
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


def edit_diff(arguments: dict[str, Any], first_changed_line: int | None) -> str | None:
    """An edit's `old_text` → `new_text` as a unified diff, numbered in the file when the
    line of its first change is known (how the call was shown); None when its arguments
    are not an edit's."""
    old, new, path = (arguments.get(key) for key in ("old_text", "new_text", "path"))
    if not (isinstance(old, str) and isinstance(new, str)):
        return None
    if old.endswith("\n") and new.endswith("\n"):  # both end a line: no empty line after
        old, new = old[:-1], new[:-1]
    old_lines, new_lines = old.split("\n"), new.split("\n")
    first = next(
        (i for i, pair in enumerate(zip(old_lines, new_lines, strict=False)) if len(set(pair)) > 1),
        min(len(old_lines), len(new_lines)),
    )
    offset = first_changed_line - 1 - first if first_changed_line else None
    name = path if isinstance(path, str) else "?"
    lines = []
    for line in difflib.unified_diff(old_lines, new_lines, f"a/{name}", f"b/{name}", lineterm=""):
        hunk = HUNK.match(line)
        if hunk and offset is None:
            line = "@@"
        elif hunk and offset is not None:
            old_start, old_count, new_start, new_count = hunk.groups()
            line = (
                f"@@ -{int(old_start) + offset}{old_count or ''} "
                f"+{int(new_start) + offset}{new_count or ''} @@"
            )
        lines.append(line)
    return "\n".join(lines)


def _first_changed_line(result: ToolResultMessage | None) -> int | None:
    """The line an edit was shown at (its location when it was announced), if stored."""
    shown = result.shown if result is not None else None
    locations = shown.get("locations") if isinstance(shown, dict) else None
    where = locations[0] if isinstance(locations, list) and locations else None
    line = where.get("line") if isinstance(where, dict) else None
    return line if type(line) is int and line > 0 else None


def _call_input_lines(name: str, arguments: Any, result: ToolResultMessage | None) -> list[str]:
    """A call's input as fenced blocks: an edit's diff, else its code and other arguments."""
    diff = (
        edit_diff(arguments, _first_changed_line(result))
        if name == EDIT_TOOL and isinstance(arguments, dict)
        else None
    )
    if diff is not None:
        return [f"{fence_for(diff)}diff", diff, fence_for(diff)]
    out: list[str] = []
    for language, text in tool_input_parts(name, arguments):
        out += [f"```{language}", text, "```"]
    return out


def _assistant_lines(
    message: AssistantMessage, results: dict[str, ToolResultMessage], heading: bool = True
) -> list[str]:
    """The answer: its thoughts folded, its text, each call with its input and result
    (under the turn's heading, or continuing it: `heading` False)."""
    out = ["", PARLEY_HEADING, ""] if heading else [""]
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
        out += _call_input_lines(call.name, call.arguments, result)
        if result is not None:
            out += ["", "```", result.content, "```"]
    return out
