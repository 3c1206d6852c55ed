"""Budgets (issue 14, item 3): a turn past its session's or the day's budget does not call the
provider, a turn that crosses one stops after the round, and the `budget` option.

The server runs as a subprocess driven by the official ACP SDK (tests/acp_client.py), the
model is the fake LLM; gpt-4.1-mini costs $0.40 per million tokens in and $1.60 out, so a
reply of (1,000,000 in, 100,000 out) costs $0.56.
"""

from __future__ import annotations

import os
from datetime import datetime, time
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import text_block
from acp_client import AcpRun, acp_server
from conftest import server_env
from parley.agent.budgets import day_start
from parley.agent.session import now_iso
from parley.config import ConfigError, load_settings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

COSTLY = (1_000_000, 100_000)  # $0.56 on gpt-4.1-mini
EVAL = ScriptedToolCall("python_eval", {"code": "6 * 7"})
INVALID_PARAMS = -32602


def env_with_budget(fake: FakeLLM, home: Path, budget: str) -> dict[str, str]:
    env = {**os.environ, **server_env(fake, home)}
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(f"[budget]\n{budget}\n", encoding="utf-8")
    env["PARLEY_CONFIG"] = str(config)
    return env


async def new_session(run: AcpRun, workspace: Path) -> str:
    return (await run.conn.new_session(cwd=str(workspace))).session_id


def current_values(config_options: list[dict[str, Any]]) -> dict[str, Any]:
    return {option["id"]: option.get("currentValue") for option in config_options}


async def test_a_turn_past_the_session_budget_does_not_call_the_provider(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=COSTLY), Reply(text="never sent")])
    env = env_with_budget(fake, tmp_path / "home", "session_usd = 0.5")
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        first = await run.conn.prompt(session_id=session_id, prompt=[text_block("Hi.")])
        before = len(fake.requests)
        shown = len(run.editor.text_of(session_id))
        refused = await run.conn.prompt(session_id=session_id, prompt=[text_block("More.")])
        why = run.editor.text_of(session_id)[shown:]
        chunks = run.recording.raw_updates(session_id, "agent_message_chunk")
        shown = len(run.editor.text_of(session_id))
        await run.conn.prompt(session_id=session_id, prompt=[text_block("/cost")])
        cost = run.editor.text_of(session_id)[shown:]
    assert first.stop_reason == "end_turn"
    assert len(fake.requests) == before  # no provider call
    assert refused.stop_reason == "refusal"  # the prompt is not kept
    assert "This session spent $0.5600 of its $0.50 budget" in why
    assert "not sent to the model" in why and "Budget" in why
    # Parley speaking, not the model: the chunk says so (docs/display.md, notices).
    assert chunks[-1]["content"]["text"] == why
    assert chunks[-1]["_meta"] == {"parley": {"notice": {"level": "warning"}}}
    assert all("_meta" not in chunk for chunk in chunks[:-1])  # the answer "ok" is not one
    assert "session budget $0.50, $0.0000 left" in cost
    run.recording.assert_conformant()


async def test_the_day_budget_counts_every_session(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=COSTLY)])
    env = env_with_budget(fake, tmp_path / "home", "day_usd = 1.0")
    async with acp_server(env) as run:
        await run.initialize()
        first = await new_session(run, workspace)
        await run.conn.prompt(session_id=first, prompt=[text_block("Hi.")])  # $0.56
        second = await new_session(run, workspace)
        await run.conn.prompt(session_id=second, prompt=[text_block("Hi.")])  # $1.12 today
        shown = len(run.editor.text_of(second))
        await run.conn.prompt(session_id=second, prompt=[text_block("/cost")])
        cost = run.editor.text_of(second)[shown:]
        before = len(fake.requests)
        third = await new_session(run, workspace)
        refused = await run.conn.prompt(session_id=third, prompt=[text_block("Hi.")])
        why = run.editor.text_of(third)
        listed = await run.conn.list_sessions()
    assert len(fake.requests) == before
    assert refused.stop_reason == "refusal"
    assert "Today's model calls spent $1.1200 of its $1.00 budget" in why
    assert "budget.day_usd" in why
    # Refused at its first prompt, the third session was never stored.
    assert {session.session_id for session in listed.sessions} == {first, second}
    assert "today $1.1200 spent of $1.00, $0.0000 left" in cost
    run.recording.assert_conformant()


async def test_a_turn_that_crosses_the_budget_stops_after_the_round(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script(
        [
            Reply(text="Computing.", tool_calls=(EVAL,), usage=COSTLY),
            Reply(text="It is 42."),  # the round the budget leaves unused
        ]
    )
    env = env_with_budget(fake, tmp_path / "home", "session_usd = 0.5")
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        result = await run.conn.prompt(session_id=session_id, prompt=[text_block("6 * 7?")])
        said = run.editor.text_of(session_id)
        calls = run.recording.raw_updates(session_id, "tool_call_update")
    assert result.stop_reason == "max_turn_requests"
    assert {request.reply_index for request in fake.requests} == {0}  # no second round
    assert "so the turn stops here" in said
    assert any(
        update.get("status") == "failed" and "budget" in str(update.get("content"))
        for update in calls
    )
    assert run.editor.updates_of(session_id, "tool_call")  # shown, never run
    run.recording.assert_conformant()


async def test_the_budget_notice_is_marked_replayed_and_never_sent_to_the_model(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script(
        [
            Reply(text="Computing.", tool_calls=(EVAL,), usage=COSTLY),
            Reply(text="It is 42."),
        ]
    )
    env = env_with_budget(fake, tmp_path / "home", "session_usd = 0.5")
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("6 * 7?")])
        chunks = run.recording.raw_updates(session_id, "agent_message_chunk")
    async with acp_server(env) as again:
        await again.initialize()
        await again.conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        replayed = again.recording.raw_updates(session_id, "agent_message_chunk")
        await again.conn.set_config_option(config_id="budget", session_id=session_id, value="none")
        result = await again.conn.prompt(session_id=session_id, prompt=[text_block("Go on.")])
    notices = [chunk for chunk in chunks if chunk.get("_meta", {}).get("parley", {}).get("notice")]
    (notice,) = notices
    assert "so the turn stops here" in notice["content"]["text"]
    answer = "".join(chunk["content"]["text"] for chunk in chunks if chunk not in notices)
    assert answer == "Computing."
    # Kept with the session, not in its history: the replay shows it again, after the
    # answer, as it came; the model is never told it said it.
    assert [chunk["content"]["text"] for chunk in replayed] == [
        "Computing.",
        notice["content"]["text"],
    ]
    assert replayed[-1]["_meta"] == {"parley": {"notice": {"level": "warning"}}}
    assert result.stop_reason == "end_turn"
    assert "so the turn stops here" not in str(fake.requests[-1].body)
    assert "Computing." in str(fake.requests[-1].body)
    run.recording.assert_conformant()
    again.recording.assert_conformant()


async def test_the_budget_option_is_offered_set_and_kept_through_resume(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=COSTLY)])
    env = env_with_budget(fake, tmp_path / "home", "session_usd = 0.75")
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        offered = run.recording.result_of("session/new")["configOptions"]
        refused = []
        for value in ("0.3", "lots", True):
            with pytest.raises(RequestError) as error:
                await run.conn.set_config_option(
                    config_id="budget", session_id=session_id, value=value
                )
            refused.append(error.value.code)
        await run.conn.set_config_option(config_id="budget", session_id=session_id, value="0.5")
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Hi.")])
        before = len(fake.requests)
        stopped = await run.conn.prompt(session_id=session_id, prompt=[text_block("More.")])
        after = len(fake.requests)
    async with acp_server(env) as again:
        await again.initialize()
        await again.conn.resume_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        resumed = again.recording.result_of("session/resume")["configOptions"]
        await again.conn.set_config_option(config_id="budget", session_id=session_id, value="none")
        result = await again.conn.prompt(session_id=session_id, prompt=[text_block("More.")])
    (budget,) = [option for option in offered if option["id"] == "budget"]
    assert budget["type"] == "select" and budget["currentValue"] == "0.75"
    values = [choice["value"] for choice in budget["options"]]
    assert values == ["none", "0.5", "0.75", "1", "2", "5", "10", "20"]
    assert refused == [INVALID_PARAMS] * 3
    assert stopped.stop_reason == "refusal" and after == before
    assert current_values(resumed)["budget"] == "0.5"  # stored with the session
    assert result.stop_reason == "end_turn"  # no budget: the turn runs
    run.recording.assert_conformant()
    again.recording.assert_conformant()


@pytest.mark.parametrize(
    "budget",
    ["session_usd = 0", "day_usd = -1", 'session_usd = "2"', "day_usd = true", "weekly_usd = 5"],
)
def test_a_bad_budget_in_config_toml_is_a_config_error(tmp_path: Path, budget: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[budget]\n{budget}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="budget"):
        load_settings({"PARLEY_CONFIG": str(path), "PARLEY_HOME": str(tmp_path / "home")})


def test_budgets_load_from_config_toml(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[budget]\nsession_usd = 2\nday_usd = 10.5\n", encoding="utf-8")
    settings = load_settings({"PARLEY_CONFIG": str(path), "PARLEY_HOME": str(tmp_path / "home")})
    assert (settings.budget.session_usd, settings.budget.day_usd) == (2.0, 10.5)


async def test_calls_of_unknown_price_never_block(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=COSTLY)])
    env = env_with_budget(fake, tmp_path / "home", "session_usd = 0.5\nday_usd = 0.5")
    env["PARLEY_MODEL"] = "openai:a-model-nobody-prices"
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        results = [
            await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])
            for text in ("Hi.", "Again.")
        ]
    assert [result.stop_reason for result in results] == ["end_turn", "end_turn"]
    assert len(fake.requests) == 2  # both turns called the model
    run.recording.assert_conformant()


def test_the_day_starts_at_local_midnight_in_the_stores_time_format() -> None:
    start = day_start()
    assert start.endswith("Z") and start <= now_iso()
    assert datetime.fromisoformat(start).astimezone().time() == time(0, 0)


async def test_compact_past_the_budget_makes_no_call_and_says_why(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    """`/compact`'s summary is a billed call: past a budget it is not made (issue 22)."""
    fake.set_script([Reply(text="ok"), Reply(text="ok", usage=COSTLY), Reply(text="ok")])
    env = env_with_budget(fake, tmp_path / "home", "session_usd = 0.5")
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        for text in ("One.", "Two, which spends the budget."):
            await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        before = len(fake.requests)
        shown = len(run.editor.text_of(session_id))
        result = await run.conn.prompt(session_id=session_id, prompt=[text_block("/compact")])
        why = run.editor.text_of(session_id)[shown:]
        chunk = run.recording.raw_updates(session_id, "agent_message_chunk")[-1]
        with pytest.raises(RequestError) as refused:
            await run.raw_request("_parley/session/compact", {"sessionId": session_id})
    assert len(fake.requests) == before  # no summary call
    assert result.stop_reason == "refusal"
    assert why.startswith("This session spent $0.5600 of its $0.50 budget, so the conversation")
    assert "not compacted" in why and "Budget" in why
    assert chunk["_meta"] == {"parley": {"notice": {"level": "warning"}}}
    assert refused.value.code == -32004 and "not compacted" in str(refused.value)
    run.recording.assert_conformant()


async def test_a_summary_that_crosses_the_budget_stops_the_turn_before_its_round(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    """Compaction's summary is a billed call made inside a turn: when it spends the budget,
    the round it was made for is not sent (issue 22, item 5)."""
    # Every request with no assistant message gets this reply: turn 1, then the summary.
    fake.set_script([Reply(text="Read it.", usage=COSTLY)])  # $0.56 a call
    home = tmp_path / "home"
    env = env_with_budget(fake, home, "session_usd = 1.0")
    config = Path(env["PARLEY_CONFIG"])
    config.write_text(
        config.read_text(encoding="utf-8")
        + '\n[models."openai:gpt-4.1-mini"]\ncontext_window = 10000\n'
        + "\n[compaction]\nthreshold = 0.8\n",
        encoding="utf-8",
    )
    long_text = "word " * 4_000  # about 5,000 tokens
    async with acp_server(env) as run:
        await run.initialize()
        session_id = await new_session(run, workspace)
        first = await run.conn.prompt(session_id=session_id, prompt=[text_block(long_text)])
        shown = len(run.editor.text_of(session_id))
        second = await run.conn.prompt(session_id=session_id, prompt=[text_block(long_text)])
        said = run.editor.text_of(session_id)[shown:]
    assert first.stop_reason == "end_turn"
    assert len(fake.requests) == 2  # turn 1, then the summary; no round after it
    assert "<transcript>" in str(fake.requests[1].body["messages"][-1])
    assert second.stop_reason == "max_turn_requests"
    assert "This session spent $1.1200 of its $1.00 budget" in said
    assert "so the turn stops here" in said and "Read it." not in said
    run.recording.assert_conformant()
