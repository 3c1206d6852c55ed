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
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.client import ParleyClient, allow_all
from parley.config_file import ConfigFileError, structure_config
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import ChildSpec, SandboxSettings, prepare, sandbox_status
from parley.tools.kernel_output import CapturedBytes, OutputPipe

MCP_SERVER = TESTS / "acp_mcp_server.py"
PIDS_MAX = 200  # the test's cap: small, so the fork loop is cheap
PIDS_DEFAULT = SandboxSettings().pids_max
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


READ_CREDENTIALS = """\
import os
found = []
for path in {paths!r}:
    try:
        with open(path, 'rb') as file:
            found.append((path, file.read()))
    except OSError:
        pass
    if os.path.isdir(path):
        found.append((path, sorted(os.listdir(path))))
'found', found
"""


@needs_bwrap
async def test_the_users_credentials_and_parleys_own_files_are_hidden_from_the_sandbox(
    start_server: Callable[..., Any], fake: FakeLLM, project: Path, tmp_path: Path, key: str
) -> None:
    # A home outside /tmp (the sandbox's /tmp is private anyway): /var/tmp is readable there.
    home = Path(f"/var/tmp/parley-home-{uuid.uuid4().hex}")
    try:
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
        (home / ".netrc").write_text("machine example.com password SECRET")
        (home / "secrets").mkdir()
        (home / "secrets" / "token").write_text("CONFIGURED SECRET")
        (home / "notes.txt").write_text("readable")
        client = await started(start_server, tmp_path, key, HOME=str(home))
        session = await client.new_session(str(project), toolPolicy="sync")
        # The configured `hidden` is read at start: a second server with it in config.toml.
        hidden_config = tmp_path / "hidden.toml"
        hidden_config.write_text(f'[sandbox]\nhidden = ["{home / "secrets"}"]\n')
        other = await started(
            start_server, tmp_path, key, HOME=str(home), PARLEY_CONFIG=str(hidden_config)
        )
        other_session = await other.new_session(str(project), toolPolicy="sync")
        paths = [str(home / name) for name in (".ssh", ".ssh/id_ed25519", ".netrc", "secrets")]
        paths += [str(home / "secrets" / "token"), str(home / "notes.txt")]
        code = READ_CREDENTIALS.format(paths=paths)
        seen = await run_tool(client, fake, session, "python_eval", {"code": code})
        seen_by_other = await run_tool(other, fake, other_session, "python_eval", {"code": code})
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)
    for answer in (seen, seen_by_other):
        assert "PRIVATE KEY" not in answer and "password SECRET" not in answer, answer
        assert "id_ed25519" not in answer
        assert "b'readable'" in answer  # the rest of home stays readable
    assert "CONFIGURED SECRET" in seen  # not hidden unless configured
    assert "CONFIGURED SECRET" not in seen_by_other and "'token'" not in seen_by_other


@needs_bwrap
async def test_an_interpreter_installed_under_tmp_still_runs_in_the_sandbox(
    start_server: Callable[..., Any], fake: FakeLLM, project: Path, tmp_path: Path, key: str
) -> None:
    """/tmp is private in the sandbox; a Python (or a Parley) installed under it still runs:
    the command, its virtual environment and the files it is given are bound read-only."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (tmp_path / "elsewhere.txt").write_text("not for the child")
    config = tmp_path / "venv-config.toml"
    config.write_text(f'[kernel]\npython = "{venv / "bin" / "python"}"\n')
    client = await started(start_server, tmp_path, key, PARLEY_CONFIG=str(config))
    session = await client.new_session(str(project), toolPolicy="sync")
    code = (
        "import os, sys\n"
        f"sys.prefix, os.path.exists({str(tmp_path / 'elsewhere.txt')!r}), os.getcwd()"
    )
    seen = await run_tool(client, fake, session, "python_eval", {"code": code})
    assert f"('{venv}', False, '{project}')" in seen, seen


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
    assert "Runs UNSANDBOXED: PARLEY_SANDBOX=off" in str(question["toolCall"]["content"])


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


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_parley_doctor_says_whether_children_are_sandboxed_and_why_not(
    tmp_path: Path, sandbox: str
) -> None:
    env = {**os.environ, "PARLEY_SANDBOX": sandbox, "PARLEY_CONFIG": str(tmp_path / "none")}
    done = subprocess.run(
        [sys.executable, "-m", "parley", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    first = lines[0]
    cap = next(line for line in lines if line.startswith("pids cap: "))
    network = next(line for line in lines if line.startswith("network: "))
    assert lines[-1].startswith("warm start: on, ")  # the tests' servers start warm
    off = {**env, "PARLEY_WARM": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "parley", "doctor"],
        capture_output=True,
        text=True,
        env=off,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines()[-1] == (
        "warm start: off (PARLEY_WARM=0): every `parley serve` starts cold"
    )
    if sandbox == "off":
        assert first.startswith("sandbox: NO — children run unsandboxed: PARLEY_SANDBOX=off")
    elif _here.sandboxed:
        assert first.startswith("sandbox: yes — ") and "bubblewrap" in first
        # The effective policy (issue 36): capabilities, sockets, what is writable or hidden.
        assert lines[1] == (
            "  capabilities: none, root's too (--cap-drop ALL); no new privileges; "
            "/proc/sys read-only"
        )
        assert lines[2] == "  unix sockets: closed (a seccomp filter)"
        assert lines[3].startswith("  writable: ") and lines[5].startswith("  hidden: ")
    else:
        assert first.startswith(f"sandbox: NO — children run unsandboxed: {_here.reason}")
    environment = next(line for line in lines if line.startswith("environment: "))
    assert "PATH" in environment and "SSH_AUTH_SOCK" not in environment
    assert cap.startswith("pids cap: ") and (str(PIDS_DEFAULT) in cap) == _here.pids_capped
    assert network == "network: the kernel's is off; MCP servers allowed it: none"


# --- properties of the launcher's inputs --------------------------------------------------

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)
# What a client may list as an MCP server's arguments: any text but NUL (exec refuses it).
ARGUMENT = st.text(st.characters(exclude_characters="\0", codec="utf-8"), max_size=30)


@PROPERTY_SETTINGS
@given(
    arguments=st.lists(ARGUMENT, max_size=6),
    name=st.sampled_from(["a", "x y", "..x", "-rf", "--bind", "ünï", "$(id)", "l\nf"]),
    network=st.booleans(),
    enabled=st.booleans(),
)
def test_a_launch_runs_exactly_the_command_given_in_the_workspace(
    tmp_path_factory: pytest.TempPathFactory,
    arguments: list[str],
    name: str,
    network: bool,
    enabled: bool,
) -> None:
    """Whatever the arguments (a client lists them), the launch ends with exactly the
    command and its arguments after the launcher's own; in the sandbox the workspace is the
    one place bound writable and the network is off unless allowed."""
    workspace = tmp_path_factory.mktemp("ws") / name
    workspace.mkdir()
    spec = ChildSpec((sys.executable, *arguments), workspace, {"PATH": os.defpath}, network)
    launch = prepare(spec, SandboxSettings(enabled=enabled))
    try:
        assert launch.argv[-len(spec.argv) :] == (sys.executable, *arguments)
        assert launch.cwd == workspace.resolve() and launch.env == {"PATH": os.defpath}
        own = launch.argv[: -len(spec.argv)]
        assert launch.sandboxed == (enabled and _here.sandboxed)
        if launch.sandboxed:
            assert own[-1] == "--"
            binds = [own[i + 1 : i + 3] for i, word in enumerate(own) if word == "--bind"]
            assert binds == [(str(workspace.resolve()),) * 2]
            assert ("--unshare-net" in own) == (not network)
            assert own.index("--tmpfs") < own.index("--bind")  # a workspace in /tmp stays
    finally:
        launch.end()


def test_a_missing_command_fails_before_anything_starts(tmp_path: Path) -> None:
    spec = ChildSpec(("no-such-command-here",), tmp_path, {"PATH": str(tmp_path)})
    with pytest.raises(FileNotFoundError) as missing:
        prepare(spec, SandboxSettings())
    assert missing.value.filename == "no-such-command-here"


SETTING_VALUES = st.one_of(
    st.booleans(),
    st.integers(-5, 5000),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.lists(st.one_of(st.text(max_size=8), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
SETTING_NAMES = st.sampled_from(
    ["enabled", "pids_max", "kernel_network", "mcp_network", "writable", "network", "Enabled"]
)


@PROPERTY_SETTINGS
@given(table=st.dictionaries(SETTING_NAMES, SETTING_VALUES, max_size=5))
def test_any_sandbox_table_is_settings_or_one_clear_error(table: dict[str, Any]) -> None:
    """config.toml's [sandbox], whatever it holds: typed settings, or mistakes each naming
    the setting; never another exception, never a wrong type let through."""
    try:
        sandbox = structure_config({"sandbox": table}).sandbox
    except ConfigFileError as error:
        assert all(mistake.startswith("sandbox") for mistake in error.mistakes)
        return
    assert isinstance(sandbox.enabled, bool) and isinstance(sandbox.kernel_network, bool)
    assert isinstance(sandbox.pids_max, int) and sandbox.pids_max >= 0
    assert all(isinstance(server, str) for server in sandbox.mcp_network)
    assert all(isinstance(directory, str) and directory for directory in sandbox.writable)
    assert set(table) <= {"enabled", "pids_max", "kernel_network", "mcp_network", "writable"}


@PROPERTY_SETTINGS
@given(
    pieces=st.lists(
        st.one_of(st.binary(max_size=300), st.sampled_from([b"\0", b"\0parley", b"-done-"])),
        max_size=12,
    ),
    cuts=st.lists(st.integers(1, 400), max_size=8),
)
def test_the_output_pipe_keeps_the_calls_bytes_and_finds_its_marker_however_split(
    pieces: list[bytes], cuts: list[int]
) -> None:
    """Bytes written to the kernel's output pipe in writes of any size (the end marker split
    across them, NULs and pieces of markers before it): the call keeps exactly what came
    before its marker, and sees the marker."""
    before = b"".join(pieces)
    assert asyncio.run(_captured_through_a_pipe(before, cuts)) == before


async def _captured_through_a_pipe(before: bytes, cuts: list[int]) -> bytes:
    read_end, write_end = os.pipe()
    pipe = OutputPipe(read_end, asyncio.get_running_loop())
    capture = CapturedBytes(limit=1 << 20)
    seen = pipe.capture(7, capture)
    stream = before + b"\0parley-kernel-done-7\0"
    position = 0
    for size in [*cuts, len(stream)]:
        os.write(write_end, stream[position : position + size])
        position += size
        if position >= len(stream):
            break
    await asyncio.wait_for(seen.wait(), 10)
    pipe.stop_capturing()
    pipe.close()
    os.close(write_end)
    await asyncio.wait_for(pipe.finished.wait(), 10)
    return bytes(capture.kept)
