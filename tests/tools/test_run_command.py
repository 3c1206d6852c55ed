"""`run_command` over the wire (the server a subprocess, the scripted model over HTTP): the
output reaches the model bounded and the editor streamed; Stop, the timeout and the session's
end leave no process, a `setsid` daemon included; in the sandbox a command writes nothing
outside the workspace and reaches no network (unless `[sandbox] command_network`).

The processes are found as `ps` finds them: by a unique `sleep` argument in /proc/*/cmdline.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import parley.tools
import pytest
from conftest import server_env
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import SandboxSettings, sandbox_status
from test_cli import read_until, start_chat
from test_sandbox import left_after_a_while, needs_bwrap, processes_with

_here = sandbox_status(SandboxSettings(), environ={})
CUT = re.compile(r"\[… ([\d,]+) lines \(([\d,]+) bytes\) cut …\]")


async def started(
    start_server: Callable[..., Any], tmp_path: Path, config: str = "", **env: str
) -> ParleyClient:
    path = tmp_path / f"config-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(config)
    client: ParleyClient = await start_server(extra_env={"PARLEY_CONFIG": str(path), **env})
    await client.initialize()
    client.permission_handler = allow_all  # the question answered `allow_once`
    return client


def command_call(command: str, **more: Any) -> list[Reply]:
    return [
        Reply(tool_calls=(ScriptedToolCall("run_command", {"command": command, **more}),)),
        Reply(text="Done."),
    ]


def the_models_copy(fake: FakeLLM) -> str:
    return str(fake.requests[-1].body["messages"][-1]["content"])


def appends(client: ParleyClient, session: str) -> list[str]:
    return [
        update["_meta"]["parley"]["commandOutput"]["append"]
        for update in client.updates_of(session, "tool_call_update")
        if "commandOutput" in update.get("_meta", {}).get("parley", {})
    ]


def unique_sleep() -> str:
    """A `sleep` argument no other process on the machine has."""
    return f"{3000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"


STREAMED = (
    "printf '\\033[1;31mFAILED\\033[0m head line\\n'; sleep 0.25; echo second; sleep 0.25; "
    "seq 1 20000; sleep 0.25; echo tail line; exit 4"
)


async def test_the_output_reaches_the_model_bounded_and_the_editor_streamed(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client = await started(start_server, tmp_path, "[commands]\nmax_timeout_seconds = 60\n")
    session = await client.new_session(str(workspace), toolPolicy="sync")
    fake.set_script(command_call(STREAMED))
    result = await client.prompt(session, "Run the tests.", timeout=60)
    assert result["stopReason"] == "end_turn"

    seen = the_models_copy(fake)
    assert seen.startswith("FAILED head line\nsecond\n1\n2\n"), seen[:200]
    cut = CUT.search(seen)
    assert cut is not None and int(cut.group(1).replace(",", "")) > 15_000
    assert re.search(r"\n19999\n20000\ntail line\nExit code: 4 · \d+\.\d s$", seen), seen[-200:]
    assert len(seen.encode()) < 17_000

    streamed = [
        update
        for update in client.updates_of(session, "tool_call_update")
        if "commandOutput" in update.get("_meta", {}).get("parley", {})
    ]
    assert len(streamed) >= 3  # while it ran: its sleeps let several updates out
    assert all(update["status"] == "in_progress" for update in streamed)
    whole = "".join(appends(client, session))
    assert whole.startswith("\x1b[1;31mFAILED\x1b[0m head line\nsecond\n")  # colours kept
    assert "\n12345\n" in whole and whole.endswith("tail line\n")  # every byte, in order
    for update in streamed:  # the generic clients' copy: stripped, in a console block
        text = update["content"][0]["content"]["text"]
        assert text.startswith("```console\n") and text.endswith("```")
        assert "\x1b" not in text
    final = client.updates_of(session, "tool_call_update")[-1]
    assert final["status"] == "completed"  # a command that ran, whatever its exit code
    raw = final["rawOutput"]
    assert raw["exitCode"] == 4 and raw["signal"] is None and raw["timedOut"] is False
    assert raw["cut"] is True and raw["outputBytes"] == len(whole.encode())
    assert 0.7 < raw["durationSeconds"] < 30

    # The question showed the whole command and where it runs.
    (question,) = client.permission_requests
    assert question["toolCall"]["title"] == f"Run `{STREAMED[:59]}…`"  # its first 60 characters
    assert question["toolCall"]["locations"] == [{"path": str(workspace)}]
    assert STREAMED in question["toolCall"]["content"][0]["content"]["text"]

    # A refused argument runs nothing and says why ([commands] max_timeout_seconds = 60).
    for arguments, said in [
        ({"timeout": 61}, "timeout: 61 s is over the maximum of 60 s ([commands] "),
        ({"cwd": "../"}, "cwd: '../' is outside the workspace"),
    ]:
        session = await client.new_session(str(workspace), toolPolicy="sync")
        fake.set_script(command_call("touch ran", **arguments))
        await client.prompt(session, "Run it.", timeout=60)
        assert the_models_copy(fake).startswith(said), the_models_copy(fake)
    assert not (workspace / "ran").exists() and not (workspace.parent / "ran").exists()


async def output_shows(client: ParleyClient, session: str, text: str) -> None:
    """Wait until the output streamed from now on holds `text`."""
    before = len(appends(client, session))
    await client.wait_for_update(
        session, lambda _: text in "".join(appends(client, session)[before:]), timeout=30
    )


def leaves_a_daemon(marker: str, second: str) -> str:
    """A command that starts a `setsid` daemon, says so, then runs on."""
    return f"setsid sleep {marker} > /dev/null 2>&1 & echo started; sleep {second}"


@pytest.mark.parametrize(
    "sandbox", [pytest.param("auto", marks=needs_bwrap), pytest.param("off", id="fallback")]
)
async def test_stop_kills_the_command_and_its_setsid_daemon(
    start_server: Callable[..., Any],
    fake: FakeLLM,
    workspace: Path,
    tmp_path: Path,
    sandbox: str,
) -> None:
    if sandbox == "off" and not _here.pids_capped:
        pytest.skip(f"the fallback ends a setsid daemon through a pids group: {_here.pids_cap}")
    client = await started(start_server, tmp_path, PARLEY_SANDBOX=sandbox)
    session = await client.new_session(str(workspace), toolPolicy="sync")
    daemon, runner = unique_sleep(), unique_sleep()
    fake.set_script(command_call(leaves_a_daemon(daemon, runner)))
    prompt = asyncio.ensure_future(client.prompt(session, "Run it.", timeout=60))
    await output_shows(client, session, "started")
    assert processes_with(daemon.encode()) and processes_with(runner.encode())
    client.cancel(session)
    assert (await prompt)["stopReason"] == "cancelled"
    assert await left_after_a_while(daemon.encode()) == []
    assert await left_after_a_while(runner.encode()) == []


@needs_bwrap
async def test_the_timeout_and_the_sessions_end_kill_the_whole_tree(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace), toolPolicy="sync")
    daemon, runner = unique_sleep(), unique_sleep()
    fake.set_script(command_call(leaves_a_daemon(daemon, runner), timeout=1))
    result = await client.prompt(session, "Run it.", timeout=60)
    assert result["stopReason"] == "end_turn"
    assert the_models_copy(fake) == "started\nKilled: timed out after 1 s"
    final = client.updates_of(session, "tool_call_update")[-1]
    assert final["rawOutput"]["timedOut"] is True and final["rawOutput"]["exitCode"] is None
    assert await left_after_a_while(daemon.encode()) == []
    assert await left_after_a_while(runner.encode()) == []

    # The session ends (session/close) while a command runs: nothing is left.
    daemon, runner = unique_sleep(), unique_sleep()
    session = await client.new_session(str(workspace), toolPolicy="sync")
    fake.set_script(command_call(leaves_a_daemon(daemon, runner)))
    prompt = asyncio.ensure_future(client.prompt(session, "Run it again.", timeout=60))
    await output_shows(client, session, "started")
    assert processes_with(daemon.encode())
    await client.request("session/close", {"sessionId": session})
    assert (await prompt)["stopReason"] == "cancelled"
    assert await left_after_a_while(daemon.encode()) == []
    assert await left_after_a_while(runner.encode()) == []


# The interpreter a sandboxed command runs the probe with: the one the test's venv points
# at, since a venv under /tmp (CI's clone is) is hidden by the sandbox's private /tmp.
PYTHON = os.path.realpath(sys.executable)
NETWORK_PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3).close()\n"
    "    print('connected')\n"
    "except OSError as error:\n"
    "    print('no network:', error)\n"
)


@needs_bwrap
async def test_in_the_sandbox_a_command_writes_nothing_outside_and_reaches_no_network(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    accepted: list[bool] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(True)
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    (workspace / "probe.py").write_text(NETWORK_PROBE)
    outside = [tmp_path / "planted.txt", Path(f"/var/tmp/parley-planted-{uuid.uuid4().hex}")]
    command = (
        f"echo planted > {outside[0]}; echo planted > {outside[1]}; echo mine > inside.txt; "
        f"{PYTHON} probe.py {port}"
    )
    try:
        client = await started(start_server, tmp_path)
        session = await client.new_session(str(workspace), toolPolicy="sync")
        fake.set_script(command_call(command))
        await client.prompt(session, "Run it.", timeout=60)
        seen = the_models_copy(fake)
        assert seen.count("Read-only file system") == 1, seen  # /var/tmp; /tmp is private
        assert "no network:" in seen and "connected" not in seen, seen
        assert not any(path.exists() for path in outside)
        assert (workspace / "inside.txt").read_text() == "mine\n"
        assert accepted == []

        # The same command with [sandbox] command_network = true reaches the listener: the
        # sandbox, not the machine, kept it off.
        allowed = await started(start_server, tmp_path, "[sandbox]\ncommand_network = true\n")
        session = await allowed.new_session(str(workspace), toolPolicy="sync")
        fake.set_script(command_call(f"{PYTHON} probe.py {port}"))
        await allowed.prompt(session, "Run it.", timeout=60)
        assert the_models_copy(fake).startswith("connected\nExit code: 0"), the_models_copy(fake)
        assert accepted == [True]
    finally:
        listener.close()
        for path in outside:
            path.unlink(missing_ok=True)


def test_parley_chat_writes_the_output_to_stderr_as_it_comes(
    fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The command waits for a file the test writes only once its first line is on stderr:
    output held back until the end would never get there."""
    command = (
        "printf '\\033[33mfirst\\033[0m\\n'; while [ ! -e go ]; do sleep 0.05; done; echo second"
    )
    fake.set_script(command_call(command))
    chat = start_chat(
        "Run it.", "--yes", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home")
    )
    assert chat.stderr is not None
    try:
        seen = read_until(chat.stderr.fileno(), b"first\n", timeout=30)
        (workspace / "go").touch()
        stdout, rest = chat.communicate(timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
    stderr = (seen + rest).decode()
    assert chat.returncode == 0, stderr
    assert stdout == b"Done.\n"  # stdout holds only the answer
    assert "\x1b" not in stderr  # not a terminal: no colours
    announced = stderr.index("→ Run `printf")
    # Each line in the gutter: nothing a command prints starts where Parley's own lines do.
    assert announced < stderr.index("\n│ first\n│ second\n") < stderr.index("✓ Run `printf")


SPAWNS = {"create_subprocess_exec", "create_subprocess_shell", "Popen", "system", "posix_spawn"}
SPAWN_MODULES = {"subprocess", "os", "pty", "asyncio"}


def test_the_tools_start_processes_only_from_a_sandbox_launch() -> None:
    """Every process the tools start (the kernel, commands) is `*launch.argv` of a Launch
    `sandbox.prepare` made: a source scan of server/parley/tools."""
    tools = Path(parley.tools.__file__).parent
    spawns = []
    for path in sorted(tools.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            module = owner.id if isinstance(owner, ast.Name) else None
            name = node.func.attr
            if module in SPAWN_MODULES and (name in SPAWNS or name.startswith(("spawn", "exec"))):
                first = node.args[0] if node.args else None
                spawned = ast.unparse(first.value) if isinstance(first, ast.Starred) else None
                spawns.append((path.name, f"{module}.{name}", spawned))
    assert sorted(spawns) == [
        ("command_runners.py", "asyncio.create_subprocess_exec", "launch.argv"),
        ("kernel.py", "asyncio.create_subprocess_exec", "launch.argv"),
    ]
    assert "prepare, self._spec(" in (tools / "run_command.py").read_text()
