"""Sessions that last: the SQLite store behind session/new, prompt, load, list, delete."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import WEATHER_TOOL
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall
from pygls.exceptions import JsonRpcException

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"Sunny in {params['arguments']['city']}"}


async def started(start_server, home: Path, **kwargs: Any) -> ParleyClient:
    client = await start_server(home=home, **kwargs)
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = answer_weather
    return client


def shown(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client shows of a conversation: text, thoughts, and each tool call's end state."""
    text = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    thoughts = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_thought_chunk"
    )
    calls: dict[str, dict[str, Any]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            state = calls.setdefault(update["toolCallId"], {})
            for key in ("title", "status", "rawInput", "rawOutput"):
                if key in update:
                    state[key] = update[key]
            if "content" in update:
                state["output"] = update["content"][0]["content"]["text"]
    return {"text": text, "thoughts": thoughts, "calls": calls}


async def test_a_new_server_replays_the_session_as_the_first_client_saw_it(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first = await started(start_server, home)
    fake.set_script(
        [
            Reply(thinking="Need the weather.", text="Checking.", tool_calls=(WEATHER,)),
            Reply(text="It is sunny in Paris.", usage=(50, 6)),
            Reply(text="You are welcome.", usage=(70, 4)),
        ]
    )
    session = await first.new_session(str(workspace))
    await first.prompt(session, "Weather in Paris?")
    await first.prompt(session, "Thanks!")
    seen_live = shown(first.updates_of(session))
    await first.stop()

    second = await started(start_server, home)
    listed = await second.request("session/list", {})
    assert listed["sessions"][0]["sessionId"] == session
    assert listed["sessions"][0]["title"] == "Weather in Paris?"
    loaded = await second.request(
        "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    replayed = second.updates_of(session)
    assert shown(replayed) == seen_live  # same text, thoughts, tool ids, inputs, outputs
    prompts = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert prompts == ["Weather in Paris?", "Thanks!"]
    assert loaded["_meta"]["parley"]["model"] == "openai:gpt-4.1-mini"
    assert loaded["_meta"]["parley"]["usage"]["turns"] == 2

    # The session continues where it left off: the provider gets the whole conversation.
    fake.set_script([Reply(text="ok")])
    await second.prompt(session, "And tomorrow?")
    sent = fake.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert sent[3]["content"] == "Sunny in Paris"
    assert sent[2]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_usage_totals_come_from_the_store(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client = await started(start_server, home)
    fake.set_script([Reply(text="one", usage=(100, 10))])
    first = await client.new_session(str(workspace))
    await client.prompt(first, "1")
    second = await client.new_session(str(workspace))
    fake.set_script([Reply(text="two", usage=(200, 20))])
    await client.prompt(second, "2")
    usage = await client.request("_parley/usage", {"sessionId": first})
    assert usage["session"]["inputTokens"] == 100 and usage["session"]["turns"] == 1
    assert usage["total"]["inputTokens"] == 300 and usage["total"]["outputTokens"] == 30
    assert usage["total"]["cost"]["amount"] == pytest.approx((300 * 0.4 + 30 * 1.6) / 1e6)
    await client.stop()
    again = await started(start_server, home)  # totals survive the server
    usage = await again.request("_parley/usage", {})
    assert usage["total"]["inputTokens"] == 300


async def test_list_is_newest_first_and_delete_removes(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client = await started(start_server, tmp_path / "home")
    fake.set_script([Reply(text="ok")])
    ids = []
    for title in ("alpha", "beta", "gamma"):
        ids.append(await client.new_session(str(workspace)))
        await client.prompt(ids[-1], title)
    await client.prompt(ids[0], "alpha again")  # alpha is now the newest
    listed = await client.request("session/list", {"cwd": str(workspace)})
    assert [s["title"] for s in listed["sessions"]] == ["alpha", "gamma", "beta"]
    # What a picker shows on one line: the model, the turns and the cost.
    meta = [s["_meta"]["parley"] for s in listed["sessions"]]
    assert [m["turns"] for m in meta] == [2, 1, 1]
    assert all(isinstance(m["model"], str) and m["model"] for m in meta)
    assert all(isinstance(m.get("cost", 0.0), float) for m in meta)
    assert (await client.request("session/list", {"cwd": "/elsewhere"}))["sessions"] == []
    assert await client.request("session/delete", {"sessionId": ids[1]}) == {}
    listed = await client.request("session/list", {})
    assert [s["title"] for s in listed["sessions"]] == ["alpha", "gamma"]
    # Deleted already: deleting it again succeeds silently (ACP: an idempotent delete).
    assert await client.request("session/delete", {"sessionId": ids[1]}) == {}
    with pytest.raises(JsonRpcException):
        await client.request(
            "session/load", {"sessionId": ids[1], "cwd": str(workspace), "mcpServers": []}
        )


async def kill_mid(client: ParleyClient) -> None:
    assert client.process is not None
    os.kill(client.process.pid, signal.SIGKILL)
    await client.process.wait()


async def test_kill_9_mid_stream_loses_only_the_step_in_flight(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client = await started(start_server, home)
    fake.set_script(
        [Reply(text="It is sunny."), Reply(text="word " * 500, pacing=Pacing(chunks_per_second=50))]
    )
    session = await client.new_session(str(workspace))
    await client.prompt(session, "First question")
    pending = asyncio.ensure_future(client.prompt(session, "Second question"))
    await client.wait_for_update(
        session, lambda u: u["sessionUpdate"] == "agent_message_chunk" and "word" in str(u)
    )
    await kill_mid(client)
    pending.cancel()

    again = await started(start_server, home)
    await again.request(
        "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    replay = shown(again.updates_of(session))
    assert replay["text"] == "It is sunny."
    prompts = [
        u["content"]["text"]
        for u in again.updates_of(session)
        if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert prompts == ["First question", "Second question"]  # the prompt was committed
    fake.set_script([Reply(text="Back again.")])
    result = await again.prompt(session, "Still there?")
    assert result["stopReason"] == "end_turn"


async def test_kill_9_mid_tool_gives_the_call_an_interrupted_result(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client = await started(start_server, home)
    tool_started = asyncio.Event()

    async def hanging_tool(params: dict[str, Any]) -> dict[str, Any]:
        tool_started.set()
        await asyncio.sleep(60)
        return {"content": "never"}

    client.editor_tool_handler = hanging_tool
    fake.set_script([Reply(text="Checking.", tool_calls=(WEATHER,)), Reply(text="Done.")])
    session = await client.new_session(str(workspace))
    pending = asyncio.ensure_future(client.prompt(session, "Weather?"))
    await asyncio.wait_for(tool_started.wait(), 20)
    await kill_mid(client)
    pending.cancel()

    again = await started(start_server, home)
    await again.request(
        "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    (call,) = shown(again.updates_of(session))["calls"].values()
    assert call["status"] == "failed" and "Interrupted" in call["output"]
    fake.set_script([Reply(text="Try again later.")])
    assert (await again.prompt(session, "So?"))["stopReason"] == "end_turn"
    sent = fake.requests[-1].body["messages"]
    tool_messages = [m for m in sent if m["role"] == "tool"]
    assert tool_messages and "Interrupted" in tool_messages[0]["content"]


async def test_two_servers_on_one_database(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    one = await started(start_server, home)
    two = await started(start_server, home)
    fake.set_script([Reply(text="answer " * 20, chunk_size=7)])

    async def converse(client: ParleyClient, name: str) -> str:
        session = await client.new_session(str(workspace))
        for n in range(5):
            await client.prompt(session, f"{name} question {n}")
        return session

    first, second = await asyncio.gather(converse(one, "one"), converse(two, "two"))
    listed = await one.request("session/list", {})
    assert {s["sessionId"] for s in listed["sessions"]} == {first, second}
    database = sqlite3.connect(home / "parley.db")
    for session, name in ((first, "one"), (second, "two")):
        rows = database.execute(
            "SELECT role, body FROM messages WHERE session_id = ? ORDER BY seq", (session,)
        ).fetchall()
        assert [role for role, _ in rows] == ["user", "assistant"] * 5
        questions = [
            json.loads(body)["content"][0]["text"] for role, body in rows if role == "user"
        ]
        assert questions == [f"{name} question {n}" for n in range(5)]
    assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_the_database_and_logs_hold_no_api_key(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client = await started(
        start_server, home, extra_env={"PARLEY_CLIENT_ECHO_STDERR": "", "PYTHONUNBUFFERED": "1"}
    )
    fake.set_script([Reply(text="Checking.", tool_calls=(WEATHER,)), Reply(text="Done.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")
    everything = b"".join(path.read_bytes() for path in home.rglob("*") if path.is_file())
    for key in (b"sk-test-parley-0123456789", b"sk-ant-test-parley-0123456789"):
        assert key not in everything
    assert not any("sk-test-parley" in line for line in client.stderr_lines)
    sent_to_editor = json.dumps(client.updates)
    assert "sk-test-parley" not in sent_to_editor


def test_an_older_database_is_migrated_in_place(tmp_path: Path) -> None:
    from parley.store import MIGRATIONS, Store

    path = tmp_path / "parley.db"
    old = sqlite3.connect(path)
    old.executescript(MIGRATIONS[0])
    old.execute(
        "INSERT INTO sessions (id, cwd, model, tool_policy, created_at, updated_at) "
        "VALUES ('sess_old', '/w', 'openai:gpt-4.1', 'hybrid', '2026-01-01', '2026-01-01')"
    )
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()
    store = Store(path)
    session = store.session("sess_old")
    settings = session.settings if session is not None else None
    assert (
        settings is not None and settings.tool_format is None and settings.model == "openai:gpt-4.1"
    )
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == len(MIGRATIONS)


def test_approvals_of_an_older_database_belong_to_the_sessions_workspace(tmp_path: Path) -> None:
    from parley.store import MIGRATIONS, Store

    path = tmp_path / "parley.db"
    old = sqlite3.connect(path)
    for script in MIGRATIONS[:2]:
        old.executescript(script)
    old.execute(
        "INSERT INTO sessions (id, cwd, model, tool_policy, auto_approve, created_at, updated_at)"
        " VALUES ('sess_old', '/w', 'openai:gpt-4.1', 'hybrid', '[\"python_eval\"]', 'x', 'x')"
    )
    old.execute("PRAGMA user_version = 2")
    old.commit()
    old.close()
    session = Store(path).session("sess_old")
    assert session is not None and session.approvals == {"/w": ["python_eval"]}


GUARDED_TOOL = {**WEATHER_TOOL, "needsPermission": True}


def allow_always(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}


async def load(client: ParleyClient, session: str, cwd: Path) -> dict[str, Any]:
    return await client.request(
        "session/load", {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    )


async def test_allow_always_holds_in_the_sessions_workspace_only(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    other_project = tmp_path / "other"
    other_project.mkdir()
    weather_turn = [Reply(text="Checking.", tool_calls=(WEATHER,)), Reply(text="Sunny.")]
    first = await start_server(home=home)
    await first.initialize(tools=[GUARDED_TOOL])
    first.editor_tool_handler = answer_weather
    first.permission_handler = allow_always
    fake.set_script(weather_turn * 5)  # the fake answers by the number of assistant messages
    session = await first.new_session(str(workspace))
    await first.prompt(session, "Weather?")
    await first.prompt(session, "And now?")
    assert len(first.permission_requests) == 1  # always allowed from then on
    await first.stop()

    second = await start_server(home=home)
    await second.initialize(tools=[GUARDED_TOOL])
    second.editor_tool_handler = answer_weather
    second.permission_handler = allow_always
    await load(second, session, other_project)
    await second.prompt(session, "Weather, from another project?")
    assert len(second.permission_requests) == 1  # asked again: another workspace
    await load(second, session, workspace)
    await second.prompt(session, "Weather, back home?")
    assert len(second.permission_requests) == 1  # its own workspace's approval still holds
    await load(second, session, other_project)
    await second.prompt(session, "And over there?")
    assert len(second.permission_requests) == 1  # approved there too, now


async def test_allow_always_is_keyed_by_the_resolved_root_not_the_cwd_text(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A session opened through a symlink keeps its approvals under the directory the link
    led to: pointed at another project later, the link carries none there; the project's
    own path finds them."""
    home = tmp_path / "home"
    other_project = tmp_path / "other"
    other_project.mkdir()
    link = tmp_path / "link"
    link.symlink_to(workspace)
    weather_turn = [Reply(text="Checking.", tool_calls=(WEATHER,)), Reply(text="Sunny.")]
    first = await start_server(home=home)
    await first.initialize(tools=[GUARDED_TOOL])
    first.editor_tool_handler = answer_weather
    first.permission_handler = allow_always
    fake.set_script(weather_turn * 4)
    session = await first.new_session(str(link))
    await first.prompt(session, "Weather?")
    assert len(first.permission_requests) == 1
    await first.stop()

    link.unlink()
    link.symlink_to(other_project)  # the same text, another directory
    second = await start_server(home=home)
    await second.initialize(tools=[GUARDED_TOOL])
    second.editor_tool_handler = answer_weather
    second.permission_handler = allow_always
    await load(second, session, link)
    await second.prompt(session, "Weather, through the link?")
    assert len(second.permission_requests) == 1  # asked: the link leads elsewhere now
    await load(second, session, workspace)
    await second.prompt(session, "Weather, in the project itself?")
    assert len(second.permission_requests) == 1  # the approval given through the link


async def test_a_session_stored_with_lone_surrogates_loads_exports_and_continues(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client = await started(start_server, home)
    fake.set_script([Reply(text="ok")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "placeholder")
    await client.stop()
    # What an old server could store: json.dumps escapes a lone surrogate and SQLite keeps it;
    # and text that is not UTF-8 at all, written by some other program.
    user_body = {"content": [{"type": "text", "text": "half an emoji: \ud83d!"}]}
    answer_body = {
        "text": "a pair \ud83d\ude00 and a half \ude00",
        "messageId": "msg_old",
        "thinking": [],
        "toolCalls": [],
    }
    database = sqlite3.connect(home / "parley.db")
    for seq, body in ((1, user_body), (2, answer_body)):
        database.execute(
            "UPDATE messages SET body = ? WHERE session_id = ? AND seq = ?",
            (json.dumps(body), session, seq),
        )
    database.execute(
        "UPDATE sessions SET title = CAST(X'6869EDA0BD' AS TEXT) WHERE id = ?", (session,)
    )
    database.commit()
    database.close()

    again = await started(start_server, home)
    listed = await again.request("session/list", {})
    assert listed["sessions"][0]["title"].startswith("hi\ufffd")
    await load(again, session, workspace)
    replay = again.updates_of(session)
    users = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["half an emoji: \ufffd!"]
    assert shown(replay)["text"] == "a pair \U0001f600 and a half \ufffd"
    fake.set_script([Reply(text="fine")])
    assert (await again.prompt(session, "next"))["stopReason"] == "end_turn"
    sent = fake.requests[-1].body["messages"]
    assert [m["content"] for m in sent[1:3]] == [users[0], "a pair \U0001f600 and a half \ufffd"]

    env = {**os.environ, "PARLEY_HOME": str(home), "PARLEY_CONFIG": str(home / "none.toml")}
    for export_format in ("markdown", "json"):
        done = subprocess.run(
            [sys.executable, "-m", "parley", "export", session, "--format", export_format],
            env=env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "half an emoji: \ufffd!" in done.stdout
        if export_format == "json":
            assert json.loads(done.stdout)["messages"][1]["text"].endswith("half \ufffd")


async def test_a_session_is_stored_and_listed_from_its_first_prompt(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client = await started(start_server, home)
    unused = await client.new_session(str(workspace))
    load_params = {"sessionId": unused, "cwd": str(workspace), "mcpServers": []}
    # Until its first prompt the session lives in this server only: it can be used, loaded,
    # resumed and configured, but it is not listed.
    assert "configOptions" in await client.request("session/resume", load_params)
    assert "configOptions" in await client.request("session/load", load_params)
    await client.request("_parley/session/configure", {"sessionId": unused, "toolPolicy": "sync"})
    assert (await client.prompt(unused, "/cost"))["stopReason"] == "end_turn"  # a command
    assert (await client.request("session/list", {}))["sessions"] == []
    usage = await client.request("_parley/usage", {"sessionId": unused})
    assert usage["session"]["turns"] == 0

    fake.set_script([Reply(text="ok")])
    await client.prompt(unused, "First question")
    (listed,) = (await client.request("session/list", {}))["sessions"]
    assert listed["sessionId"] == unused and listed["title"] == "First question"
    assert fake.requests[-1].stream is False  # the configured policy held: sync

    # Closed or deleted before any prompt, a session is gone: nothing kept it.
    closed, deleted = [await client.new_session(str(workspace)) for _ in range(2)]
    assert await client.request("session/close", {"sessionId": closed}) == {}
    assert await client.request("session/delete", {"sessionId": deleted}) == {}
    for session in (closed, deleted):
        with pytest.raises(JsonRpcException) as gone:
            await client.request("session/load", {**load_params, "sessionId": session})
        assert gone.value.code == -32002
    assert [s["sessionId"] for s in (await client.request("session/list", {}))["sessions"]] == [
        unused
    ]


async def test_a_change_made_outside_set_config_option_is_announced(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client = await started(start_server, tmp_path / "home")
    session = await client.new_session(str(workspace))
    await client.request(
        "_parley/session/configure", {"sessionId": session, "model": "openai:gpt-4.1"}
    )
    (announced,) = client.updates_of(session, "config_option_update")
    current = {o["id"]: o["currentValue"] for o in announced["configOptions"]}
    assert current == {
        "mode": "ask",
        "model": "openai:gpt-4.1",
        "tool_policy": "hybrid",
        "budget": "none",
        "kernel": "parley",
    }
    # A change the options do not show (autoApprove) is not announced.
    await client.request("_parley/session/configure", {"sessionId": session, "autoApprove": []})
    assert len(client.updates_of(session, "config_option_update")) == 1
    # /model switches too, and says so; a model that cannot be used is refused in words.
    await client.prompt(session, "/model anthropic:claude-haiku-4-5")
    await client.prompt(session, "/model nonsense")
    assert len(client.updates_of(session, "config_option_update")) == 2
    assert "Switched to `anthropic:claude-haiku-4-5`" in client.text_of(session)
    ((level, refused),) = client.notices_of(session)
    assert level == "warning" and "provider:model" in refused and fake.requests == []
    fake.set_script([Reply(text="ok")])
    await client.prompt(session, "Hi")
    assert fake.requests[-1].api == "anthropic"


async def test_close_cancels_the_running_turn_and_keeps_what_it_said(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client = await started(start_server, tmp_path / "home")
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="slow " * 400, pacing=Pacing(chunks_per_second=40))])
    running = asyncio.ensure_future(client.prompt(session, "Talk slowly."))
    await client.wait_for_update(session, lambda u: "slow" in json.dumps(u), timeout=30)
    assert await client.request("session/close", {"sessionId": session}) == {}
    assert (await asyncio.wait_for(running, 5))["stopReason"] == "cancelled"
    with pytest.raises(JsonRpcException) as unknown:
        await client.request("session/close", {"sessionId": "sess_nobody"})
    assert unknown.value.code == -32002
    await client.load_session(session, str(workspace))  # stored, with the cancelled turn
    replayed = client.updates_of(session, "user_message_chunk")
    assert replayed[-1]["content"]["text"] == "Talk slowly."


async def test_a_cancelled_turn_is_replayed_with_its_notice(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first = await started(start_server, home)
    session = await first.new_session(str(workspace))
    fake.set_script([Reply(text="slow " * 400, pacing=Pacing(chunks_per_second=40))])
    running = asyncio.ensure_future(first.prompt(session, "Talk slowly."))
    await first.wait_for_update(
        session, lambda u: u["sessionUpdate"] == "agent_message_chunk", timeout=30
    )
    first.cancel(session)
    assert (await asyncio.wait_for(running, 5))["stopReason"] == "cancelled"
    fake.set_script([Reply(text="Done in full.")])
    await first.prompt(session, "Again.")
    await first.stop()

    # A new server replays the cut-short answer, then the notice that said why it stopped;
    # the whole one without.
    second = await started(start_server, home)
    await second.load_session(session, str(workspace))
    answers = second.updates_of(session, "agent_message_chunk")
    assert answers[0]["content"]["text"].startswith("slow") and "_meta" not in answers[0]
    assert answers[1]["content"]["text"] == "Stopped."
    assert answers[1]["_meta"] == {"parley": {"notice": {"level": "info"}}}
    assert answers[2]["content"]["text"] == "Done in full." and "_meta" not in answers[2]
    assert len(answers) == 3
    # What the provider is sent next is unchanged: the text, no mark.
    fake.set_script([Reply(text="ok")])
    await second.prompt(session, "Go on.")
    sent = fake.requests[-1].body["messages"]
    assert sent[2]["role"] == "assistant" and sent[2]["content"].startswith("slow")
