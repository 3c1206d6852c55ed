"""The fake LLM's faults and scripting, seen through the real OpenAI and Anthropic SDKs over
real HTTP: HTTP errors, dropped, stalled and held streams, which reply answers which request,
pacing and hang-ups, the control endpoints and the `parley fake-llm` CLI. Its wire formats:
test_fakellm_wire.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from fakellm_clients import (
    USER_TURN,
    assembled_openai_tool_calls,
    openai_stream_chunks,
    sync_openai_client,
)
from parley.fakellm import FakeLLM, Fault, Pacing, RecordedRequest, Reply

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
