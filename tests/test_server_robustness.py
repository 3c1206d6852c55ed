"""Bad input and bad luck: malformed messages, provider faults, cancel, runaway tools.

Every request gets exactly one response, the server keeps serving, and the session stays
usable afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, WEATHER_TOOL, server_env
from parley.client import ParleyClient
from parley.fakellm import Fault, Pacing, Reply, ScriptedToolCall
from pygls.exceptions import JsonRpcException

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})

# --- malformed JSON-RPC, on the raw byte stream ------------------------------------------


class RawServer:
    """`parley serve` spoken to byte by byte, to send what no well-behaved client would."""

    def __init__(self, env: dict[str, str], framing: str = "lsp") -> None:
        self.framing = framing
        self.process = subprocess.Popen(
            [sys.executable, "-m", "parley", "serve", "--framing", framing],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )

    def send_bytes(self, body: bytes) -> None:
        assert self.process.stdin is not None
        if self.framing == "lsp":
            body = b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            body += b"\n"
        self.process.stdin.write(body)
        self.process.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_bytes(json.dumps(message).encode())

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        if self.framing == "ndjson":
            return json.loads(self.process.stdout.readline())
        length = None
        while True:
            line = self.process.stdout.readline().strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        assert length is not None
        return json.loads(self.process.stdout.read(length))

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=10)


@pytest.fixture(params=["lsp", "ndjson"])
def raw_server(request, fake, tmp_path):
    server = RawServer(server_env(fake, tmp_path), framing=request.param)
    yield server
    if server.process.poll() is None:
        server.process.kill()


def test_every_malformed_request_gets_its_error_and_the_server_keeps_serving(
    raw_server: RawServer, workspace: Path
) -> None:
    raw_server.send_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", ')
    answer = raw_server.receive()
    assert answer["id"] == 1 and answer["error"]["code"] == -32700
    raw_server.send_bytes(b"this is not json and has no id")  # logged and skipped
    raw_server.send({"jsonrpc": "2.0", "id": 2, "method": "no/such/method", "params": {}})
    assert raw_server.receive()["error"]["code"] == -32601
    raw_server.send({"jsonrpc": "2.0", "id": 3, "method": "session/new"})  # no params
    error = raw_server.receive()["error"]
    assert error["code"] == -32602
    raw_server.send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"x": 1}})
    error = raw_server.receive()["error"]
    assert error["code"] == -32602 and "sessionId: required field missing" in error["message"]
    raw_server.send({"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": 7}})
    assert raw_server.receive()["error"]["code"] == -32602
    raw_server.send({"id": 6, "method": "initialize", "params": {}})  # no "jsonrpc"
    assert raw_server.receive()["error"]["code"] == -32600
    raw_server.send([{"jsonrpc": "2.0", "id": 7, "method": "initialize"}])
    assert raw_server.receive()["error"]["code"] == -32600
    raw_server.send({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "session/prompt",
            "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]},
        }
    )
    error = raw_server.receive()
    assert error["id"] == 8 and error["error"]["code"] == -32002
    assert "Unknown session" in error["error"]["message"]

    # ... and it still serves real requests.
    raw_server.send(
        {"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    answer = raw_server.receive()
    assert answer["id"] == 9 and answer["result"]["sessionId"].startswith("sess_")
    assert raw_server.close() == 0  # it exits when stdin closes


def test_parse_error_names_the_problem(raw_server: RawServer) -> None:
    raw_server.send_bytes(b'{"jsonrpc": "2.0", "id": "abc", "method": ')
    answer = raw_server.receive()
    assert answer["id"] == "abc"
    assert answer["error"]["code"] == -32700
    assert "not JSON" in answer["error"]["message"]


def test_bad_prompt_blocks_and_settings_are_refused(raw_server: RawServer, workspace) -> None:
    raw_server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "relative/dir"}}
    )
    assert "absolute" in raw_server.receive()["error"]["message"]
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(workspace), "_meta": {"parley": {"toolPolicy": "yolo"}}},
        }
    )
    assert "toolPolicy" in raw_server.receive()["error"]["message"]
    raw_server.send(
        {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    session = raw_server.receive()["result"]["sessionId"]
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "image", "data": "..."}]},
        }
    )
    assert "not supported" in raw_server.receive()["error"]["message"]
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "  "}]},
        }
    )
    assert "empty" in raw_server.receive()["error"]["message"]


# --- provider faults ---------------------------------------------------------------------

# The stream faults come after the first text delta in both wire formats (Anthropic's third
# chunk is a ping): a stream that breaks off before any text is retried, not an error.
FAULTS = {
    "429 rate limit": (Fault("http", status=429, retry_after=0.01, times=3), 429, "rate_limit"),
    "500 server error": (Fault("http", status=500, times=3), 500, "server_error"),
    "dropped stream": (
        Fault("drop", after_chunks=4, streaming_only=True),
        None,
        "stream_interrupted",
    ),
    "error inside the stream": (
        Fault("error_event", after_chunks=4, streaming_only=True),
        None,
        "stream_error",
    ),
}


@pytest.mark.parametrize("fault_name", sorted(FAULTS))
async def test_provider_fault_ends_the_prompt_with_the_protocol_error_and_the_next_works(
    client: ParleyClient, fake, workspace, provider: str, fault_name: str
) -> None:
    fault, status, kind = FAULTS[fault_name]
    fake.set_script([Reply(text="Partial answer that breaks off", fault=fault)])
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?", timeout=30)
    error = raised.value
    assert error.code == -32001
    assert error.data["provider"] == provider
    assert error.data["retryable"] is True
    if status is not None:
        assert error.data["status"] == status
        assert len(fake.requests) == 3  # the SDK retried twice
    if kind != "stream_error" or provider == "openai":
        assert error.data["type"] == kind
    assert error.message  # a sentence a person can act on

    # The fault was used up: the same session answers the next prompt.
    result = await client.prompt(session, "Again?", timeout=30)
    assert result["stopReason"] == "end_turn"


async def test_anthropic_overloaded_529(start_server, fake, workspace) -> None:
    client = await start_server(model=MODELS["anthropic"])
    await client.initialize()
    fake.set_script([Reply(text="ok", fault=Fault("http", status=529, retry_after=0.01, times=3))])
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?", timeout=30)
    assert raised.value.code == -32001
    assert raised.value.data["status"] == 529
    assert raised.value.data["type"] == "overloaded"


async def test_missing_api_key_says_which_variable_to_set(start_server, workspace) -> None:
    client = await start_server(extra_env={"OPENAI_API_KEY": ""})
    await client.initialize()
    models = await client.request("_parley/models", {})
    openai_model = next(m for m in models["models"] if m["id"] == "openai:gpt-4.1-mini")
    assert openai_model["available"] is False and "OPENAI_API_KEY" in openai_model["reason"]
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?")
    assert raised.value.code == -32001
    assert "OPENAI_API_KEY" in raised.value.message


# --- cancel ------------------------------------------------------------------------------


async def test_cancel_mid_stream_returns_fast_and_keeps_what_was_said(
    client: ParleyClient, fake, workspace
) -> None:
    slow = Reply(text="word " * 400, chunk_size=5, pacing=Pacing(chunks_per_second=50))
    fake.set_script([slow, Reply(text="Fresh answer.")])
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Talk for a long time."))
    await client.wait_for_update(session, lambda u: u["sessionUpdate"] == "agent_message_chunk")
    cancelled_at = time.monotonic()
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 5)
    assert result["stopReason"] == "cancelled"
    assert time.monotonic() - cancelled_at < 1.0
    streamed = client.text_of(session)
    assert streamed.startswith("word")
    (request,) = fake.wait_for_requests(1)
    assert request.client_hung_up  # the provider stream was closed

    # The next prompt works, and the history kept the prompt and the text streamed before.
    again = await client.prompt(session, "Now briefly.")
    assert again["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "Talk for a long time." in sent and streamed.strip() in sent


async def test_cancel_while_waiting_for_permission(start_server, fake, workspace) -> None:
    client = await start_server()
    never_answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    client.permission_handler = lambda params: never_answered
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "1"}),)), Reply(text="ok")]
    )
    await client.initialize()
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Eval."))
    while not client.permission_requests:
        await asyncio.sleep(0.02)
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 2)
    assert result["stopReason"] == "cancelled"
    never_answered.set_result({"outcome": {"outcome": "cancelled"}})
    # The unfinished call got a result, so the provider accepts the history.
    again = await client.prompt(session, "Something else.")
    assert again["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "cancelled" in sent


async def test_cancel_interrupts_a_running_tool(client: ParleyClient, fake, workspace) -> None:
    started = asyncio.Event()

    async def slow_tool(params: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(30)
        return {"content": "too late"}

    client.editor_tool_handler = slow_tool
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="ok")])
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Weather?"))
    await asyncio.wait_for(started.wait(), 10)
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 2)
    assert result["stopReason"] == "cancelled"
    failed = [
        u for u in client.updates_of(session, "tool_call_update") if u.get("status") == "failed"
    ]
    assert failed and "cancelled" in failed[-1]["content"][0]["content"]["text"]


async def test_a_second_prompt_while_one_runs_is_refused(
    client: ParleyClient, fake, workspace
) -> None:
    fake.set_script([Reply(text="slow " * 50, pacing=Pacing(chunks_per_second=50))])
    session = await client.new_session(str(workspace))
    first = asyncio.ensure_future(client.prompt(session, "One."))
    await client.wait_for_update(session, lambda u: u["sessionUpdate"] == "agent_message_chunk")
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Two.")
    assert "already running" in raised.value.message
    client.cancel(session)
    assert (await first)["stopReason"] == "cancelled"


# --- tools that fail ---------------------------------------------------------------------


async def test_circuit_breaker_ends_a_loop_of_identical_errors(
    client: ParleyClient, fake, workspace
) -> None:
    client.editor_tool_handler = lambda params: {"content": "city not found", "isError": True}
    fake.set_script([Reply(tool_calls=(WEATHER,))])  # the model keeps calling, forever
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn"
    assert len(client.editor_calls) == 5
    assert "failed 5 times in a row" in client.text_of(session)


async def test_round_limit(start_server, fake, workspace, tmp_path) -> None:
    config = tmp_path / "limit.toml"
    config.write_text("max_turn_requests = 3\n")
    client = await start_server(extra_env={"PARLEY_CONFIG": str(config)})
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = lambda params: {"content": f"ok {len(client.editor_calls)}"}
    fake.set_script([Reply(tool_calls=(WEATHER,))])
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Loop.")
    assert result["stopReason"] == "max_turn_requests"
    assert result["_meta"]["parley"]["rounds"] == 3


async def test_unknown_tool_and_bad_arguments_go_back_to_the_model(
    client: ParleyClient, fake, workspace
) -> None:
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("launch_rockets", {}),)),
            Reply(text="Sorry."),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Go.")
    assert result["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "no tool named 'launch_rockets'" in sent


async def test_editor_tool_error_reaches_the_model(client: ParleyClient, fake, workspace) -> None:
    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the editor exploded")

    client.editor_tool_handler = broken
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="Sorry.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")
    assert "The editor failed to run get_weather" in json.dumps(fake.requests[-1].body)


@pytest.mark.parametrize("method", ["$/cancelRequest", "$/cancel_request"])
async def test_cancel_request_answers_the_prompt_with_request_cancelled(
    client: ParleyClient, fake, workspace, method: str
) -> None:
    fake.set_script(
        [Reply(text="slow " * 200, pacing=Pacing(chunks_per_second=50)), Reply(text="ok")]
    )
    session = await client.new_session(str(workspace))
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "Talk."}]}
    pending = client.protocol.send_request_async("session/prompt", params, msg_id="prompt-1")
    await client.wait_for_update(session, lambda u: u["sessionUpdate"] == "agent_message_chunk")
    client.notify(method, {"id": "prompt-1"})
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(pending, 5)
    assert raised.value.code == -32800
    assert (await client.prompt(session, "Again."))["stopReason"] == "end_turn"
