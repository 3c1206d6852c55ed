"""`parley serve` through the warm process (server/parley/warm_start.py, warm_process.py,
warm_server.py).

A first start is cold and launches the warm process; a later start hands its stdio over and
is served by a fork of it, exactly as a cold server would serve it: the official ACP SDK
client drives a whole session through it. What the editor sends the client reaches the
server, the server's end is the client's, and what the warm process may hold and whom it
serves is what docs/security.md ("The warm process") says.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from acp.schema import TextContentBlock
from acp_client import acp_server
from conftest import MODELS, REPO, server_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.fakellm import FakeLLM, Pacing, Reply
from parley.sandbox import SandboxSettings, sandbox_status
from parley.warm_server import parse_request
from parley.warm_start import FORWARDED_SIGNALS, HEADER, runtime_directory

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
INITIALIZE["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
SERVE = [sys.executable, "-m", "parley", "serve", "--framing", "ndjson"]
_here = sandbox_status(SandboxSettings(), environ={})
needs_bwrap = pytest.mark.skipif(not _here.sandboxed, reason=f"no bubblewrap: {_here.reason}")


class Warm:
    """A runtime directory of the test's own (short: a socket's path is at most 108 bytes)
    and the warm process started in it, ended at the test's end."""

    def __init__(self, env: dict[str, str]) -> None:
        # Outside /tmp (which the sandbox makes private), so that hiding it is what is tested.
        self.runtime = Path(tempfile.mkdtemp(prefix="pw", dir="/var/tmp"))
        self.env = {**env, "PARLEY_WARM": "1", "XDG_RUNTIME_DIR": str(self.runtime)}
        self.env["PARLEY_WARM_IDLE_SECONDS"] = "120"

    @property
    def folder(self) -> Path:
        return self.runtime / "parley"

    def log(self) -> str:
        return "".join(path.read_text() for path in self.folder.glob("warm-*.log"))

    def pid(self) -> int:
        found = re.search(r"listening on \S+ \(pid (\d+)\)", self.log())
        assert found, self.log()
        return int(found[1])

    def servers(self) -> list[int]:
        """The servers it has forked, in order."""
        return [int(pid) for pid in re.findall(r"server (\d+) started", self.log())]

    def new_servers(self, before: list[int]) -> list[int]:
        return [pid for pid in self.servers() if pid not in before]

    def new_server(self, before: list[int]) -> int:
        """The one server forked since `before` (the warm process logs it after the fork,
        which may be after the server has answered)."""
        deadline = time.monotonic() + 20
        while not (new := self.new_servers(before)):
            assert time.monotonic() < deadline, self.log()
            time.sleep(0.02)
        [server] = new
        return server

    def start(self, cwd: Path | None = None, command: list[str] = SERVE) -> None:
        """A cold start (stdin closed at once), which launches the warm process; then wait
        for it to listen."""
        subprocess.run(command, input=b"", env=self.env, cwd=cwd, check=True, timeout=60)
        deadline = time.monotonic() + 60
        while not list(self.folder.glob("warm-*.sock")):
            assert time.monotonic() < deadline, f"no warm process: {self.log()}"
            time.sleep(0.05)

    def end(self) -> None:
        for pid in [*re.findall(r"\(pid (\d+)\)", self.log()), *self.servers()]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        shutil.rmtree(self.runtime, ignore_errors=True)


@pytest.fixture
def warm(fake: FakeLLM, tmp_path: Path) -> Iterator[Warm]:
    """A warm process of the test's own (not started yet): for the tests that change it."""
    started = Warm(server_env(fake, tmp_path / "home"))
    try:
        yield started
    finally:
        started.end()


@pytest.fixture(scope="module")
def module_fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def shared(module_fake: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warm]:
    """One warm process, started, for the tests that only use it (each starts and ends
    servers of its own; `new_servers` tells them apart)."""
    started = Warm(server_env(module_fake, tmp_path_factory.mktemp("home")))
    started.env["PARLEY_WARM"] = "1"
    try:
        started.start()
        yield started
    finally:
        started.end()


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone, or going: it ended as it was read
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(condition: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def spawned(warm: Warm, **options: object) -> subprocess.Popen[bytes]:
    """`parley serve` started as an editor starts it, answered `initialize`."""
    client = subprocess.Popen(
        SERVE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=warm.env, **options
    )
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    client.stdin.flush()
    assert json.loads(client.stdout.readline())["result"]["protocolVersion"] == 1
    return client


def send(client: subprocess.Popen[bytes], number: int, method: str, params: dict) -> int:
    request = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
    assert client.stdin is not None
    client.stdin.write(json.dumps(request).encode() + b"\n")
    client.stdin.flush()
    return number


def read_until(client: subprocess.Popen[bytes], wanted: Callable[[dict], bool]) -> dict:
    assert client.stdout is not None
    while not wanted(message := json.loads(client.stdout.readline())):
        pass
    return message


async def test_a_warm_start_serves_a_whole_session_with_the_clients_environment(
    shared: Warm, module_fake: FakeLLM, workspace: Path
) -> None:
    warm, fake, before = shared, module_fake, shared.servers()
    fake.set_script([Reply(text="Hello from a fork.")])
    env = {**warm.env, "PARLEY_MODEL": MODELS["anthropic"]}  # this start's, not the first's
    async with acp_server(env) as run:
        await run.initialize()
        session = await run.conn.new_session(cwd=str(workspace), mcp_servers=[])
        await run.conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(type="text", text="Hi")]
        )
        assert run.editor.text_of(session.session_id) == "Hello from a fork."
        server = warm.new_server(before)
        assert alive(server)
    assert fake.requests[-1].path.endswith("/messages")  # the Anthropic wire: its env's model
    wait_until(lambda: not alive(server))


def test_the_server_takes_the_clients_directory_and_umask(shared: Warm, workspace: Path) -> None:
    warm, before = shared, shared.servers()
    client = spawned(warm, cwd=workspace, preexec_fn=lambda: os.umask(0o027))
    server = warm.new_server(before)
    assert Path(f"/proc/{server}/cwd").resolve() == workspace.resolve()
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{server}/status").read_text().splitlines()
    )
    assert fields["Umask"].strip() == "0027"
    client.stdin.close()  # type: ignore[union-attr]
    assert client.wait(20) == 0  # the editor closed stdin: the server ended, and so the client


def test_the_editors_signals_reach_the_server_and_its_end_is_the_clients(shared: Warm) -> None:
    warm, before = shared, shared.servers()
    client = spawned(warm)
    server = warm.new_server(before)
    client.send_signal(signal.SIGTERM)
    assert client.wait(20) == 0  # a server ends cleanly on SIGTERM, warm or cold
    wait_until(lambda: not alive(server))


def test_a_client_killed_mid_turn_takes_its_server_with_it_at_once(
    shared: Warm, module_fake: FakeLLM, workspace: Path
) -> None:
    """SIGKILL cannot be forwarded: the server, seeing its client gone, dies the same way. A
    server that ended gracefully instead would go on writing the turn's end to an editor
    that took it for dead (VS Code's restart test saw the prompt answered)."""
    warm, before = shared, shared.servers()
    module_fake.set_script([Reply(text="word " * 400, pacing=Pacing(chunks_per_second=20))])
    client = spawned(warm)
    server = warm.new_server(before)
    new = send(client, 2, "session/new", {"cwd": str(workspace), "mcpServers": []})
    session = read_until(client, lambda message: message.get("id") == new)["result"]["sessionId"]
    prompt = [{"type": "text", "text": "Long, please."}]
    send(client, 3, "session/prompt", {"sessionId": session, "prompt": prompt})
    read_until(client, lambda message: message.get("method") == "session/update")
    client.kill()
    client.wait(20)
    rest = client.stdout.read()  # type: ignore[union-attr]  (to the end: all its writers gone)
    assert b'"stopReason"' not in rest
    wait_until(lambda: not alive(server))


def test_the_warm_process_holds_no_key_and_nothing_of_the_repository(
    warm: Warm, tmp_path: Path
) -> None:
    repository = tmp_path / "hostile"
    repository.mkdir()
    marker = tmp_path / "imported-from-the-repository"
    for module in ("openai", "anthropic", "httpx", "pygls"):
        (repository / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    # `-P`: this cold start itself does not import from its folder (an editor runs the
    # `parley` script, which does not either); what is checked is the warm process.
    warm.start(cwd=repository, command=[sys.executable, "-P", *SERVE[1:]])
    pid = warm.pid()
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert b"sk-test-parley" not in environ and b"sk-ant-test" not in environ
    assert b"PARLEY_HOME" not in environ  # each server takes its own client's
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    assert b"-P" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert "imported in" in warm.log() and not marker.exists()
    assert (warm.folder.stat().st_mode & 0o777) == 0o700
    for path in warm.folder.iterdir():
        assert path.stat().st_mode & 0o077 == 0, path


def test_a_start_that_would_run_another_interpreter_gets_another_warm_process(
    warm: Warm,
) -> None:
    warm.start()
    first = warm.pid()
    warm.env["PYTHONHASHSEED"] = "7"  # read when an interpreter starts: a fork never does
    warm.env["PYTHON_TEST_TOKEN"] = "not-for-the-warm-process"
    client = spawned(warm)
    client.stdin.close()  # type: ignore[union-attr]
    assert client.wait(20) == 0
    assert warm.servers() == []  # served cold: the first warm process runs another seed
    wait_until(lambda: len(list(warm.folder.glob("warm-*.sock"))) == 2, 60)
    [second] = [int(pid) for pid in re.findall(r"\(pid (\d+)\)", warm.log()) if int(pid) != first]
    environ = Path(f"/proc/{second}/environ").read_bytes().split(b"\0")
    assert b"PYTHONHASHSEED=7" in environ
    assert not [variable for variable in environ if b"TOKEN" in variable]


def test_a_confined_client_gets_no_server_of_the_warm_process(shared: Warm) -> None:
    warm, before = shared, shared.servers()
    confined = subprocess.run(
        ["setpriv", "--no-new-privs", *SERVE],
        input=json.dumps(INITIALIZE).encode() + b"\n",
        capture_output=True,
        env=warm.env,
        timeout=60,
        check=True,
    )
    assert json.loads(confined.stdout.splitlines()[0])["result"]  # served cold, in itself
    assert "request refused: a confined peer" in warm.log()
    assert warm.new_servers(before) == []


@needs_bwrap
def test_a_sandboxed_child_cannot_reach_the_warm_process(shared: Warm, workspace: Path) -> None:
    warm, before = shared, shared.servers()
    [sock] = warm.folder.glob("warm-*.sock")
    probe = (
        "import os, socket\n"
        f"print('listed', os.path.exists({str(sock)!r}))\n"
        f"try: socket.socket(socket.AF_UNIX).connect({str(sock)!r}); print('connected')\n"
        "except OSError as e: print('refused', e.errno)\n"
    )
    # Hidden (its folder is the runtime directory), and no Unix socket at all (seccomp) —
    # hidden still where the configuration allows Unix sockets. The launcher runs in a
    # process of its own whose XDG_RUNTIME_DIR is the warm process's (this one's caches,
    # the seccomp filter's file among them, must not live in a folder the test removes).
    launcher = (
        "import shlex, sys\n"
        "from pathlib import Path\n"
        "from parley.sandbox import SandboxSettings\n"
        "from sandbox_probe import run_in_sandbox\n"
        "command = '/usr/bin/python3 -c ' + shlex.quote(sys.argv[2])\n"
        "for sockets in (False, True):\n"
        "    settings = SandboxSettings(unix_sockets=sockets)\n"
        "    done = run_in_sandbox(command, Path(sys.argv[1]), settings)\n"
        "    print(done.stdout + done.stderr)\n"
    )
    env = {**os.environ, "XDG_RUNTIME_DIR": str(warm.runtime)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", launcher, str(workspace), probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outputs = done.stdout.split("listed ")[1:]
    assert len(outputs) == 2, done.stdout + done.stderr
    for output in outputs:
        assert output.startswith("False") and "refused" in output, output
    assert warm.new_servers(before) == []


def test_a_runtime_directory_not_the_users_alone_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "parley").mkdir(parents=True)
    (shared / "parley").chmod(0o755)
    assert runtime_directory({"XDG_RUNTIME_DIR": str(shared)}) is None
    (shared / "parley").chmod(0o700)
    assert runtime_directory({"XDG_RUNTIME_DIR": str(shared)}) == shared / "parley"
    os.chown(shared / "parley", 65534, 65534)
    assert runtime_directory({"XDG_RUNTIME_DIR": str(shared)}) is None
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    assert runtime_directory({"XDG_RUNTIME_DIR": str(tmp_path / "link")}) is not None
    assert runtime_directory({"XDG_RUNTIME_DIR": "relative/place"}) is None


def test_a_dead_socket_or_warm_off_starts_cold_and_serves(warm: Warm) -> None:
    warm.folder.mkdir(mode=0o700)
    off = {**warm.env, "PARLEY_WARM": "0"}
    subprocess.run(SERVE, input=b"", env=off, check=True, timeout=60)
    assert not list(warm.folder.iterdir())  # off: nothing launched
    warm.start()
    [sock] = warm.folder.glob("warm-*.sock")
    os.kill(warm.pid(), signal.SIGKILL)  # its socket left behind, nobody listening
    wait_until(lambda: not alive(warm.pid()))
    client = spawned(warm)  # served cold, and a new warm process launched
    client.stdin.close()  # type: ignore[union-attr]
    assert client.wait(20) == 0
    wait_until(lambda: warm.log().count("listening on") == 1 and "imported in" in warm.log(), 60)
    connection = socket.socket(socket.AF_UNIX)
    wait_until(lambda: connection.connect_ex(str(sock)) == 0, 60)
    connection.close()


def test_another_parley_gets_another_warm_process(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(
        REPO / "server" / "parley", copy / "parley", ignore=shutil.ignore_patterns("__pycache__")
    )
    script = "from parley.warm_start import fingerprint; print(fingerprint())"

    def fingerprint() -> str:
        env = {**os.environ, "PYTHONPATH": str(copy)}
        return subprocess.run(
            [sys.executable, "-P", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    first = fingerprint()
    assert fingerprint() == first
    module = copy / "parley" / "agent" / "turn.py"
    os.utime(module, ns=(module.stat().st_atime_ns, module.stat().st_mtime_ns + 1_000_000))
    assert fingerprint() != first


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
REQUESTS = st.fixed_dictionaries(
    {},
    optional={
        "argv": st.lists(
            st.sampled_from(["serve", "chat", "--framing", "ndjson", "\0", ""]) | st.text(),
            max_size=4,
        )
        | JSON,
        "env": st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4) | JSON,
        "umask": st.integers(-10, 0o1000) | JSON,
        "ignored": st.lists(st.sampled_from([1, 2, 15, 9, 0, -1, True]), max_size=3) | JSON,
    },
)


@given(
    st.one_of(
        REQUESTS.map(lambda r: json.dumps(r).encode()),
        JSON.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=64),
    )
)
@settings(max_examples=300)
def test_a_request_is_parsed_whole_or_refused_with_a_reason(payload: bytes) -> None:
    try:
        request = parse_request(payload)
    except ValueError as error:
        assert str(error)
        return
    assert request.argv[0] == "serve" and all(
        isinstance(a, str) and "\0" not in a for a in request.argv
    )
    assert all("=" not in name and name for name in request.env)
    assert 0 <= request.umask <= 0o777
    assert all(signum in FORWARDED_SIGNALS and type(signum) is int for signum in request.ignored)


def send_raw(path: Path, header: bytes, descriptors: list[int], payload: bytes) -> list[str]:
    """What the warm process answers to bytes a broken or hostile client sends."""
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(30)
        connection.connect(str(path))
        socket.send_fds(connection, [header], descriptors)
        with contextlib.suppress(OSError):
            connection.sendall(payload)
            connection.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(ConnectionResetError):  # refused before all was read
            while chunk := connection.recv(4096):
                answer += chunk
    return answer.decode().splitlines()


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    request=REQUESTS.map(lambda r: json.dumps(r).encode()) | st.binary(max_size=32),
    length_error=st.sampled_from([0, 0, 1, -1, 1 << 40]),
    descriptor_count=st.sampled_from([4, 4, 4, 0, 1, 3]),
)
def test_no_request_breaks_the_warm_process(
    shared: Warm, request: bytes, length_error: int, descriptor_count: int
) -> None:
    warm = shared
    [path] = warm.folder.glob("warm-*.sock")
    read, write = os.pipe()
    here = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    os.close(write)  # a server forked on these ends at once: its stdin is at its end
    try:
        length = max(0, len(request) + length_error) if length_error != 1 << 40 else 1 << 40
        descriptors = [
            read,
            os.open(os.devnull, os.O_WRONLY),
            os.open(os.devnull, os.O_WRONLY),
            here,
        ]
        answer = send_raw(path, HEADER.pack(length), descriptors[:descriptor_count], request)
        for descriptor in descriptors[1:3]:
            os.close(descriptor)
    finally:
        os.close(read)
        os.close(here)
    first = answer[0].split()[0] if answer else ""
    assert first in ("refused", "started", ""), answer
    if first == "started":
        assert answer[1].split()[0] in ("exited", "killed"), answer
    assert alive(warm.pid())
