"""Showing a stored conversation again: `session/load` replays it as `session/update`s.

Also mends the end of a history that a killed server left behind: a tool call without a
result gets one that says it was interrupted, so the provider accepts the history.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parley.core.conversation import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultMessage,
    UserMessage,
)
from parley.protocol import updates
from parley.tools.registry import ToolRegistry

INTERRUPTED = "Interrupted: Parley stopped before this call finished; it may not have run."


def unanswered_calls(history: list[Message]) -> list[ToolResultMessage]:
    """Results for the calls of the last assistant message that have none."""
    for position in range(len(history) - 1, -1, -1):
        message = history[position]
        if isinstance(message, AssistantMessage):
            answered = {
                later.tool_call_id
                for later in history[position + 1 :]
                if isinstance(later, ToolResultMessage)
            }
            return [
                ToolResultMessage(call.id, call.name, INTERRUPTED, True, wire_id=call.wire_id)
                for call in message.tool_calls
                if call.id not in answered
            ]
        if isinstance(message, UserMessage):
            return []
    return []


def replay_updates(
    history: list[Message], tools: ToolRegistry, start: int = 0
) -> Iterator[dict[str, Any]]:
    """The updates that show `history[start:]` as a client first saw it, in order (a window
    that was behind is shown only the turns it missed); each call titled as `tools` shows it.
    Made one at a time, so a replay is sent as it is built, never held whole."""
    results = {m.tool_call_id: m for m in history if isinstance(m, ToolResultMessage)}
    for position in range(start, len(history)):
        message = history[position]
        if isinstance(message, UserMessage):
            for block in message.content:
                yield updates.user_chunk(f"user_{position}", _user_content(block))
        elif isinstance(message, AssistantMessage):
            for thought in message.thinking:
                if thought.text:
                    yield updates.thought_chunk(f"{message.message_id}_thought", thought.text)
            if message.text:
                chunk = updates.message_chunk(message.message_id, message.text)
                if message.stopped:
                    # The turn was cut short here: the client shows its mark again.
                    chunk["_meta"] = {"parley": {"stopReason": message.stopped}}
                yield chunk
            for call in message.tool_calls:
                result = results.get(call.id)
                view = updates.call_view(tools.view_of(call.name, call.arguments))
                view.pop("content", None)  # what it showed before it ran: the output follows
                update = updates.tool_call(
                    call.wire_id,
                    view.pop("title"),
                    tools.kind_of(call.name),
                    status="failed" if result is None or result.is_error else "completed",
                    raw_input=call.arguments,
                )
                update.update(view)
                if result is not None:
                    update["rawOutput"] = updates.raw_output(
                        result.raw_output, result.content, result.is_error
                    )
                    update["content"] = [updates.text_content(result.content)]
                yield update


def _user_content(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        image = {"type": "image", "mimeType": block.media_type, "data": block.data}
        return {**image, "uri": block.uri} if block.uri else image
    resource: dict[str, Any] = {"uri": block.uri, "text": block.text}
    if block.mime_type:
        resource["mimeType"] = block.mime_type
    return {"type": "resource", "resource": resource}
