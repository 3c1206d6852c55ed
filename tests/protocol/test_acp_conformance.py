"""ACP conformance: `parley serve --framing ndjson` driven by the official ACP Python SDK
(`agent-client-protocol`) as a client, every message the server sends checked against ACP's
official JSON Schema (`@agentclientprotocol/sdk` from npm; tests/acp_schema.py).

Each scenario below runs once per module (a real server, the fake LLM over HTTP) and keeps
what crossed the wire; the tests read it twice: what a user of a generic ACP client sees,
and whether each message conforms. The tests of the second edition's methods
(/work/shared/protocol.md) drive a server of their own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import image_block, text_block
from acp.schema import McpServerStdio
from acp_client import AcpRun, EditorClient, Recording, acp_server
from acp_schema import acp_schema
from conftest import MODELS, TESTS, server_env
from parley.fakellm import FakeLLM, Pacing, RecordedRequest, Reply, ScriptedToolCall

PACED = Pacing(chunks_per_second=100)
ANSWER = "The area is width times height."
EVAL = ScriptedToolCall("python_eval", {"code": "6 * 7"})
READ = ScriptedToolCall("read_file", {"path": "geometry.py"})
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
REQUEST_CANCELLED = -32800


# --- scenarios -------------------------------------------------------------------------


@dataclass
class Stage:
    """Where a scenario runs: a fake LLM, a workspace, the server's environment."""

    fake: FakeLLM
    workspace: Path
    env: dict[str, str]


@dataclass
class Scenario:
    """What a scenario left: the wire, the editor's view, and what the model was sent."""

    recordings: list[Recording]  # one per server the scenario started
    editor: EditorClient  # the last server's
    session_id: str
    workspace: Path
    requests: list[RecordedRequest]
    seen: dict[str, Any] = field(default_factory=dict)  # SDK results and timings by name

    def assert_conformant(self, only: str | None = None, but: str | None = None) -> None:
        for recording in self.recordings:
            recording.assert_conformant(only=only, but=but)


@contextlib.contextmanager
def stage(root: Path) -> Iterator[Stage]:
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "geometry.py").write_text(
        'def area(width, height):\n    """Width times height."""\n    return width * height\n'
    )
    with FakeLLM() as fake:
        yield Stage(fake, workspace, {**os.environ, **server_env(fake, root / "home")})


def run_scenario(
    tmp_path_factory: pytest.TempPathFactory, body: Callable[[Stage], Awaitable[Scenario]]
) -> Scenario:
    """Run a scenario once for the module (a sync fixture: no event loop is running)."""
    with stage(tmp_path_factory.mktemp(body.__name__)) as where:
        scenario = asyncio.run(body(where))
        scenario.requests = where.fake.requests
        return scenario


async def a_text_turn(where: Stage) -> Scenario:
    where.fake.set_script([Reply(thinking="The user asks about area.", text=ANSWER, chunk_size=3)])
    async with acp_server(where.env) as run:
        initialized = await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(where.workspace))).session_id
        result = await run.conn.prompt(session_id=session_id, prompt=[text_block("What is area?")])
        listed = await run.conn.list_sessions(cwd=str(where.workspace))
    seen = {"initialize": initialized, "prompt": result, "list": listed}
    return Scenario([run.recording], run.editor, session_id, where.workspace, [], seen)


async def a_tool_turn(where: Stage) -> Scenario:
    """A hybrid round: the streamed text announces a tool call, the synchronous call of the
    round says something else (a revision, for clients that asked for them); the user allows
    the evaluation once."""
    where.fake.set_script(
        [
            Reply(
                text="Let me compute that.",
                tool_calls=(EVAL,),
                pacing=PACED,
                sync=Reply(text="I will compute it.", tool_calls=(EVAL,)),
            ),
            Reply(text="It is 42."),
        ]
    )
    async with acp_server(where.env) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(where.workspace))).session_id
        result = await run.conn.prompt(session_id=session_id, prompt=[text_block("6 times 7?")])
    return Scenario(
        [run.recording], run.editor, session_id, where.workspace, [], {"prompt": result}
    )


async def a_cancelled_turn(where: Stage) -> Scenario:
    """`session/cancel` mid-stream, a prompt after it, then ACP's `$/cancel_request`."""
    slow = Reply(text="word " * 400, chunk_size=5, pacing=Pacing(chunks_per_second=50))
    async with acp_server(where.env) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(where.workspace))).session_id

        async def talking() -> asyncio.Future[Any]:
            """A prompt, once its answer has started to stream."""
            where.fake.set_script([slow])
            started = len(run.editor.updates_of(session_id, "agent_message_chunk"))
            talk = [text_block("Talk for a long time.")]
            pending = asyncio.ensure_future(run.conn.prompt(session_id=session_id, prompt=talk))
            while len(run.editor.updates_of(session_id, "agent_message_chunk")) == started:
                await asyncio.sleep(0.01)
            return pending

        pending = await talking()
        cancelled_at = time.monotonic()
        await run.conn.cancel(session_id=session_id)
        cancelled = await asyncio.wait_for(pending, 5)
        answered_in = time.monotonic() - cancelled_at
        streamed = "".join(  # the answer's text: the notice that follows it is not
            chunk["content"]["text"]
            for chunk in run.recording.raw_updates(session_id, "agent_message_chunk")
            if "_meta" not in chunk
        )
        where.fake.set_script([Reply(text="Fresh answer.")])
        again = await run.conn.prompt(session_id=session_id, prompt=[text_block("Briefly.")])
        sent_again = json.dumps(where.fake.requests[-1].body)

        pending = await talking()
        (*_, prompt_id) = [
            m["id"] for m in run.recording.from_client if m.get("method") == "session/prompt"
        ]
        await run.raw_notification("$/cancel_request", {"requestId": prompt_id})
        with pytest.raises(RequestError) as request_cancelled:
            await asyncio.wait_for(pending, 5)
    seen = {
        "cancelled": cancelled,
        "answered_in": answered_in,
        "streamed": streamed,
        "again": again,
        "sent_again": sent_again,
        "request_cancelled": request_cancelled.value,
    }
    return Scenario([run.recording], run.editor, session_id, where.workspace, [], seen)


async def a_reloaded_session(where: Stage) -> Scenario:
    """A session with a tool call, stored by one server; a second server lists it, replays it
    (`session/load`), continues it, deletes it, and can no longer load it."""
    where.fake.set_script(
        [Reply(text="Reading.", tool_calls=(READ,)), Reply(text="It multiplies.")]
    )
    async with acp_server(where.env) as first:
        await first.initialize()
        session_id = (await first.conn.new_session(cwd=str(where.workspace))).session_id
        await first.conn.prompt(session_id=session_id, prompt=[text_block("What does area do?")])
    where.fake.set_script(
        [Reply(text="Reading."), Reply(text="x"), Reply(text="Still multiplies.")]
    )
    async with acp_server(where.env) as run:
        await run.initialize()
        listed = await run.conn.list_sessions()
        loaded = await run.conn.load_session(cwd=str(where.workspace), session_id=session_id)
        replayed = list(run.editor.updates_of(session_id))
        again = await run.conn.prompt(session_id=session_id, prompt=[text_block("And now?")])
        deleted = await run.raw_request("session/delete", {"sessionId": session_id})
        with pytest.raises(RequestError) as gone:
            await run.conn.load_session(cwd=str(where.workspace), session_id=session_id)
        # ACP advises an idempotent delete: an unknown id (deleted, or never made) is no error.
        deleted_again = await run.raw_request("session/delete", {"sessionId": session_id})
    seen = {
        "list": listed,
        "load": loaded,
        "replayed": replayed,
        "again": again,
        "deleted": deleted,
        "gone": gone.value,
        "deleted_again": deleted_again,
    }
    return Scenario(
        [first.recording, run.recording], run.editor, session_id, where.workspace, [], seen
    )


@pytest.fixture(scope="module")
def text_turn(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return run_scenario(tmp_path_factory, a_text_turn)


@pytest.fixture(scope="module")
def tool_turn(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return run_scenario(tmp_path_factory, a_tool_turn)


@pytest.fixture(scope="module")
def cancelled_turn(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return run_scenario(tmp_path_factory, a_cancelled_turn)


@pytest.fixture(scope="module")
def reloaded(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return run_scenario(tmp_path_factory, a_reloaded_session)


# --- what a generic ACP client sees ----------------------------------------------------


def test_initialize_as_the_official_client_reads_it(text_turn: Scenario) -> None:
    answer = text_turn.seen["initialize"]
    assert answer.protocol_version == 1
    assert answer.agent_capabilities.load_session is True
    assert answer.agent_capabilities.session_capabilities.list is not None
    assert answer.agent_info.name == "parley"
    assert answer.auth_methods == []
    assert answer.field_meta["parley"]["defaultModel"] == MODELS["openai"]


def test_a_text_turn_streams_the_answer_and_its_thoughts(text_turn: Scenario) -> None:
    sid = text_turn.session_id
    assert text_turn.seen["prompt"].stop_reason == "end_turn"
    assert text_turn.editor.text_of(sid) == ANSWER
    assert len(text_turn.editor.updates_of(sid, "agent_message_chunk")) > 1  # streamed
    thoughts = text_turn.editor.updates_of(sid, "agent_thought_chunk")
    assert "".join(t.content.text for t in thoughts) == "The user asks about area."
    (listed,) = text_turn.seen["list"].sessions
    assert listed.session_id == sid and listed.cwd == str(text_turn.workspace)


def test_a_tool_turn_asks_permission_and_shows_the_call(tool_turn: Scenario) -> None:
    sid = tool_turn.session_id
    assert tool_turn.seen["prompt"].stop_reason == "end_turn"
    (asked,) = tool_turn.editor.permission_requests
    assert asked.raw_input == {"code": "6 * 7"}
    (announced,) = tool_turn.editor.updates_of(sid, "tool_call")
    assert announced.status == "pending" and announced.tool_call_id == asked.tool_call_id
    updates = [
        u
        for u in tool_turn.editor.updates_of(sid, "tool_call_update")
        if u.tool_call_id == announced.tool_call_id
    ]
    assert updates[-1].status == "completed"
    assert "42" in json.dumps([u.model_dump(mode="json") for u in updates])
    assert tool_turn.editor.text_of(sid).endswith("It is 42.")
    assert "42" in json.dumps(tool_turn.requests[-1].body)  # the model got the result


def test_a_cancelled_turn_answers_cancelled_promptly_and_the_session_goes_on(
    cancelled_turn: Scenario,
) -> None:
    seen = cancelled_turn.seen
    assert seen["cancelled"].stop_reason == "cancelled"
    assert seen["answered_in"] < 1.0
    assert seen["streamed"].startswith("word")
    assert seen["again"].stop_reason == "end_turn"
    sent = seen["sent_again"]  # the history the model got with the prompt after the cancel
    assert "Talk for a long time." in sent and seen["streamed"].strip() in sent
    assert seen["request_cancelled"].code == REQUEST_CANCELLED
    # The stop is said once, by a notice (an ordinary message to a generic client) before
    # the answer; the request `$/cancel_request` ended is answered by its error alone.
    (recording,) = cancelled_turn.recordings
    chunks = recording.raw_updates(cancelled_turn.session_id, "agent_message_chunk")
    said = [chunk for chunk in chunks if "notice" in chunk.get("_meta", {}).get("parley", {})]
    assert [(chunk["content"]["text"], chunk["_meta"]) for chunk in said] == [
        ("Stopped.", {"parley": {"notice": {"level": "info"}}})
    ]
    assert "Stopped." in cancelled_turn.editor.text_of(cancelled_turn.session_id)


def test_load_replays_the_session_then_it_goes_on_and_delete_removes_it(
    reloaded: Scenario,
) -> None:
    seen = reloaded.seen
    assert [s.session_id for s in seen["list"].sessions] == [reloaded.session_id]
    kinds = [u.session_update for u in seen["replayed"]]
    assert kinds[0] == "user_message_chunk" and seen["replayed"][0].content.text == (
        "What does area do?"
    )
    (call,) = [u for u in seen["replayed"] if u.session_update == "tool_call"]
    assert call.status == "completed" and call.raw_input == {"path": "geometry.py"}
    assert "width * height" in json.dumps(call.model_dump(mode="json"))
    assert "".join(
        u.content.text for u in seen["replayed"] if u.session_update == "agent_message_chunk"
    ) == ("Reading.It multiplies.")
    assert seen["again"].stop_reason == "end_turn"
    assert "What does area do?" in json.dumps(reloaded.requests[-1].body)
    assert seen["deleted"] == {}
    assert seen["gone"].code == RESOURCE_NOT_FOUND
    assert seen["deleted_again"] == {}


# --- every message against ACP's schema ------------------------------------------------

SCENARIOS = ["text_turn", "tool_turn", "cancelled_turn", "reloaded"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_message_but_the_prompt_results_conforms(
    name: str, request: pytest.FixtureRequest
) -> None:
    scenario: Scenario = request.getfixturevalue(name)
    scenario.assert_conformant(but="session/prompt")


@pytest.mark.parametrize("name", SCENARIOS)
def test_prompt_results_conform(name: str, request: pytest.FixtureRequest) -> None:
    scenario: Scenario = request.getfixturevalue(name)
    scenario.assert_conformant(only="session/prompt")


def test_the_scenarios_sent_what_they_claim_to_check(
    text_turn: Scenario, tool_turn: Scenario, cancelled_turn: Scenario, reloaded: Scenario
) -> None:
    """The check covers each message kind this module names (else it checks nothing)."""
    sent: set[str] = set()
    for scenario in (text_turn, tool_turn, cancelled_turn, reloaded):
        for recording in scenario.recordings:
            asked = {
                m["id"]: m["method"] for m in recording.from_client if "method" in m and "id" in m
            }
            for message in recording.agent_messages():
                if message.get("method") == "session/update":
                    update = message["params"]["update"]
                    sent.add(update["sessionUpdate"])
                    if "notice" in update.get("_meta", {}).get("parley", {}):
                        sent.add("notice")
                elif "method" in message:
                    sent.add(message["method"])
                else:
                    sent.add(f"{asked[message['id']]} answered")
    assert sent >= {
        "initialize answered",
        "session/new answered",
        "session/prompt answered",
        "session/load answered",
        "session/list answered",
        "session/delete answered",
        "session/request_permission",
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "usage_update",
        "session_info_update",
        "notice",
    }
    assert any("error" in m for m in reloaded.recordings[-1].agent_messages())


# --- the second edition (/work/shared/protocol.md) -------------------------------------

PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )
).decode()
MCP_SERVER = TESTS / "acp_mcp_server.py"


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


def current_values(config_options: list[dict[str, Any]]) -> dict[str, Any]:
    return {option["id"]: option.get("currentValue") for option in config_options}


async def started_session(run: AcpRun, workspace: Path, **initialize: Any) -> str:
    await run.initialize(**initialize)
    return (await run.conn.new_session(cwd=str(workspace))).session_id


async def test_initialize_advertises_the_second_editions_capabilities(
    acp_env: dict[str, str],
) -> None:
    async with acp_server(acp_env) as run:
        await run.initialize()
    capabilities = run.recording.result_of("initialize")["agentCapabilities"]
    assert capabilities["promptCapabilities"] == {
        "image": True,
        "audio": False,
        "embeddedContext": True,
    }
    assert capabilities["mcpCapabilities"]["http"] is True
    assert set(capabilities["sessionCapabilities"]) >= {"list", "delete", "resume", "close"}
    run.recording.assert_conformant()


async def test_set_config_option_switches_the_model_from_the_next_prompt(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok")])
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        offered = run.recording.result_of("session/new")["configOptions"]
        assert current_values(offered)["model"] == MODELS["openai"]
        assert current_values(offered)["tool_policy"] == "hybrid"
        (model,) = [option for option in offered if option["id"] == "model"]
        assert model["category"] == "model" and model["type"] == "select"
        answer = await run.conn.set_config_option(
            config_id="model", session_id=session_id, value="openai:gpt-4.1"
        )
        assert answer is not None
        assert (
            current_values(run.recording.result_of("session/set_config_option")["configOptions"])[
                "model"
            ]
            == "openai:gpt-4.1"
        )
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Hi.")])
    assert fake.requests[-1].body["model"] == "gpt-4.1"
    run.recording.assert_conformant()


async def test_the_slash_commands_are_advertised(acp_env: dict[str, str], workspace: Path) -> None:
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        await run.editor.wait_for_update(session_id, "available_commands_update", timeout=5)
    (update, *_) = run.recording.raw_updates(session_id, "available_commands_update")
    names = {command["name"].lstrip("/") for command in update["availableCommands"]}
    assert names >= {"model", "cost", "undo", "compact"}
    run.recording.assert_conformant()


async def test_the_commands_are_announced_after_the_answer_that_starts_the_session(
    acp_env: dict[str, str], workspace: Path
) -> None:
    """A client can only route an update once it knows the session: from the answer."""
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        await run.editor.wait_for_update(session_id, "available_commands_update", timeout=5)
        await run.conn.resume_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        while len(run.recording.raw_updates(session_id, "available_commands_update")) < 2:
            await asyncio.sleep(0.01)
    asked = {m["id"]: m["method"] for m in run.recording.from_client if "id" in m}
    order = [
        asked[m["id"]] if "id" in m else m["params"]["update"]["sessionUpdate"]
        for m in run.recording.agent_messages()
    ]
    assert order == [
        "initialize",
        "session/new",
        "available_commands_update",
        "session/resume",
        "available_commands_update",
    ]
    run.recording.assert_conformant()


async def test_a_model_command_is_announced_as_a_config_option_update(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok")])
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        command = [text_block("/model openai:gpt-4.1")]
        await run.conn.prompt(session_id=session_id, prompt=command)
        await run.editor.wait_for_update(session_id, "config_option_update", timeout=5)
    (update, *_) = run.recording.raw_updates(session_id, "config_option_update")
    assert current_values(update["configOptions"])["model"] == "openai:gpt-4.1"
    run.recording.assert_conformant()


async def test_resume_continues_a_stored_session_without_replaying_it(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="Noted."), Reply(text="Seven.")])
    async with acp_server(acp_env) as first:
        session_id = await started_session(first, workspace)
        await first.conn.prompt(session_id=session_id, prompt=[text_block("Remember 7.")])
    async with acp_server(acp_env) as run:
        await run.initialize()
        await run.conn.resume_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        resumed = run.recording.result_of("session/resume")
        replayed = [
            u
            for u in run.recording.raw_updates(session_id)
            if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk", "tool_call")
        ]
        result = await run.conn.prompt(session_id=session_id, prompt=[text_block("Which?")])
    assert "model" in current_values(resumed["configOptions"])
    assert replayed == []
    assert result.stop_reason == "end_turn"
    assert "Remember 7." in json.dumps(fake.requests[-1].body)
    first.recording.assert_conformant()
    run.recording.assert_conformant()


async def test_close_frees_the_session_and_keeps_it_stored(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="Noted.")])
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Remember 7.")])
        await run.conn.close_session(session_id=session_id)
        closed = run.recording.result_of("session/close")
        listed = await run.conn.list_sessions()
        await run.conn.load_session(cwd=str(workspace), session_id=session_id)
    assert closed == {}
    assert [s.session_id for s in listed.sessions] == [session_id]
    assert run.editor.updates_of(session_id, "user_message_chunk")  # replayed from the store
    run.recording.assert_conformant()


async def test_set_config_option_refuses_what_the_options_do_not_offer(
    acp_env: dict[str, str], workspace: Path
) -> None:
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        refused = {}
        for config_id, value in (
            ("model", "openai:no-such-model"),
            ("tool_policy", "sometimes"),
            ("temperature", "hot"),
        ):
            with pytest.raises(RequestError) as error:
                await run.conn.set_config_option(
                    config_id=config_id, session_id=session_id, value=value
                )
            refused[config_id] = error.value
        with pytest.raises(RequestError) as unknown:
            await run.conn.set_config_option(
                config_id="model", session_id="sess_nobody", value="openai:gpt-4.1"
            )
        options = await run.conn.set_config_option(
            config_id="tool_policy", session_id=session_id, value="sync"
        )
    assert {name: error.code for name, error in refused.items()} == {
        "model": INVALID_PARAMS,
        "tool_policy": INVALID_PARAMS,
        "temperature": INVALID_PARAMS,
    }
    assert "openai:gpt-4.1-mini" in str(refused["model"])  # what would fit
    assert unknown.value.code == RESOURCE_NOT_FOUND
    assert options is not None
    answered = run.recording.result_of("session/set_config_option")["configOptions"]
    assert current_values(answered)["tool_policy"] == "sync"
    # set_config_option answers with the options: no config_option_update besides.
    assert run.recording.raw_updates(session_id, "config_option_update") == []
    run.recording.assert_conformant()


async def test_the_cost_command_answers_without_calling_the_model(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=(1000, 200))])
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Hi.")])
        before = len(fake.requests)
        shown = len(run.editor.text_of(session_id))
        result = await run.conn.prompt(session_id=session_id, prompt=[text_block("/cost")])
        answer = run.editor.text_of(session_id)[shown:]
    assert result.stop_reason == "end_turn"
    assert len(fake.requests) == before  # no model call
    assert "1 turn" in answer and "1,000 tokens in" in answer and "200 out" in answer
    assert "$0.0007" in answer  # gpt-4.1-mini: 1000 x $0.4 + 200 x $1.6 per million
    run.recording.assert_conformant()


def test_the_prompt_result_has_its_usage_under_meta(text_turn: Scenario) -> None:
    (recording,) = text_turn.recordings
    result = recording.result_of("session/prompt")
    # `usage` at the root: the end-turn-token-usage RFD's place
    # (tests/protocol/test_prompt_usage.py).
    assert set(result) == {"stopReason", "usage", "_meta"}
    parley = result["_meta"]["parley"]
    assert result["usage"] == parley["usage"]
    assert parley["usage"]["inputTokens"] == 10 and parley["usage"]["outputTokens"] == 5
    assert parley["turn"]["rounds"] == 1 and parley["turn"]["model"] == MODELS["openai"]
    assert parley["session"]["turns"] == 1


async def test_usage_update_reports_the_context_the_window_and_the_cost(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="ok", usage=(100, 20))])
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Hi.")])
    models = run.recording.result_of("initialize")["_meta"]["parley"]["models"]
    (window,) = [m["contextWindow"] for m in models if m["id"] == MODELS["openai"]]
    (update,) = run.recording.raw_updates(session_id, "usage_update")
    assert update["used"] == 120 and update["size"] == window
    assert update["cost"]["currency"] == "USD" and update["cost"]["amount"] > 0
    assert update["_meta"]["parley"]["call"]["inputTokens"] == 100
    assert update["_meta"]["parley"]["session"]["outputTokens"] == 20
    run.recording.assert_conformant()


async def test_a_window_that_is_not_known_is_never_reported_as_0(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = {**os.environ, **server_env(fake, tmp_path / "home", "openai:a-model-nobody-knows")}
    fake.set_script([Reply(text="ok")])
    async with acp_server(env) as run:
        session_id = await started_session(run, workspace)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Hi.")])
    assert all(u["size"] > 0 for u in run.recording.raw_updates(session_id, "usage_update"))
    run.recording.assert_conformant(only="session/update")


def test_a_client_that_did_not_opt_in_gets_no_revision(tool_turn: Scenario) -> None:
    (recording,) = tool_turn.recordings
    chunks = recording.raw_updates(tool_turn.session_id, "agent_message_chunk")
    assert not [c for c in chunks if "replaces" in c.get("_meta", {}).get("parley", {})]
    # What the stream said stays on screen; the synchronous call's wording is not appended.
    assert tool_turn.editor.text_of(tool_turn.session_id) == "Let me compute that.It is 42."


def test_the_permission_request_shows_what_it_asks_about(tool_turn: Scenario) -> None:
    (asked,) = tool_turn.editor.permission_requests
    assert asked.title != "python_eval"  # a title a person reads ("Run Python")
    shown = json.dumps([c.model_dump(mode="json") for c in asked.content or []])
    assert "6 * 7" in shown


async def test_an_image_in_the_prompt_reaches_the_model(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="A single pixel.")])
    async with acp_server(acp_env) as run:
        session_id = await started_session(run, workspace)
        prompt = [text_block("What is this?"), image_block(PNG_1X1, "image/png")]
        result = await run.conn.prompt(session_id=session_id, prompt=prompt)
    assert result.stop_reason == "end_turn"
    assert f"data:image/png;base64,{PNG_1X1}" in json.dumps(fake.requests[-1].body)
    run.recording.assert_conformant()


async def test_files_are_read_through_the_editor_that_offers_it(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    path = str((workspace / "geometry.py").resolve())
    editor = EditorClient()
    editor.buffers[path] = "UNSAVED_EDIT = 1\n"  # what the editor holds, not the disk
    fake.set_script([Reply(tool_calls=(READ,)), Reply(text="Done.")])
    async with acp_server(acp_env, editor) as run:
        session_id = await started_session(run, workspace, read_files=True)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Read geometry.py.")])
    assert editor.file_reads == [path]
    (read,) = run.recording.agent_messages("fs/read_text_file")
    assert read["params"]["path"] == path and read["params"]["sessionId"] == session_id
    assert "UNSAVED_EDIT" in json.dumps(fake.requests[-1].body)
    run.recording.assert_conformant()


async def test_an_mcp_servers_tools_are_offered_to_the_model_and_run(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    notes = McpServerStdio(name="notes", command=sys.executable, args=[str(MCP_SERVER)], env=[])
    fake.set_script([Reply(text="ok")])
    async with acp_server(acp_env) as run:
        await run.initialize()
        session = await run.conn.new_session(cwd=str(workspace), mcp_servers=[notes])
        sid = session.session_id
        await run.conn.prompt(session_id=sid, prompt=[text_block("Which tools?")])
        offered = [tool["function"]["name"] for tool in fake.requests[-1].body.get("tools", [])]
        (shout,) = [name for name in offered if "shout" in name]  # namespaced
        call = ScriptedToolCall(shout, {"text": "hello"})
        fake.set_script([Reply(text="ok"), Reply(tool_calls=(call,)), Reply(text="Done.")])
        await run.conn.prompt(session_id=sid, prompt=[text_block("Shout hello.")])
    finished = [u for u in run.editor.updates_of(sid, "tool_call_update") if u.status]
    assert finished[-1].status == "completed"
    assert "HELLO" in json.dumps(fake.requests[-1].body)
    run.recording.assert_conformant()


# --- the check itself: it finds what it is meant to find --------------------------------


def check(*agent: Any, client: list[dict[str, Any]] | None = None) -> list[tuple[str, str]]:
    sent = client or [{"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}}]
    found = acp_schema().check_agent_messages(sent, list(agent))
    return [(v.path, v.complaint) for v in found]


def update(fields: dict[str, Any]) -> dict[str, Any]:
    params = {"sessionId": "s", "update": fields}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def test_the_check_reads_acps_schema_from_the_npm_package() -> None:
    schema = acp_schema()
    lock = json.loads((TESTS / "acp-schema/package-lock.json").read_text())
    assert schema.version == lock["packages"]["node_modules/@agentclientprotocol/sdk"]["version"]
    assert schema.type_for("Response", "agent", "session/prompt") == "PromptResponse"
    assert schema.type_for("Notification", "client", "session/update") == "SessionNotification"


def test_the_check_finds_custom_fields_outside_meta() -> None:
    root = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn", "tokens": {}}}
    assert [p for p, _ in check(root)] == ["result.tokens"]
    nested = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x", "extra": 1}
    assert [p for p, _ in check(update(nested))] == ["params.update.extra"]
    content = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "a", "x": 1},
    }
    assert [p for p, _ in check(update(content))] == ["params.update.content.x"]
    meta = {"stopReason": "end_turn", "_meta": {"parley": {"usage": {"anything": [1]}}}}
    assert check({"jsonrpc": "2.0", "id": 1, "result": meta}) == []


def test_the_check_finds_what_the_schema_requires_and_forbids() -> None:
    (missing,) = check(update({"sessionUpdate": "usage_update", "used": 3}))
    assert missing == (
        "params.update",
        "'size' is a required property (schema: SessionNotification)",
    )
    (wrong,) = check({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "done"}})
    assert wrong[0] == "result.stopReason"
    assert check(update({"sessionUpdate": "no_such_update"}))
    assert check({"jsonrpc": "2.0", "id": 1, "error": {"code": "bad", "message": "m"}})


def test_the_check_knows_who_sends_what() -> None:
    assert check({"jsonrpc": "2.0", "method": "_parley/anything", "params": {"x": 1}}) == []
    assert [p for p, _ in check({"jsonrpc": "2.0", "id": 9, "result": {}})] == ["id"]
    unknown = {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {}}
    assert [p for p, _ in check(unknown)] == ["method"]  # a client's method, not the agent's
    envelope = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}, "usage": 1}
    assert [p for p, _ in check(envelope)] == ["usage"]


def test_a_line_that_is_not_json_is_a_violation() -> None:
    recording = Recording()
    recording.add_agent_line(b"Traceback (most recent call last):")
    with pytest.raises(AssertionError, match="not JSON"):
        recording.assert_conformant()
