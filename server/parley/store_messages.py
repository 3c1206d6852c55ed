"""A message's stored form: provider-neutral JSON, one row of the `messages` table each
(`role`, `body`), what the store writes and reads back (`store.py`) and an export shows.

Kept apart from store.py (which holds the tables' queries) for its size.
"""

from __future__ import annotations

import json
import re
from typing import Any

from parley.core.conversation import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    ResourceBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

# A lone surrogate in a stored body, as `json.dumps` escapes it (old servers stored some).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def load_body(body: str) -> Any:
    """A stored body; lone surrogates (which no encoder takes) become U+FFFD. Only a body
    that escapes a surrogate is walked: the check is one regex search."""
    loaded = json.loads(body)
    return _mend_surrogates(loaded) if _SURROGATE_ESCAPE.search(body) else loaded


def _mend_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        # Through UTF-16: a valid pair joins into its character, a lone half is replaced.
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_mend_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_mend_surrogates(key): _mend_surrogates(item) for key, item in value.items()}
    return value


def encode_message(message: Message) -> tuple[str, dict[str, Any]]:
    if isinstance(message, UserMessage):
        return "user", {"content": [_encode_block(block) for block in message.content]}
    if isinstance(message, AssistantMessage):
        stopped = {"stopped": message.stopped} if message.stopped else {}
        return "assistant", {
            **stopped,
            "text": message.text,
            "messageId": message.message_id,
            "thinking": [
                {"text": t.text, "signature": t.signature, "redacted": t.redacted}
                for t in message.thinking
            ],
            "toolCalls": [
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "wireId": call.wire_id,
                    "argumentsError": call.arguments_error,
                }
                for call in message.tool_calls
            ],
        }
    shown = {"shown": message.shown} if message.shown else {}
    return "tool", {
        **shown,
        "toolCallId": message.tool_call_id,
        "name": message.name,
        "content": message.content,
        "isError": message.is_error,
        "wireId": message.wire_id,
        "rawOutput": message.raw_output,
        "startedAt": message.started_at,
        "endedAt": message.ended_at,
    }


def decode_message(role: str, body: dict[str, Any]) -> Message:
    if role == "user":
        return UserMessage(tuple(_decode_block(block) for block in body["content"]))
    if role == "assistant":
        return AssistantMessage(
            text=body["text"],
            thinking=tuple(
                ThinkingBlock(t["text"], t.get("signature"), t.get("redacted"))
                for t in body["thinking"]
            ),
            tool_calls=tuple(
                ToolCall(c["id"], c["name"], c["arguments"], c["wireId"], c.get("argumentsError"))
                for c in body["toolCalls"]
            ),
            message_id=body.get("messageId", ""),
            stopped=body.get("stopped"),
        )
    return ToolResultMessage(
        tool_call_id=body["toolCallId"],
        name=body["name"],
        content=body["content"],
        is_error=body["isError"],
        wire_id=body.get("wireId", ""),
        raw_output=body.get("rawOutput"),
        started_at=body.get("startedAt"),
        ended_at=body.get("endedAt"),
        shown=body.get("shown"),
    )


def _encode_block(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        if block.for_model:
            return {"type": "text", "text": block.text, "forModel": True}
        if block.sent is not None:
            return {"type": "text", "text": block.text, "sent": block.sent}
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "mimeType": block.media_type, "data": block.data, "uri": block.uri}
    return {"type": "resource", "uri": block.uri, "text": block.text, "mimeType": block.mime_type}


def _decode_block(block: dict[str, Any]) -> ContentBlock:
    if block["type"] == "text":
        sent = block.get("sent")
        sent = sent if isinstance(sent, dict) else None
        return TextBlock(block["text"], for_model=block.get("forModel") is True, sent=sent)
    if block["type"] == "image":
        return ImageBlock(block["mimeType"], block["data"], block.get("uri"))
    return ResourceBlock(block["uri"], block["text"], block.get("mimeType"))
