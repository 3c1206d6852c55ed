"""The providers over real HTTP: `OpenAIProvider` and `AnthropicProvider` against the fake LLM.

Nothing is mocked: each test builds a provider whose SDK talks to a `FakeLLM` on 127.0.0.1,
and looks at the events and completions the provider makes of what came over the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import WIRE_FIXTURES, wire_fixture
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.core.conversation import TextBlock, UserMessage
from parley.core.errors import ProviderError
from parley.core.usage import Usage
from parley.fakellm import FakeLLM, Fault, Pacing, Reply, ScriptedToolCall
from parley.providers.anthropic_provider import AnthropicProvider
from parley.providers.base import (
    Completion,
    ModelRequest,
    Provider,
)
from parley.providers.events import (
    FinishReason,
    StreamEvent,
    StreamFinished,
    TextDelta,
    ThoughtDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
)
from parley.providers.openai_provider import OpenAIProvider
from parley.tools.base import ToolSpec

PROVIDERS = ("openai", "anthropic")

WEATHER_SPEC = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
REQUEST = ModelRequest(
    model="test-model",
    system="Answer briefly.",
    messages=(UserMessage((TextBlock("What is the weather in Paris?"),)),),
    tools=(WEATHER_SPEC,),
)


def make_provider(kind: str, fake: FakeLLM, max_retries: int = 2) -> Provider:
    if kind == "openai":
        return OpenAIProvider(
            name="openai",
            api_key="sk-test-parley",
            base_url=fake.openai_base_url,
            max_retries=max_retries,
        )
    return AnthropicProvider(
        name="anthropic",
        api_key="sk-ant-test-parley",
        base_url=fake.anthropic_base_url,
        max_retries=max_retries,
    )


@asynccontextmanager
async def provider_for(kind: str, fake: FakeLLM, max_retries: int = 2) -> AsyncIterator[Provider]:
    provider = make_provider(kind, fake, max_retries)
    try:
        yield provider
    finally:
        await provider.aclose()


@attrs.frozen
class StreamRun:
    """Everything one streamed call gave: its events, and the completion assembled after."""

    events: list[StreamEvent]
    completion: Completion

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def thoughts(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ThoughtDelta))

    def arguments_text(self, index: int) -> str:
        return "".join(
            e.text
            for e in self.events
            if isinstance(e, ToolCallArgumentsDelta) and e.index == index
        )


async def read_stream(provider: Provider, request: ModelRequest = REQUEST) -> StreamRun:
    async with provider.stream(request) as stream:
        events = [event async for event in stream]
    assert stream.completion is not None, "a stream read to its end has a completion"
    return StreamRun(events, stream.completion)


def tool_calls_of(completion: Completion) -> list[tuple[str, dict[str, Any]]]:
    return [(call.name, call.arguments) for call in completion.tool_calls]


# The order every provider keeps: thoughts, then text, then tool calls, then the finish.
_PHASE = {
    ThoughtDelta: 0,
    TextDelta: 1,
    ToolCallStarted: 2,
    ToolCallArgumentsDelta: 2,
    StreamFinished: 3,
}


def assert_events_in_order(events: list[StreamEvent]) -> None:
    phases = [_PHASE[type(event)] for event in events]
    assert phases == sorted(phases), f"events out of order: {events}"
    assert sum(isinstance(event, StreamFinished) for event in events) == 1
    assert isinstance(events[-1], StreamFinished)
    started: set[int] = set()
    for event in events:
        if isinstance(event, ToolCallStarted):
            assert event.index not in started, "each tool call starts once"
            started.add(event.index)
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.index in started, "arguments come after their call's start"


# --- any chunking gives the same reply (property tests) ------------------------------------

# Any text a model might send; lone surrogates cannot be encoded, so no provider sends them.
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)
tool_names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)
json_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**9), 10**9), any_text, st.lists(any_text, max_size=3)
)
tool_arguments = st.dictionaries(any_text, json_values, max_size=4)


@st.composite
def split_text(draw: st.DrawFn) -> tuple[str, tuple[str, ...]]:
    """A text and one way to cut it into non-empty chunks, at split points hypothesis picks."""
    text = draw(any_text)
    if len(text) < 2:
        return text, (text,) if text else ()
    cuts = draw(st.sets(st.integers(1, len(text) - 1), max_size=len(text) - 1))
    bounds = [0, *sorted(cuts), len(text)]
    return text, tuple(text[start:end] for start, end in pairwise(bounds))


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[FakeLLM]:
    """One fake for every example of the property tests (they run one after another)."""
    with FakeLLM() as fake:
        yield fake


@pytest.mark.parametrize("kind", PROVIDERS)
@settings(max_examples=25, deadline=None)
@given(
    answer=split_text(),
    thinking=any_text,
    calls=st.lists(st.tuples(tool_names, tool_arguments), max_size=2),
    chunk_size=st.integers(1, 12),
    usage=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
)
def test_any_chunking_gives_the_same_reply(
    shared_fake: FakeLLM,
    kind: str,
    answer: tuple[str, tuple[str, ...]],
    thinking: str,
    calls: list[tuple[str, dict[str, Any]]],
    chunk_size: int,
    usage: tuple[int, int],
) -> None:
    text, chunks = answer
    shared_fake.set_script(
        [
            Reply(
                chunks=chunks,  # the text, cut exactly here
                thinking=thinking,  # thinking and arguments: in `chunk_size` pieces
                tool_calls=tuple(ScriptedToolCall(name, arguments) for name, arguments in calls),
                chunk_size=chunk_size,
                usage=usage,
            )
        ]
    )

    async def run() -> StreamRun:
        async with provider_for(kind, shared_fake) as provider:
            return await read_stream(provider)

    run_result = asyncio.run(run())
    completion = run_result.completion

    assert_events_in_order(run_result.events)
    # What the events said ...
    assert run_result.text == text
    assert run_result.thoughts == thinking
    started = [(e.index, e.name) for e in run_result.events if isinstance(e, ToolCallStarted)]
    assert [name for _, name in started] == [name for name, _ in calls]
    for (index, _), (_, arguments) in zip(started, calls, strict=True):
        assert json.loads(run_result.arguments_text(index)) == arguments
    # ... is what the completion says, whatever the chunking.
    assert completion.text == text
    assert [block.text for block in completion.thinking] == ([thinking] if thinking else [])
    if kind == "anthropic":
        assert all(block.signature for block in completion.thinking)
    assert tool_calls_of(completion) == calls
    assert all(call.arguments_error is None and call.id for call in completion.tool_calls)
    # Neither wire here says how many output tokens were thinking: unknown when there was
    # thinking, none when there was none.
    thoughts = None if thinking else 0
    assert completion.usage == Usage(usage[0], usage[1], thought_tokens=thoughts)
    finish: FinishReason = "tool_use" if calls else "end_turn"
    assert completion.finish_reason == finish
    assert run_result.events[-1] == StreamFinished(finish, completion.usage)


# --- recorded wire fixtures, replayed --------------------------------------------------------


def recorded_data(path: Path) -> list[dict[str, Any]]:
    """The JSON of each `data:` line of a recorded SSE body ([DONE] left out)."""
    # split("\n"), not splitlines(): the recordings hold characters splitlines() breaks on.
    lines = path.read_text(encoding="utf-8").split("\n")
    return [
        json.loads(line.removeprefix("data: "))
        for line in lines
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def recorded_openai_text(path: Path) -> str:
    return "".join(
        choice["delta"].get("content") or ""
        for data in recorded_data(path)
        for choice in data.get("choices", [])
    )


def recorded_anthropic_deltas(path: Path, delta_type: str, field: str) -> str:
    return "".join(
        data["delta"][field]
        for data in recorded_data(path)
        if data.get("type") == "content_block_delta" and data["delta"]["type"] == delta_type
    )


def recorded_json(path: Path) -> dict[str, Any]:
    lines = path.read_text(encoding="utf-8").split("\n")
    return json.loads("\n".join(line for line in lines if not line.startswith("#")))


@attrs.frozen
class Replay:
    """A recorded stream and what a provider must make of it."""

    fixture: str
    kind: str
    usage: Usage | None
    finish: FinishReason
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    text: str | None = None  # None: computed from the recording


STREAM_REPLAYS = [
    Replay("openai_chat_stream_text.sse", "openai", Usage(14, 30), "end_turn"),
    Replay(
        "openai_chat_stream_tool_call.sse",
        "openai",
        Usage(48, 19),
        "tool_use",
        (("get_weather", {"city": "San Francisco", "state": "CA"}),),
    ),
    Replay("openai_chat_stream_finish_length.sse", "openai", Usage(79, 1), "max_tokens"),
    # Ollama before 0.5.2 sends no usage, and repeats the role on every chunk.
    Replay("ollama_v1_chat_stream_text_real.sse", "openai", None, "end_turn", text="."),
    Replay("anthropic_stream_text_sdkfixture.sse", "anthropic", Usage(11, 6), "end_turn"),
    Replay(
        "anthropic_stream_tool_use_sdkfixture.sse",
        "anthropic",
        Usage(377, 65),
        "tool_use",
        (("get_weather", {"location": "Paris"}),),
    ),
    Replay(
        # Anthropic counts thinking in output_tokens and says nothing apart: unknown
        "anthropic_stream_thinking_refusal_sdkfixture.sse",
        "anthropic",
        Usage(28, 106, thought_tokens=None),
        "refusal",
    ),
]


def expected_text(replay: Replay, path: Path) -> str:
    if replay.text is not None:
        return replay.text
    if replay.kind == "openai":
        return recorded_openai_text(path)
    return recorded_anthropic_deltas(path, "text_delta", "text")


@pytest.mark.parametrize("replay", STREAM_REPLAYS, ids=lambda replay: replay.fixture)
async def test_recorded_stream_replays_exactly(fake: FakeLLM, replay: Replay) -> None:
    path = wire_fixture(replay.fixture)
    fake.set_script([Reply(raw_stream=path)])

    async with provider_for(replay.kind, fake) as provider:
        run = await read_stream(provider)

    assert_events_in_order(run.events)
    assert run.text == run.completion.text == expected_text(replay, path)
    assert run.completion.usage == replay.usage
    assert run.completion.finish_reason == replay.finish
    assert tuple(tool_calls_of(run.completion)) == replay.tool_calls


async def test_openai_text_replay_is_the_recorded_answer(fake: FakeLLM) -> None:
    # One figure checked by hand, so the computed expectations above cannot both be wrong.
    fake.set_script([Reply(raw_stream=wire_fixture("openai_chat_stream_text.sse"))])
    async with provider_for("openai", fake) as provider:
        run = await read_stream(provider)
    assert run.completion.text == (
        "I'm unable to provide real-time weather updates. To get the current weather in San "
        "Francisco, I recommend checking a reliable weather website or a weather app."
    )


async def test_recorded_thinking_keeps_its_signature_and_the_refusal(fake: FakeLLM) -> None:
    path = wire_fixture("anthropic_stream_thinking_refusal_sdkfixture.sse")
    fake.set_script([Reply(raw_stream=path)])

    async with provider_for("anthropic", fake) as provider:
        run = await read_stream(provider)

    (block,) = run.completion.thinking
    assert (
        block.text == run.thoughts == recorded_anthropic_deltas(path, "thinking_delta", "thinking")
    )
    assert block.text.startswith("Simple educational question")
    assert block.signature == recorded_anthropic_deltas(path, "signature_delta", "signature")
    assert block.signature == "c3ludGhldGljLXNpZ25hdHVyZS1maXh0dXJlLWEtbm90LWEtcmVhbC1zaWduYXR1cmU="
    assert run.completion.text == "Hi"
    assert run.completion.finish_reason == "refusal"


async def test_recorded_incomplete_tool_arguments_become_an_arguments_error(
    fake: FakeLLM,
) -> None:
    # The recording stops at max_tokens in the middle of the tool call's JSON.
    path = wire_fixture("anthropic_stream_incomplete_partial_json_sdkfixture.sse")
    fake.set_script([Reply(raw_stream=path)])

    async with provider_for("anthropic", fake) as provider:
        run = await read_stream(provider)

    assert run.completion.text == recorded_anthropic_deltas(path, "text_delta", "text")
    (call,) = run.completion.tool_calls
    assert call.name == "make_file" and call.id == "toolu_01EKqbqmZrGRXy18eN7m9kvY"
    assert call.arguments == {}
    assert call.arguments_error is not None and "output token limit" in call.arguments_error
    assert run.arguments_text(1).startswith('{"filename": "taxes.txt')
    assert run.completion.usage == Usage(450, 124)


@attrs.frozen
class JsonReplay:
    fixture: str
    kind: str
    usage: Usage
    finish: FinishReason
    tool_calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()  # (id, name, arguments)


JSON_REPLAYS = [
    JsonReplay("openai_chat_nonstream_text.json", "openai", Usage(14, 37), "end_turn"),
    JsonReplay(
        "openai_chat_nonstream_tool_call.json",
        "openai",
        Usage(48, 19),
        "tool_use",
        (
            (
                "call_CUdUoJpsWWVdxXntucvnol1M",
                "get_weather",
                {"city": "San Francisco", "state": "CA"},
            ),
        ),
    ),
    JsonReplay(
        "anthropic_nonstream_tool_use.json",
        "anthropic",
        Usage(659, 88),
        "tool_use",
        (
            (
                "toolu_01MxFFv4azdWzubHT3dXurMY",
                "get_weather",
                {"location": "San Francisco, CA", "units": "c"},
            ),
        ),
    ),
]


def recorded_json_text(replay: JsonReplay, path: Path) -> str:
    body = recorded_json(path)
    if replay.kind == "openai":
        return body["choices"][0]["message"]["content"] or ""
    return "".join(block["text"] for block in body["content"] if block["type"] == "text")


@pytest.mark.parametrize("replay", JSON_REPLAYS, ids=lambda replay: replay.fixture)
async def test_recorded_json_replays_through_complete(fake: FakeLLM, replay: JsonReplay) -> None:
    path = wire_fixture(replay.fixture)
    fake.set_script([Reply(raw_json=path)])

    async with provider_for(replay.kind, fake) as provider:
        completion = await provider.complete(REQUEST)

    assert completion.text == recorded_json_text(replay, path)
    assert completion.usage == replay.usage
    assert completion.finish_reason == replay.finish
    calls = tuple((call.id, call.name, call.arguments) for call in completion.tool_calls)
    assert calls == replay.tool_calls
    assert not fake.requests[0].stream


def test_every_recorded_reply_has_a_replay_test() -> None:
    """A recording added to fixtures/wire/ later is not silently left untested. Error bodies
    are not replies: the fake renders the providers' error bodies itself (tested below)."""
    replies = {
        path.name
        for path in WIRE_FIXTURES.iterdir()
        if path.suffix in (".sse", ".json") and "error" not in path.name
    }
    replayed = {replay.fixture for replay in [*STREAM_REPLAYS, *JSON_REPLAYS]}
    replayed.add("anthropic_stream_incomplete_partial_json_sdkfixture.sse")
    assert replies <= replayed, f"no replay test for {sorted(replies - replayed)}"


# --- closing a stream early ------------------------------------------------------------------


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_closing_a_stream_at_the_tool_call_hangs_up_on_the_provider(
    fake: FakeLLM, kind: str
) -> None:
    fake.set_script(
        [
            Reply(
                text="Let me check the weather for you.",
                tool_calls=(ScriptedToolCall("get_weather", {"city": "Paris, France"}),),
                chunk_size=3,
                pacing=Pacing(chunks_per_second=100),
            )
        ]
    )

    async with provider_for(kind, fake) as provider:
        stream = provider.stream(REQUEST)
        seen: list[StreamEvent] = []
        async for event in stream:
            seen.append(event)
            if isinstance(event, ToolCallStarted):
                await stream.aclose()
                break

    assert isinstance(seen[-1], ToolCallStarted) and seen[-1].name == "get_weather"
    (recorded,) = fake.wait_for_requests(1)
    assert recorded.client_hung_up
    assert recorded.chunks_sent < recorded.chunks_total
    assert stream.completion is None  # a closed stream has no complete reply to offer


# --- errors ------------------------------------------------------------------------------------


async def stream_error(provider: Provider) -> ProviderError:
    with pytest.raises(ProviderError) as raised:
        await read_stream(provider)
    return raised.value


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_401_is_an_authentication_error_and_not_retried(fake: FakeLLM, kind: str) -> None:
    fake.set_script([Reply(text="never sent", fault=Fault("http", status=401, times=10))])

    async with provider_for(kind, fake) as provider:
        streamed = await stream_error(provider)
        with pytest.raises(ProviderError) as raised:
            await provider.complete(REQUEST)

    for error in (streamed, raised.value):
        assert error.type == "authentication"
        assert error.status == 401
        assert not error.retryable
        assert "API key" in error.message
    assert len(fake.requests) == 2  # one each: the SDKs do not retry a 401


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_429_after_the_retries_is_a_retryable_rate_limit_error(
    fake: FakeLLM, kind: str
) -> None:
    fake.set_script(
        [Reply(text="never sent", fault=Fault("http", status=429, retry_after=0.01, times=10))]
    )

    async with provider_for(kind, fake, max_retries=2) as provider:
        error = await stream_error(provider)

    assert error.type == "rate_limit"
    assert error.status == 429
    assert error.retryable
    assert "after retries" in error.message
    assert [request.status for request in fake.requests] == [429, 429, 429]  # 1 + 2 retries


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_connection_dropped_mid_stream_is_stream_interrupted(
    fake: FakeLLM, kind: str
) -> None:
    fake.set_script(
        [Reply(text="a long answer that is cut off", fault=Fault("drop", after_chunks=4))]
    )

    async with provider_for(kind, fake) as provider:
        stream = provider.stream(REQUEST)
        seen: list[StreamEvent] = []
        with pytest.raises(ProviderError) as raised:
            async for event in stream:
                seen.append(event)

    assert raised.value.type == "stream_interrupted"
    assert raised.value.retryable
    assert any(isinstance(event, TextDelta) for event in seen)  # it broke off mid-reply
    assert not any(isinstance(event, StreamFinished) for event in seen)
    (recorded,) = fake.wait_for_requests(1)
    assert recorded.chunks_sent == 4 < recorded.chunks_total


# --- the thinking level on the wire --------------------------------------------------------


async def test_a_thinking_budget_goes_to_anthropic_with_room_for_the_answer(fake: FakeLLM) -> None:
    fake.set_script([Reply(text="ok")] * 3)
    thinking = attrs.evolve(REQUEST, thinking_budget=24576)
    async with provider_for("anthropic", fake) as provider:
        await read_stream(provider, thinking)
        await provider.complete(thinking)
        await provider.complete(REQUEST)
    streamed, completed, plain = (request.body for request in fake.wait_for_requests(3))
    for body in (streamed, completed):
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 24576}
        assert body["max_tokens"] > 24576  # the API refuses a budget that fills max_tokens
    assert "thinking" not in plain and plain["max_tokens"] == 8192


async def test_a_reasoning_effort_goes_to_openai_only_when_chosen(fake: FakeLLM) -> None:
    fake.set_script([Reply(text="ok")] * 3)
    effort = attrs.evolve(REQUEST, reasoning_effort="low")
    async with provider_for("openai", fake) as provider:
        await read_stream(provider, effort)
        await provider.complete(effort)
        await provider.complete(REQUEST)
    streamed, completed, plain = (request.body for request in fake.wait_for_requests(3))
    assert streamed["reasoning_effort"] == completed["reasoning_effort"] == "low"
    assert "reasoning_effort" not in plain
