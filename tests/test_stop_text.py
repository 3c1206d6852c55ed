"""Why a turn stopped, in words (`_meta.parley.stopText`, docs/display.md): `parley serve` as
a subprocess, the fake LLM over HTTP. gpt-4.1-mini costs $0.40 per million tokens in and $1.60
out, so a reply of (1,000,000 in, 100,000 out) costs $0.56."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall

READ = ScriptedToolCall("read_file", {"path": "geometry.py"})
COSTLY = (1_000_000, 100_000)  # $0.56 on gpt-4.1-mini


async def server_with_config(start_server: Any, tmp_path: Path, config: str) -> ParleyClient:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    client = await start_server(extra_env={"PARLEY_CONFIG": str(home / "config.toml")})
    await client.initialize()
    return client


def stop_text(result: dict[str, Any]) -> str | None:
    return result["_meta"]["parley"].get("stopText")


async def test_a_finished_turn_has_no_stop_text(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="Done.")])
    client = await server_with_config(start_server, tmp_path, "")
    result = await client.prompt(await client.new_session(str(workspace)), "Hi.")
    assert result["stopReason"] == "end_turn"
    assert "stopText" not in result["_meta"]["parley"]


async def test_the_round_limit_is_named_with_its_number(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(tool_calls=(READ,)), Reply(tool_calls=(READ,))])
    client = await server_with_config(start_server, tmp_path, "max_turn_requests = 2\n")
    result = await client.prompt(await client.new_session(str(workspace)), "Read it.")
    assert result["stopReason"] == "max_turn_requests"
    assert stop_text(result) == "Stopped: the turn reached its limit of 2 model requests."


async def test_a_cut_off_answer_names_the_output_limit(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="The area is", finish_reason="length")])
    config = '[models."openai:gpt-4.1-mini"]\nmax_tokens = 1200\n'
    client = await server_with_config(start_server, tmp_path, config)
    result = await client.prompt(await client.new_session(str(workspace)), "Explain.")
    assert result["stopReason"] == "max_tokens"
    assert stop_text(result) == (
        "The answer was cut off: the model reached its output token limit (1,200 tokens)."
    )


async def test_a_spent_session_budget_names_its_amount_and_spending(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=COSTLY)])
    client = await server_with_config(start_server, tmp_path, "[budget]\nsession_usd = 0.5\n")
    session = await client.new_session(str(workspace))
    first = await client.prompt(session, "Hi.")
    refused = await client.prompt(session, "More.")
    assert "stopText" not in first["_meta"]["parley"]
    assert refused["stopReason"] == "refusal"
    assert stop_text(refused) == (
        "Not started: this session's budget of $0.50 is spent ($0.5600 so far)."
    )


async def test_a_turn_that_crosses_the_day_budget_says_so(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(tool_calls=(READ,), usage=(2_000_000, 200_000)), Reply(text="never")])
    client = await server_with_config(start_server, tmp_path, "[budget]\nday_usd = 1\n")
    result = await client.prompt(await client.new_session(str(workspace)), "Read it.")
    assert result["stopReason"] == "max_turn_requests"
    assert stop_text(result) == "Stopped: today's budget of $1.00 is spent ($1.12 so far)."


async def test_a_cancelled_turn_says_stopped(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="word " * 400, pacing=Pacing(chunks_per_second=20))])
    client = await server_with_config(start_server, tmp_path, "")
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Talk."))
    while not client.text_of(session):
        await asyncio.sleep(0.02)
    client.cancel(session)
    result = await prompt
    assert result["stopReason"] == "cancelled"
    assert stop_text(result) == "Stopped."
