"""The `thought_level` config option over the wire: offered for a model that thinks, sent as
Anthropic's thinking budget or OpenAI's reasoning effort, kept with the session.

The server runs as a subprocess (`parley serve --framing ndjson`), driven by the official
ACP SDK client, against the fake LLM; every message it sends is checked against ACP's schema.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import text_block
from acp_client import AcpRun, acp_server
from conftest import MODELS, server_env
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall

INVALID_PARAMS = -32602
CLAUDE = MODELS["anthropic"]  # anthropic:claude-sonnet-4-5: extended thinking
O3 = "openai:o3"  # a reasoning model: reasoning_effort
EVAL = ScriptedToolCall("python_eval", {"code": "6 * 7"})


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


def options_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {option["id"]: option for option in answer["configOptions"]}


async def started_session(run: AcpRun, workspace: Path) -> str:
    await run.initialize()
    return (await run.conn.new_session(cwd=str(workspace))).session_id


async def set_option(run: AcpRun, session_id: str, config_id: str, value: str) -> dict:
    await run.conn.set_config_option(config_id=config_id, session_id=session_id, value=value)
    return options_of(run.recording.result_of("session/set_config_option"))


async def prompt(run: AcpRun, session_id: str, text: str = "Hi.") -> None:
    await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])


async def test_an_anthropic_thinking_model_offers_off_to_high_as_budgets(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok")] * 3)
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        offered = options_of(run.recording.result_of("session/new"))
        assert "thought_level" not in offered  # gpt-4.1-mini does not think
        options = await set_option(run, session_id, "model", CLAUDE)
        thought = options["thought_level"]
        assert thought["category"] == "thought_level" and thought["type"] == "select"
        assert [choice["value"] for choice in thought["options"]] == [
            "off",
            "low",
            "medium",
            "high",
        ]
        assert thought["currentValue"] == "off"  # no thinking_budget configured
        await prompt(run, session_id)
        default = fake.requests[-1].body
        options = await set_option(run, session_id, "thought_level", "high")
        assert options["thought_level"]["currentValue"] == "high"
        await prompt(run, session_id)
        high = fake.requests[-1].body
        await set_option(run, session_id, "thought_level", "off")
        await prompt(run, session_id)
        off = fake.requests[-1].body
    assert "thinking" not in default
    assert high["thinking"] == {"type": "enabled", "budget_tokens": 24576}
    assert high["max_tokens"] > 24576
    assert "thinking" not in off
    run.recording.assert_conformant()


async def test_an_openai_reasoning_model_sends_the_effort_only_once_chosen(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok")] * 2)
    async with acp_server({**acp_env, "PARLEY_MODEL": O3}) as run:
        session_id = await started_session(run, workspace)
        thought = options_of(run.recording.result_of("session/new"))["thought_level"]
        assert [choice["value"] for choice in thought["options"]] == ["low", "medium", "high"]
        assert thought["currentValue"] == "medium"  # the API's own default
        await prompt(run, session_id)
        default = fake.requests[-1].body
        await set_option(run, session_id, "thought_level", "low")
        await prompt(run, session_id)
        low = fake.requests[-1].body
    assert "reasoning_effort" not in default
    assert low["reasoning_effort"] == "low"
    run.recording.assert_conformant()


async def test_a_level_the_model_does_not_take_is_refused(
    acp_env: dict[str, str], workspace: Path
) -> None:
    async with acp_server({**acp_env, "PARLEY_MODEL": O3}) as run:
        session_id = await started_session(run, workspace)
        refused = []
        for value in ("off", "extreme", "HIGH"):  # `off` is Anthropic's only
            with pytest.raises(RequestError) as error:
                await set_option(run, session_id, "thought_level", value)
            refused.append(error.value)
        # gpt-4.1-mini has no thinking level: the option goes, and setting it is refused.
        options = await set_option(run, session_id, "model", MODELS["openai"])
        with pytest.raises(RequestError) as without:
            await set_option(run, session_id, "thought_level", "high")
        # Back to a thinking model: offered again, at that model's default.
        again = await set_option(run, session_id, "model", CLAUDE)
    assert [error.code for error in refused] == [INVALID_PARAMS] * 3
    assert "low, medium, high" in str(refused[0])
    assert "thought_level" not in options
    assert without.value.code == INVALID_PARAMS
    assert again["thought_level"]["currentValue"] == "off"
    run.recording.assert_conformant()


async def test_the_level_is_kept_with_the_session_through_resume_and_load(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok")] * 3)
    env = {**acp_env, "PARLEY_MODEL": CLAUDE}
    async with acp_server(env) as first:
        session_id = await started_session(first, workspace)
        await set_option(first, session_id, "thought_level", "low")
        await prompt(first, session_id)
    async with acp_server(env) as resumed:
        await resumed.initialize()
        await resumed.conn.resume_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        on_resume = options_of(resumed.recording.result_of("session/resume"))
        await prompt(resumed, session_id)
    async with acp_server(env) as loaded:
        await loaded.initialize()
        await loaded.conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        on_load = options_of(loaded.recording.result_of("session/load"))
        await prompt(loaded, session_id)
    assert on_resume["thought_level"]["currentValue"] == "low"
    assert on_load["thought_level"]["currentValue"] == "low"
    budgets = [request.body.get("thinking", {}).get("budget_tokens") for request in fake.requests]
    assert budgets == [2048, 2048, 2048]
    for run in (first, resumed, loaded):
        run.recording.assert_conformant()


async def test_the_configure_alias_takes_thought_level_and_announces_it(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok")])
    async with acp_server({**acp_env, "PARLEY_MODEL": CLAUDE}) as run:
        session_id = await started_session(run, workspace)
        configure = "_parley/session/configure"
        await run.raw_request(configure, {"sessionId": session_id, "thoughtLevel": "medium"})
        with pytest.raises(RequestError) as refused:
            await run.raw_request(configure, {"sessionId": session_id, "thoughtLevel": "max"})
        await run.editor.wait_for_update(session_id, "config_option_update", timeout=5)
        await prompt(run, session_id)
    (update, *_) = run.recording.raw_updates(session_id, "config_option_update")
    announced = {option["id"]: option["currentValue"] for option in update["configOptions"]}
    assert announced["thought_level"] == "medium"
    assert refused.value.code == INVALID_PARAMS
    assert fake.requests[-1].body["thinking"]["budget_tokens"] == 8192
    run.recording.assert_conformant()


@pytest.mark.parametrize(
    ("model", "level", "sent_in_the_turn"),
    [
        # Anthropic takes one thinking setting per tool loop: the turn keeps its own.
        (CLAUDE, "high", ("thinking", None)),
        # OpenAI's effort may change between rounds: it applies from the next one.
        (O3, "high", ("reasoning_effort", "high")),
    ],
)
async def test_a_change_during_a_turn(
    acp_env: dict[str, str],
    fake: FakeLLM,
    workspace: Path,
    model: str,
    level: str,
    sent_in_the_turn: tuple[str, str | None],
) -> None:
    # The first round streams slowly: the level is changed while it streams.
    slow = Pacing(chunks_per_second=20)
    fake.set_script(
        [
            Reply(text="Let me compute that. " * 4, chunk_size=8, tool_calls=(EVAL,), pacing=slow),
            Reply(text="It is 42."),
            Reply(text="ok"),
        ]
    )
    async with acp_server({**acp_env, "PARLEY_MODEL": model}) as run:
        session_id = await started_session(run, workspace)
        turn = asyncio.ensure_future(prompt(run, session_id, "6 times 7?"))
        await run.editor.wait_for_update(session_id, "agent_message_chunk")
        await set_option(run, session_id, "thought_level", level)
        await turn
        await prompt(run, session_id)
    streamed, synchronous, second_round, next_turn = (request.body for request in fake.requests)
    field, value = sent_in_the_turn
    for body in (streamed, synchronous):  # the round's two calls: one request
        assert field not in body
    assert second_round.get(field) == value
    assert field in next_turn
    run.recording.assert_conformant()
