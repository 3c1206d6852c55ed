"""The anthropic provider reads a stream's events as the JSON the server sent (not the SDK's
models): text, thinking with its signature, redacted thinking, tool calls in pieces, the stop
reason and usage (cache reads and writes too) come out exact, and no event of any shape,
however malformed, stops the stream or invents anything."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from parley.core.conversation import ThinkingBlock
from parley.core.usage import Usage
from parley.providers import events
from parley.providers.anthropic_provider import _AnthropicReply

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "type",
    "index",
    "delta",
    "content_block",
    "message",
    "usage",
    "text",
    "thinking",
    "signature",
    "data",
    "partial_json",
    "id",
    "name",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
]
KINDS = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "text_delta",
    "thinking_delta",
    "signature_delta",
    "input_json_delta",
    "tool_use",
    "redacted_thinking",
]
# Events shaped like the real ones, with any value in any field (and the real kinds' names
# often where a `type` is read).
NEAR_EVENTS = st.recursive(
    JSON | st.sampled_from(KINDS),
    lambda inner: (
        st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4) | st.lists(inner, max_size=3)
    ),
    max_leaves=16,
)


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": body}


def text_delta(text: str, index: int = 0) -> dict[str, Any]:
    return delta(index, {"type": "text_delta", "text": text})


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def read_all(chunks: list[Any]) -> tuple[list[events.StreamEvent], _AnthropicReply]:
    reply = _AnthropicReply()
    return [event for chunk in chunks for event in reply.read(chunk)], reply


START_USAGE = {
    "input_tokens": 20,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 4000,
    "output_tokens": 1,
}
EVERY_KIND = [
    {"type": "message_start", "message": {"id": "msg_1", "content": [], "usage": START_USAGE}},
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    {"type": "ping"},
    delta(0, {"type": "thinking_delta", "thinking": "Width "}),
    delta(0, {"type": "thinking_delta", "thinking": "times height."}),
    delta(0, {"type": "signature_delta", "signature": "c2lnbmF0dXJl"}),
    block_stop(0),
    block_start(1, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
    block_stop(1),
    block_start(2, {"type": "text", "text": ""}),
    text_delta("The area ", 2),
    text_delta("is 6.", 2),
    block_stop(2),
    block_start(3, {"type": "tool_use", "id": "toolu_1", "name": "area", "input": {}}),
    delta(3, {"type": "input_json_delta", "partial_json": ""}),
    delta(3, {"type": "input_json_delta", "partial_json": '{"w": '}),
    delta(3, {"type": "input_json_delta", "partial_json": "2}"}),
    block_stop(3),
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 42},
    },
    {"type": "message_stop"},
]


def test_a_reply_read_from_its_json_events_is_exact() -> None:
    streamed, reply = read_all(EVERY_KIND)

    assert streamed == [
        events.ThoughtDelta("Width "),
        events.ThoughtDelta("times height."),
        events.TextDelta("The area "),
        events.TextDelta("is 6."),
        events.ToolCallStarted(3, "area"),
        events.ToolCallArgumentsDelta(3, '{"w": '),
        events.ToolCallArgumentsDelta(3, "2}"),
    ]
    completion = reply.completion()
    assert completion.text == "The area is 6."
    # Kept for the next request: the signed thought and the redacted one, in order.
    assert completion.thinking == (
        ThinkingBlock("Width times height.", "c2lnbmF0dXJl"),
        ThinkingBlock("", redacted="EmwKAhgBEgy3va3pzix"),
    )
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("toolu_1", "area", {"w": 2})
    ]
    assert completion.finish_reason == "tool_use"
    # Anthropic's `input_tokens` leaves out the cache's reads and writes: ours counts them.
    assert completion.usage == Usage(
        input_tokens=4320,
        output_tokens=42,
        cached_read_tokens=4000,
        cached_write_tokens=300,
        thought_tokens=None,
    )


def test_usage_before_the_end_is_the_inputs_and_the_output_once_told() -> None:
    reply = _AnthropicReply()
    assert reply.usage_so_far() is None
    for chunk in EVERY_KIND[:3]:
        list(reply.read(chunk))
    assert reply.usage_so_far() == Usage(4320, 1, None, 4000, 300)
    list(reply.read(EVERY_KIND[-2]))
    assert reply.usage_so_far() == Usage(4320, 42, None, 4000, 300)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1), max_size=8),
    noise=st.lists(NEAR_EVENTS, max_size=8),
    positions=st.lists(st.integers(min_value=0), max_size=8),
)
def test_any_event_is_read_without_failing_and_text_is_never_invented_or_lost(
    texts: list[str], noise: list[Any], positions: list[int]
) -> None:
    chunks: list[Any] = [text_delta(text) for text in texts]
    for chunk, position in zip(noise, positions, strict=False):
        chunks.insert(position % (len(chunks) + 1), json.loads(json.dumps(chunk)))
    streamed, reply = read_all(chunks)
    completion = reply.completion()  # never raises either
    reply.usage_so_far()
    shown = "".join(event.text for event in streamed if isinstance(event, events.TextDelta))
    assert completion.text == shown
    # What the well-formed events said is there, in order, among what the others added.
    position = 0
    for text in texts:
        position = shown.index(text, position) + len(text)
    # Every tool call's pieces follow its start, and every call started is in the reply.
    started = {event.index for event in streamed if isinstance(event, events.ToolCallStarted)}
    assert {
        event.index for event in streamed if isinstance(event, events.ToolCallArgumentsDelta)
    } <= started
    assert len(completion.tool_calls) == len(started)
