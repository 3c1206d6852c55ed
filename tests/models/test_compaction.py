"""Compaction: a conversation grown past a small context window keeps working.

The server runs as a subprocess against the fake LLM, with a small `context_window` for its
model in config.toml: old tool outputs are pruned first, then the older turns summarised in
one call; a provider's "context length exceeded" answer is followed by compaction and one
retry; the store keeps the full history for replay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from acp.helpers import text_block
from acp_client import acp_server
from conftest import MODELS, WEATHER_TOOL, server_env
from parley.agent.compaction import (
    Compaction,
    compacted_view,
    is_context_exceeded,
    pruned,
    summary_cut,
)
from parley.client import ParleyClient
from parley.config import ConfigError, load_settings
from parley.core.conversation import (
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.fakellm.script import Fault
from parley.providers.errors import SDKErrors, provider_error

MODEL = MODELS["openai"]
MARKER = "removed to save context"
SUMMARY_HEADER = "[Summary of the earlier conversation"
WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})
# Even replies call the tool (their text is also what a summary call gets), odd ones answer.
SCRIPT = [
    Reply(text="The story so far: weather was asked for.", tool_calls=(WEATHER,))
    if index % 2 == 0
    else Reply(text="Sunny.")
    for index in range(60)
]


def body_tokens(body: dict[str, Any]) -> int:
    """An OpenAI request's size as Parley estimates it (about four characters a token; a
    tool: its name, description and schema, as `compaction.request_tokens` counts it)."""
    tools = [tool["function"] for tool in body.get("tools", [])]
    chars = sum(
        len(t["name"]) + len(t.get("description", "")) + len(json.dumps(t.get("parameters", {})))
        for t in tools
    )
    for message in body["messages"]:
        content = message.get("content") or ""
        chars += len(content if isinstance(content, str) else json.dumps(content))
        chars += len(json.dumps(message.get("tool_calls", [])))
    return chars // 4


def is_summary(body: dict[str, Any]) -> bool:
    return "<transcript>" in json.dumps(body["messages"][-1])


def assert_calls_answered(body: dict[str, Any]) -> None:
    """Every tool call in what is sent is followed by its result, and every result follows
    its call: compaction never separates them."""
    owed: list[str] = []
    for message in body["messages"]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in owed, message
            owed.remove(message["tool_call_id"])
        else:
            assert not owed, f"calls {owed} have no result before {message['role']}"
            owed = [call["id"] for call in message.get("tool_calls") or []]
    assert not owed


def stored_text(client: ParleyClient, session: str) -> str:
    return json.dumps(client.updates_of(session), ensure_ascii=False)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


async def started(
    start_server: Callable[..., Any],
    home: Path,
    window: int,
    threshold: float,
    model: str = MODEL,
) -> ParleyClient:
    home.mkdir(exist_ok=True)
    config = home / "config.toml"
    config.write_text(
        f'[models."{model}"]\ncontext_window = {window}\n\n[compaction]\nthreshold = {threshold}\n'
    )
    client = await start_server(model=model, extra_env={"PARLEY_CONFIG": str(config)}, home=home)
    await client.initialize(tools=[WEATHER_TOOL])
    return client


def output_of(size: list[int]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The editor's weather tool, answering `size[0]` characters."""
    return lambda params: {"content": "x" * size[0]}


async def test_a_conversation_past_the_window_is_pruned_then_summarised_and_keeps_working(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, home: Path
) -> None:
    fake.set_script(SCRIPT)
    # (10,500: room for the server's 14 tools, about 1,700 tokens of every request.)
    window, threshold = 10_500, 0.8
    limit = window * threshold
    client = await started(start_server, home, window, threshold)
    size = [8_000]  # about 2,000 tokens each
    client.editor_tool_handler = output_of(size)
    session = await client.new_session(str(workspace), toolPolicy="sync")

    # Turns 1-3 fit; turn 4's second request would not: old tool outputs are pruned.
    for turn in range(1, 5):
        result = await client.prompt(session, f"Question {turn}: weather in Paris?")
        assert result["stopReason"] == "end_turn"
    requests = fake.requests
    assert not any(MARKER in json.dumps(r.body) for r in requests[:6])
    last = requests[-1].body
    assert MARKER in json.dumps(last) and body_tokens(last) <= limit
    assert not any(is_summary(r.body) for r in requests)  # pruning first
    assert json.dumps(last).count(MARKER) == 1  # the last three outputs are protected

    # Bigger outputs: pruning is not enough, so the older turns are summarised, once.
    size[0] = 10_000
    await client.prompt(session, "Question 5: weather in Paris?")
    await client.prompt(session, "Question 6: weather in Paris?")
    summaries = [r for r in fake.requests if is_summary(r.body)]
    assert len(summaries) == 1
    assert not summaries[0].body.get("tools") and not summaries[0].stream
    after = fake.requests[fake.requests.index(summaries[0]) + 1 :]
    assert after and all(body_tokens(r.body) <= limit for r in after)
    assert SUMMARY_HEADER in json.dumps(after[0].body)
    assert "Question 1" not in json.dumps(after[0].body)
    shown = [u["content"]["text"] for u in client.updates_of(session, "agent_thought_chunk")]
    assert any(text.startswith("Compacted the conversation:") for text in shown)
    for request in fake.requests:
        if not is_summary(request.body):
            assert_calls_answered(request.body)

    # The next prompt's request is under the threshold (and every request sent for a turn).
    sent = len(fake.requests)
    await client.prompt(session, "Question 7: weather in Paris?")
    first = fake.requests[sent].body
    assert not is_summary(first) and body_tokens(first) <= limit
    turns = [r.body for r in fake.requests if not is_summary(r.body)]
    assert all(body_tokens(body) <= limit for body in turns)

    # Each summary call is counted like any call (and is no round of a turn).
    usage = await client.request("_parley/usage", {"sessionId": session})
    assert usage["session"]["rounds"] == len(turns) == 14
    assert usage["session"]["inputTokens"] == 10 * len(fake.requests)

    # A reload replays the full history; the model goes on seeing the compacted view.
    await client.stop()
    again = await started(start_server, home, window, threshold)
    again.editor_tool_handler = output_of(size)
    await again.load_session(session, str(workspace))
    replayed = stored_text(again, session)
    assert "Question 1" in replayed and "x" * 8_000 in replayed and MARKER not in replayed
    fake.set_script(SCRIPT)
    await again.prompt(session, "Question 8: weather in Paris?")
    body = json.dumps(fake.requests[0].body)
    assert SUMMARY_HEADER in body and "Question 1" not in body
    assert body_tokens(fake.requests[0].body) <= limit


TOO_LONG = {
    # What each provider says (OpenAI also sends the code `context_length_exceeded`).
    "openai": "This model's maximum context length is 8192 tokens. However, your messages "
    "resulted in 9000 tokens. Please reduce the length of the messages.",
    "anthropic": "prompt is too long: 210000 tokens > 200000 maximum",
}


@pytest.mark.parametrize("policy", ["sync", "hybrid"])
async def test_a_context_length_error_is_followed_by_compaction_and_one_retry(
    start_server: Callable[..., Any],
    fake: FakeLLM,
    workspace: Path,
    home: Path,
    provider: str,
    policy: str,
) -> None:
    too_long = Fault(kind="http", status=400, message=TOO_LONG[provider])
    script = list(SCRIPT)
    script[4] = Reply(text="The story so far.", tool_calls=(WEATHER,), fault=too_long)
    fake.set_script(script)
    client = await started(start_server, home, 100_000, 0.8, MODELS[provider])
    client.editor_tool_handler = output_of([100])
    session = await client.new_session(str(workspace), toolPolicy=policy)
    await client.prompt(session, "Question 1: weather in Paris?")
    await client.prompt(session, "Question 2: weather in Paris?")
    sent = len(fake.requests)

    result = await client.prompt(session, "Question 3: weather in Paris?")
    assert result["stopReason"] == "end_turn"
    statuses = [r.status for r in fake.requests[sent:]]
    assert statuses[0] == 400 and all(status == 200 for status in statuses[1:])
    assert is_summary(fake.requests[sent + 1].body)
    retried = json.dumps(fake.requests[sent + 2].body)
    assert SUMMARY_HEADER in retried and "Question 3" in retried and "Question 1" not in retried
    assert client.text_of(session).endswith("Sunny.")


async def test_compact_on_demand_returns_the_token_counts(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, home: Path
) -> None:
    fake.set_script(SCRIPT)
    client = await started(start_server, home, 100_000, 0.8)
    client.editor_tool_handler = output_of([4_000])
    session = await client.new_session(str(workspace), toolPolicy="sync")
    for turn in range(1, 4):
        await client.prompt(session, f"Question {turn}: weather in Paris?")

    counts = await client.request("_parley/session/compact", {"sessionId": session})
    assert counts["tokensBefore"] > counts["tokensAfter"] > 0
    assert is_summary(fake.requests[-1].body)

    await client.prompt(session, "Question 4: weather in Paris?")
    await client.prompt(session, "Question 5: weather in Paris?")
    result = await client.prompt(session, "/compact")
    assert result["stopReason"] == "end_turn"
    (reply, *_) = reversed(client.updates_of(session, "agent_message_chunk"))
    assert reply["content"]["text"].startswith("Compacted the conversation:")
    assert sum(is_summary(r.body) for r in fake.requests) == 2


def test_the_view_summarises_whole_turns_and_prunes_only_old_outputs() -> None:
    call = ToolCall("c1", "get_weather", {}, "w1")
    turn = [
        UserMessage((TextBlock("q"),)),
        AssistantMessage("", tool_calls=(call,)),
        ToolResultMessage("c1", "get_weather", "x" * 4_000),
        AssistantMessage("Sunny."),
    ]
    history = turn * 5
    cut = summary_cut(history, 0, 2_000)
    assert cut is not None and isinstance(history[cut], UserMessage)
    view = compacted_view(history, Compaction(cut, "earlier"))
    assert len(view) == len(history) - cut
    assert isinstance(view[0], UserMessage) and "earlier" in view[0].as_text()
    outputs = [m.content for m in pruned(history, 2_000) if isinstance(m, ToolResultMessage)]
    assert [MARKER in text for text in outputs] == [True, True, False, False, False]


async def test_compaction_on_the_wire_conforms_to_acp(fake: FakeLLM, tmp_path: Path) -> None:
    """Long prompts past the window: the compaction update, `/compact` and
    `_parley/session/compact` as an ACP client sees them, checked against ACP's schema."""
    fake.set_script([Reply(text="Noted.")])
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {**os.environ, **server_env(fake, tmp_path / "home")}
    Path(env["PARLEY_CONFIG"]).parent.mkdir(parents=True, exist_ok=True)
    Path(env["PARLEY_CONFIG"]).write_text(f'[models."{MODEL}"]\ncontext_window = 10000\n')
    async with acp_server(env) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(workspace))).session_id
        for turn in range(1, 4):
            text = f"Part {turn}: " + "y" * 12_000
            await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        assert sum(is_summary(r.body) for r in fake.requests) == 1
        thoughts = run.recording.raw_updates(session_id, "agent_thought_chunk")
        assert thoughts[-1]["content"]["text"].startswith("Compacted the conversation:")
        await run.conn.prompt(session_id=session_id, prompt=[text_block("/compact")])
        counts = await run.raw_request("_parley/session/compact", {"sessionId": session_id})
        assert set(counts) == {"tokensBefore", "tokensAfter"}
    run.recording.assert_conformant()


def test_the_threshold_is_configured_as_a_share_of_the_window(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    environ = {"PARLEY_CONFIG": str(config), "PARLEY_HOME": str(tmp_path / "home")}
    config.write_text("")
    assert load_settings(environ).compaction_threshold == 0.8
    config.write_text("[compaction]\nthreshold = 0.5\n")
    assert load_settings(environ).compaction_threshold == 0.5
    for wrong in ("0", "1.5", "true", '"high"'):
        config.write_text(f"[compaction]\nthreshold = {wrong}\n")
        with pytest.raises(ConfigError, match=r"compaction\.threshold"):
            load_settings(environ)


@pytest.mark.parametrize(
    ("body", "exceeded"),
    [
        ({"error": {"message": "Too long.", "code": "context_length_exceeded"}}, True),
        ({"error": {"message": TOO_LONG["openai"], "code": None}}, True),
        ({"type": "error", "error": {"message": TOO_LONG["anthropic"]}}, True),
        ({"error": {"message": "Invalid value for 'temperature'.", "code": None}}, False),
    ],
)
def test_a_context_length_error_is_told_from_other_refusals(
    body: dict[str, Any], exceeded: bool
) -> None:
    import openai

    request = httpx2.Request("POST", "https://api.example/v1/chat/completions")
    response = httpx2.Response(400, request=request)
    error = openai.BadRequestError("400", response=response, body=body)
    translated = provider_error("openai", error, SDKErrors.of(openai, openai.OpenAIError))
    assert translated.type == "invalid_request"
    assert is_context_exceeded(translated) is exceeded
