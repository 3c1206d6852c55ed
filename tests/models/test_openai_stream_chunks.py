"""The openai provider reads a stream's chunks as the JSON the server sent (not the SDK's
models): text, reasoning, tool calls in pieces and usage come out exact, and no chunk of any
shape, however malformed, stops the stream or invents anything."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from parley.core.usage import Usage
from parley.providers import events
from parley.providers.openai_provider import _OpenAIReply

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "choices",
    "delta",
    "content",
    "reasoning",
    "reasoning_content",
    "tool_calls",
    "index",
    "id",
    "function",
    "name",
    "arguments",
    "finish_reason",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
]
# Chunks shaped like the real ones, with any value in any field.
NEAR_CHUNKS = st.recursive(
    JSON,
    lambda inner: (
        st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4) | st.lists(inner, max_size=3)
    ),
    max_leaves=16,
)


def delta_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def text_chunk(text: str) -> dict[str, Any]:
    return delta_chunk({"content": text})


def read_all(chunks: list[Any]) -> tuple[list[events.StreamEvent], _OpenAIReply]:
    reply = _OpenAIReply()
    return [event for chunk in chunks for event in reply.read(chunk)], reply


def test_a_reply_read_from_its_json_chunks_is_exact() -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    chunks = [
        delta_chunk({"role": "assistant", "content": ""}),
        delta_chunk({"reasoning_content": "Think "}),
        delta_chunk({"reasoning": "more."}),
        text_chunk("Width "),
        text_chunk("times height."),
        delta_chunk({"tool_calls": [{**call, "function": {"name": "area", "arguments": "{"}}]}),
        delta_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"w": 2}'}}]}),
        delta_chunk({}, finish="tool_calls"),
        {"choices": [], "usage": usage},
    ]
    streamed, reply = read_all(chunks)
    assert streamed == [
        events.ThoughtDelta("Think "),
        events.ThoughtDelta("more."),
        events.TextDelta("Width "),
        events.TextDelta("times height."),
        events.ToolCallStarted(0, "area"),
        events.ToolCallArgumentsDelta(0, "{"),
        events.ToolCallArgumentsDelta(0, '"w": 2}'),
    ]
    completion = reply.completion()
    assert completion.text == "Width times height."
    assert [block.text for block in completion.thinking] == ["Think more."]
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("call_1", "area", {"w": 2})
    ]
    assert completion.finish_reason == "tool_use"
    assert completion.usage == Usage(
        input_tokens=12, output_tokens=7, thought_tokens=3, cached_read_tokens=4
    )


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1), max_size=8),
    noise=st.lists(NEAR_CHUNKS, max_size=8),
    positions=st.lists(st.integers(min_value=0), max_size=8),
)
def test_any_chunk_is_read_without_failing_and_text_is_never_invented_or_lost(
    texts: list[str], noise: list[Any], positions: list[int]
) -> None:
    chunks: list[Any] = [text_chunk(text) for text in texts]
    for chunk, position in zip(noise, positions, strict=False):
        chunks.insert(position % (len(chunks) + 1), json.loads(json.dumps(chunk)))
    streamed, reply = read_all(chunks)
    completion = reply.completion()  # never raises either
    shown = "".join(event.text for event in streamed if isinstance(event, events.TextDelta))
    assert completion.text == shown
    # What the well-formed chunks said is there, in order, among what the others added.
    position = 0
    for text in texts:
        position = shown.index(text, position) + len(text)
