"""ACP v2 (the draft), behind its switch (`PARLEY_ACP_V2=1`), over the wire.

`parley serve --framing ndjson` runs as a subprocess, spoken to by `V2Client`, a small raw
JSON-RPC client that opts in with `protocolVersion: 2` (the official Python SDK speaks v1
only) and records every message both ways: everything the server sends it is validated
against ACP's v2 draft schema (`schema/v2/schema.json` of the pinned
`@agentclientprotocol/sdk`, tests/acp-schema), with no field the schema does not define. A v1
client on a server with the switch on is driven by the official SDK (tests/acp_client.py)
and validated against the v1 schema, as every other test does. The reshaping of updates and
the replay cursor are also checked in-process, as Hypothesis properties.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from acp.helpers import text_block
from acp_client import acp_server
from acp_schema import SCHEMA_PACKAGE, AcpSchema
from conftest import server_env
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.fakellm import FakeLLM, Fault, Pacing, Reply, ScriptedToolCall
from parley.protocol import v2
from pygls.exceptions import JsonRpcInvalidParams

V2_SCHEMA_FILE = SCHEMA_PACKAGE / "schema/v2/schema.json"
STREAM_LIMIT = 50 * 1024 * 1024
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SWITCH_ON = {v2.SWITCH: "1"}
PLAN = [
    {"content": "Read geometry.py", "priority": "high", "status": "completed"},
    {"content": "Add perimeter()", "priority": "medium", "status": "in_progress"},
]
# A command whose output comes in two parts, a moment apart, then fails.
COMMAND = "printf 'first part\\n'; sleep 0.4; printf 'second part\\n'; exit 3"


@cache
def v2_schema() -> AcpSchema:
    return AcpSchema(json.loads(V2_SCHEMA_FILE.read_text(encoding="utf-8")))


@cache
def v2_update_kinds() -> set[str]:
    """The `sessionUpdate` kinds the v2 schema defines."""
    variants = v2_schema().defs["SessionUpdate"]["anyOf"]
    return {v["properties"]["sessionUpdate"].get("const") for v in variants} - {None}


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")


class V2Client:
    """A client that speaks ACP v2 over ndjson: requests, notifications, the server's
    permission questions answered `allow_once`; every message kept, in order."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._reading = asyncio.ensure_future(self._read())

    async def request(self, method: str, params: dict[str, Any], timeout: float = 60) -> Any:
        self._next_id += 1
        answer = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = answer
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return await asyncio.wait_for(answer, timeout)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self) -> dict[str, Any]:
        info = {"name": "v2-test-client", "version": "1"}
        return await self.request(
            "initialize", {"protocolVersion": 2, "info": info, "capabilities": {}}
        )

    async def new_session(self, cwd: Path, **parley: Any) -> str:
        params = {"cwd": str(cwd), "mcpServers": [], "_meta": {"parley": parley}}
        return (await self.request("session/new", params))["sessionId"]

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        prompt = [{"type": "text", "text": text}]
        return await self.request("session/prompt", {"sessionId": session_id, "prompt": prompt})

    def updates(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.received
            if m.get("method") == "session/update"
            and m["params"]["sessionId"] == session_id
            and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)
        ]

    def kinds(self, session_id: str) -> list[str]:
        return [update["sessionUpdate"] for update in self.updates(session_id)]

    def assert_conformant(self) -> None:
        """Valid under the v2 schema, and no update of a kind it does not name: its open
        "other" variant would take v1's `tool_call` or `plan` (a kind without `_` is
        reserved for ACP)."""
        kinds = {
            m["params"]["update"].get("sessionUpdate")
            for m in self.received
            if m.get("method") == "session/update"
        }
        assert kinds <= v2_update_kinds(), kinds - v2_update_kinds()
        found = v2_schema().check_agent_messages(self.sent, self.received)
        assert not found, f"{len(found)} message(s) break ACP's v2 draft schema:\n" + "\n".join(
            f"- {violation}" for violation in found
        )

    def _send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            self.received.append(message)
            if "method" in message and "id" in message:
                self._answer(message)
            elif "id" in message and message["id"] in self._pending:
                answer = self._pending.pop(message["id"])
                if "error" in message:
                    answer.set_exception(RpcError(message["error"]))
                else:
                    answer.set_result(message["result"])

    def _answer(self, request: dict[str, Any]) -> None:
        if request["method"] == "session/request_permission":
            outcome = {"outcome": "selected", "optionId": "allow_once"}
            self._send({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}})
        else:
            error = {"code": METHOD_NOT_FOUND, "message": request["method"]}
            self._send({"jsonrpc": "2.0", "id": request["id"], "error": error})

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await asyncio.wait_for(self.process.wait(), 20)
        await asyncio.wait_for(self._reading, 5)


@pytest.fixture
def env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home"), **SWITCH_ON}


@contextlib.asynccontextmanager
async def v2_server(env: dict[str, str]) -> AsyncIterator[V2Client]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "parley", "serve", "--framing", "ndjson"),
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=STREAM_LIMIT,
    )
    client = V2Client(process)
    try:
        yield client
    finally:
        await client.close()


def tool_calls(*calls: ScriptedToolCall) -> list[Reply]:
    return [Reply(tool_calls=calls), Reply(text="Done.")]


# --- the switch ----------------------------------------------------------------------------


async def test_a_client_asking_for_v2_gets_it_only_behind_the_switch(
    env: dict[str, str],
) -> None:
    async with v2_server(env) as client:
        result = await client.initialize()
    assert result["protocolVersion"] == 2
    assert result["info"]["name"] == "parley"
    assert set(result["capabilities"]["session"]) >= {"prompt", "mcp", "delete"}
    assert "agentCapabilities" not in result and "agentInfo" not in result
    client.assert_conformant()

    async with v2_server({**env, v2.SWITCH: "0"}) as client:
        result = await client.initialize()
    # The draft's negotiation: the agent answers the latest version it speaks.
    assert result["protocolVersion"] == 1
    assert result["agentCapabilities"]["loadSession"] is True


async def test_a_v1_client_sees_v1_with_the_switch_on(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    """The official SDK's client (v1) on a server that offers v2: modes, `tool_call`,
    `plan` and `current_mode_update` as ever, every message valid under the v1 schema."""
    async with acp_server(env) as run:
        initialized = await run.initialize()
        session = await run.conn.new_session(cwd=str(workspace))
        started = run.recording.result_of("session/new")
        fake.set_script(tool_calls(ScriptedToolCall("update_plan", {"entries": PLAN})))
        await run.conn.prompt(session_id=session.session_id, prompt=[text_block("Plan it.")])
        await run.conn.set_session_mode(session_id=session.session_id, mode_id="plan")
        kinds = [u["sessionUpdate"] for u in run.recording.raw_updates(session.session_id)]
    assert initialized.protocol_version == 1
    assert started["modes"]["currentModeId"] == "ask"
    assert started["configOptions"][0]["id"] == "mode"
    assert {"tool_call", "plan", "current_mode_update"} <= set(kinds)
    assert not {"tool_call_content_chunk", "plan_update", "state_update"} & set(kinds)
    run.recording.assert_conformant()


# --- modes: a config option only -----------------------------------------------------------


async def test_in_v2_the_mode_is_a_config_option_only(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    async with v2_server(env) as client:
        await client.initialize()
        started = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        session = started["sessionId"]
        chosen = await client.request(
            "session/set_config_option",
            {"sessionId": session, "configId": "mode", "type": "id", "value": "plan"},
        )
        fake.set_script([Reply(text="ok")])
        await client.prompt(session, "Which tools?")
        offered = {tool["function"]["name"] for tool in fake.requests[-1].body["tools"]}
        await client.prompt(session, "/mode accept_edits")
        with pytest.raises(RpcError) as refused:
            await client.request("session/set_mode", {"sessionId": session, "modeId": "ask"})
    assert "modes" not in started
    mode = started["configOptions"][0]
    assert (mode["configId"], mode["category"], mode["currentValue"]) == ("mode", "mode", "ask")
    assert [o["value"] for o in mode["options"]] == ["ask", "accept_edits", "plan"]
    assert chosen["configOptions"][0]["currentValue"] == "plan"
    assert "run_command" not in offered and "read_file" in offered  # Plan mode: read only
    (announced,) = client.updates(session, "config_option_update")  # by `/mode`
    assert announced["configOptions"][0]["currentValue"] == "accept_edits"
    assert "current_mode_update" not in client.kinds(session)
    assert refused.value.code == METHOD_NOT_FOUND
    client.assert_conformant()


# --- tool calls: upserts, content streamed -------------------------------------------------


async def test_a_commands_output_streams_into_its_tool_call_as_upserts(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    async with v2_server(env) as client:
        await client.initialize()
        session = await client.new_session(workspace, toolPolicy="sync")
        fake.set_script(tool_calls(ScriptedToolCall("run_command", {"command": COMMAND})))
        answer = await client.prompt(session, "Run it.")
        updates = client.updates(session)
    assert "tool_call" not in client.kinds(session)  # v1's creation: v2 upserts
    calls = [u for u in updates if "toolCallId" in u]
    (call_id,) = {u["toolCallId"] for u in calls}
    assert calls[0]["sessionUpdate"] == "tool_call_update" and calls[0]["title"]
    (anchor,) = client.updates(session, "tool_call_content_chunk")
    assert anchor["content"]["type"] == "terminal"
    terminal_id = anchor["content"]["terminalId"]
    described, ended = client.updates(session, "terminal_update")
    assert described == {
        "sessionUpdate": "terminal_update",
        "terminalId": terminal_id,
        "command": COMMAND,
        "cwd": str(workspace),
    }
    chunks = client.updates(session, "terminal_output_chunk")
    assert len(chunks) >= 2 and {c["terminalId"] for c in chunks} == {terminal_id}
    output = b"".join(base64.b64decode(chunk["data"]) for chunk in chunks)
    assert output == b"first part\nsecond part\n"
    assert ended["exitStatus"] == {"exitCode": 3}
    final = calls[-1]
    assert final["sessionUpdate"] == "tool_call_update" and final["status"] == "completed"
    assert updates.index(ended) < updates.index(final)
    # The question: the v2 draft's title and the call as its subject.
    (question,) = [m for m in client.received if m.get("method") == "session/request_permission"]
    assert question["params"]["subject"]["type"] == "tool_call"
    assert question["params"]["subject"]["toolCall"]["toolCallId"] == call_id
    assert question["params"]["title"] == question["params"]["subject"]["toolCall"]["title"]
    # The prompt's lifecycle: echoed, running, idle with the stop reason.
    (echo,) = client.updates(session, "user_message")
    assert echo["content"] == [{"type": "text", "text": "Run it."}]
    assert answer["messageId"] == echo["messageId"]
    states = [(u["state"], u.get("stopReason")) for u in client.updates(session, "state_update")]
    assert states == [("running", None), ("idle", "end_turn")]
    client.assert_conformant()


async def test_an_edits_diff_is_a_structured_change_with_a_git_patch(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    edit = {"path": "geometry.py", "old_text": "width * height", "new_text": "height * width"}
    async with v2_server(env) as client:
        await client.initialize()
        session = await client.new_session(workspace, toolPolicy="sync")
        fake.set_script(
            [
                Reply(tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),)),
                *tool_calls(ScriptedToolCall("edit_file", edit)),
            ]
        )
        await client.prompt(session, "Swap them.")
    diffs = [
        item
        for update in client.updates(session, "tool_call_update")
        for item in update.get("content") or []
        if item["type"] == "diff"
    ]
    assert diffs, client.kinds(session)
    path = str(workspace / "geometry.py")
    for diff in diffs:
        assert diff["changes"] == [{"operation": "modify", "path": path}]
        patch = diff["patch"]["text"]
        assert patch.startswith(f"diff --git a{path} b{path}\n")
        assert "-    return width * height\n+    return height * width\n" in patch
    assert "return height * width" in (workspace / "geometry.py").read_text()
    client.assert_conformant()


async def test_a_cancelled_or_failed_turn_ends_idle_with_its_reason(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    slow = Reply(text="word " * 400, chunk_size=5, pacing=Pacing(chunks_per_second=50))
    async with v2_server(env) as client:
        await client.initialize()
        session = await client.new_session(workspace)
        fake.set_script([slow])
        running = asyncio.ensure_future(client.prompt(session, "Talk."))
        while not client.updates(session, "agent_message_chunk"):
            await asyncio.sleep(0.01)
        client.notify("session/cancel", {"sessionId": session})
        await running
        fake.set_script([Reply(fault=Fault(kind="http", status=401))])
        with pytest.raises(RpcError) as failed:
            await client.prompt(session, "Again.")
    states = [(u["state"], u.get("stopReason")) for u in client.updates(session, "state_update")]
    assert states == [
        ("running", None),
        ("idle", "cancelled"),
        ("running", None),
        ("idle", "error"),
    ]
    assert failed.value.code == -32001  # the provider's failure, said as in v1
    client.assert_conformant()


# --- the plan -------------------------------------------------------------------------------


async def test_the_plan_is_a_plan_update_live_and_replayed(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    async with v2_server(env) as client:
        await client.initialize()
        session = await client.new_session(workspace)
        fake.set_script(tool_calls(ScriptedToolCall("update_plan", {"entries": PLAN})))
        await client.prompt(session, "Plan it.")
        live = client.updates(session, "plan_update")
        resume = {"sessionId": session, "cwd": str(workspace), "replayFrom": {"type": "start"}}
        await client.request("session/resume", resume)
    expected = {"type": "items", "planId": "main", "entries": PLAN}
    assert [update["plan"] for update in live] == [expected]
    assert [u["plan"] for u in client.updates(session, "plan_update")] == [expected, expected]
    assert "plan" not in client.kinds(session)
    client.assert_conformant()


# --- resume with replayFrom -----------------------------------------------------------------


def replayed_words(client: V2Client, session: str, since: int) -> list[str]:
    """The user's words replayed after the client's message number `since`."""
    return [
        m["params"]["update"]["content"]["text"]
        for m in client.received[since:]
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == session
        and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]


async def test_resume_replays_from_its_cursor_only(
    env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    async with v2_server(env) as client:
        await client.initialize()
        session = await client.new_session(workspace)
        for question in ("First question", "Second question", "Third question"):
            fake.set_script([Reply(text=f"Answer to {question.lower()}.")])
            await client.prompt(session, question)

    async with v2_server(env) as client:  # another window, later
        await client.initialize()
        resume = {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
        seen: dict[str, list[str]] = {}
        for name, cursor in [
            ("none", None),
            ("start", {"type": "start"}),
            ("turn 2", {"type": "_parley/turn", "turn": 2}),
        ]:
            since = len(client.received)
            answer = await client.request("session/resume", {**resume, "replayFrom": cursor})
            seen[name] = replayed_words(client, session, since)
            (state,) = [
                m["params"]["update"]
                for m in client.received[since:]
                if m.get("params", {}).get("update", {}).get("sessionUpdate") == "state_update"
            ]
            assert state["state"] == "idle" and "modes" not in answer
        refusals = {}
        for cursor in ({"type": "message"}, {"type": "_parley/turn", "turn": 9}, "start"):
            with pytest.raises(RpcError) as refused:
                await client.request("session/resume", {**resume, "replayFrom": cursor})
            refusals[json.dumps(cursor)] = refused.value.code
        with pytest.raises(RpcError) as load:
            await client.request("session/load", resume)
        fake.set_script([Reply(text="Still here.")])
        await client.prompt(session, "Fourth question")  # resumed: it takes prompts
        listed = await client.request("session/list", {})
        await client.request("session/close", {"sessionId": session})
    assert seen == {
        "none": [],
        "start": ["First question", "Second question", "Third question"],
        "turn 2": ["Second question", "Third question"],
    }
    assert set(refusals.values()) == {INVALID_PARAMS}
    assert load.value.code == METHOD_NOT_FOUND
    assert [listed_session["sessionId"] for listed_session in listed["sessions"]] == [session]
    client.assert_conformant()


# --- in-process properties ------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
CURSORS = JSON | st.fixed_dictionaries(
    {"type": st.sampled_from(["start", v2.TURN_CURSOR, "_other"])},
    optional={"turn": JSON | st.integers(-3, 50)},
)


@settings(max_examples=300, deadline=None)
@given(CURSORS)
def test_a_replay_cursor_is_a_turn_or_invalid_params(cursor: Any) -> None:
    """Whatever `replayFrom` holds: no replay (omitted, null), a turn from 1, or -32602."""
    try:
        turn = v2.replay_start(cursor)
    except JsonRpcInvalidParams:
        known = isinstance(cursor, dict) and cursor.get("type") in ("start", v2.TURN_CURSOR)
        assert not known or cursor["type"] == v2.TURN_CURSOR
        return
    if cursor is None:
        assert turn is None
    elif cursor["type"] == "start":
        assert turn == 1
    else:
        assert turn == cursor["turn"] and type(turn) is int and turn >= 1


CAPABILITIES = JSON | st.fixed_dictionaries(
    {}, optional={"fs": JSON, "terminal": JSON, "_meta": JSON | st.just({"parley": {}})}
)


@settings(max_examples=200, deadline=None)
@given(CAPABILITIES)
def test_a_v2_clients_capabilities_offer_no_files_nor_terminals(raw: Any) -> None:
    """Whatever a v2 client's `capabilities` hold (v1's `fs` and `terminal` too): only
    Parley's `_meta` is read, or the request is -32602; never files nor terminals."""
    try:
        capabilities = v2.client_capabilities(raw)
    except JsonRpcInvalidParams:
        assert not isinstance(raw, dict) or raw.get("_meta") is not None
        return
    assert capabilities.fs is None and capabilities.terminal is False
    if not isinstance(raw, dict) or raw.get("_meta") is None:
        assert capabilities == v2.client_capabilities({})


def test_a_v2_client_offers_its_tools_and_revisions_in_capabilities_meta() -> None:
    parley = {"revisions": True, "tools": [{"name": "eval_elisp", "kind": "execute"}]}
    raw = {"fs": {"readTextFile": True}, "terminal": True, "_meta": {"parley": parley}}
    capabilities = v2.client_capabilities(raw)
    assert capabilities.meta.parley.revisions is True
    assert [tool.name for tool in capabilities.meta.parley.tools] == ["eval_elisp"]
    assert capabilities.fs is None and capabilities.terminal is False


ENTRIES = st.lists(
    st.fixed_dictionaries(
        {
            "content": st.text(max_size=20),
            "priority": st.sampled_from(["high", "medium", "low"]),
            "status": st.sampled_from(["pending", "in_progress", "completed"]),
        }
    ),
    max_size=4,
)
TEXTS = st.text(st.characters(blacklist_categories=["Cs"]), max_size=60)


def v2_violations(update: dict[str, Any]) -> list[tuple[str, str]]:
    params = {"sessionId": "sess_1", "update": update}
    return list(v2_schema().violations("UpdateSessionNotification", params, "params"))


@settings(max_examples=60, deadline=None)
@given(ENTRIES, st.lists(TEXTS, min_size=1, max_size=4), st.none() | TEXTS, TEXTS)
def test_every_reshaped_update_is_a_valid_v2_update(
    entries: list[dict[str, Any]], appended: list[str], old: str | None, new: str
) -> None:
    """A plan, a command's streamed output and an edit's diff, reshaped: each valid under
    the v2 schema; the terminal's bytes are the output, in order; a diff names its change."""
    reshaper = v2.UpdateReshaper()
    sent = reshaper.reshape("sess_1", {"sessionUpdate": "plan", "entries": entries})
    start = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run", "kind": "execute"}
    sent += reshaper.reshape("sess_1", {**start, "rawInput": {"command": "make"}})
    for text in appended:
        live = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}
        meta = {"_meta": {"parley": {"commandOutput": {"append": text}}}}
        sent += reshaper.reshape("sess_1", {**live, **meta})
    diff = {"type": "diff", "path": "/w/a.py", "oldText": old, "newText": new}
    end = {"toolCallId": "c1", "status": "completed", "rawOutput": {"exitCode": 0}}
    sent += reshaper.reshape(
        "sess_1", {"sessionUpdate": "tool_call_update", **end, "content": [diff]}
    )
    for update in sent:
        assert not v2_violations(update), (update, v2_violations(update))
        assert update["sessionUpdate"] in v2_update_kinds()
    chunks = [u["data"] for u in sent if u["sessionUpdate"] == "terminal_output_chunk"]
    assert b"".join(map(base64.b64decode, chunks)) == "".join(appended).encode()
    (shown,) = sent[-1]["content"]
    assert shown["changes"] == [
        {"operation": "add" if old is None else "modify", "path": "/w/a.py"}
    ]
    assert shown["patch"]["text"].startswith("diff --git a/w/a.py b/w/a.py\n")
    assert [u["sessionUpdate"] for u in sent].count("terminal_update") == 2


def test_a_diff_too_big_to_patch_on_the_loop_still_names_its_change() -> None:
    big = "x = 1\n" * (v2.PATCH_LIMIT // 6)
    diff = {"type": "diff", "path": "/w/big.py", "oldText": big, "newText": big + "y = 2\n"}
    shown = v2.content_item(diff)
    assert shown == {"type": "diff", "changes": [{"operation": "modify", "path": "/w/big.py"}]}
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": [shown]}
    assert not v2_violations(update)
