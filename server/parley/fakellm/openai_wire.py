"""OpenAI Chat Completions wire format (`POST /v1/chat/completions`).

Shapes follow the recordings in fixtures/wire/openai_*: a role chunk, `delta.content` chunks,
`delta.tool_calls` chunks (the first of each call carries id and name), a finish chunk with an
empty delta, then — only with `stream_options.include_usage` — a usage chunk with
`choices: []`, and `data: [DONE]`. Reasoning goes in `delta.reasoning_content` (the field
DeepSeek, vLLM and Ollama use).
"""

from __future__ import annotations

import time
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

PATH = "/v1/chat/completions"
SYSTEM_FINGERPRINT = "fp_fakellm"

_ERRORS: dict[int, tuple[str, str, str | None]] = {
    # status: (type, message, code)
    400: ("invalid_request_error", "Invalid request.", None),
    401: ("invalid_request_error", "Incorrect API key provided.", "invalid_api_key"),
    404: ("invalid_request_error", "The model does not exist.", "model_not_found"),
    429: (
        "requests",
        "Rate limit reached for requests. Please try again later.",
        "rate_limit_exceeded",
    ),
    500: (
        "server_error",
        "The server had an error processing your request. Sorry about that! "
        "You can retry your request.",
        None,
    ),
    503: ("server_error", "The engine is currently overloaded, please try again later.", None),
}


def _finish_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _usage(reply: Reply) -> dict[str, Any] | None:
    if reply.usage is None:
        return None
    prompt_tokens, completion_tokens = reply.usage
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reply.cache is not None:  # OpenAI's `prompt_tokens` includes the cached ones
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cache[0], "audio_tokens": 0}
    return usage


def _tool_call_id(scripted_id: str | None) -> str:
    return scripted_id or random_id("call_", 24)


def stream_events(reply: Reply, request_body: dict[str, Any]) -> list[bytes]:
    envelope = {
        "id": random_id("chatcmpl-", 29),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request_body.get("model", "fake-model"),
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return sse_event({**envelope, "choices": [choice]})

    events: list[bytes] = []
    pieces = text_pieces(reply)
    # A reply that is only tool calls carries the role in its first tool-call chunk, as
    # OpenAI does (openai_chat_stream_tool_call.sse); otherwise a role chunk comes first.
    role_in_tool_call = bool(reply.tool_calls) and not pieces and not reply.thinking
    if not role_in_tool_call:
        events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
    for piece in split_into_pieces(reply.thinking, reply.chunk_size):
        events.append(chunk({"reasoning_content": piece}))
    for piece in pieces:
        events.append(chunk({"content": piece}))
    for index, call in enumerate(reply.tool_calls):
        opening: dict[str, Any] = {
            "tool_calls": [
                {
                    "index": index,
                    "id": _tool_call_id(call.id),
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
        }
        if role_in_tool_call and index == 0:
            opening = {"role": "assistant", "content": None, **opening, "refusal": None}
        events.append(chunk(opening))
        for piece in split_into_pieces(tool_arguments_json(call.arguments), reply.chunk_size):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, _finish_reason(reply)))
    usage = _usage(reply)
    include_usage = bool((request_body.get("stream_options") or {}).get("include_usage"))
    if include_usage and usage is not None:
        events.append(sse_event({**envelope, "choices": [], "usage": usage}))
    events.append(sse_event("[DONE]"))
    return events


def message_body(reply: Reply, request_body: dict[str, Any]) -> dict[str, Any]:
    text = reply_text(reply)
    message: dict[str, Any] = {
        "role": "assistant",
        # OpenAI sends null content for a reply that is only tool calls.
        "content": text if text or not reply.tool_calls else None,
        "refusal": None,
    }
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _tool_call_id(call.id),
                "type": "function",
                "function": {"name": call.name, "arguments": tool_arguments_json(call.arguments)},
            }
            for call in reply.tool_calls
        ]
    body: dict[str, Any] = {
        "id": random_id("chatcmpl-", 29),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request_body.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(reply),
            }
        ],
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    usage = _usage(reply)
    if usage is not None:
        body["usage"] = usage
    return body


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    default = _ERRORS[500] if status >= 500 else ("invalid_request_error", "Request failed.", None)
    error_type, usual_message, code = _ERRORS.get(status, default)
    return {
        "error": {
            "message": message or usual_message,
            "type": error_type,
            "param": None,
            "code": code,
        }
    }


def error_event(status: int) -> bytes:
    # OpenAI reports a mid-stream failure as a data chunk holding only an `error` object.
    return sse_event(error_body(status))


WIRE = WireFormat(
    api="openai",
    path=PATH,
    stream_events=stream_events,
    message_body=message_body,
    error_body=error_body,
    error_event=error_event,
)
