"""Children run sandboxed (docs/security.md, "Children"): over the wire, an approved eval or a
stdio MCP server tries what an attacker's code would — read the server's keys through /proc,
list the machine's processes, fork without end, leave a `setsid` daemon behind, write outside
the workspace — and gets nothing, is bounded, and leaves no process once its session ends.

The bubblewrap tests are skipped only where bwrap cannot run here; the forced fallback
(PARLEY_SANDBOX=off) runs everywhere: even as root, a child cannot read the server's keys, and
the permission question says the code runs unsandboxed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import SandboxSettings, sandbox_status

MCP_SERVER = Path(__file__).with_name("acp_mcp_server.py")
PIDS_MAX = 200  # the test's cap: small, so the fork loop is cheap
GONE_WITHIN_SECONDS = 10.0

_here = sandbox_status(SandboxSettings(), environ={})
needs_bwrap = pytest.mark.skipif(
    not _here.sandboxed, reason=f"bubblewrap cannot run here: {_here.reason}"
)


@pytest.fixture
def key() -> str:
    """This test's own provider key: other servers on the machine hold other ones."""
    return f"sk-test-sandbox-{uuid.uuid4().hex}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


async def started(
    start_server: Callable[..., Any], tmp_path: Path, key: str, **env: str
) -> ParleyClient:
    config = tmp_path / "config.toml"
    config.write_text(f"[sandbox]\npids_max = {PIDS_MAX}\n[kernel]\ntimeout_seconds = 20\n")
    client: ParleyClient = await start_server(
        extra_env={"OPENAI_API_KEY": key, "PARLEY_CONFIG": str(config), **env}
    )
    await client.initialize()
    client.permission_handler = allow_all
    return client


async def run_tool(
    client: ParleyClient, fake: FakeLLM, session: str, tool: str, arguments: dict[str, Any]
) -> str:
    """One prompt in which the model calls `tool`; what the model got back."""
    fake.set_script([Reply(tool_calls=(ScriptedToolCall(tool, arguments),)), Reply(text="Ok.")])
    result = await client.prompt(session, "Run it.", timeout=120)
    assert result["stopReason"] == "end_turn"
    return str(fake.requests[-1].body["messages"][-1]["content"])


def processes_with(marker: bytes) -> list[int]:
    """The live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            if not entry.name.isdigit() or marker not in (entry / "cmdline").read_bytes():
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
    return found


async def left_after_a_while(marker: bytes) -> list[int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GONE_WITHIN_SECONDS
    while (left := processes_with(marker)) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return left


def kernel_marker(project: Path) -> bytes:
    """In the command line of the kernel, of bwrap around it and of every fork of it."""
    return f"--root\0{project}\0".encode()


ATTACK = """\
import os, subprocess
keys = []
for pid in ['{server}', str(os.getppid())] + os.listdir('/proc'):
    try:
        if b'{key}' in open('/proc/' + pid + '/environ', 'rb').read():
            keys.append(pid)
    except OSError:
        pass
visible = sorted(int(pid) for pid in os.listdir('/proc') if pid.isdigit())
subprocess.Popen(['setsid', 'sleep', '{daemon}'], start_new_session=True)
refused = []
for target in {outside!r}:
    try:
        with open(target, 'w') as planted:
            planted.write('planted')
    except OSError as error:
        refused.append(error.strerror)
open('inside.txt', 'w').write('mine')
'keys', keys, 'server visible', {server} in visible, 'processes', len(visible), refused
"""


@needs_bwrap
async def test_an_approved_eval_in_the_sandbox_gets_no_key_sees_no_process_writes_nothing_outside(
    start_server: Callable[..., Any], fake: FakeLLM, project: Path, tmp_path: Path, key: str
) -> None:
    client = await started(start_server, tmp_path, key)
    assert client.process is not None
    daemon = f"{4000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"  # a unique sleep
    # Outside the workspace: the test's /tmp (private in the sandbox) and a system directory.
    outside = [str(tmp_path / "planted.txt"), f"/var/tmp/parley-planted-{uuid.uuid4().hex}"]
    session = await client.new_session(str(project), toolPolicy="sync")
    code = ATTACK.format(server=client.process.pid, key=key, daemon=daemon, outside=outside)
    try:
        seen = await run_tool(client, fake, session, "python_eval", {"code": code})
        assert "'keys', [], 'server visible', False" in seen, seen
        processes = re.search(r"'processes', (\d+)", seen)
        assert processes is not None and int(processes.group(1)) < 10  # bwrap's init, us, ...
        assert "Read-only file system" in seen  # /var/tmp
        assert not any(Path(target).exists() for target in outside)
        assert (project / "inside.txt").read_text() == "mine"
        assert processes_with(daemon.encode())  # the daemon runs, in the sandbox
        await client.request("session/close", {"sessionId": session})
        assert await left_after_a_while(daemon.encode()) == []
        assert await left_after_a_while(kernel_marker(project)) == []
    finally:
        for target in outside:
            Path(target).unlink(missing_ok=True)


FORK_LOOP = """\
import os, time
children, refused = 0, None
for _ in range(10_000):
    try:
        pid = os.fork()
    except OSError as error:
        refused = error.strerror
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children += 1
'forked', children, refused
"""


@needs_bwrap
@pytest.mark.skipif(not _here.pids_capped, reason=f"no pids cap here: {_here.pids_cap}")
async def test_a_fork_loop_is_bounded_and_ends_with_its_session(
    start_server: Callable[..., Any], fake: FakeLLM, project: Path, tmp_path: Path, key: str
) -> None:
    client = await started(start_server, tmp_path, key)
    session = await client.new_session(str(project), toolPolicy="sync")
    seen = await run_tool(client, fake, session, "python_eval", {"code": FORK_LOOP})
    forked = re.search(r"'forked', (\d+), '([^']+)'", seen)
    assert forked is not None, seen
    assert int(forked.group(1)) < PIDS_MAX and "unavailable" in forked.group(2)
    other = await client.new_session(str(project), toolPolicy="sync")  # the server answers
    fake.set_script([Reply(text="Still here.")])
    assert (await client.prompt(other, "Hello?", timeout=60))["stopReason"] == "end_turn"
    await client.request("session/close", {"sessionId": session})
    assert await left_after_a_while(kernel_marker(project)) == []


async def test_unsandboxed_children_still_cannot_read_the_keys_and_the_question_says_so(
    start_server: Callable[..., Any], fake: FakeLLM, project: Path, tmp_path: Path, key: str
) -> None:
    client = await started(start_server, tmp_path, key, PARLEY_SANDBOX="off")
    assert client.process is not None
    code = (
        "import os\n"
        "def read(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except OSError as error:\n"
        "        return error.strerror.encode()\n"
        f"holding = [p for p in os.listdir('/proc') if p.isdigit() and b'{key}' in read(p)]\n"
        f"'holding', holding, read({client.process.pid})[:40], os.getuid()\n"
    )
    session = await client.new_session(str(project), toolPolicy="sync")
    seen = await run_tool(client, fake, session, "python_eval", {"code": code})
    assert "'holding', [], b'Permission denied'" in seen, seen
    [question] = client.permission_requests
    assert question["toolCall"]["title"] == "Run Python (unsandboxed)"
    assert "Runs unsandboxed: PARLEY_SANDBOX=off" in str(question["toolCall"]["content"])


@pytest.mark.parametrize(
    "sandbox", [pytest.param("auto", marks=needs_bwrap), pytest.param("off", id="fallback")]
)
async def test_a_stdio_mcp_server_cannot_read_the_servers_keys(
    start_server: Callable[..., Any],
    fake: FakeLLM,
    project: Path,
    tmp_path: Path,
    key: str,
    sandbox: str,
) -> None:
    client = await started(start_server, tmp_path, key, PARLEY_SANDBOX=sandbox)
    notes = {"name": "notes", "command": sys.executable, "args": [str(MCP_SERVER)], "env": []}
    answer = await client.request("session/new", {"cwd": str(project), "mcpServers": [notes]})
    session = answer["sessionId"]
    seen = await run_tool(client, fake, session, "mcp__notes__find_in_environs", {"text": key})
    assert re.search(r"\d+ environs read; holding it: \[\]", seen), seen
    [question] = client.permission_requests
    unsandboxed = "(unsandboxed)" in question["toolCall"]["title"]
    assert unsandboxed == (sandbox == "off")


FLOOD = """\
import os, subprocess
written = os.write(1, b'x' * 200_000_000)
piped = subprocess.run('yes | head -c 200000000', shell=True).returncode
'written', written, 'piped', piped
"""


def rss_bytes(pid: int) -> int:
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert found is not None
    return int(found.group(1)) * 1024


async def test_a_200_mb_write_to_fd_1_is_cut_not_drained(
    start_server: Callable[..., Any], fake: FakeLLM, project: Path, tmp_path: Path, key: str
) -> None:
    """Each 200 MB write ends well inside the eval's 20 s limit (drained 64 KiB at a time,
    one took about 20 s), cut at the output limit, and the server's memory stays flat."""
    client = await started(start_server, tmp_path, key)
    assert client.process is not None
    session = await client.new_session(str(project), toolPolicy="sync")
    before = rss_bytes(client.process.pid)
    seen = await run_tool(client, fake, session, "python_eval", {"code": FLOOD})
    assert "'written', 200000000, 'piped', 0" in seen, seen[-2000:]
    assert "time limit" not in seen and "Interrupted" not in seen
    cut = [int(n.replace(",", "")) for n in re.findall(r"\[… ([\d,]+) more bytes cut\]", seen)]
    assert cut and sum(cut) > 390_000_000
    assert len(seen) < 60_000
    assert rss_bytes(client.process.pid) - before < 50 * 1024**2


@pytest.mark.parametrize(
    "sandbox", [pytest.param("auto", marks=needs_bwrap), pytest.param("off", id="fallback")]
)
async def test_an_mcp_servers_setsid_daemon_ends_with_its_session(
    start_server: Callable[..., Any],
    fake: FakeLLM,
    project: Path,
    tmp_path: Path,
    key: str,
    sandbox: str,
) -> None:
    """The SDK ends a server's process group; a `setsid` grandchild left it. The sandbox's
    end takes it along; in the fallback, the server's pids group does (where there is one)."""
    if sandbox == "off" and not _here.pids_capped:
        pytest.skip(f"the fallback ends a setsid daemon through a pids group: {_here.pids_cap}")
    client = await started(start_server, tmp_path, key, PARLEY_SANDBOX=sandbox)
    notes = {"name": "notes", "command": sys.executable, "args": [str(MCP_SERVER)], "env": []}
    answer = await client.request("session/new", {"cwd": str(project), "mcpServers": [notes]})
    session = answer["sessionId"]
    daemon = f"{5000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"  # a unique sleep
    seen = await run_tool(client, fake, session, "mcp__notes__start_daemon", {"seconds": daemon})
    assert seen.startswith("started"), seen
    assert processes_with(daemon.encode())
    await client.request("session/close", {"sessionId": session})
    assert await left_after_a_while(daemon.encode()) == []
