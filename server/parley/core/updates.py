"""The `update` objects of `session/update` notifications, as ACP v1 spells them: every one the
server sends is built here (the agent's, and the tools' own: a command's output, a plan), and
protocol/v2.py reshapes them for a client that negotiated the v2 draft.

Plain dicts, built directly: these are on the per-token path.
"""

from __future__ import annotations

from typing import Any

from parley.core.call_view import CallView, Diff


def message_chunk(message_id: str, text: str, replaces: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
        "messageId": message_id,
    }
    if replaces is not None:
        update["_meta"] = {"parley": {"replaces": replaces}}
    return update


def notice_chunk(message_id: str, level: str, text: str) -> dict[str, Any]:
    """Parley speaking about the turn (why it stopped, why a prompt or command was refused),
    not the model's answer: a generic client shows it as a message, Parley's as a notice at
    its `level` (`info`, `warning`, `error`; docs/protocol.md, Notices)."""
    update = message_chunk(message_id, text)
    update["_meta"] = {"parley": {"notice": {"level": level}}}
    return update


def command_chunk(
    message_id: str, text: str, *, typed: bool, warning: bool = False
) -> dict[str, Any]:
    """A slash command turn's words: the command as typed (`typed`: a `user_message_chunk`)
    or its answer (an `agent_message_chunk`), marked `_meta.parley.command`; an answer that
    is a warning (a restore that failed or was rejected in part) marked `level: warning`."""
    if typed:
        update = user_chunk(message_id, {"type": "text", "text": text})
    else:
        update = message_chunk(message_id, text)
    update["_meta"] = {"parley": {"command": True, **({"level": "warning"} if warning else {})}}
    return update


def thought_chunk(message_id: str, text: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": text},
        "messageId": message_id,
    }


def user_chunk(message_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": "user_message_chunk", "content": content, "messageId": message_id}


def tool_call(
    tool_call_id: str,
    title: str,
    kind: str,
    status: str = "pending",
    raw_input: Any = None,
) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": status,
    }
    if raw_input is not None:
        update["rawInput"] = raw_input
    return update


def tool_call_update(tool_call_id: str, **changes: Any) -> dict[str, Any]:
    """Only what changed: status, title, kind, rawInput, rawOutput, `text` (the output
    shown to a person), which becomes the update's `content` (after `diffs`, the changes
    the call made, and `first`, content blocks shown before both: a terminal), and `meta`
    (its `_meta`)."""
    update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id}
    text = changes.pop("text", None)
    diffs = changes.pop("diffs", ())
    first = changes.pop("first", ())
    meta = changes.pop("meta", None)
    for name, value in changes.items():
        if value is not None:
            update[camel(name)] = value
    if text is not None:
        update["content"] = [*first, *map(diff_content, diffs), text_content(text)]
    if meta is not None:
        update["_meta"] = meta
    return update


def call_view(view: CallView) -> dict[str, Any]:
    """A call's `title`, `locations` and `content` as `tool_call_update` and the permission
    request's `toolCall` carry them (only what the view has)."""
    fields: dict[str, Any] = {"title": view.title}
    if view.locations:
        fields["locations"] = [
            {"path": where.path} if where.line is None else {"path": where.path, "line": where.line}
            for where in view.locations
        ]
    if view.content or view.diffs:
        fields["content"] = [
            *map(diff_content, view.diffs),
            *(text_content(text) for text in view.content),
        ]
    return fields


def diff_content(diff: Diff) -> dict[str, Any]:
    """A change to a file as one item of a tool call's `content` (ACP's `diff`)."""
    return {"type": "diff", "path": diff.path, "oldText": diff.old_text, "newText": diff.new_text}


def text_content(text: str) -> dict[str, Any]:
    """Text as one item of a tool call's `content`."""
    return {"type": "content", "content": {"type": "text", "text": text}}


def terminal_content(terminal_id: str) -> dict[str, Any]:
    """The editor's terminal a command runs in, as one item of a tool call's `content`."""
    return {"type": "terminal", "terminalId": terminal_id}


def plan(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """ACP's `plan`: the whole plan each time."""
    return {"sessionUpdate": "plan", "entries": entries}


def current_mode(mode: str) -> dict[str, Any]:
    """The session's mode changed."""
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode}


def usage_update(
    *,
    used: int,
    size: int,
    cost: dict[str, Any] | None,
    call: dict[str, Any],
    session: dict[str, Any],
) -> dict[str, Any]:
    """The context's fill (`used` of the window `size`), the session's cost so far, and
    (Parley's) the counted call's `Usage` and the session's `UsageTotals`."""
    update: dict[str, Any] = {
        "sessionUpdate": "usage_update",
        "used": used,
        "size": size,
        "_meta": {"parley": {"call": call, "session": session}},
    }
    if cost is not None:
        update["cost"] = cost
    return update


def session_info(title: str | None = None, updated_at: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "session_info_update"}
    if title is not None:
        update["title"] = title
    if updated_at is not None:
        update["updatedAt"] = updated_at
    return update


def camel(name: str) -> str:
    """A Python field name as the wire spells it: `raw_input` → `rawInput`."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def raw_output(raw: Any, content: str, is_error: bool) -> Any:
    """A tool call's `rawOutput`: what the tool returned, else its text and error flag."""
    return raw if raw is not None else {"content": content, "isError": is_error}


def config_options(options: list[dict[str, Any]]) -> dict[str, Any]:
    """The session's options changed other than by `session/set_config_option`."""
    return {"sessionUpdate": "config_option_update", "configOptions": options}


def available_commands(commands: list[dict[str, Any]]) -> dict[str, Any]:
    return {"sessionUpdate": "available_commands_update", "availableCommands": commands}
