"""Providers that hiccup, and turns that fail: `parley serve` as a subprocess, the fake LLM
over HTTP, both wire formats.

A stream that breaks off before anything was shown is asked again; after something was
shown, the prompt ends with the retryable `-32001` and keeps what was shown. A provider that
sends nothing for `stall_timeout` seconds is abandoned with a clear error. Whatever ends a
turn, the history stays valid: the next prompt works and answers every tool call.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from conftest import MODELS, WEATHER_TOOL
from parley.client import ParleyClient
from parley.config import ConfigError, load_settings
from parley.core.errors import ProviderError
from parley.fakellm import FakeLLM, Fault, Pacing, Reply, ScriptedToolCall
from parley.providers.base import retry_delay
from pygls.exceptions import JsonRpcException

STALL_TIMEOUT = 1  # seconds, from config.toml; the default is 60
# Generous: the machine is shared. A stall still ends long before the fake's 30 s stall.
MARGIN = 8.0
WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})
ANSWER = "It is sunny in Paris, 21 degrees."
# After this many chunks both wire formats have streamed their first text delta (OpenAI: the
# role chunk, then text; Anthropic: message_start, content_block_start, ping, then text).
AFTER_FIRST_TEXT = 4


@pytest.fixture
async def client(start_server, provider: str, tmp_path: Path) -> ParleyClient:
    config = tmp_path / "config.toml"
    config.write_text(f"stall_timeout = {STALL_TIMEOUT}\n")
    started = await start_server(model=MODELS[provider], extra_env={"PARLEY_CONFIG": str(config)})
    await started.initialize(tools=[WEATHER_TOOL])
    started.editor_tool_handler = lambda params: {"content": "Sunny, 21 °C"}
    return started


async def failed_prompt(client: ParleyClient, session: str, text: str) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, text, timeout=60)
    return raised.value


def tool_call_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The ids of the calls the assistant made, and of the results sent back, in order."""
    calls, results = [], []
    for message in body["messages"]:
        if message["role"] == "assistant" and message.get("tool_calls"):  # OpenAI
            calls += [call["id"] for call in message["tool_calls"]]
        elif message["role"] == "tool":
            results.append(message["tool_call_id"])
        elif isinstance(message.get("content"), list):  # Anthropic blocks
            for block in message["content"]:
                if block["type"] == "tool_use":
                    calls.append(block["id"])
                elif block["type"] == "tool_result":
                    results.append(block["tool_use_id"])
    return calls, results


def assert_valid_for_the_provider(body: dict[str, Any]) -> None:
    calls, results = tool_call_ids(body)
    assert calls == results, "every tool call has exactly one result"
    roles = [message["role"] for message in body["messages"] if message["role"] != "system"]
    assert roles[0] == "user" and roles[-1] in ("user", "tool")


def sent_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # Anthropic blocks: text, or a tool result's content
            parts += [str(block.get("text") or block.get("content") or "") for block in content]
    return "\n".join(parts)


# --- breaking off before anything was shown: retried --------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Fault("drop", after_chunks=0),
        Fault("drop", after_chunks=1),  # after the role chunk / message_start: no text yet
        Fault("error_event", status=529, after_chunks=0),
        Fault("error_event", status=500, after_chunks=1),
    ],
    ids=["drop at once", "drop after the first chunk", "overloaded event", "error event"],
)
async def test_a_stream_that_breaks_off_before_any_text_is_retried(
    client: ParleyClient, fake: FakeLLM, workspace: Path, fault: Fault
) -> None:
    fake.set_script([Reply(text=ANSWER, fault=fault)])
    session = await client.new_session(str(workspace))

    result = await client.prompt(session, "Weather?", timeout=60)

    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == ANSWER  # shown once: the failed attempt showed nothing
    first, second = fake.wait_for_requests(2)
    assert first.stream and second.stream
    assert first.chunks_sent == fault.after_chunks < first.chunks_total
    assert second.chunks_sent == second.chunks_total
    assert second.body["messages"] == first.body["messages"]  # the same request, again
    assert len(fake.requests) == 2


async def test_stream_retries_are_bounded_like_the_sdks(
    client: ParleyClient, fake: FakeLLM, workspace: Path, provider: str
) -> None:
    fake.set_script([Reply(text=ANSWER, fault=Fault("drop", after_chunks=0, times=3))])
    session = await client.new_session(str(workspace))

    error = await failed_prompt(client, session, "Weather?")

    assert error.code == -32001
    assert error.data["retryable"] is True and error.data["type"] == "stream_interrupted"
    assert error.data["provider"] == provider
    assert len(fake.requests) == 3  # the first try and the SDKs' default 2 retries
    assert client.text_of(session) == ""

    # The faults are used up: the same session answers, and its history is valid.
    assert (await client.prompt(session, "Again?", timeout=60))["stopReason"] == "end_turn"
    assert_valid_for_the_provider(fake.requests[-1].body)


# --- breaking off after something was shown: the retryable error, the text kept -----------


@pytest.mark.parametrize("kind", ["drop", "error_event"])
async def test_a_stream_that_breaks_off_after_text_ends_the_turn_and_keeps_the_text(
    client: ParleyClient,
    fake: FakeLLM,
    workspace: Path,
    start_server,
    provider: str,
    tmp_path: Path,
    kind: str,
) -> None:
    fake.set_script(
        [
            Reply(text=ANSWER, chunk_size=6, fault=Fault(kind, after_chunks=AFTER_FIRST_TEXT)),
            Reply(text="Fresh answer."),
        ]
    )
    session = await client.new_session(str(workspace))

    error = await failed_prompt(client, session, "Weather?")

    assert error.code == -32001 and error.data["retryable"] is True
    shown = client.text_of(session)
    assert shown and ANSWER.startswith(shown) and shown != ANSWER
    assert len(fake.requests) == 1  # not retried: the user saw the start of the answer

    # The next prompt works, and the provider gets the partial answer as the assistant's.
    assert (await client.prompt(session, "Go on.", timeout=60))["stopReason"] == "end_turn"
    body = fake.requests[-1].body
    assert_valid_for_the_provider(body)
    assert shown in sent_text(body)
    assert [m["role"] for m in body["messages"] if m["role"] != "system"] == [
        "user",
        "assistant",
        "user",
    ]

    # Another window loading the session replays what was shown.
    second = await start_server(
        model=MODELS[provider],
        extra_env={"PARLEY_CONFIG": str(tmp_path / "config.toml")},
    )
    await second.initialize()
    await second.request(
        "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    # ... with the failure said after the part that was cut short: an error notice with
    # the error's message (live, the prompt's JSON-RPC error said it).
    replayed = second.updates_of(session, "agent_message_chunk")
    assert [update["content"]["text"] for update in replayed] == [
        shown,
        f"The turn failed: {error.message}",
        "Fresh answer.",
    ]
    assert "_meta" not in replayed[0] and "_meta" not in replayed[-1]
    assert replayed[1]["_meta"] == {"parley": {"notice": {"level": "error"}}}


# --- stalls --------------------------------------------------------------------------------


async def test_a_stall_mid_stream_ends_with_a_clear_error_and_drops_the_connection(
    client: ParleyClient, fake: FakeLLM, workspace: Path, provider: str
) -> None:
    fake.set_script(
        [
            Reply(
                text=ANSWER,
                chunk_size=6,
                fault=Fault("stall", after_chunks=AFTER_FIRST_TEXT, stall_seconds=30),
            ),
            Reply(text="Fresh answer."),
        ]
    )
    session = await client.new_session(str(workspace))

    started = time.monotonic()
    error = await failed_prompt(client, session, "Weather?")

    assert time.monotonic() - started < STALL_TIMEOUT + MARGIN
    assert error.code == -32001
    assert error.data == {"provider": provider, "type": "stalled", "retryable": True}
    assert f"sent nothing for {STALL_TIMEOUT} s" in error.message
    assert "stall_timeout" in error.message  # says what to change
    (stalled,) = fake.wait_for_requests(1, timeout=10)
    assert stalled.client_hung_up  # the stalled connection was closed, not left waiting

    assert (await client.prompt(session, "Go on.", timeout=60))["stopReason"] == "end_turn"
    assert_valid_for_the_provider(fake.requests[-1].body)
    assert client.text_of(session).endswith("Fresh answer.")


async def test_a_stall_before_any_text_is_retried(
    client: ParleyClient, fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text=ANSWER, fault=Fault("stall", after_chunks=0, stall_seconds=30))])
    session = await client.new_session(str(workspace))

    result = await client.prompt(session, "Weather?", timeout=60)

    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == ANSWER
    stalled, answered = fake.wait_for_requests(2, timeout=10)
    assert stalled.client_hung_up and stalled.chunks_sent == 0
    assert answered.chunks_sent == answered.chunks_total


async def test_a_stall_in_the_synchronous_call_ends_with_a_clear_error(
    client: ParleyClient, fake: FakeLLM, workspace: Path, provider: str
) -> None:
    stalling_sync = Reply(
        tool_calls=(WEATHER,), fault=Fault("stall", stall_seconds=30, times=3)
    )  # the first call and both of the SDK's retries
    fake.set_script(
        [
            Reply(text="Let me look.", tool_calls=(WEATHER,), sync=stalling_sync),
            Reply(text=ANSWER),
        ]
    )
    session = await client.new_session(str(workspace))

    started = time.monotonic()
    error = await failed_prompt(client, session, "Weather?")

    # Three waits of STALL_TIMEOUT and the SDK's backoff (at most 0.5 s + 1 s) between them.
    assert time.monotonic() - started < 3 * STALL_TIMEOUT + 1.5 + MARGIN
    assert error.code == -32001
    assert error.data == {"provider": provider, "type": "stalled", "retryable": True}
    assert f"sent nothing for {STALL_TIMEOUT} s" in error.message
    requests = fake.wait_for_requests(4, timeout=10)
    assert [request.stream for request in requests] == [True, False, False, False]
    assert all(request.client_hung_up for request in requests[1:])
    # The call the stream announced is ended for the editor, not left pending.
    announced = client.updates_of(session, "tool_call")[0]["toolCallId"]
    statuses = [
        update.get("status")
        for update in client.updates_of(session, "tool_call_update")
        if update["toolCallId"] == announced
    ]
    assert statuses[-1] == "failed"

    # The history kept what was shown and no call without a result: the next prompt works.
    assert (await client.prompt(session, "Try again.", timeout=60))["stopReason"] == "end_turn"
    body = fake.requests[-1].body
    assert_valid_for_the_provider(body)
    assert "Let me look." in sent_text(body)
    assert client.text_of(session).endswith(ANSWER)


async def test_a_drop_in_the_synchronous_call_is_retried_by_the_sdk(
    client: ParleyClient, fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script(
        [
            Reply(
                tool_calls=(WEATHER,),
                pacing=Pacing(chunks_per_second=100),
                sync=Reply(tool_calls=(WEATHER,), fault=Fault("drop")),
            ),
            Reply(text=ANSWER),
        ]
    )
    session = await client.new_session(str(workspace))

    result = await client.prompt(session, "Weather?", timeout=60)

    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == ANSWER
    requests = fake.wait_for_requests(4)
    assert [request.stream for request in requests] == [True, False, False, True]
    assert requests[1].status == 0  # dropped before any answer
    assert len(client.editor_calls) == 1
    assert_valid_for_the_provider(requests[-1].body)


# --- odd text inside a turn --------------------------------------------------------------


async def test_a_tool_result_cut_mid_emoji_keeps_the_turn_and_the_history_valid(
    client: ParleyClient, fake: FakeLLM, workspace: Path
) -> None:
    # An editor that cuts an emoji in half answers a lone surrogate. Before the wire repaired
    # such text where it enters, the turn failed sending it on (UTF-8 cannot encode it), and
    # the call was left unanswered; `Turn.run` settles the history on any exception for
    # that reason. Now the text arrives as U+FFFD and the turn goes on.
    client.editor_tool_handler = lambda params: {"content": "Sunny \ud83d"}
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text=ANSWER)])
    session = await client.new_session(str(workspace))

    result = await client.prompt(session, "Weather?", timeout=60)

    assert result["stopReason"] == "end_turn"
    body = fake.requests[-1].body
    calls, results = tool_call_ids(body)
    assert len(calls) == 1 and calls == results
    assert "Sunny \ufffd" in sent_text(body)
    fake.set_script([Reply(text=ANSWER)])
    assert (await client.prompt(session, "And now?", timeout=60))["stopReason"] == "end_turn"


# --- how long a retry waits ----------------------------------------------------------------


def failure_with_headers(headers: dict[str, str]) -> ProviderError:
    """A ProviderError as a stream's error event raises it: caused by the SDK's status error,
    which holds the streamed response and its headers."""
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx2.Response(200, headers=headers, request=request)
    cause = anthropic.APIStatusError("Overloaded", response=response, body=None)
    failure = ProviderError("overloaded", provider="anthropic", type="stream_error")
    failure.__cause__ = cause
    return failure


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "0.2"}, 0.2),
        ({"retry-after-ms": "150"}, 0.15),
        ({"retry-after": "0"}, 0.0),
    ],
)
def test_a_retry_honours_a_short_retry_after(headers: dict[str, str], expected: float) -> None:
    assert retry_delay(0, failure_with_headers(headers)) == pytest.approx(expected)


@pytest.mark.parametrize("headers", [{}, {"retry-after": "3600"}, {"retry-after": "soon"}])
def test_otherwise_a_retry_backs_off_like_the_sdks(headers: dict[str, str]) -> None:
    failure = failure_with_headers(headers)
    assert 0.375 <= retry_delay(0, failure) <= 0.5  # 0.5 s, less up to 25 % jitter
    assert 0.75 <= retry_delay(1, failure) <= 1.0
    assert 6.0 <= retry_delay(10, failure) <= 8.0  # capped


# --- where stall_timeout comes from --------------------------------------------------------


def test_stall_timeout_is_read_from_the_config_for_all_providers_or_one(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    assert load_settings({"PARLEY_CONFIG": str(config)}).providers["openai"].stall_timeout == 60

    config.write_text("stall_timeout = 5\n\n[providers.ollama]\nstall_timeout = 300\n")
    providers = load_settings({"PARLEY_CONFIG": str(config)}).providers
    assert providers["openai"].stall_timeout == 5
    assert providers["anthropic"].stall_timeout == 5
    assert providers["ollama"].stall_timeout == 300

    for bad in ('"soon"', "0", "-1", "true"):
        config.write_text(f"stall_timeout = {bad}\n")
        with pytest.raises(ConfigError, match=r"stall_timeout: expected a number( > 0)?, got"):
            load_settings({"PARLEY_CONFIG": str(config)})
