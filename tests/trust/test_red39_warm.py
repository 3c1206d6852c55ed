"""Red team 39's attacks on the warm start (server/parley/warm_start.py, warm_process.py), kept
as tests: each is what docs/security.md ("The warm process serves only its user's unconfined
starts", "Fallback") or docs/architecture.md ("Warm start") promises. Those that found a hole
now closed pass; those that show a limit stay marked `xfail(strict=True)`, so closing one shows
up as an XPASS.

The findings, ranked: W1 the thin client (`parley serve` when warm) held the editor's keys in
a dumpable process, so a fallback child read them in its `/proc/<pid>/environ`; W2 one silent
or slow connection held the single-threaded warm process for 5 s a read (for ever, a byte at
a time), so every other start waited 10 s and started cold; W3 a start connected without a
timeout, so a warm process that accepts nothing (stopped, its backlog full) hung the editor's
`parley serve` for ever; W4 a client learned its server's end from the warm process only: with
the warm process killed it exited 1 for a server that exited 0, stopped it never exited; W5 a
forked server ended with `os._exit`, so what it registered with `atexit` never ran (the
seccomp filter's directory left in the runtime directory by every server); W7 a peer under
other resource limits (a kernel's eval, its CPU cap) or in another cgroup got a server free of
them, though the fingerprint keeps honest clients apart by both; W8 a warm server showed local
times in the warm process's time zone, not its client's `TZ`; W9 under `nohup` a warm start
died of the hangup a cold one ignores (the client forwarded a signal it ignored). Limits, kept
as `xfail`: W6 in the fallback a child is the user: it can put a listener of its own at the
warm socket's path and receive the environment, keys included, of every later start.
Found later: W11 in a directory the user may enter but not read, a warm start crashed; W12
the warm process, once ended, stayed a zombie under the cold server that launched it; W13 a
`PARLEY_WARM_IDLE_SECONDS` that is no positive number made every start launch a warm process
that imported everything and then failed; W14 a warm process stopped or busy past a
client's wait forked a server for the request the client left, on the pipes of the cold
server it had become. W10, once a limit: the clients' keys stayed in the warm process's
freed memory (it parsed each request before it forked; now its forked child alone reads one).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from acp.schema import TextContentBlock
from acp_client import acp_server
from conftest import REPO, server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import SandboxSettings, sandbox_status
from parley.warm_start import HEADER
from sandbox_probe import NOBODY, as_user
from test_warm_start import INITIALIZE, SERVE, Warm, alive, send_raw, spawned, wait_until

_here = sandbox_status(SandboxSettings(), environ={})
needs_bwrap = pytest.mark.skipif(not _here.sandboxed, reason=f"no bubblewrap: {_here.reason}")
PATH = "/usr/local/bin:/usr/bin:/bin"


class UsersWarm(Warm):
    """A warm process of `uid`'s own (None: this process's user): its runtime directory,
    Parley's home and a workspace, all in the test's own directory and theirs."""

    def __init__(self, fake: FakeLLM, uid: int | None) -> None:
        super().__init__(server_env(fake, Path("/nonexistent")))
        self.uid = uid
        home = self.runtime / "home"
        for folder in (home, self.workspace):
            folder.mkdir()
        self.env.update(HOME=str(home), PATH=PATH, PARLEY_HOME=str(home / "parley"))
        self.env.update(PARLEY_CONFIG=str(home / "none.toml"), XDG_CONFIG_HOME=str(home))
        if uid is not None:
            subprocess.run(["chown", "-R", f"{uid}:{uid}", str(self.runtime)], check=True)
            packages = sysconfig.get_paths()["purelib"]
            self.env["PYTHONPATH"] = f"{REPO / 'server'}:{packages}"

    @property
    def workspace(self) -> Path:
        return self.runtime / "workspace"

    @property
    def python(self) -> list[str]:
        """The interpreter `uid` runs Parley with: one it may execute (not this venv's link
        into root's home) on this checkout and this venv's packages."""
        if self.uid is None:
            return [sys.executable]
        return as_user(["/usr/bin/python3"], self.uid)

    def start(self, cwd: Path | None = None, command: list[str] = SERVE) -> None:
        super().start(cwd, [*self.python, *command[1:]])


@pytest.fixture
def nobodys_warm(fake: FakeLLM) -> Iterator[UsersWarm]:
    started = UsersWarm(fake, NOBODY)
    try:
        yield started
    finally:
        started.end()


@pytest.fixture
def warm_of_root(fake: FakeLLM) -> Iterator[UsersWarm]:
    """This process's user's (not started yet: for a test that sets its launcher's env)."""
    started = UsersWarm(fake, None)
    try:
        yield started
    finally:
        started.end()


@pytest.fixture
def started_warm(warm_of_root: UsersWarm) -> UsersWarm:
    warm_of_root.start()
    return warm_of_root


def tool_result(fake: FakeLLM) -> str:
    """What the model got back for the call of the last round (OpenAI's wire)."""
    return str(fake.requests[-1].body["messages"][-1]["content"])


# --- W1. the thin client's environment -------------------------------------------------------

SCAN = (
    "import os\n"
    "held = []\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        if b'{key}' in open('/proc/' + pid + '/environ', 'rb').read(): held.append(pid)\n"
    "    except OSError: pass\n"
    "print('holding', held)\n"
)


async def test_a_fallback_child_cannot_read_the_keys_of_a_warm_started_parley(
    nobodys_warm: UsersWarm, fake: FakeLLM
) -> None:
    """As an unprivileged user (a root's child has no capabilities, which already refuses
    it): an approved command in the fallback looks for the key in every process's environ."""
    warm = nobodys_warm
    warm.start()
    key = f"sk-red39-{uuid.uuid4().hex}"
    env = {**warm.env, "OPENAI_API_KEY": key, "PARLEY_SANDBOX": "off"}
    command = f"/usr/bin/python3 -c {shlex.quote(SCAN.format(key=key))}"
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("run_command", {"command": command}),)), Reply("Ok")]
    )
    before = warm.servers()
    async with acp_server(env, interpreter=warm.python) as run:
        await run.initialize()
        session = await run.conn.new_session(cwd=str(warm.workspace), mcp_servers=[])
        prompt = [TextContentBlock(type="text", text="Look.")]
        await run.conn.prompt(session_id=session.session_id, prompt=prompt)
        assert warm.new_server(before)  # served by a fork of the warm process
    assert "holding []" in tool_result(fake), tool_result(fake)


# --- W11. a directory the user may enter but not read ---------------------------------------


def test_a_warm_start_serves_in_a_directory_it_may_enter_but_not_read(
    nobodys_warm: UsersWarm,
) -> None:
    """As an unprivileged user (root reads any directory): `parley serve` crashed with a
    traceback there (it opened `.` to read), where a cold start serves."""
    warm = nobodys_warm
    warm.start()
    enter_only = warm.workspace / "enter-only"
    enter_only.mkdir(mode=0o311)
    os.chown(enter_only, NOBODY, NOBODY)
    before = warm.servers()
    client = subprocess.Popen(
        [*warm.python, *SERVE[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=warm.env,
        cwd=enter_only,
    )
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    client.stdin.flush()
    assert json.loads(client.stdout.readline())["result"]["protocolVersion"] == 1
    server = warm.new_server(before)
    assert Path(f"/proc/{server}/cwd").resolve() == enter_only
    client.stdin.close()
    assert client.wait(60) == 0


# --- W12. the warm process a cold server launched, once it ends ------------------------------


def test_a_warm_process_that_ended_is_no_zombie_under_the_cold_server(
    warm_of_root: UsersWarm,
) -> None:
    warm = warm_of_root
    warm.env["PARLEY_WARM_IDLE_SECONDS"] = "1"  # it ends a second after it listens
    client = spawned(warm)  # cold: it launches the warm process, then serves for long
    wait_until(lambda: "ending" in warm.log(), 90)
    pid = warm.pid()
    try:
        wait_until(lambda: not Path(f"/proc/{pid}").exists())  # reaped, not a zombie
    finally:
        client.stdin.close()  # type: ignore[union-attr]
        client.wait(60)


# --- W13. a bad PARLEY_WARM_IDLE_SECONDS -------------------------------------------------------


@pytest.mark.parametrize("idle", ["soon", "nan", "-5"])
def test_a_bad_idle_setting_leaves_the_warm_process_serving(
    warm_of_root: UsersWarm, idle: str
) -> None:
    """Each start launched a warm process that imported everything, then failed (or ended)."""
    warm = warm_of_root
    warm.env["PARLEY_WARM_IDLE_SECONDS"] = idle
    warm.start()
    client = spawned(warm)
    assert len(warm.servers()) == 1  # served warm
    client.stdin.close()  # type: ignore[union-attr]
    assert client.wait(60) == 0


# --- W14. a client that stopped waiting ------------------------------------------------------


def test_no_server_is_forked_for_a_client_that_stopped_waiting(started_warm: UsersWarm) -> None:
    """A warm process stopped (or busy) past the client's wait: the client serves cold, and
    the request it left in the socket must not become a second server on the same pipes."""
    warm, pid = started_warm, started_warm.pid()
    before = warm.servers()
    os.kill(pid, signal.SIGSTOP)
    try:
        client = spawned(warm)  # after 10 s: cold
    finally:
        os.kill(pid, signal.SIGCONT)
    assert client.stdin is not None and client.stdout is not None
    wait_until(lambda: "request refused: the client stopped waiting" in warm.log())
    assert warm.new_servers(before) == []
    for number in range(2, 12):  # every request reaches the one server, and is answered
        client.stdin.write(json.dumps({**INITIALIZE, "id": number}).encode() + b"\n")
        client.stdin.flush()
        assert json.loads(client.stdout.readline())["id"] == number
    client.stdin.close()
    assert client.wait(60) == 0


# --- W2. a silent or slow client ---------------------------------------------------------------


def test_a_silent_or_slow_client_delays_no_other_start_and_none_of_its_descriptors_leak(
    started_warm: UsersWarm, tmp_path: Path
) -> None:
    warm = started_warm
    [path] = warm.folder.glob("warm-*.sock")
    marker = tmp_path / "the-slow-clients-file"
    marker.write_text("")
    silent = []
    for _ in range(3):  # each held the warm process for its 5 s read timeout
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(str(path))
        silent.append(connection)
    slow = socket.socket(socket.AF_UNIX)
    slow.connect(str(path))
    own = [os.open(marker, os.O_RDONLY) for _ in range(3)] + [os.open("/", os.O_RDONLY)]
    socket.send_fds(slow, [HEADER.pack(1000)], own)  # a header, its descriptors, then a byte
    slow.sendall(b"{")
    before = warm.servers()
    try:
        # Its descriptors are received by the child forked for it alone, never by the warm
        # process (which once held them, and the request, while it read it).
        wait_until(lambda: any(str(marker) in descriptors(pid) for pid in children(warm.pid())))
        assert str(marker) not in descriptors(warm.pid())
        client = spawned(warm)
        server = warm.new_server(before)  # served warm, not cold after 10 s of waiting
        assert str(marker) not in descriptors(server)
        client.stdin.close()  # type: ignore[union-attr]
        assert client.wait(60) == 0
        for connection in [*silent, slow]:  # each refused in the end, the warm process alive
            connection.settimeout(30)
            assert connection.recv(100).startswith(b"refused timed out")
        assert alive(warm.pid())
    finally:
        for connection in [*silent, slow]:
            connection.close()
        for descriptor in own:
            os.close(descriptor)


def test_a_flood_of_silent_clients_holds_at_most_32_children_and_a_start_is_served(
    started_warm: UsersWarm,
) -> None:
    """Each connection gets a child of its own to read its request: no more than 32 at once
    (the rest wait in the backlog), and once theirs time out the next start is served warm."""
    warm = started_warm
    [path] = warm.folder.glob("warm-*.sock")
    flood = []
    try:
        for _ in range(40):
            connection = socket.socket(socket.AF_UNIX)
            connection.connect(str(path))
            flood.append(connection)
        wait_until(lambda: len(children(warm.pid())) == 32)
        before = warm.servers()
        client = spawned(warm)  # accepted once the first 32 are refused (5 s), then the rest
        assert warm.new_server(before)
        assert len(children(warm.pid())) <= 32
        client.stdin.close()  # type: ignore[union-attr]
        assert client.wait(60) == 0
        for connection in flood:
            connection.settimeout(30)
            assert connection.recv(100).startswith(b"refused timed out")
        assert alive(warm.pid())
    finally:
        for connection in flood:
            connection.close()


def descriptors(pid: int) -> list[str]:
    """What the process's descriptors are open on (those closed meanwhile left out)."""
    held = []
    with contextlib.suppress(FileNotFoundError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(FileNotFoundError):
                held.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return held


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


# --- W3. a warm process that accepts nothing ----------------------------------------------------


def test_a_start_does_not_hang_on_a_warm_process_that_accepts_nothing(
    started_warm: UsersWarm,
) -> None:
    warm, pid = started_warm, started_warm.pid()
    [path] = warm.folder.glob("warm-*.sock")
    os.kill(pid, signal.SIGSTOP)
    queued = []
    try:
        while True:  # its backlog filled: the next connect waits for an accept
            connection = socket.socket(socket.AF_UNIX)
            connection.setblocking(False)
            queued.append(connection)
            try:
                connection.connect(str(path))
            except BlockingIOError:
                break
        done = subprocess.run(
            SERVE,
            input=json.dumps(INITIALIZE).encode() + b"\n",
            capture_output=True,
            env=warm.env,
            timeout=120,
        )
        assert json.loads(done.stdout.splitlines()[0])["result"]["protocolVersion"] == 1
    finally:
        for connection in queued:
            connection.close()
        os.kill(pid, signal.SIGCONT)


# --- W4. the client's end is its server's, whatever becomes of the warm process ---------------


@pytest.mark.parametrize("fate", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
def test_the_client_ends_as_its_server_did_when_the_warm_process_is_gone_or_stopped(
    started_warm: UsersWarm, fate: signal.Signals
) -> None:
    warm, pid = started_warm, started_warm.pid()
    before = warm.servers()
    client = spawned(warm)
    server = warm.new_server(before)
    os.kill(pid, fate)
    try:
        client.stdin.close()  # type: ignore[union-attr]
        wait_until(lambda: not alive(server))  # ended (a zombie while its parent is stopped)
        assert client.wait(60) == 0  # killed: was 1; stopped: never ended
    finally:
        os.kill(pid, signal.SIGCONT)


# --- W5. what a server registered for its exit -------------------------------------------------


@needs_bwrap
async def test_a_warm_server_leaves_no_seccomp_filter_behind(
    started_warm: UsersWarm, fake: FakeLLM
) -> None:
    warm = started_warm
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("run_command", {"command": "true"}),)), Reply("Ok")]
    )
    before = warm.servers()
    async with acp_server(warm.env) as run:
        await run.initialize()
        session = await run.conn.new_session(cwd=str(warm.workspace), mcp_servers=[])
        prompt = [TextContentBlock(type="text", text="Run it.")]
        await run.conn.prompt(session_id=session.session_id, prompt=prompt)
        server = warm.new_server(before)
        made = list(warm.runtime.glob("parley-seccomp-*"))
        assert made, "the sandboxed command made no filter where it was looked for"
    wait_until(lambda: not alive(server))
    assert list(warm.runtime.glob("parley-seccomp-*")) == []


# --- W7. a peer under other limits -------------------------------------------------------------

# A client of the socket's own making, as a kernel's eval could be in the fallback: the
# request `parley serve` sends, with descriptors of nothing; what the warm process answers.
RAW_CLIENT = """
import json, os, resource, socket, struct, sys
if sys.argv[2] == "limited":  # a CPU cap, as the kernel sets one for each eval
    resource.setrlimit(resource.RLIMIT_CPU, (86400, resource.getrlimit(resource.RLIMIT_CPU)[1]))
payload = json.dumps({"argv": ["serve"], "env": {}, "umask": 18}).encode()
nothing = [os.open(os.devnull, os.O_RDWR) for _ in range(3)] + [os.open("/", os.O_RDONLY)]
with socket.socket(socket.AF_UNIX) as connection:
    connection.settimeout(30)
    connection.connect(sys.argv[1])
    try:  # a peer refused at once may find the connection closed before all is sent
        socket.send_fds(connection, [struct.pack("!Q", len(payload))], nothing)
        connection.sendall(payload)
    except OSError:
        pass
    print(connection.recv(200).decode().split(" ")[0])
"""


def test_a_peer_under_other_limits_gets_no_server(started_warm: UsersWarm) -> None:
    warm = started_warm
    [path] = warm.folder.glob("warm-*.sock")

    def answer(how: str) -> str:
        command = [sys.executable, "-c", RAW_CLIENT, str(path), how]
        return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout

    assert answer("as-is") == "started\n"  # the client is one the warm process serves
    assert answer("limited") == "refused\n"
    assert "request refused: a peer under other resource limits" in warm.log()


# --- W8. the client's time zone -------------------------------------------------------------------


async def test_a_warm_server_shows_times_in_its_clients_time_zone(
    warm_of_root: UsersWarm, fake: FakeLLM
) -> None:
    warm = warm_of_root
    warm.env["TZ"] = "UTC0"  # the warm process's, from the start that launched it
    warm.start()
    fake.set_script([Reply(text="Hello.")])
    early = datetime.now(UTC)
    before = warm.servers()
    async with acp_server({**warm.env, "TZ": "RED-9"}) as run:  # nine hours east
        await run.initialize()
        session = await run.conn.new_session(cwd=str(warm.workspace), mcp_servers=[])
        prompt = [TextContentBlock(type="text", text="Hi")]
        await run.conn.prompt(session_id=session.session_id, prompt=prompt)
        exported = await run.raw_request(
            "_parley/session/export", {"sessionId": session.session_id}
        )
        assert warm.new_server(before)
    late = datetime.now(UTC)
    east = timezone(timedelta(hours=9))
    shown = {moment.astimezone(east).strftime("%Y-%m-%d %H:%M") for moment in (early, late)}
    header = exported["text"].splitlines()[:4]
    assert any(f" · {time}*" in line for line in header for time in shown), header


# --- W9. a signal the editor made the client ignore ----------------------------------------------


@pytest.mark.parametrize("warmth", ["1", "0"], ids=["warm", "cold"])
def test_a_start_under_nohup_outlives_a_hangup_warm_as_cold(
    started_warm: UsersWarm, warmth: str
) -> None:
    warm = started_warm
    warm.env["PARLEY_WARM"] = warmth
    before = warm.servers()
    client = spawned(warm, preexec_fn=ignore_hangups)
    assert len(warm.new_servers(before)) == (warmth == "1")
    client.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):  # the server is not hung up on
        client.wait(5)
    assert client.stdin is not None and client.stdout is not None
    client.stdin.write(json.dumps({**INITIALIZE, "id": 2}).encode() + b"\n")
    client.stdin.flush()
    assert json.loads(client.stdout.readline())["id"] == 2
    client.stdin.close()
    assert client.wait(60) == 0


def ignore_hangups() -> None:
    """What `nohup` does before it runs its command."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


# --- W10. the clients' keys in the warm process's memory -----------------------------------------


def memory_holds(pid: int, needle: bytes) -> bool:
    """Whether the process's writable memory holds `needle` (root reads any process's)."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as memory:
        for line in maps:
            span, permissions = line.split()[:2]
            if not permissions.startswith("rw"):
                continue
            start, end = (int(bound, 16) for bound in span.split("-"))
            with contextlib.suppress(OSError, ValueError, OverflowError):
                memory.seek(start)
                if needle in memory.read(end - start):
                    return True
    return False


def test_a_clients_key_never_enters_the_warm_processs_memory(started_warm: UsersWarm) -> None:
    """As root (CAP_SYS_PTRACE reads a non-dumpable process's memory): the warm process
    parsed each request, so every client's keys stayed in its freed memory. Now its child
    alone reads one, whether it serves it or refuses it."""
    warm = started_warm
    [path] = warm.folder.glob("warm-*.sock")
    served, refused = (f"sk-red39-{uuid.uuid4().hex}" for _ in range(2))
    warm.env["OPENAI_API_KEY"] = served
    before = warm.servers()
    client = spawned(warm)
    server = warm.new_server(before)
    assert memory_holds(server, served.encode())  # the scan finds a key where one was read
    client.stdin.close()  # type: ignore[union-attr]
    assert client.wait(60) == 0
    payload = json.dumps({"argv": ["chat"], "env": {"OPENAI_API_KEY": refused}, "umask": 18})
    nothing = [os.open(os.devnull, os.O_RDWR) for _ in range(3)] + [os.open("/", os.O_RDONLY)]
    try:
        answer = send_raw(path, HEADER.pack(len(payload)), nothing, payload.encode())
    finally:
        for descriptor in nothing:
            os.close(descriptor)
    assert answer == ["refused only `parley serve` is served"], answer
    assert alive(warm.pid())
    for key in (served, refused):
        assert not memory_holds(warm.pid(), key.encode())


# --- W6. in the fallback a child is the user -----------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="a limit: in the fallback a child runs with the user's rights, the runtime directory "
    "is the user's, and no check tells the warm process from another process of the user's "
    "(docs/security.md, 'In the fallback')",
)
def test_a_fallback_child_cannot_stand_in_for_the_warm_process(started_warm: UsersWarm) -> None:
    warm = started_warm
    [path] = warm.folder.glob("warm-*.sock")
    # What an approved fallback command can run as root's child: no capability, no_new_privs.
    impostor = (
        "import os, socket, sys\n"
        "path = sys.argv[1]\n"
        "os.unlink(path)\n"
        "listener = socket.socket(socket.AF_UNIX)\n"
        "listener.bind(path)\n"
        "listener.listen()\n"
        "print('listening', flush=True)\n"
        "connection, _ = listener.accept()\n"
        "socket.recv_fds(connection, 8, 4)\n"
        "print(connection.recv(1 << 20).decode(errors='replace'), flush=True)\n"
    )
    argv = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    child = subprocess.Popen(
        [*argv, "/usr/bin/python3", "-c", impostor, str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "listening\n"
        key = f"sk-red39-{uuid.uuid4().hex}"
        start = subprocess.Popen(
            SERVE, stdin=subprocess.PIPE, env={**warm.env, "OPENAI_API_KEY": key}
        )
        received, _ = child.communicate(timeout=60)
        start.kill()
        start.wait(30)
        assert key not in received
    finally:
        child.kill()
        child.wait(30)
