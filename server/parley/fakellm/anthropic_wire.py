"""Anthropic Messages wire format (`POST /v1/messages`).

Shapes follow the recordings in fixtures/wire/anthropic_*: `message_start` (input usage,
output_tokens 1), one content block after another (thinking with `thinking_delta`s then a
`signature_delta`; redacted_thinking, its `data` in the start and no delta; text with
`text_delta`s; tool_use with `input_json_delta`s), a `ping` after the first block starts,
`message_delta` (stop reason, output usage), `message_stop`.
Anthropic always reports usage, so a reply with `usage=None` reports zeros.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from parley.fakellm.script import Reply
from parley.fakellm.wire import (
    WireFormat,
    random_id,
    reply_text,
    split_into_pieces,
    sse_event,
    text_pieces,
    tool_arguments_json,
)

PATH = "/v1/messages"

_ERRORS: dict[int, tuple[str, str]] = {
    # status: (type, message)
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization. Please try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def _stop_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_use" if reply.tool_calls else "end_turn"


def _tokens(reply: Reply) -> tuple[int, int]:
    return reply.usage if reply.usage is not None else (0, 0)


def _input_usage(reply: Reply) -> dict[str, int]:
    """Anthropic's input fields: `input_tokens` leaves out the cache's reads and writes."""
    input_tokens, _ = _tokens(reply)
    read, written = reply.cache or (0, 0)
    return {
        "input_tokens": max(input_tokens - read - written, 0),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
    }


def _thinking_signature(thinking: str) -> str:
    # Real signatures are opaque base64; a digest keeps ours stable for the same thinking.
    digest = hashlib.sha256(thinking.encode()).digest()
    return base64.b64encode(b"fakellm-signature:" + digest).decode()


def _message_id() -> str:
    return random_id("msg_01", 22)


def _tool_use_id(scripted_id: str | None) -> str:
    return scripted_id or random_id("toolu_01", 22)


def stream_events(reply: Reply, request_body: dict[str, Any]) -> list[bytes]:
    _, output_tokens = _tokens(reply)
    events = [
        sse_event(
            {
                "type": "message_start",
                "message": {
                    "id": _message_id(),
                    "type": "message",
                    "role": "assistant",
                    "model": request_body.get("model", "fake-model"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**_input_usage(reply), "output_tokens": 1},
                },
            },
            "message_start",
        )
    ]
    ping = sse_event({"type": "ping"}, "ping")
    block_index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal block_index
        events.append(
            sse_event(
                {"type": "content_block_start", "index": block_index, "content_block": start},
                "content_block_start",
            )
        )
        if block_index == 0:
            events.append(ping)
        for delta in deltas:
            events.append(
                sse_event(
                    {"type": "content_block_delta", "index": block_index, "delta": delta},
                    "content_block_delta",
                )
            )
        events.append(
            sse_event({"type": "content_block_stop", "index": block_index}, "content_block_stop")
        )
        block_index += 1

    if reply.thinking:
        thinking_deltas: list[dict[str, Any]] = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in split_into_pieces(reply.thinking, reply.chunk_size)
        ]
        thinking_deltas.append(
            {"type": "signature_delta", "signature": _thinking_signature(reply.thinking)}
        )
        block({"type": "thinking", "thinking": "", "signature": ""}, thinking_deltas)
    for data in reply.redacted_thinking:
        block({"type": "redacted_thinking", "data": data}, [])
    pieces = text_pieces(reply)
    if pieces:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in pieces],
        )
    for call in reply.tool_calls:
        arguments = tool_arguments_json(call.arguments)
        block(
            {"type": "tool_use", "id": _tool_use_id(call.id), "name": call.name, "input": {}},
            [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in split_into_pieces(arguments, reply.chunk_size)
            ],
        )
    if block_index == 0:
        events.append(ping)  # no content at all: the ping still comes once
    events.append(
        sse_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
            "message_delta",
        )
    )
    events.append(sse_event({"type": "message_stop"}, "message_stop"))
    return events


def message_body(reply: Reply, request_body: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": _thinking_signature(reply.thinking),
            }
        )
    content.extend({"type": "redacted_thinking", "data": data} for data in reply.redacted_thinking)
    text = reply_text(reply)
    if text:
        content.append({"type": "text", "text": text})
    content.extend(
        {
            "type": "tool_use",
            "id": _tool_use_id(call.id),
            "name": call.name,
            "input": call.arguments,
        }
        for call in reply.tool_calls
    )
    _, output_tokens = _tokens(reply)
    return {
        "model": request_body.get("model", "fake-model"),
        "id": _message_id(),
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": {**_input_usage(reply), "output_tokens": output_tokens},
    }


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    default = _ERRORS[500] if status >= 500 else ("invalid_request_error", "Request failed.")
    error_type, usual_message = _ERRORS.get(status, default)
    return {"type": "error", "error": {"type": error_type, "message": message or usual_message}}


def error_event(status: int) -> bytes:
    return sse_event(error_body(status), "error")


def error_headers(status: int) -> dict[str, str]:
    # A real 529 carries this (anthropic_error_529_overloaded.http); the SDK obeys it.
    return {"x-should-retry": "true"} if status == 529 else {}


WIRE = WireFormat(
    api="anthropic",
    path=PATH,
    stream_events=stream_events,
    message_body=message_body,
    error_body=error_body,
    error_event=error_event,
    error_headers=error_headers,
)
