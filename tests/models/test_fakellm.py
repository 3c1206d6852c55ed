"""The fake LLM against the real OpenAI and Anthropic SDKs, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from conftest import TESTS
from parley.fakellm import FakeLLM, Fault, Pacing, RecordedRequest, Reply, ScriptedToolCall

# Real recorded provider streams, kept in the repository: a fresh clone replays them all.
WIRE_FIXTURES = TESTS / "fixtures" / "wire"
USER_TURN = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


# The fake speaks plain HTTP: `verify=False` saves loading the CA bundle for every client
# (~0.1 s each, most of this file's run time otherwise).


@pytest.fixture
async def openai_client(fake: FakeLLM) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=fake.openai_base_url,
        api_key="test-key",
        http_client=openai.DefaultAsyncHttpxClient(verify=False),
    ) as client:
        yield client


@pytest.fixture
async def anthropic_client(fake: FakeLLM) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        base_url=fake.anthropic_base_url,
        api_key="test-key",
        http_client=anthropic.DefaultAsyncHttpxClient(verify=False),
    ) as client:
        yield client


def sync_openai_client(fake_url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=fake_url + "/v1",
        api_key="test-key",
        http_client=openai.DefaultHttpxClient(verify=False),
    )


def wire_fixture(name: str) -> Path:
    path = WIRE_FIXTURES / name
    if not path.is_file():
        pytest.fail(f"wire fixture {path} is missing from the repository")
    return path


async def openai_stream_chunks(client: openai.AsyncOpenAI, **request: Any) -> list[Any]:
    stream = await client.chat.completions.create(
        model="gpt-test", messages=request.pop("messages", USER_TURN), stream=True, **request
    )
    return [chunk async for chunk in stream]


def assembled_openai_tool_calls(chunks: list[Any]) -> list[dict[str, str]]:
    """Tool calls put together from stream deltas, as a client of the SDK does."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    return [calls[index] for index in sorted(calls)]


# --- OpenAI Chat Completions ---------------------------------------------------------------


async def test_openai_text_stream_gives_the_exact_text_and_usage(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="Hello there, world!", usage=(12, 7))])

    chunks = await openai_stream_chunks(openai_client, stream_options={"include_usage": True})

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello there, world!"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 7, 19)
    assert chunks[0].id.startswith("chatcmpl-")
    [recorded] = fake.wait_for_requests(1)
    assert recorded.path == "/v1/chat/completions"
    assert recorded.api == "openai"
    assert recorded.stream
    assert recorded.body["model"] == "gpt-test"
    # role chunk + 5 text chunks of 4 characters + finish + usage + [DONE]
    assert recorded.chunks_total == recorded.chunks_sent == 9
    assert not recorded.client_hung_up
    assert recorded.status == 200


async def test_openai_usage_chunk_only_when_asked_for(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="hi")])

    chunks = await openai_stream_chunks(openai_client)

    assert all(chunk.choices and chunk.usage is None for chunk in chunks)


async def test_openai_text_split_exactly_on_chunks(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(chunks=("Hel", "lo, ", "wor", "ld"))])

    chunks = await openai_stream_chunks(openai_client)

    deltas = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert deltas == ["Hel", "lo, ", "wor", "ld"]


async def test_openai_tool_call_stream_assembles_to_the_scripted_call(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    arguments = {"city": "Paris", "units": "celsius", "days": [1, 2]}
    fake.set_script(
        [
            Reply(
                tool_calls=(
                    ScriptedToolCall("get_weather", arguments, id="call_fixed"),
                    ScriptedToolCall("get_time"),
                ),
                chunk_size=5,
            )
        ]
    )

    chunks = await openai_stream_chunks(openai_client)

    first, second = assembled_openai_tool_calls(chunks)
    assert first == {"id": "call_fixed", "name": "get_weather", "arguments": json.dumps(arguments)}
    assert second["name"] == "get_time"
    assert json.loads(second["arguments"]) == {}
    assert second["id"].startswith("call_")
    assert len(second["id"]) == len("call_") + 24
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks][-1] == "tool_calls"


async def test_openai_reasoning_content_streams_before_the_text(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(thinking="Paris is in France.", text="Sunny.")])

    chunks = await openai_stream_chunks(openai_client)

    reasoning = [getattr(c.choices[0].delta, "reasoning_content", None) for c in chunks]
    assert "".join(piece or "" for piece in reasoning) == "Paris is in France."
    first_text = next(i for i, c in enumerate(chunks) if c.choices[0].delta.content)
    last_reasoning = max(i for i, piece in enumerate(reasoning) if piece)
    assert last_reasoning < first_text


async def test_openai_non_streaming_completion(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script(
        [
            Reply(
                text="Let me look.",
                tool_calls=(ScriptedToolCall("get_weather", {"city": "Paris"}),),
                usage=(30, 4),
            )
        ]
    )

    completion = await openai_client.chat.completions.create(model="gpt-test", messages=USER_TURN)

    message = completion.choices[0].message
    assert message.content == "Let me look."
    [call] = message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (30, 4)
    [recorded] = fake.requests  # recorded by the time the SDK has the answer
    assert not recorded.stream
    assert recorded.chunks_total == recorded.chunks_sent == 0


# --- Anthropic Messages --------------------------------------------------------------------


async def test_anthropic_text_stream_gives_the_exact_text_and_usage(
    fake: FakeLLM, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script([Reply(text="Hello there, world!", usage=(21, 6))])

    async with anthropic_client.messages.stream(
        model="claude-test", max_tokens=100, messages=USER_TURN
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        message = await stream.get_final_message()

    assert text == "Hello there, world!"
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (21, 6)
    assert message.id.startswith("msg_01")
    [recorded] = fake.wait_for_requests(1)
    assert (recorded.api, recorded.path, recorded.stream) == ("anthropic", "/v1/messages", True)
    assert recorded.chunks_sent == recorded.chunks_total


async def test_anthropic_tool_use_stream_assembles_to_the_scripted_input(
    fake: FakeLLM, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    arguments = {"location": "Paris", "units": "c"}
    fake.set_script(
        [Reply(text="Checking.", tool_calls=(ScriptedToolCall("get_weather", arguments),))]
    )

    async with anthropic_client.messages.stream(
        model="claude-test", max_tokens=100, messages=USER_TURN
    ) as stream:
        message = await stream.get_final_message()

    text_block, tool_block = message.content
    assert text_block.text == "Checking."
    assert (tool_block.name, tool_block.input) == ("get_weather", arguments)
    assert tool_block.id.startswith("toolu_01")
    assert message.stop_reason == "tool_use"


async def test_anthropic_thinking_stream_has_thinking_then_signature(
    fake: FakeLLM, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script([Reply(thinking="Paris is in France.", text="Sunny.")])

    stream = await anthropic_client.messages.create(
        model="claude-test", max_tokens=100, messages=USER_TURN, stream=True
    )
    events = [event async for event in stream]

    delta_types = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert delta_types[: delta_types.index("signature_delta") + 1] == [
        *["thinking_delta"] * 5,
        "signature_delta",
    ]
    thinking_deltas = [e.delta for e in events if e.type == "content_block_delta"]
    thinking = "".join(d.thinking for d in thinking_deltas if d.type == "thinking_delta")
    assert thinking == "Paris is in France."
    assert [e.type for e in events][:4] == [
        "message_start",
        "content_block_start",
        "content_block_delta",  # the SDK drops the ping
        "content_block_delta",
    ]
    assert events[0].message.usage.output_tokens == 1


async def test_anthropic_non_streaming_message_with_thinking(
    fake: FakeLLM, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script(
        [
            Reply(
                thinking="Need the weather tool.",
                tool_calls=(ScriptedToolCall("get_weather", {"location": "Paris"}),),
                usage=(40, 9),
            )
        ]
    )

    message = await anthropic_client.messages.create(
        model="claude-test", max_tokens=100, messages=USER_TURN
    )

    thinking_block, tool_block = message.content
    assert thinking_block.type == "thinking"
    assert thinking_block.thinking == "Need the weather tool."
    assert thinking_block.signature
    assert tool_block.input == {"location": "Paris"}
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (40, 9)
    assert message.usage.cache_read_input_tokens == 0


# --- Recorded bodies replayed verbatim -----------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "expected_text", "expected_arguments", "expected_finish"),
    [
        ("openai_chat_stream_text.sse", "I'm unable to provide real-time weather", None, "stop"),
        ("openai_chat_stream_tool_call.sse", "", '{"city":"San Francisco","state":"CA"}', None),
        ("openai_chat_stream_finish_length.sse", '{"', None, "length"),
        ("ollama_v1_chat_stream_text_real.sse", ".", None, "stop"),
    ],
)
async def test_openai_sdk_reads_recorded_streams(
    fake: FakeLLM,
    openai_client: openai.AsyncOpenAI,
    fixture: str,
    expected_text: str,
    expected_arguments: str | None,
    expected_finish: str | None,
) -> None:
    fake.set_script([Reply(raw_stream=wire_fixture(fixture))])

    chunks = await openai_stream_chunks(openai_client)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith(expected_text)
    if expected_arguments is not None:
        [call] = assembled_openai_tool_calls(chunks)
        assert call["arguments"] == expected_arguments
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == (expected_finish or "tool_calls")


async def test_anthropic_sdk_reads_recorded_tool_use_stream(
    fake: FakeLLM, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script([Reply(raw_stream=wire_fixture("anthropic_stream_tool_use_sdkfixture.sse"))])

    async with anthropic_client.messages.stream(
        model="claude-test", max_tokens=100, messages=USER_TURN
    ) as stream:
        message = await stream.get_final_message()

    assert message.content[1].input == {"location": "Paris"}
    assert message.stop_reason == "tool_use"
    [recorded] = fake.wait_for_requests(1)
    assert recorded.chunks_total == 15  # events; the leading comments go with the first


async def test_anthropic_sdk_reads_recorded_text_stream_without_final_blank_line(
    fake: FakeLLM,
    anthropic_client: anthropic.AsyncAnthropic,
) -> None:
    # The file ends right after message_stop's data line; the fake adds the blank line.
    fake.set_script([Reply(raw_stream=wire_fixture("anthropic_stream_text_sdkfixture.sse"))])

    stream = await anthropic_client.messages.create(
        model="claude-test", max_tokens=100, messages=USER_TURN, stream=True
    )
    events = [event async for event in stream]

    assert events[-1].type == "message_stop"
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == "Hello there!"


async def test_anthropic_sdk_reads_recorded_thinking_and_incomplete_json_streams(
    fake: FakeLLM,
    anthropic_client: anthropic.AsyncAnthropic,
) -> None:
    fake.set_script(
        [Reply(raw_stream=wire_fixture("anthropic_stream_thinking_refusal_sdkfixture.sse"))]
    )
    async with anthropic_client.messages.stream(
        model="claude-test", max_tokens=100, messages=USER_TURN
    ) as stream:
        message = await stream.get_final_message()
    assert message.content[0].type == "thinking"
    assert message.content[0].signature.startswith("c3ludGhldGlj")
    assert message.stop_reason == "refusal"

    fake.set_script(
        [Reply(raw_stream=wire_fixture("anthropic_stream_incomplete_partial_json_sdkfixture.sse"))]
    )
    stream = await anthropic_client.messages.create(
        model="claude-test", max_tokens=100, messages=USER_TURN, stream=True
    )
    events = [event async for event in stream]
    assert events[-2].delta.stop_reason == "max_tokens"


async def test_recorded_json_bodies_are_served_without_their_notes(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script([Reply(raw_json=wire_fixture("openai_chat_nonstream_tool_call.json"))])
    completion = await openai_client.chat.completions.create(model="gpt-test", messages=USER_TURN)
    assert completion.id == "chatcmpl-ABfvzdvCI6RaIkiEFNjqGXCSYnlzf"
    assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"

    fake.set_script([Reply(raw_json=wire_fixture("anthropic_nonstream_tool_use.json"))])
    message = await anthropic_client.messages.create(
        model="claude-test", max_tokens=100, messages=USER_TURN
    )
    assert message.content[1].input == {"location": "San Francisco, CA", "units": "c"}


# --- Faults --------------------------------------------------------------------------------


async def test_openai_429_with_retry_after_raises_without_retries(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="ok", fault=Fault("http", status=429, retry_after=2))])

    with pytest.raises(openai.RateLimitError) as raised:
        await openai_client.with_options(max_retries=0).chat.completions.create(
            model="gpt-test", messages=USER_TURN
        )

    assert raised.value.response.headers["retry-after"] == "2"
    error = raised.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "rate_limit_exceeded"


async def test_openai_429_once_then_the_sdk_retry_succeeds(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="ok", fault=Fault("http", status=429, retry_after=0.05))])

    chunks = await openai_stream_chunks(openai_client)

    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"
    statuses = [request.status for request in fake.wait_for_requests(2)]
    assert statuses == [429, 200]


async def test_openai_500_raises_internal_server_error(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(fault=Fault("http", status=500))])

    with pytest.raises(openai.InternalServerError) as raised:
        await openai_client.with_options(max_retries=0).chat.completions.create(
            model="gpt-test", messages=USER_TURN
        )

    assert raised.value.response.json()["error"]["type"] == "server_error"


async def test_anthropic_http_errors_have_the_anthropic_body(
    fake: FakeLLM, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    client = anthropic_client.with_options(max_retries=0)
    for status, exception, error_type in [
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ]:
        fake.set_script([Reply(fault=Fault("http", status=status))])
        with pytest.raises(exception) as raised:
            await client.messages.create(model="claude-test", max_tokens=10, messages=USER_TURN)
        assert raised.value.status_code == status
        body = raised.value.response.json()
        assert body == {
            "type": "error",
            "error": {"type": error_type, "message": body["error"]["message"]},
        }


async def test_dropped_stream_raises_in_both_sdks(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script(
        [Reply(text="a long answer that gets cut", fault=Fault("drop", after_chunks=3, times=2))]
    )
    with pytest.raises(openai.APIConnectionError):
        await openai_stream_chunks(openai_client)

    stream = await anthropic_client.messages.create(
        model="claude-test", max_tokens=10, messages=USER_TURN, stream=True
    )
    received = []
    # The Anthropic SDK lets the transport's error through unwrapped.
    with pytest.raises(httpx2.RemoteProtocolError):
        async for event in stream:
            received.append(event)
    openai_request, anthropic_request = fake.wait_for_requests(2)
    assert openai_request.chunks_sent == 3 < openai_request.chunks_total
    assert anthropic_request.chunks_sent == 3
    assert len(received) == 2  # message_start, content_block_start (the ping is dropped)


async def test_error_event_inside_a_200_stream_raises(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script([Reply(text="partial answer", fault=Fault("error_event", after_chunks=2))])
    with pytest.raises(openai.APIError, match="server had an error"):
        await openai_stream_chunks(openai_client)

    fake.set_script(
        [Reply(text="partial answer", fault=Fault("error_event", status=529, after_chunks=2))]
    )
    stream = await anthropic_client.messages.create(
        model="claude-test", max_tokens=10, messages=USER_TURN, stream=True
    )
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        async for _event in stream:
            pass
    [recorded] = fake.wait_for_requests(1)
    assert (recorded.status, recorded.chunks_sent) == (200, 2)


async def test_stall_trips_the_client_timeout_and_ends_early(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="slow", fault=Fault("stall", after_chunks=1, stall_seconds=10))])
    client = openai_client.with_options(max_retries=0, timeout=0.3)

    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        stream = await client.chat.completions.create(
            model="gpt-test", messages=USER_TURN, stream=True
        )
        async for _chunk in stream:
            pass

    assert time.monotonic() - started < 2
    [recorded] = fake.wait_for_requests(1, timeout=2)  # the fake noticed the hang-up
    assert recorded.client_hung_up
    assert recorded.chunks_sent == 1


async def test_a_held_stream_waits_for_release_then_ends_whole(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    # Held after two chunks: the role chunk and "a".
    fake.set_script([Reply(chunks=("a", "b", "c"), fault=Fault("hold", after_chunks=2))])
    stream = await openai_client.chat.completions.create(
        model="gpt-test", messages=USER_TURN, stream=True
    )
    chunks = aiter(stream)
    texts = []
    while not texts:  # the role chunk, then the first text
        texts = [c.delta.content for c in (await anext(chunks)).choices if c.delta.content]
    assert texts == ["a"]
    rest = asyncio.ensure_future(anext(chunks))
    await asyncio.sleep(0.5)
    assert not rest.done() and fake.requests == []  # held: nothing more sent, still open
    fake.release()
    received = [await rest] + [chunk async for chunk in chunks]
    text = "".join(c.delta.content or "" for chunk in received for c in chunk.choices)
    assert text == "bc"
    [recorded] = fake.wait_for_requests(1)
    assert not recorded.client_hung_up and recorded.chunks_sent == recorded.chunks_total


async def test_a_client_that_hangs_up_on_a_held_stream_is_recorded(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="never sent", fault=Fault("hold", after_chunks=1))])
    client = openai_client.with_options(max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        stream = await client.chat.completions.create(
            model="gpt-test", messages=USER_TURN, stream=True
        )
        async for _chunk in stream:
            pass
    [recorded] = fake.wait_for_requests(1, timeout=5)  # no release: the hang-up ended it
    assert recorded.client_hung_up and recorded.chunks_sent == 1


async def test_streaming_only_fault_spares_the_synchronous_call(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="ok", fault=Fault("http", status=500, streaming_only=True))])
    client = openai_client.with_options(max_retries=0)

    completion = await client.chat.completions.create(model="gpt-test", messages=USER_TURN)
    assert completion.choices[0].message.content == "ok"
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="gpt-test", messages=USER_TURN, stream=True)


# --- Reply selection -----------------------------------------------------------------------


async def test_reply_is_chosen_by_the_number_of_assistant_messages(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(text="first"), Reply(text="second")])
    client = openai_client

    async def answer(assistant_turns: int) -> str:
        messages: list[Any] = list(USER_TURN)
        for _ in range(assistant_turns):
            messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
        completion = await client.chat.completions.create(model="gpt-test", messages=messages)
        return completion.choices[0].message.content or ""

    assert [await answer(0), await answer(1), await answer(3)] == ["first", "second", "second"]
    assert [request.reply_index for request in fake.requests] == [0, 1, 1]


async def test_sync_reply_answers_non_streaming_requests(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    fake.set_script([Reply(text="streamed", sync=Reply(text="synchronous"))])

    chunks = await openai_stream_chunks(openai_client)
    message = await anthropic_client.messages.create(
        model="claude-test", max_tokens=10, messages=USER_TURN
    )

    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "streamed"
    assert message.content[0].text == "synchronous"


async def test_empty_script_answers_with_an_error(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.InternalServerError, match="no script is set"):
        await openai_client.with_options(max_retries=0).chat.completions.create(
            model="gpt-test", messages=USER_TURN
        )


# --- Pacing and hang-ups -------------------------------------------------------------------


async def test_paced_stream_takes_its_time(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    # role + 7 text chunks + finish + [DONE] = 10 chunks at 50 per second
    pieces = ("a", "b", "c", "d", "e", "f", "g")
    fake.set_script([Reply(chunks=pieces, pacing=Pacing(chunks_per_second=50))])

    started = time.monotonic()
    await openai_stream_chunks(openai_client)
    elapsed = time.monotonic() - started

    [recorded] = fake.wait_for_requests(1)
    assert recorded.chunks_total == 10
    assert elapsed >= 0.17


async def test_first_token_delay(fake: FakeLLM, openai_client: openai.AsyncOpenAI) -> None:
    fake.set_script([Reply(text="hi", pacing=Pacing(first_token_delay=0.2))])

    started = time.monotonic()
    stream = await openai_client.chat.completions.create(
        model="gpt-test", messages=USER_TURN, stream=True
    )
    await stream.__anext__()

    assert time.monotonic() - started >= 0.19
    await stream.close()


async def test_client_closing_a_stream_is_recorded_as_a_hang_up(
    fake: FakeLLM, openai_client: openai.AsyncOpenAI
) -> None:
    fake.set_script([Reply(chunks=("x",) * 37, pacing=Pacing(chunks_per_second=100))])

    stream = await openai_client.chat.completions.create(
        model="gpt-test", messages=USER_TURN, stream=True
    )
    for _ in range(3):
        await stream.__anext__()
    await stream.close()

    [recorded] = fake.wait_for_requests(1)
    assert recorded.client_hung_up
    assert recorded.chunks_total == 40
    assert 3 <= recorded.chunks_sent < recorded.chunks_total


def test_sync_anthropic_client_closing_a_stream_is_recorded_as_a_hang_up(fake: FakeLLM) -> None:
    fake.set_script([Reply(chunks=("x",) * 40, pacing=Pacing(chunks_per_second=100))])
    with anthropic.Anthropic(
        base_url=fake.anthropic_base_url,
        api_key="test-key",
        http_client=anthropic.DefaultHttpxClient(verify=False),
    ) as client:
        stream = client.messages.create(
            model="claude-test", max_tokens=10, messages=USER_TURN, stream=True
        )
        for _ in range(3):
            next(stream)
        stream.response.close()

    [recorded] = fake.wait_for_requests(1)
    assert recorded.client_hung_up
    assert recorded.chunks_sent < recorded.chunks_total


# --- Control endpoints and the CLI ---------------------------------------------------------

SCRIPT_JSON = [
    {
        "text": "from json",
        "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}],
        "usage": [3, 2],
        "pacing": {"chunks_per_second": None},
        "sync": {"text": "sync from json"},
    }
]


def exercise_control_endpoints(base_url: str) -> list[dict[str, Any]]:
    """Script the fake over HTTP, call it with the SDK, and read back the requests."""
    response = httpx.post(base_url + "/_fake/script", json=SCRIPT_JSON, verify=False)
    assert response.status_code == 200, response.text
    with sync_openai_client(base_url) as client:
        with client.chat.completions.create(
            model="gpt-test", messages=USER_TURN, stream=True
        ) as stream:
            chunks = list(stream)
        completion = client.chat.completions.create(model="gpt-test", messages=USER_TURN)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "from json"
    assert assembled_openai_tool_calls(chunks)[0]["name"] == "get_weather"
    assert completion.choices[0].message.content == "sync from json"
    return httpx.get(base_url + "/_fake/requests", verify=False).json()


def test_control_endpoints(fake: FakeLLM) -> None:
    recorded = exercise_control_endpoints(fake.url)

    assert [(r["api"], r["stream"], r["status"]) for r in recorded] == [
        ("openai", True, 200),
        ("openai", False, 200),
    ]
    assert recorded[0]["body"]["messages"] == USER_TURN
    assert RecordedRequest(**recorded[0]) == fake.requests[0]


def test_control_endpoint_rejects_a_bad_script(fake: FakeLLM) -> None:
    for bad_script in [{"text": "not a list"}, [{"txet": "typo"}], [{"fault": {"kind": "nope"}}]]:
        response = httpx.post(fake.url + "/_fake/script", json=bad_script, verify=False)
        assert response.status_code == 400
        assert response.json()["error"]


def test_cli_serves_until_terminated(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    process = subprocess.Popen(
        [sys.executable, "-m", "parley.fakellm", "--port-file", str(port_file)],
        stdin=subprocess.DEVNULL,  # serving must not depend on stdin staying open
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port_file.read_text().strip()}"

        recorded = exercise_control_endpoints(url)

        assert [r["stream"] for r in recorded] == [True, False]
    finally:
        process.terminate()
        assert process.wait(timeout=5) == 0


def test_cli_loads_a_script_file_and_can_exit_when_stdin_closes(tmp_path: Path) -> None:
    recorded_answer = {
        "id": "chatcmpl-recorded",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "from the file"},
                "finish_reason": "stop",
            }
        ],
    }
    (tmp_path / "answer.json").write_text("# a note line\n" + json.dumps(recorded_answer))
    script_file = tmp_path / "script.json"
    # A relative raw path is taken relative to the script file.
    script_file.write_text(json.dumps([{"raw_json": "answer.json"}]))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "parley.fakellm",
            "--script",
            str(script_file),
            "--exit-on-stdin-eof",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        url = process.stdout.readline().strip()
        with sync_openai_client(url) as client:
            completion = client.chat.completions.create(model="gpt-test", messages=USER_TURN)
        assert completion.choices[0].message.content == "from the file"
        process.stdin.close()
        assert process.wait(timeout=5) == 0
    finally:
        process.kill()
