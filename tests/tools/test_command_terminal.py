"""`run_command` in the editor's terminal (ACP `terminal/*`), driven by the official ACP Python
SDK as a client that offers `terminal` and runs each terminal's command for real (an asyncio
subprocess): every message the server sends validates against ACP's JSON Schema, the tool
call's content embeds the terminal, the model gets the output bounded with the exit code,
Stop kills the terminal and every terminal is released."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import text_block
from acp.schema import (
    ClientCapabilities,
    CreateTerminalResponse,
    EnvVariable,
    Implementation,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)
from acp_client import AcpRun, EditorClient, acp_server
from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from test_run_command import leaves_a_daemon, unique_sleep
from test_sandbox import _here, left_after_a_while, processes_with


class Terminal:
    """One terminal of the editor: a real process, its output kept (bounded from the start
    as ACP says: the end is kept)."""

    def __init__(self, process: asyncio.subprocess.Process, limit: int | None) -> None:
        self.process = process
        self.limit = limit
        self.output = b""
        self.truncated = False
        self.reading = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                self.output, self.truncated = self.output[-self.limit :], True

    def exit_status(self) -> dict[str, Any]:
        code = self.process.returncode
        if code is None:
            return {}
        if code < 0:
            return {"exit_code": None, "signal": signal.Signals(-code).name}
        return {"exit_code": code, "signal": None}


class TerminalEditor(EditorClient):
    """The editor, offering `terminal/*`: each terminal runs its command for real."""

    def __init__(self) -> None:
        super().__init__()
        self.terminals: dict[str, Terminal] = {}
        self.created: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []  # (method, terminalId), in order
        self.refuse_to_create = False  # answer terminal/create with an error

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        env: list[EnvVariable] | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        if self.refuse_to_create:
            raise RequestError.internal_error({"details": "no terminal here"})
        self.created.append(
            {"command": command, "args": args, "cwd": cwd, "env": env, "limit": output_byte_limit}
        )
        # The editor's own environment, as a real one would pass it on.
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**os.environ, "EDITOR_SECRET": "editor-only"},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = Terminal(process, output_byte_limit)
        return CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, method: str, terminal_id: str) -> Terminal:
        self.calls.append((method, terminal_id))
        if terminal_id not in self.terminals:
            raise RequestError.invalid_params({"terminalId": terminal_id})
        return self.terminals[terminal_id]

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self._terminal("output", terminal_id)
        status = terminal.exit_status()
        if status:  # all of its output is in once it has exited
            await terminal.reading
        return TerminalOutputResponse(
            output=terminal.output.decode("utf-8", "replace"),
            truncated=terminal.truncated,
            exit_status=TerminalExitStatus(**status) if status else None,
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        terminal = self._terminal("wait_for_exit", terminal_id)
        await terminal.process.wait()
        return WaitForTerminalExitResponse(**terminal.exit_status())

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        terminal = self._terminal("kill", terminal_id)
        with contextlib.suppress(ProcessLookupError):
            terminal.process.kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        terminal = self._terminal("release", terminal_id)
        with contextlib.suppress(ProcessLookupError):
            terminal.process.kill()
        await terminal.process.wait()
        terminal.reading.cancel()
        return ReleaseTerminalResponse()


async def initialized_with_terminals(run: AcpRun, workspace: Path) -> str:
    await run.conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(terminal=True),
        client_info=Implementation(name="acp-terminal", version="1"),
    )
    return (await run.conn.new_session(cwd=str(workspace))).session_id


def command_call(command: str) -> list[Reply]:
    call = ScriptedToolCall("run_command", {"command": command})
    return [Reply(tool_calls=(call,)), Reply(text="Done.")]


async def test_a_command_runs_in_the_editors_terminal_and_stop_kills_it(
    fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    env = {**os.environ, **server_env(fake, tmp_path / "home")}
    editor = TerminalEditor()
    marker, daemon = unique_sleep(), unique_sleep()
    async with acp_server(env, editor) as run:
        session = await initialized_with_terminals(run, workspace)
        fake.set_script(
            command_call("printf '\\033[32mok\\033[0m\\n'; seq 1 5000; echo $EDITOR_SECRET; exit 3")
        )
        await run.conn.prompt(session_id=session, prompt=[text_block("Run it.")])
        seen = str(fake.requests[-1].body["messages"][-1]["content"])

        # A second session's command runs until Stop.
        session_2 = (await run.conn.new_session(cwd=str(workspace))).session_id
        fake.set_script(command_call(leaves_a_daemon(daemon, marker)))
        prompt = asyncio.ensure_future(
            run.conn.prompt(session_id=session_2, prompt=[text_block("Run it.")])
        )
        async with asyncio.timeout(30):
            while not any(b"started" in t.output for t in editor.terminals.values()):
                await asyncio.sleep(0.05)
        assert processes_with(marker.encode()) and processes_with(daemon.encode())
        await run.conn.cancel(session_id=session_2)
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "cancelled"
        assert await left_after_a_while(marker.encode()) == []
        if _here.sandboxed or _here.pids_capped:  # the sandbox's end, or the pids group's
            assert await left_after_a_while(daemon.encode()) == []

        # An editor that cannot make a terminal: the call fails, saying so; the turn goes on.
        editor.refuse_to_create = True
        session_3 = (await run.conn.new_session(cwd=str(workspace))).session_id
        fake.set_script(command_call("echo never"))
        await run.conn.prompt(session_id=session_3, prompt=[text_block("Run it.")])
        refused = str(fake.requests[-1].body["messages"][-1]["content"])
        assert refused.startswith("The editor's terminal failed:"), refused
        failed = run.recording.raw_updates(session_3, "tool_call_update")[-1]
        assert failed["status"] == "failed"

    # The model's copy: stripped, bounded, the exit code; not the editor's environment.
    assert seen.startswith("ok\n1\n2\n"), seen[:100]
    assert "lines (" in seen and "bytes) cut …]" in seen
    assert seen.endswith("\n4999\n5000\n\nExit code: 3 · " + seen.rsplit("· ", 1)[1])
    assert "editor-only" not in seen

    # What the editor was asked: the launch's argv behind `env -i`, its env, the workspace.
    first = editor.created[0]
    assert first["command"] == "env" and first["args"][0] == "-i"
    assert first["args"][-3:] == [
        "/bin/sh",
        "-c",
        "printf '\\033[32mok\\033[0m\\n'; seq 1 5000; echo $EDITOR_SECRET; exit 3",
    ]
    assert first["cwd"] == str(workspace) and first["limit"] == 1_000_000
    assert not any(variable.name.startswith("OPENAI") for variable in first["env"])
    # Each terminal: its output polled, waited for, released once at the end; the stopped
    # one killed first.
    assert editor.calls[-1] == ("release", "term-1") or ("release", "term-1") in editor.calls
    assert [c for c in editor.calls if c[1] == "term-1"][-1] == ("release", "term-1")
    assert ("wait_for_exit", "term-1") in editor.calls and ("output", "term-1") in editor.calls
    term_2 = [method for method, terminal in editor.calls if terminal == "term-2"]
    assert term_2[-2:] == ["kill", "release"] and term_2.count("release") == 1
    assert ("kill", "term-1") not in editor.calls

    # The call's content embeds the terminal while it runs and after it ended.
    updates = run.recording.raw_updates(session, "tool_call_update")
    running = [u for u in updates if u.get("status") == "in_progress" and u.get("content")]
    assert running[0]["content"] == [{"type": "terminal", "terminalId": "term-1"}]
    final = updates[-1]
    assert final["status"] == "completed"
    assert final["content"][0] == {"type": "terminal", "terminalId": "term-1"}
    assert final["rawOutput"]["exitCode"] == 3 and final["rawOutput"]["cut"] is True
    run.recording.assert_conformant()


async def test_a_signal_ends_a_command_the_same_in_either_runner(
    fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """One core ends both runners' commands: a command its own signal ends is said ended by
    that signal whether it ran in Parley's process or the editor's terminal (where, in the
    sandbox, the terminal sees bwrap's exit code 128 + n and no signal)."""
    env = {**os.environ, **server_env(fake, tmp_path / "home")}
    ends = []
    for editor in (EditorClient(), TerminalEditor()):
        async with acp_server(env, editor) as run:
            if isinstance(editor, TerminalEditor):
                session = await initialized_with_terminals(run, workspace)
            else:
                await run.initialize()
                session = (await run.conn.new_session(cwd=str(workspace))).session_id
            fake.set_script(command_call("kill -TERM $$"))
            await run.conn.prompt(session_id=session, prompt=[text_block("Run it.")])
            raw = run.recording.raw_updates(session, "tool_call_update")[-1]["rawOutput"]
            ends.append((raw["signal"], raw["timedOut"]))
    assert ends == [("SIGTERM", False), ("SIGTERM", False)]
