"""The fake LLM's wire formats against the real OpenAI and Anthropic SDKs, over real HTTP:
OpenAI Chat Completions and Anthropic Messages, streamed and whole, and real recorded provider
bodies replayed verbatim. Its faults and scripting: test_fakellm_script.py."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from conftest import wire_fixture
from fakellm_clients import (
    USER_TURN,
    assembled_openai_tool_calls,
    openai_stream_chunks,
)
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

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
