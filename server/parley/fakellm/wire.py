"""What both wire formats share: SSE framing, provider-shaped ids, splitting a reply into pieces.

A wire format (`openai_wire`, `anthropic_wire`) turns a `Reply` into bytes; the server only
decides which bytes go out when. `WireFormat` is the interface the server calls.
"""

from __future__ import annotations

import itertools
import json
import secrets
import string
from collections.abc import Callable
from typing import Any

import attrs

from parley.fakellm.script import Reply

_ID_ALPHABET = string.ascii_letters + string.digits


def random_id(prefix: str, length: int) -> str:
    """`prefix` followed by `length` random letters and digits, like the providers' ids."""
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(length))


def compact_json(value: Any) -> str:
    """JSON without spaces, as the providers send it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event: an optional `event:` line, a `data:` line, a blank line."""
    payload = data if isinstance(data, str) else compact_json(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def split_into_pieces(text: str, size: int) -> list[str]:
    """`text` in consecutive pieces of `size` characters (the last may be shorter)."""
    size = max(1, size)
    return [text[start : start + size] for start in range(0, len(text), size)]


def cut_stream(events: list[bytes], cuts: tuple[int, ...]) -> list[bytes]:
    """The stream's bytes cut at `cuts` (offsets; those outside it ignored), not at events."""
    stream = b"".join(events)
    bounds = sorted({0, len(stream), *(cut for cut in cuts if 0 < cut < len(stream))})
    return [stream[start:end] for start, end in itertools.pairwise(bounds)]


def reply_text(reply: Reply) -> str:
    """The whole answer text: `chunks` joined when given, else `text`."""
    return "".join(reply.chunks) if reply.chunks is not None else reply.text


def text_pieces(reply: Reply) -> list[str]:
    """The text deltas to stream: exactly `chunks` when given, else `chunk_size` pieces."""
    if reply.chunks is not None:
        return list(reply.chunks)
    return split_into_pieces(reply.text, reply.chunk_size)


def tool_arguments_json(arguments: dict[str, Any]) -> str:
    """A tool call's arguments as the JSON string streamed and returned (json.dumps default)."""
    return json.dumps(arguments, ensure_ascii=False)


@attrs.frozen
class WireFormat:
    """How one provider API renders replies and errors.

    - `stream_events(reply, request_body)`: every SSE event of a streamed reply, in order
      (one event = one chunk for counting and pacing).
    - `message_body(reply, request_body)`: the JSON object of a non-streamed reply.
    - `error_body(status, message)`: the JSON body the provider sends with an HTTP error
      status; `message` replaces the provider's usual message when given.
    - `error_event(status)`: the SSE event that reports an error inside a 200 stream.
    - `error_headers(status)`: extra headers the provider sends with that error.
    """

    api: str
    path: str
    stream_events: Callable[[Reply, dict[str, Any]], list[bytes]]
    message_body: Callable[[Reply, dict[str, Any]], dict[str, Any]]
    error_body: Callable[[int, str | None], dict[str, Any]]
    error_event: Callable[[int], bytes]
    error_headers: Callable[[int], dict[str, str]] = lambda status: {}
