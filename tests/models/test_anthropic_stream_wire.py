"""The anthropic provider's stream over real HTTP, in Anthropic's wire format (the fake LLM).

The provider reads the events as the JSON sent, through the SDK's public request for
undocumented responses (`AsyncAnthropic.post(..., cast_to=object, stream=True,
stream_cls=AsyncStream[object])`). The canaries here fail if the SDK changes what that gives:
each event's JSON as sent, pings left out, an `error` event raised. The rest: every kind of
event, and the SSE bytes cut anywhere (also mid-event, with the connection dropped there).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import attrs
import pytest
from conftest import WIRE_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.core.conversation import AssistantMessage, TextBlock, ThinkingBlock, UserMessage
from parley.core.errors import ProviderError
from parley.core.usage import Usage
from parley.fakellm import FakeLLM, Fault, Reply, ScriptedToolCall
from parley.fakellm.anthropic_wire import stream_events
from parley.providers.anthropic_provider import (
    AnthropicProvider,
    _AnthropicReply,
    to_anthropic_messages,
)
from parley.providers.base import ModelRequest
from parley.providers.events import (
    StreamEvent,
    StreamFinished,
    TextDelta,
    ThoughtDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
)

REQUEST = ModelRequest(
    model="claude-sonnet-4-5",
    system="Answer briefly.",
    messages=(UserMessage((TextBlock("What is the area of a 2 by 3 rectangle?"),)),),
)
THINKING = "The area is width times height: 2 * 3 = 6."
REDACTED = ("EmwKAhgBEgy3va3pzix/redacted==", "EmwKAhgBEgy3va3pzix/second==")
ANSWER = "The area is 6 — square units, since both sides are in units. ✓"
CALL = ScriptedToolCall("record_area", {"shape": "rectangle", "area": 6}, id="toolu_01area")
# Every kind of event: thinking and its signature, redacted thinking, text, a tool call in
# pieces, cache reads and writes in the usage.
EVERY_KIND = Reply(
    text=ANSWER,
    thinking=THINKING,
    redacted_thinking=REDACTED,
    tool_calls=(CALL,),
    chunk_size=5,
    usage=(5000, 77),
    cache=(4000, 300),
)


@asynccontextmanager
async def anthropic_provider(fake: FakeLLM) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(
        name="anthropic", api_key="sk-ant-test-parley", base_url=fake.anthropic_base_url
    )
    try:
        yield provider
    finally:
        await provider.aclose()


async def read_events(fake: FakeLLM) -> tuple[list[StreamEvent], Any]:
    """The events of one streamed call (its error raised), and the stream."""
    async with anthropic_provider(fake) as provider, provider.stream(REQUEST) as stream:
        return [event async for event in stream], stream


def recorded_events(name: str) -> list[tuple[str, dict[str, Any]]]:
    """A recorded SSE body's events: (the `event:` name, the `data:` JSON)."""
    events, name_of_event = [], ""
    for line in (WIRE_FIXTURES / name).read_text(encoding="utf-8").split("\n"):
        if line.startswith("event: "):
            name_of_event = line.removeprefix("event: ").strip()
        elif line.startswith("data: "):
            events.append((name_of_event, json.loads(line.removeprefix("data: "))))
    return events


# --- canaries: what the SDK's public request gives ------------------------------------------


@pytest.mark.parametrize(
    "fixture",
    [
        "anthropic_stream_text_sdkfixture.sse",
        "anthropic_stream_tool_use_sdkfixture.sse",
        "anthropic_stream_thinking_refusal_sdkfixture.sse",
    ],
)
async def test_the_sdk_gives_each_events_json_as_sent_without_pings(
    fake: FakeLLM, fixture: str
) -> None:
    fake.set_script([Reply(raw_stream=WIRE_FIXTURES / fixture)])
    async with anthropic_provider(fake) as provider:
        stream = provider.stream(REQUEST)
        sdk_stream = await stream._open()  # type: ignore[attr-defined]
        read = [chunk async for chunk in sdk_stream]
        body = {**provider._arguments(REQUEST), "stream": True}

    sent = [data for name, data in recorded_events(fixture) if name != "ping"]
    assert read == sent  # dictionaries, exactly the JSON: no model, nothing dropped or added
    assert all(type(chunk) is dict for chunk in read)
    (request,) = fake.wait_for_requests(1)
    assert request.body == body  # the request `messages.create(stream=True)` sends


async def test_an_overloaded_error_event_mid_stream_is_reported_as_the_provider_said(
    fake: FakeLLM,
) -> None:
    # message_start, the text's start, a ping, two text deltas: then the error event.
    fake.set_script([Reply(text=ANSWER, fault=Fault("error_event", status=529, after_chunks=5))])

    seen: list[StreamEvent] = []
    async with anthropic_provider(fake) as provider:
        stream = provider.stream(REQUEST)
        with pytest.raises(ProviderError) as raised:
            async for event in stream:
                seen.append(event)

    error = raised.value
    assert error.type == "stream_error" and error.retryable
    assert error.message == "anthropic reported an error mid-reply: Overloaded"
    assert isinstance(error.__cause__, anthropic.APIStatusError)
    assert error.__cause__.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert seen == [TextDelta(ANSWER[:4]), TextDelta(ANSWER[4:8])]  # shown before: kept
    assert stream.usage_so_far() == Usage(10, 1, None)  # the input's, from message_start
    assert len(fake.requests) == 1  # not retried: the user saw the start of the answer


# --- every kind of event ---------------------------------------------------------------------


async def test_every_kind_of_event_comes_through_and_thinking_goes_back_signed(
    fake: FakeLLM,
) -> None:
    fake.set_script([EVERY_KIND])

    streamed, stream = await read_events(fake)

    assert "".join(e.text for e in streamed if isinstance(e, ThoughtDelta)) == THINKING
    assert "".join(e.text for e in streamed if isinstance(e, TextDelta)) == ANSWER
    (started,) = [e for e in streamed if isinstance(e, ToolCallStarted)]
    assert started.name == "record_area"
    arguments = "".join(e.text for e in streamed if isinstance(e, ToolCallArgumentsDelta))
    assert json.loads(arguments) == CALL.arguments
    completion = stream.completion
    usage = Usage(5000, 77, None, cached_read_tokens=4000, cached_write_tokens=300)
    assert streamed[-1] == StreamFinished("tool_use", usage)
    assert completion.text == ANSWER
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("toolu_01area", "record_area", CALL.arguments)
    ]
    thought, *redacted = completion.thinking
    assert thought.text == THINKING and thought.signature
    assert redacted == [ThinkingBlock("", redacted=data) for data in REDACTED]
    # What the next request sends back: the thought with its signature, the redacted ones.
    reply = AssistantMessage(completion.text, completion.thinking, ())
    (sent,) = to_anthropic_messages((reply,))
    assert sent["content"][:3] == [
        {"type": "thinking", "thinking": THINKING, "signature": thought.signature},
        *({"type": "redacted_thinking", "data": data} for data in REDACTED),
    ]


# --- the SSE bytes cut anywhere (property tests) ----------------------------------------------


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[FakeLLM]:
    """One fake for every example of the property tests (they run one after another)."""
    with FakeLLM() as fake:
        yield fake


def sse_bytes(reply: Reply) -> bytes:
    return b"".join(stream_events(reply, {"model": REQUEST.model}))


def events_of_complete_sse_events(data: bytes) -> list[StreamEvent]:
    """What the provider makes of the events wholly in `data` (an event ends at its blank
    line), read as the SDK would give them: pings left out."""
    reply = _AnthropicReply()
    whole = data[: data.rfind(b"\n\n") + 2] if b"\n\n" in data else b""
    made: list[StreamEvent] = []
    for event in whole.decode().split("\n\n"):
        for line in event.split("\n"):
            if line.startswith("data: ") and '"type":"ping"' not in line:
                made.extend(reply.read(json.loads(line.removeprefix("data: "))))
    return made


def run(fake: FakeLLM) -> tuple[list[StreamEvent], Any, ProviderError | None]:
    seen: list[StreamEvent] = []

    async def read() -> Any:
        async with anthropic_provider(fake) as provider, provider.stream(REQUEST) as stream:
            async for event in stream:
                seen.append(event)
            return stream

    try:
        return seen, asyncio.run(read()), None
    except ProviderError as error:
        return seen, None, error


STREAM_LENGTH = len(sse_bytes(EVERY_KIND))  # the ids are random, but of fixed lengths
cuts = st.lists(st.integers(1, STREAM_LENGTH - 1), max_size=40).map(tuple)


@settings(max_examples=25, deadline=None)
@given(byte_cuts=cuts)
def test_a_stream_cut_into_pieces_anywhere_reads_as_the_whole(
    shared_fake: FakeLLM, byte_cuts: tuple[int, ...]
) -> None:
    shared_fake.set_script([EVERY_KIND])
    whole, whole_stream, _ = run(shared_fake)
    shared_fake.set_script([attrs.evolve(EVERY_KIND, byte_cuts=byte_cuts)])

    cut, cut_stream, error = run(shared_fake)

    assert error is None
    assert cut == whole
    assert cut_stream.completion.text == ANSWER
    assert cut_stream.completion.thinking[1:] == whole_stream.completion.thinking[1:]
    recorded = shared_fake.requests[-1]
    assert recorded.chunks_sent == recorded.chunks_total == len(set(byte_cuts)) + 1


@settings(max_examples=40, deadline=None)
@given(byte_cuts=cuts.filter(bool), data=st.data())
def test_a_stream_dropped_mid_event_shows_only_whole_events_then_reports_the_break(
    shared_fake: FakeLLM, byte_cuts: tuple[int, ...], data: st.DataObject
) -> None:
    bounds = sorted({0, *byte_cuts, STREAM_LENGTH})
    dropped_after = data.draw(st.integers(0, len(bounds) - 2), label="pieces sent")
    drop = Fault("drop", after_chunks=dropped_after)
    shared_fake.set_script([attrs.evolve(EVERY_KIND, byte_cuts=byte_cuts, fault=drop)])

    seen, stream, error = run(shared_fake)

    shown = events_of_complete_sse_events(sse_bytes(EVERY_KIND)[: bounds[dropped_after]])
    if shown:  # something was shown: it stays, and the break is the user's to see
        assert error is not None and error.type == "stream_interrupted" and error.retryable
        assert seen == shown
        assert len(shared_fake.requests) == 1
    else:  # nothing was: asked again, the whole reply
        assert error is None and stream.completion.text == ANSWER
        assert isinstance(seen[-1], StreamFinished) and seen[-1].reason == "tool_use"
        assert len(shared_fake.requests) == 2
