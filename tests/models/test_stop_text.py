"""Why a turn stopped, in words: one notice per stop, `{level, text}`, said by the server
before it answers the prompt, kept with the session and replayed where it came, never sent to
the model (docs/protocol.md, Notices). `parley serve` as a subprocess, the fake LLM over HTTP.
gpt-4.1-mini costs $0.40 per million tokens in and $1.60 out, so a reply of (1,000,000 in,
100,000 out) costs $0.56."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall

READ = ScriptedToolCall("read_file", {"path": "geometry.py"})
MISSING = ScriptedToolCall("read_file", {"path": "nowhere.py"})
COSTLY = (1_000_000, 100_000)  # $0.56 on gpt-4.1-mini


async def server_with_config(
    start_server: Any, tmp_path: Path, config: str, model: str = MODELS["openai"]
) -> ParleyClient:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    client = await start_server(model=model, extra_env={"PARLEY_CONFIG": str(home / "config.toml")})
    await client.initialize()
    return client


def assert_said_once(
    client: ParleyClient, session: str, result: dict[str, Any], level: str, text: str
) -> None:
    """The stop was said once, by a notice that came before the answer (it is recorded when
    the prompt returns), and the answer carries no words of its own."""
    assert client.notices_of(session) == [(level, text)]
    assert "stopText" not in result["_meta"]["parley"]
    last = client.updates_of(session)[-1]
    assert last["_meta"]["parley"]["notice"] == {"level": level}  # after the turn's updates


async def test_a_finished_turn_has_no_notice(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="Done.")])
    client = await server_with_config(start_server, tmp_path, "")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Hi.")
    assert result["stopReason"] == "end_turn"
    assert "stopText" not in result["_meta"]["parley"]
    assert client.notices_of(session) == []


async def test_the_round_limit_is_named_with_its_number(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(tool_calls=(READ,)), Reply(tool_calls=(READ,))])
    client = await server_with_config(start_server, tmp_path, "max_turn_requests = 2\n")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Read it.")
    assert result["stopReason"] == "max_turn_requests"
    said = "Stopped: the turn reached its limit of 2 model requests."
    assert_said_once(client, session, result, "warning", said)


async def test_a_cut_off_answer_names_the_output_limit(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="The area is", finish_reason="length")])
    config = '[models."openai:gpt-4.1-mini"]\nmax_tokens = 1200\n'
    client = await server_with_config(start_server, tmp_path, config)
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Explain.")
    assert result["stopReason"] == "max_tokens"
    said = "The answer was cut off: the model reached its output token limit (1,200 tokens)."
    assert_said_once(client, session, result, "warning", said)
    assert client.text_of(session).startswith("The area is")


async def test_a_model_that_refuses_is_said_to(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="I can't help with that.", finish_reason="refusal")])
    client = await server_with_config(start_server, tmp_path, "", model=MODELS["anthropic"])
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Something.")
    assert result["stopReason"] == "refusal"
    assert_said_once(client, session, result, "warning", "The model refused to answer.")


async def test_a_spent_session_budget_is_said_once(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=COSTLY)])
    client = await server_with_config(start_server, tmp_path, "[budget]\nsession_usd = 0.5\n")
    session = await client.new_session(str(workspace))
    first = await client.prompt(session, "Hi.")
    shown = len(client.updates_of(session))
    refused = await client.prompt(session, "More.")
    assert "stopText" not in first["_meta"]["parley"]
    assert refused["stopReason"] == "refusal"
    said = (
        "This session spent $0.5600 of its $0.50 budget, so this prompt was not sent to the "
        "model. To go on, choose a higher Budget in the session's options (or "
        "`budget.session_usd` in config.toml)."
    )
    assert_said_once(client, session, refused, "warning", said)
    # One text in all: the notice (not a notice and a stop line).
    (update,) = client.updates_of(session)[shown:]
    assert update["content"]["text"] == said


async def test_a_turn_that_crosses_the_day_budget_says_so_once_after_its_calls(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(tool_calls=(READ,), usage=(2_000_000, 200_000)), Reply(text="never")])
    client = await server_with_config(start_server, tmp_path, "[budget]\nday_usd = 1\n")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Read it.")
    assert result["stopReason"] == "max_turn_requests"
    said = (
        "Today's model calls spent $1.1200 of its $1.00 budget, so the turn stops here. To go "
        "on, raise `budget.day_usd` in config.toml (the day starts at local midnight)."
    )
    assert_said_once(client, session, result, "warning", said)
    failed = client.updates_of(session, "tool_call_update")[-1]
    assert failed["status"] == "failed" and "budget" in str(failed["content"])


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
    assert_said_once(client, session, result, "info", "Stopped.")


async def test_the_circuit_breaker_is_a_notice(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script([Reply(tool_calls=(MISSING,))] * 6)
    client = await server_with_config(start_server, tmp_path, "")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Read it.")
    assert result["stopReason"] == "end_turn"
    ((level, text),) = client.notices_of(session)
    assert level == "warning"
    assert text.startswith("Stopped: `read_file` failed 5 times in a row with the same error:")
    assert "nowhere.py" in text


@pytest.mark.parametrize(
    ("command", "stop_reason", "level", "start"),
    [
        ("/undo", "end_turn", "info", "Nothing to undo: no turn of this session"),
        ("/model nowhere:model", "end_turn", "warning", ""),
    ],
)
async def test_a_refused_command_is_one_notice(
    start_server: Any,
    fake: FakeLLM,
    tmp_path: Path,
    workspace: Path,
    command: str,
    stop_reason: str,
    level: str,
    start: str,
) -> None:
    client = await server_with_config(start_server, tmp_path, "")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, command)
    assert result["stopReason"] == stop_reason
    ((said_level, text),) = client.notices_of(session)
    assert said_level == level and text.startswith(start)
    assert len(client.updates_of(session, "agent_message_chunk")) == 1  # nothing else said
    assert "stopText" not in result["_meta"]["parley"]
    assert not fake.requests


def replayable(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What a replay shows again of a session's updates, in order: the prompts, the answers
    and the notices (level: text)."""
    shown = []
    for update in updates:
        kind = update["sessionUpdate"]
        notice = update.get("_meta", {}).get("parley", {}).get("notice")
        if kind == "user_message_chunk":
            shown.append(("you", update["content"]["text"]))
        elif kind == "agent_message_chunk":
            who = notice["level"] if isinstance(notice, dict) else "answer"
            if shown and shown[-1][0] == who == "answer":
                shown[-1] = (who, shown[-1][1] + update["content"]["text"])
            else:
                shown.append((who, update["content"]["text"]))
    return shown


async def test_a_loaded_session_replays_each_notice_where_it_came_and_the_model_never_sees_one(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    fake.set_script(
        [
            Reply(text="Reading.", tool_calls=(READ,)),  # turn 1: the round limit
            Reply(text="Half an ans", finish_reason="length"),  # turn 2: cut off
            Reply(text="All done."),  # turn 4 (turn 3 is `/undo`)
            Reply(text="Fine."),  # the prompt after the reload
        ]
    )
    client = await server_with_config(start_server, tmp_path, "max_turn_requests = 1\n")
    session = await client.new_session(str(workspace))
    for text in ("Read it.", "Explain.", "/undo", "Finish."):
        await client.prompt(session, text)
    live = replayable(client.updates_of(session))
    await client.stop()

    again = await server_with_config(start_server, tmp_path, "max_turn_requests = 1\n")
    await again.load_session(session, str(workspace))
    replayed = replayable(again.updates_of(session))
    # As it came (live, the prompts were the client's own; a command's is kept too).
    assert [entry for entry in replayed if entry[0] != "you"] == live
    assert [text for who, text in replayed if who == "you"] == [
        "Read it.",
        "Explain.",
        "/undo",
        "Finish.",
    ]
    assert [who for who, _ in replayed] == [
        "you",
        "answer",
        "warning",
        "you",
        "answer",
        "warning",
        "you",
        "info",
        "you",
        "answer",
    ]

    await again.prompt(session, "And now?")
    sent = str(fake.requests[-1].body)
    assert "Half an ans" in sent and "All done." in sent
    for _, text in client.notices_of(session):
        assert text not in sent
