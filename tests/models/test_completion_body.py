"""The synchronous completion (the hybrid policy's call for a round's tool calls) builds and
encodes its body off the event loop, and posts it through the SDK's public request
(`client.post(..., content=..., cast_to=ChatCompletion | Message)`): the SDKs' own `create`
transforms its parameters on the loop, walking every message of the history (the OpenAI
SDK: over a second for 10,000 messages).

The canaries: what the provider sends is, byte for byte once parsed, what the SDK's `create`
sends for the same request (over HTTP, to the fake LLM), in every form a request takes. And
over the wire: a tool round after a long history leaves the loop free (the watchdog at 50 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from parley.bench.harness import server_environment
from parley.bench.sessions import write_long_session
from parley.core.conversation import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.providers.anthropic_provider import AnthropicProvider
from parley.providers.base import ModelRequest
from parley.providers.openai_provider import OpenAIProvider
from parley.tools.base import ToolSpec

SPEC = ToolSpec(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HISTORY = (
    UserMessage((TextBlock('The weather in Paris? ✓ \u2028 "quoted"'),)),
    AssistantMessage(
        text="Let me look.",
        tool_calls=(ToolCall("call_1", "get_weather", {"city": "Paris"}, "wire_1"),),
        thinking=(ThinkingBlock("Look it up.", signature="sig=="),),
    ),
    ToolResultMessage("call_1", "get_weather", "Sunny, 21 °C"),
    UserMessage((TextBlock("And in Rome?"),)),
)
REQUESTS = {
    "plain": ModelRequest("m", "", (UserMessage((TextBlock("Hi."),)),)),
    "every field": ModelRequest(
        "m",
        "Answer briefly.",
        HISTORY,
        tools=(SPEC,),
        max_tokens=300,
        thinking_budget=1024,
        reasoning_effort="low",
        cache_key="session-1",
    ),
    "continued (vLLM)": ModelRequest(
        "m", "", HISTORY, tools=(SPEC,), continue_from="Rome is", continue_form="vllm"
    ),
    "continued (deepseek)": ModelRequest(
        "m", "", HISTORY, continue_from="Rome is", continue_form="deepseek"
    ),
    "continued (prefill)": ModelRequest(
        "m", "", HISTORY, continue_from="Rome is", continue_form="prefill"
    ),
}


REPLAYED = 10_000  # messages: 2,500 rounds of a prompt, a call, its result, an answer


def _openai(fake: FakeLLM) -> OpenAIProvider:
    return OpenAIProvider(
        name="openai", api_key="sk-test", base_url=fake.openai_base_url, prompt_cache_key=True
    )


@pytest.mark.parametrize("name", sorted(REQUESTS))
async def test_openai_sends_what_the_sdks_create_sends(fake: FakeLLM, name: str) -> None:
    request = REQUESTS[name]
    provider = _openai(fake)
    fake.set_script([Reply(text="Sunny."), Reply(text="Sunny.")])
    try:
        completion = await provider.complete(request)
        arguments: dict[str, Any] = provider._arguments(request)
        await provider._client.chat.completions.create(**arguments)  # the SDK's own way
    finally:
        await provider.aclose()
    ours, sdks = fake.requests[-2], fake.requests[-1]
    assert ours.body == sdks.body and not ours.stream
    assert completion.text == "Sunny."


@pytest.mark.parametrize("name", sorted(REQUESTS))
async def test_anthropic_sends_what_the_sdks_create_sends(fake: FakeLLM, name: str) -> None:
    request = REQUESTS[name]
    provider = AnthropicProvider(
        name="anthropic", api_key="sk-ant", base_url=fake.anthropic_base_url
    )
    call = ScriptedToolCall("get_weather", {"city": "Rome"}, id="toolu_1")
    fake.set_script([Reply(text="Sunny.", tool_calls=(call,), usage=(10, 5))] * 2)
    try:
        completion = await provider.complete(request)
        await provider._client.messages.create(**provider._arguments(request))
    finally:
        await provider.aclose()
    ours, sdks = fake.requests[-2], fake.requests[-1]
    assert ours.body == sdks.body
    assert completion.text == "Sunny."
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("get_weather", {"city": "Rome"})
    ]
    assert completion.usage is not None and completion.usage.output_tokens == 5


def test_a_tool_round_after_a_long_history_leaves_the_loop_free(
    fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session of 10,000 messages, loaded, then a prompt whose round turns to a tool: the
    hybrid policy's synchronous call carries the whole history. Its body was the SDK's to
    make, on the loop (the watchdog, here at 50 ms, saw it blocked for over a second)."""
    from test_nonblocking_writes import SlowClient

    monkeypatch.setenv("PARLEY_LOOP_WATCHDOG_MS", "50")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    session_id = write_long_session(tmp_path / "data", workspace, REPLAYED)
    client = SlowClient(server_environment(fake, tmp_path), tmp_path / "server.log")
    client.send(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientCapabilities": {}}}
    )
    assert client.receive()["id"] == 1
    load = {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
    client.send({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": load})
    while "id" not in client.receive():
        pass
    call = ScriptedToolCall("read_file", {"path": "missing.py"})
    # The fake answers by the count of assistant messages in the history: 5,000 here.
    before = [Reply(text="(earlier)")] * (REPLAYED // 2)
    fake.set_script([*before, Reply(tool_calls=(call,)), Reply(text="It is not there.")])
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "Read it."}]}
    client.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt})
    while (message := client.receive()).get("id") != 3:
        pass
    assert message["result"]["stopReason"] == "end_turn", message
    synchronous = [r for r in fake.requests if not r.stream]
    assert len(synchronous[-1].body["messages"]) > REPLAYED  # the long history, whole
    client.close()
