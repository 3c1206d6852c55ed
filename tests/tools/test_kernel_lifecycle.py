"""The kernel's process tree ends with it, with its session and with the server; a flood on
its output does not pin the server; no secret of the server reaches it.

The processes are real: an eval starts `yes`, forks a sleeper and leaves an orphaned `sleep`
behind a shell, then the test ends the kernel one way or another and watches those PIDs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.kernel import KernelSettings, PythonKernel
from pygls.exceptions import JsonRpcException

SETTINGS = KernelSettings(timeout_seconds=30.0, interrupt_grace_seconds=0.5)

# Returns [kernel, yes, forked sleeper, orphaned sleep] PIDs.
SPAWN_TREE = """\
import os, subprocess, time
spinner = subprocess.Popen(['yes'], stdout=subprocess.DEVNULL)
forked = os.fork()
if forked == 0:
    time.sleep(1000)
    os._exit(0)
shell = subprocess.Popen(['sh', '-c', 'sleep 1000 & echo $!'], stdout=subprocess.PIPE)
orphan = int(shell.stdout.readline())
shell.wait()
[os.getpid(), spinner.pid, forked, orphan]
"""

GONE_WITHIN_SECONDS = 10.0


def is_alive(pid: int) -> bool:
    """Running or sleeping; a zombie has ended (whoever inherits it reaps it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, it was read
        return False
    return "\nState:\tZ" not in status


async def still_alive_after_a_while(pids: list[int]) -> list[int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GONE_WITHIN_SECONDS
    while (alive := [pid for pid in pids if is_alive(pid)]) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return alive


def pids_in(text: str, root: Path) -> list[int]:
    found = re.search(r"value: \[(\d+), (\d+), (\d+), (\d+)\]", text)
    assert found is not None, text
    return host_pids([int(pid) for pid in found.groups()], root)


def host_pids(pids: list[int], root: Path) -> list[int]:
    """The host's pids of processes that the kernel of `root` reported by their own pids: in
    the sandbox those are pids of its PID namespace (NSpid's last field), found through the
    namespace of the processes whose command line names `--root root`."""
    marker = f"--root\0{root}\0".encode()
    namespaces = set()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                namespaces.add(os.readlink(entry / "ns" / "pid"))
    by_own_pid: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, StopIteration):
            if entry.name.isdigit() and os.readlink(entry / "ns" / "pid") in namespaces:
                status = (entry / "status").read_text().splitlines()
                nspid = next(line for line in status if line.startswith("NSpid:"))
                by_own_pid[int(nspid.split()[-1])] = int(entry.name)
    assert all(pid in by_own_pid for pid in pids), (pids, by_own_pid)
    return [by_own_pid[pid] for pid in pids]


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bytes_written(pid: int) -> int:
    found = re.search(r"wchar: (\d+)", Path(f"/proc/{pid}/io").read_text())
    assert found is not None
    return int(found.group(1))


# How much a flood may push through the server in FLOOD_SECONDS: it drains at most 64 KiB per
# 5 ms (~40 MB here) plus its buffers. Read flat out, the pipe carries hundreds of MB even on a
# loaded machine, with the server's event loop busy all along.
FLOOD_SECONDS = 3.0
FLOOD_BYTES_BOUND = 100 * 1000**2
FLOOD_CPU_BOUND = 0.6  # seconds of the server's CPU in FLOOD_SECONDS; bounded: ~0.2


async def server_load_during_flood(server: int, flooder: int) -> tuple[float, int]:
    """The server's CPU seconds, and the bytes the flooder wrote, over FLOOD_SECONDS."""
    cpu, written = cpu_seconds(server), bytes_written(flooder)
    await asyncio.sleep(FLOOD_SECONDS)
    return cpu_seconds(server) - cpu, bytes_written(flooder) - written


def rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found.group(1)) * 1024


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


# --- the kernel on its own ----------------------------------------------------------------


async def spawn_tree(kernel: PythonKernel) -> list[int]:
    reply = await kernel.call("eval", code=SPAWN_TREE)
    assert reply.ok, reply
    pids = pids_in(f"value: {reply.result['value']}", kernel.workspace)
    assert all(is_alive(pid) for pid in pids)
    return pids


async def test_closing_the_kernel_ends_everything_it_started(project: Path) -> None:
    kernel = PythonKernel(project, SETTINGS)
    pids = await spawn_tree(kernel)
    await kernel.aclose()
    assert await still_alive_after_a_while(pids) == []


async def test_a_kernel_killed_from_outside_takes_its_tree_along(project: Path) -> None:
    kernel = PythonKernel(project, SETTINGS)
    try:
        kernel_pid, *started = await spawn_tree(kernel)
        os.kill(kernel_pid, signal.SIGKILL)  # the server does nothing until the next call
        assert await still_alive_after_a_while(started) == []
        reply = await kernel.call("eval", code="'back'")
        assert reply.kernel_note is not None and "killed by signal SIGKILL" in reply.kernel_note
        assert (await kernel.call("eval", code="'back'")).result == {"value": "'back'"}
    finally:
        await kernel.aclose()


async def test_a_kernel_that_exits_in_a_call_takes_its_tree_along(project: Path) -> None:
    kernel = PythonKernel(project, SETTINGS)
    try:
        _, *started = await spawn_tree(kernel)
        reply = await kernel.call("eval", code="import os\nos._exit(3)")
        assert reply.kernel_note is not None and "exit code 3" in reply.kernel_note
        assert await still_alive_after_a_while(started) == []
    finally:
        await kernel.aclose()


async def test_a_flood_on_the_output_does_not_keep_the_server_busy(project: Path) -> None:
    kernel = PythonKernel(project, SETTINGS)
    try:
        flood = """\
            import subprocess, sys, threading
            flood = subprocess.Popen(['yes', 'flood'])  # on fd 1: the kernel's output pipe
            def shout():
                while True:
                    print('x' * 1000, file=sys.__stdout__)
            threading.Thread(target=shout, daemon=True).start()
            flood.pid
        """
        reply = await kernel.call("eval", code=flood.replace("\n            ", "\n").strip())
        [flooder] = host_pids([int(reply.result["value"])], project)
        cpu, written = await server_load_during_flood(os.getpid(), flooder)
        assert written < FLOOD_BYTES_BOUND
        assert cpu < FLOOD_CPU_BOUND
        started = asyncio.get_running_loop().time()
        reply = await kernel.call("eval", code="6 * 7")
        assert reply.result == {"value": "42"}
        assert asyncio.get_running_loop().time() - started < 5.0
        assert "[… " in reply.process_output  # the flood that reached the call, cut
        assert len(reply.process_output) < 21_000
    finally:
        await kernel.aclose()


# --- over JSON-RPC: sessions and the server -----------------------------------------------


async def run_eval(client: ParleyClient, fake: FakeLLM, session: str, code: str) -> str:
    """One prompt in which the model runs `code` with python_eval; what the model got back."""
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": code}),)), Reply(text="Ok.")]
    )
    result = await client.prompt(session, "Run it.", timeout=120)
    assert result["stopReason"] == "end_turn"
    return fake.requests[-1].body["messages"][-1]["content"]


@pytest.fixture
async def client(start_server: Callable[..., object]) -> ParleyClient:
    started = await start_server()  # type: ignore[misc]
    await started.initialize()
    started.permission_handler = allow_all
    return started


async def test_deleting_a_session_ends_its_kernels_tree(
    client: ParleyClient, fake: FakeLLM, project: Path
) -> None:
    session = await client.new_session(str(project), toolPolicy="sync")
    pids = pids_in(await run_eval(client, fake, session, SPAWN_TREE), project)
    assert all(is_alive(pid) for pid in pids)
    assert await client.request("session/delete", {"sessionId": session}) == {}
    assert await still_alive_after_a_while(pids) == []


async def test_closing_a_session_ends_its_kernels_tree_and_keeps_it_stored(
    client: ParleyClient, fake: FakeLLM, project: Path
) -> None:
    session = await client.new_session(str(project), toolPolicy="sync")
    pids = pids_in(await run_eval(client, fake, session, SPAWN_TREE), project)
    assert all(is_alive(pid) for pid in pids)
    assert await client.request("session/close", {"sessionId": session}) == {}
    assert await still_alive_after_a_while(pids) == []
    with pytest.raises(JsonRpcException) as closed:  # freed here: a prompt needs a load
        await client.prompt(session, "Still there?")
    assert closed.value.code == -32002
    await client.load_session(session, str(project))
    fake.set_script([Reply(text="Yes.")])
    assert (await client.prompt(session, "Still there?"))["stopReason"] == "end_turn"


async def test_a_server_killed_with_sigkill_leaves_no_process_behind(
    client: ParleyClient, fake: FakeLLM, project: Path
) -> None:
    session = await client.new_session(str(project), toolPolicy="sync")
    pids = pids_in(await run_eval(client, fake, session, SPAWN_TREE), project)
    assert client.process is not None
    os.kill(client.process.pid, signal.SIGKILL)
    assert await still_alive_after_a_while(pids) == []


async def test_a_server_stopped_with_sigterm_ends_its_kernels_tree_and_exits_0(
    client: ParleyClient, fake: FakeLLM, project: Path
) -> None:
    session = await client.new_session(str(project), toolPolicy="sync")
    pids = pids_in(await run_eval(client, fake, session, SPAWN_TREE), project)
    assert client.process is not None
    assert all(is_alive(pid) for pid in pids)
    client.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(client.process.wait(), 15) == 0
    assert await still_alive_after_a_while(pids) == []


async def test_a_flooding_session_leaves_the_server_free_for_others(
    client: ParleyClient, fake: FakeLLM, project: Path
) -> None:
    assert client.process is not None
    server = client.process.pid
    flooding = await client.new_session(str(project), toolPolicy="sync")
    code = "import subprocess\nflood = subprocess.Popen(['yes', 'flood'])\nflood.pid"
    reported = int(re.findall(r"value: (\d+)", await run_eval(client, fake, flooding, code))[-1])
    [flooder] = host_pids([reported], project)
    rss_before = rss_bytes(server)

    other = await client.new_session(str(project), toolPolicy="sync")
    fake.set_script([Reply(text="Still here.")])
    started = asyncio.get_running_loop().time()
    assert (await client.prompt(other, "Hello?", timeout=60))["stopReason"] == "end_turn"
    assert asyncio.get_running_loop().time() - started < 10.0
    assert "Still here." in client.text_of(other)

    cpu, written = await server_load_during_flood(server, flooder)
    assert written < FLOOD_BYTES_BOUND
    assert cpu < FLOOD_CPU_BOUND
    assert rss_bytes(server) - rss_before < 50 * 1024**2


async def test_the_kernel_gets_none_of_the_servers_secrets(
    start_server: Callable[..., object], fake: FakeLLM, project: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.mine]\nkind = "openai"\nbase_url = "http://localhost:9/v1"\n'
        'api_key_env = "MY_LLM_CREDS"\n'
    )
    secrets = {"MY_LLM_CREDS": "creds-0123", "GITHUB_TOKEN": "ghp-0123", "HF_TOKEN": "hf-0123"}
    # Names no secret-looking pattern catches (issue 36): the allow-list leaves them out.
    secrets |= {
        name: f"value-0123-{name}"
        for name in (
            *("API_KEYS", "GITHUB_PAT", "GH_PAT", "MYSQL_PWD", "SENTRY_DSN", "SLACK_WEBHOOK_URL"),
            *("NPM_CONFIG__AUTH", "SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS"),
        )
    }
    client: ParleyClient = await start_server(  # type: ignore[misc]
        extra_env={"PARLEY_CONFIG": str(config), **secrets}
    )
    await client.initialize()
    client.permission_handler = allow_all
    session = await client.new_session(str(project), toolPolicy="sync")
    code = (
        "import os\n"
        "secret_values = [v for v in os.environ.values() if '0123' in v]\n"
        "sorted(os.environ), secret_values"
    )
    seen = await run_eval(client, fake, session, code)
    # conftest's server environment holds both providers' keys, ending in 0123456789
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", *secrets):
        assert f"'{name}'" not in seen
    assert "'PATH'" in seen and "'HOME'" in seen and "'PARLEY_HOME'" not in seen
    assert seen.rstrip().endswith("], [])")  # no value holding a secret
