"""MCP servers listed in `session/new`: `parley serve --framing ndjson` as a subprocess, driven
by the official ACP SDK's client, the model played by the fake LLM over HTTP, and a small MCP
server written with the official MCP SDK (tests/acp_mcp_server.py) over stdio and streamable
HTTP. Each server records its pid in a file, so the tests can check none outlives its session.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import text_block
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer
from acp_client import AcpRun, acp_server
from conftest import TESTS, server_env
from mcp.types import CallToolResult, ImageContent, TextContent
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.mcp import namespaced_name, tool_result

MCP_SERVER = TESTS / "acp_mcp_server.py"
TOOL_TIMEOUT = 2  # seconds (config.toml): how long a hanging tool is waited for
START_TIMEOUT = 3  # seconds: how long a server may take to list its tools, where it matters
INVALID_PARAMS = -32602


def call(tool: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(f"mcp__notes__{tool}", arguments)


@pytest.fixture
def env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text(f"tool_timeout_seconds = {TOOL_TIMEOUT}\n")
    return {**os.environ, **server_env(fake, home), "PARLEY_CONFIG": str(config)}


@pytest.fixture
def pid_file(tmp_path: Path) -> Path:
    return tmp_path / "mcp-pids"


def stdio_server(pid_file: Path, name: str = "notes", **env: str) -> McpServerStdio:
    variables = [EnvVariable(name="MCP_PID_FILE", value=str(pid_file))]
    variables += [EnvVariable(name=key, value=value) for key, value in env.items()]
    return McpServerStdio(name=name, command=sys.executable, args=[str(MCP_SERVER)], env=variables)


def pids(pid_file: Path) -> list[int]:
    """The MCP servers started with MCP_PID_FILE=pid_file, found in /proc (in the sandbox a
    server sees neither the test's /tmp nor its own pid as the test does): processes whose
    environment holds that variable and that run our Python (not bwrap or its init)."""
    marker = f"MCP_PID_FILE={pid_file}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            program = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except (OSError, ValueError):
            continue
        if marker in environ and program == sys.executable.encode() and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone, or going
        return False
    return state != "Z"  # a zombie has ended: only its parent has not read its status yet


def wait_until_ended(pid_list: list[int], timeout: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout
    while (running := [pid for pid in pid_list if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running


async def new_session(run: AcpRun, workspace: Path, *servers: Any) -> str:
    await run.initialize()
    session = await run.conn.new_session(cwd=str(workspace), mcp_servers=list(servers))
    return session.session_id


def finished_calls(run: AcpRun, session_id: str) -> list[Any]:
    return [
        u
        for u in run.editor.updates_of(session_id, "tool_call_update")
        if u.status in ("completed", "failed")
    ]


def then(fake: FakeLLM, *replies: Reply) -> None:
    """The replies of the next turn, after one that made a tool call and answered: the fake
    picks a reply by the number of assistant messages in the request."""
    fake.set_script([Reply(), Reply(), *replies])


def last_tool_result(fake: FakeLLM) -> str:
    """What the model was sent as the last tool result (OpenAI's wire)."""
    messages = fake.requests[-1].body["messages"]
    return next(m["content"] for m in reversed(messages) if m["role"] == "tool")


async def test_a_stdio_servers_tool_runs_with_permission_and_without_parleys_keys(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    fake.set_script(
        [
            Reply(tool_calls=(call("shout", text="hello"),)),
            Reply(tool_calls=(call("environment"),)),
            Reply(text="Done."),
        ]
    )
    async with acp_server(env) as run:
        notes = stdio_server(pid_file, NOTES_SETTING="listed")
        sid = await new_session(run, workspace, notes)
        result = await run.conn.prompt(session_id=sid, prompt=[text_block("Shout hello.")])
        running = pids(pid_file)
    assert result.stop_reason == "end_turn"
    offered = [tool["function"]["name"] for tool in fake.requests[0].body["tools"]]
    assert {"mcp__notes__shout", "mcp__notes__environment"} <= set(offered)
    asked = [request.title for request in run.editor.permission_requests]
    assert asked == ["mcp__notes__shout", "mcp__notes__environment"]
    kinds = [u.kind for u in run.editor.updates_of(sid, "tool_call")]
    assert kinds[0] == "read"  # shout's readOnlyHint
    assert [u.status for u in finished_calls(run, sid)] == ["completed", "completed"]
    assert "HELLO" in json.dumps(fake.requests[-1].body)
    seen = set(last_tool_result(fake).split())
    assert "NOTES_SETTING" in seen and "PATH" in seen
    assert not {name for name in seen if name.startswith(("OPENAI", "ANTHROPIC", "PARLEY"))}
    assert len(running) == 1 and wait_until_ended(running) == []
    run.recording.assert_conformant()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The same MCP server over streamable HTTP, on a free port; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(MCP_SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MCP_PID_FILE": str(tmp_path / "http-pid")},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no HTTP server"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()


async def test_a_streamable_http_servers_tool_runs(
    env: dict[str, str], fake: FakeLLM, workspace: Path, http_server: str
) -> None:
    fake.set_script([Reply(tool_calls=(call("shout", text="over http"),)), Reply(text="Done.")])
    notes = HttpMcpServer(
        type="http",
        name="notes",
        url=http_server,
        headers=[HttpHeader(name="X-Notes", value="1")],
    )
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, notes)
        await run.conn.prompt(session_id=sid, prompt=[text_block("Shout.")])
    assert [u.status for u in finished_calls(run, sid)] == ["completed"]
    assert last_tool_result(fake) == "OVER HTTP"
    assert run.recording.result_of("initialize")["agentCapabilities"]["mcpCapabilities"] == {
        "http": True
    }


async def test_a_server_that_does_not_start_is_reported_and_the_session_works(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    fake.set_script([Reply(text="Hello.")])
    missing = McpServerStdio(name="ghost", command="/no/such/mcp-server", args=[], env=[])
    broken = McpServerStdio(
        name="broken", command=sys.executable, args=["-c", "raise SystemExit('no config')"], env=[]
    )
    sse = SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, missing, broken, sse, stdio_server(pid_file))
        told = await run.editor.wait_for_update(sid, "agent_message_chunk")
        result = await run.conn.prompt(session_id=sid, prompt=[text_block("Hi.")])
    assert result.stop_reason == "end_turn"
    notice = told.content.text
    assert "`ghost` could not start: its command was not found (/no/such/mcp-server)" in notice
    assert "`broken` could not start" in notice and "no config" in notice  # its stderr
    assert "`old` could not start: its transport, sse, is not supported" in notice
    assert "goes on without its tools" in notice
    offered = {tool["function"]["name"] for tool in fake.requests[0].body["tools"]}
    assert "mcp__notes__shout" in offered and not any("ghost" in name for name in offered)
    # The notice follows the answer: an ACP client drops updates of a session it doesn't know.
    wire = run.recording.agent_messages()
    answered = next(i for i, m in enumerate(wire) if m.get("result", {}).get("sessionId") == sid)
    updates = [i for i, m in enumerate(wire) if m.get("method") == "session/update"]
    assert updates[0] > answered
    run.recording.assert_conformant()


async def test_a_server_that_hangs_at_its_start_is_reported_at_the_timeout(
    env: dict[str, str], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "silent-pid"
    silent = McpServerStdio(
        name="silent",
        command=sys.executable,
        args=[
            "-c",
            f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "time.sleep(600)",
        ],
        env=[EnvVariable(name="MCP_PID_FILE", value=str(pid_file))],
    )
    with Path(env["PARLEY_CONFIG"]).open("a") as config:  # a server that works starts slower
        config.write(f"mcp_start_timeout_seconds = {START_TIMEOUT}\n")
    fake.set_script([Reply(text="Hello.")])
    async with acp_server(env) as run:
        started = time.monotonic()
        sid = await new_session(run, workspace, silent)
        took = time.monotonic() - started
        told = await run.editor.wait_for_update(sid, "agent_message_chunk")
        result = await run.conn.prompt(session_id=sid, prompt=[text_block("Hi.")])
    assert result.stop_reason == "end_turn"
    assert took < START_TIMEOUT  # answered at once: the server is waited for in the background
    assert f"`silent` could not start: it did not answer within {START_TIMEOUT} s" in (
        told.content.text
    )
    assert wait_until_ended(pids(pid_file)) == []


async def test_session_new_is_answered_at_once_and_a_prompt_sent_at_once_has_the_tools(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    """A server slow to start does not hold `session/new` (an editor's chat opens at once);
    a prompt sent right away waits for it, so the model's first request offers its tools."""
    delay = 3.0
    fake.set_script([Reply(text="Hello.")])
    async with acp_server(env) as run:
        started = time.monotonic()
        sid = await new_session(run, workspace, stdio_server(pid_file, MCP_START_DELAY=str(delay)))
        took = time.monotonic() - started
        result = await run.conn.prompt(session_id=sid, prompt=[text_block("Hi.")])
    assert took < delay
    assert result.stop_reason == "end_turn"
    offered = {tool["function"]["name"] for tool in fake.requests[0].body["tools"]}
    assert "mcp__notes__shout" in offered


async def test_stop_while_the_servers_start_ends_the_turn_and_they_still_join(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    delay = 4.0
    fake.set_script([Reply(text="Hello.")])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, stdio_server(pid_file, MCP_START_DELAY=str(delay)))
        started = time.monotonic()
        prompt = asyncio.ensure_future(run.conn.prompt(session_id=sid, prompt=[text_block("Hi.")]))
        await asyncio.sleep(0.5)
        await run.conn.cancel(session_id=sid)
        stopped = await prompt
        stopped_after = time.monotonic() - started
        assert fake.requests == []  # no request without the tools the user listed
        result = await run.conn.prompt(session_id=sid, prompt=[text_block("Again.")])
    assert stopped.stop_reason == "cancelled" and stopped_after < delay
    assert result.stop_reason == "end_turn"
    offered = {tool["function"]["name"] for tool in fake.requests[0].body["tools"]}
    assert "mcp__notes__shout" in offered


async def test_session_load_starts_the_servers_it_lists(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    fake.set_script([Reply(text="Hello.")])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace)
        await run.conn.prompt(session_id=sid, prompt=[text_block("Hi.")])
    fake.set_script([Reply(), Reply(tool_calls=(call("shout", text="loaded"),)), Reply(text="ok")])
    async with acp_server(env) as run:
        await run.initialize()
        await run.conn.load_session(
            cwd=str(workspace), session_id=sid, mcp_servers=[stdio_server(pid_file)]
        )
        await run.conn.prompt(session_id=sid, prompt=[text_block("Shout.")])
        assert last_tool_result(fake) == "LOADED"
        running = pids(pid_file)
    assert len(running) == 1 and wait_until_ended(running) == []


async def test_a_server_listed_without_its_command_is_invalid_params_another_type_is_not(
    env: dict[str, str], workspace: Path
) -> None:
    async with acp_server(env) as run:
        await run.initialize()
        with pytest.raises(RequestError) as raised:
            await run.raw_request(
                "session/new",
                {"cwd": str(workspace), "mcpServers": [{"name": "x", "args": [], "env": []}]},
            )
        # A transport Parley does not know is not invalid: the session goes on without it.
        other = {"type": "websocket", "name": "w", "url": "ws://127.0.0.1:9"}
        answer = await run.raw_request(
            "session/new", {"cwd": str(workspace), "mcpServers": [other]}
        )
        told = await run.editor.wait_for_update(answer["sessionId"], "agent_message_chunk")
    assert raised.value.code == INVALID_PARAMS
    assert "mcpServers[0]: a stdio server needs 'command'" in str(raised.value.data or raised.value)
    assert "`w` could not start: its transport, websocket, is not supported" in told.content.text


async def test_a_server_that_crashes_mid_call_is_a_tool_error_and_the_session_goes_on(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    fake.set_script([Reply(tool_calls=(call("crash"),)), Reply(text="It crashed.")])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, stdio_server(pid_file))
        first = await run.conn.prompt(session_id=sid, prompt=[text_block("Crash it.")])
        assert "stopped while running crash" in last_tool_result(fake)
        then(fake, Reply(tool_calls=(call("shout", text="x"),)), Reply(text="Gone."))
        second = await run.conn.prompt(session_id=sid, prompt=[text_block("Again.")])
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert [u.status for u in finished_calls(run, sid)] == ["failed", "failed"]
    assert "'notes' is not running (it stopped earlier" in last_tool_result(fake)
    run.recording.assert_conformant()


async def test_a_tool_that_hangs_times_out_and_the_turn_ends(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    fake.set_script([Reply(tool_calls=(call("hang"),)), Reply(text="It hung.")])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, stdio_server(pid_file))
        started = time.monotonic()
        result = await asyncio.wait_for(
            run.conn.prompt(session_id=sid, prompt=[text_block("Hang.")]), TOOL_TIMEOUT + 20
        )
        took = time.monotonic() - started
        assert f"did not answer hang within {TOOL_TIMEOUT} s" in last_tool_result(fake)
        then(fake, Reply(tool_calls=(call("shout", text="still here"),)), Reply(text="ok"))
        await run.conn.prompt(session_id=sid, prompt=[text_block("Shout.")])
        assert last_tool_result(fake) == "STILL HERE"  # the server still serves
        running = pids(pid_file)
    assert result.stop_reason == "end_turn" and took < TOOL_TIMEOUT + 10
    assert [u.status for u in finished_calls(run, sid)] == ["failed", "completed"]
    assert len(running) == 1 and wait_until_ended(running) == []  # the hung one, with the server
    run.recording.assert_conformant()


async def test_no_mcp_server_outlives_its_session_or_the_server(
    env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    names = ("del", "closed", "kept", "starting")
    deleted_pids, closed_pids, kept_pids, starting_pids = (tmp_path / name for name in names)
    async with acp_server(env) as run:
        deleted = await new_session(run, workspace, stdio_server(deleted_pids))
        closed = await run.conn.new_session(
            cwd=str(workspace), mcp_servers=[stdio_server(closed_pids)]
        )
        await run.conn.new_session(cwd=str(workspace), mcp_servers=[stdio_server(kept_pids)])
        # Closed while its server is still starting (the start runs in the background).
        slow = stdio_server(starting_pids, MCP_START_DELAY="30")
        starting = await run.conn.new_session(cwd=str(workspace), mcp_servers=[slow])
        deadline = time.monotonic() + 30
        places = (deleted_pids, closed_pids, kept_pids, starting_pids)
        while not all(every := [pids(place) for place in places]):
            assert time.monotonic() < deadline, every
            await asyncio.sleep(0.1)
        await run.raw_request("session/delete", {"sessionId": deleted})
        await run.conn.close_session(session_id=closed.session_id)
        await run.conn.close_session(session_id=starting.session_id)
        assert wait_until_ended(pids(deleted_pids) + pids(closed_pids) + every[3]) == []
        assert all(alive(pid) for pid in pids(kept_pids))
    assert wait_until_ended(pids(kept_pids)) == []


async def test_session_resume_starts_the_servers_it_lists_in_place_of_the_old(
    env: dict[str, str], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    first_pids, second_pids = tmp_path / "first", tmp_path / "second"
    fake.set_script([Reply(tool_calls=(call("shout", text="resumed"),)), Reply(text="ok")])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, stdio_server(first_pids))
        await run.conn.resume_session(
            cwd=str(workspace), session_id=sid, mcp_servers=[stdio_server(second_pids)]
        )
        assert wait_until_ended(pids(first_pids)) == []
        await run.conn.prompt(session_id=sid, prompt=[text_block("Shout.")])
        assert last_tool_result(fake) == "RESUMED"
        second = pids(second_pids)
    assert len(second) == 1 and wait_until_ended(second) == []


async def test_a_cancel_during_a_call_ends_the_turn_at_once(
    env: dict[str, str], fake: FakeLLM, workspace: Path, pid_file: Path
) -> None:
    fake.set_script([Reply(tool_calls=(call("hang"),)), Reply(text="Never.")])
    async with acp_server(env) as run:
        sid = await new_session(run, workspace, stdio_server(pid_file))
        prompt = asyncio.ensure_future(
            run.conn.prompt(session_id=sid, prompt=[text_block("Hang.")])
        )
        async with asyncio.timeout(20):
            while not any(
                u.status == "in_progress" for u in run.editor.updates_of(sid, "tool_call_update")
            ):
                await asyncio.sleep(0.02)
        cancelled_at = time.monotonic()
        await run.conn.cancel(session_id=sid)
        result = await asyncio.wait_for(prompt, 10)
        took = time.monotonic() - cancelled_at
    assert result.stop_reason == "cancelled" and took < 1.5
    assert [u.status for u in finished_calls(run, sid)] == ["failed"]


# --- names and results, in process --------------------------------------------------------


def test_names_follow_the_providers_rules_and_stay_distinct() -> None:
    assert namespaced_name("notes", "shout") == "mcp__notes__shout"
    assert namespaced_name("my notes.v2", "say hi/ö") == "mcp__my_notes_v2__say_hi__"
    long = namespaced_name("server" * 10, "tool" * 10)
    assert len(long) == 64 and long != namespaced_name("server" * 10, "tool" * 11)
    taken = {"mcp__a__b"}
    assert namespaced_name("a", "b", taken) == "mcp__a__b_2"
    assert namespaced_name("a", "b", taken | {"mcp__a__b_2"}) == "mcp__a__b_3"
    first = namespaced_name("s" * 30, "t" * 40)
    second = namespaced_name("s" * 30, "t" * 40, {first})
    assert len(first) == len(second) == 64 and first != second


def test_results_keep_their_text_and_note_what_is_not_text() -> None:
    result = CallToolResult(
        content=[
            TextContent(text="first"),
            ImageContent(data="aGVsbG8h", mime_type="image/png"),
            TextContent(text="second"),
        ],
        is_error=True,
    )
    converted = tool_result(result)
    assert converted.content == "first\n[image: image/png, 6 bytes]\nsecond"
    assert converted.is_error
    structured = tool_result(CallToolResult(content=[], structured_content={"n": 1}))
    assert structured.content == '{"n": 1}' and not structured.is_error
    assert tool_result(CallToolResult(content=[])).content == "(no output)"
