"""The warm process: everything a server imports, imported once; a server forked per start.

Started by `parley serve` (`warm_start.start_warm_process`) as
`python -P -m parley.warm_process DIRECTORY FINGERPRINT`, in `/`, with no key in its
environment. It takes `warm-FINGERPRINT.lock` (one warm process per fingerprint), imports
what a server and its first prompt need, then listens on `warm-FINGERPRINT.sock` (0600, in
a 0700 directory of the user's). For each connection it checks the peer (this user, and not
a confined process: see `confined`), reads the request, forks, and the child becomes the
server of that `parley serve` (`become_server`). It reports each server's end to its client
and ends itself after `PARLEY_WARM_IDLE_SECONDS` with no server running. Single-threaded
until it forks, as a fork must be.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import importlib
import json
import logging
import os
import pkgutil
import resource
import selectors
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

import attrs

from parley.undumpable import make_undumpable
from parley.warm_start import (
    EXITED,
    FINGERPRINTED_LIMITS,
    FORWARDED_SIGNALS,
    HEADER,
    KILLED,
    MAX_PAYLOAD_BYTES,
    REFUSED,
    SIGNAL,
    STARTED,
    fingerprint,
    idle_seconds,
    peer_credentials,
    socket_path,
)

logger = logging.getLogger("parley.warm")
REQUEST_TIMEOUT_SECONDS = 5.0  # for a whole request, however slowly it comes
MAX_PENDING_REQUESTS = 32  # requests read at once; more connections wait to be accepted
PRELOAD_DELAY_SECONDS = 1.5  # a client that connects and then sends nothing is dropped
# What a server and its first prompt import: the packages walked whole (modules that run as
# programs of their own — the kernel's, the fake LLM's — are not among them).
PRELOADED_PACKAGES = ("parley.core", "parley.protocol", "parley.agent", "parley.tools")
PRELOADED_MODULES = ("parley.cli", "parley.server", "parley.store", "parley.providers.registry")


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    directory, wanted = Path(argv[0]), argv[1]
    if fingerprint() != wanted:  # not the Parley the client runs: it would serve older code
        logger.info("fingerprint differs from the client's: not starting")
        return 0
    lock = os.fdopen(
        os.open(directory / f"warm-{wanted}.lock", os.O_WRONLY | os.O_CREAT, 0o600), "w"
    )
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another start launched one first
    with contextlib.suppress(OSError):
        os.ftruncate(sys.stderr.fileno(), 0)  # the log (appended to) is this process's now
    make_undumpable()
    # The start that launched this one is importing the same modules right now, cold: on a
    # machine of two cores, importing beside it would slow that start by as much.
    time.sleep(PRELOAD_DELAY_SECONDS)
    preload()
    if threading.active_count() != 1:  # an import started a thread: a fork would be unsafe
        logger.info("a thread is running after the imports: not serving")
        return 0
    gc.freeze()  # what was imported stays out of every collection (and shared with each fork)
    WarmProcess(directory, wanted, lock).serve()
    return 0


def preload() -> None:
    started = time.monotonic()
    for name in PRELOADED_MODULES:
        importlib.import_module(name)
    for package in PRELOADED_PACKAGES:
        for module in pkgutil.walk_packages(
            importlib.import_module(package).__path__, f"{package}."
        ):
            if not module.name.endswith("_main"):
                importlib.import_module(module.name)
    from parley.core.wire_kinds import WIRE_KINDS
    from parley.providers.registry import import_sdk

    for kind in WIRE_KINDS:
        import_sdk(kind)
    logger.info("imported in %.0f ms", (time.monotonic() - started) * 1000)


class WarmProcess:
    def __init__(self, directory: Path, print_: str, lock: object) -> None:
        self.path = socket_path(directory, print_)
        self.lock = lock
        self.idle_seconds = idle_seconds(os.environ)
        self.selector = selectors.DefaultSelector()
        self.servers: dict[int, tuple[int, socket.socket]] = {}  # pidfd → pid, its client
        self.pending: dict[int, PendingRequest] = {}  # a connection's fd → its request so far
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.idle_since = time.monotonic()  # when the last server ended

    def serve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a socket left by a warm process that died (we hold the lock)
        old_mask = os.umask(0o177)
        try:
            self.listener.bind(os.fspath(self.path))
        finally:
            os.umask(old_mask)
        self.listener.listen(64)
        self.selector.register(self.listener, selectors.EVENT_READ)
        logger.info("listening on %s (pid %d)", self.path, os.getpid())
        while True:
            timeout = self.wait_limit()
            if timeout is not None and timeout <= 0 and not self.servers and not self.pending:
                break  # idle for `idle_seconds`
            for key, _events in self.selector.select(None if timeout is None else max(timeout, 0)):
                if key.fileobj is self.listener:
                    self.accept()
                elif isinstance(key.data, PendingRequest):
                    self.read_request(key.data)
                else:
                    self.reap(key.fd)
            self.drop_overdue()
        self.close()

    def wait_limit(self) -> float | None:
        """How long the loop may wait: until the first pending request's deadline, or the
        idle end when nothing runs nor is asked; None: without limit."""
        deadlines = [pending.deadline for pending in self.pending.values()]
        if not self.servers and not self.pending:
            deadlines.append(self.idle_since + self.idle_seconds)
        return min(deadlines) - time.monotonic() if deadlines else None

    def close(self) -> None:
        """The socket is removed first, so no client connects to a process that is ending."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.listener.close()
        logger.info("idle for %.0f s: ending", self.idle_seconds)

    def accept(self) -> None:
        """A connection's peer checked; its request is then read as it comes, beside the
        others' (a slow or silent client delays no one: `PendingRequest`)."""
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        reason = confined(connection)
        if reason:
            refuse(connection, [], reason)
            return
        connection.setblocking(False)
        pending = PendingRequest(connection, time.monotonic() + REQUEST_TIMEOUT_SECONDS)
        self.pending[connection.fileno()] = pending
        self.selector.register(connection, selectors.EVENT_READ, pending)
        if len(self.pending) >= MAX_PENDING_REQUESTS:  # the rest wait in the backlog
            self.selector.unregister(self.listener)

    def read_request(self, pending: PendingRequest) -> None:
        try:
            request = pending.received()
        except (OSError, ValueError) as error:
            self.forget(pending)
            refuse(pending.connection, pending.descriptors, str(error))
            return
        if request is not None:
            self.forget(pending)
            pending.connection.setblocking(True)
            self.fork_server(pending.connection, request, pending.descriptors)

    def drop_overdue(self) -> None:
        now = time.monotonic()
        for pending in [each for each in self.pending.values() if each.deadline <= now]:
            self.forget(pending)
            refuse(pending.connection, pending.descriptors, "timed out")

    def forget(self, pending: PendingRequest) -> None:
        if len(self.pending) >= MAX_PENDING_REQUESTS:
            self.selector.register(self.listener, selectors.EVENT_READ)
        del self.pending[pending.connection.fileno()]
        self.selector.unregister(pending.connection)

    def fork_server(
        self, connection: socket.socket, request: ServerRequest, descriptors: list[int]
    ) -> None:
        pid = os.fork()
        if pid == 0:  # the child: it never comes back here
            self.forget_in_child(connection)
            become_server(connection, request, descriptors)
        for descriptor in descriptors:  # the editor's pipes are the server's alone now
            os.close(descriptor)
        logger.info("server %d started for %d", pid, peer_credentials(connection)[0])
        pidfd = os.pidfd_open(pid)
        self.servers[pidfd] = (pid, connection)
        self.selector.register(pidfd, selectors.EVENT_READ)
        with contextlib.suppress(OSError):
            connection.sendall(f"{STARTED} {pid}\n".encode())

    def reap(self, pidfd: int) -> None:
        pid, connection = self.servers.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            line = f"{KILLED} {os.WTERMSIG(status)}\n"
        else:
            line = f"{EXITED} {os.waitstatus_to_exitcode(status)}\n"
        with contextlib.suppress(OSError):
            connection.sendall(line.encode())
        connection.close()
        if not self.servers:
            self.idle_since = time.monotonic()

    def forget_in_child(self, connection: socket.socket) -> None:
        """A server keeps nothing of the warm process's: not its socket, not its lock, not
        the connections of the other servers (each would hold the other's client open), nor
        the descriptors of a request still coming."""
        self.selector.close()
        self.listener.close()
        self.lock.close()  # type: ignore[attr-defined]
        for pidfd, (_pid, other) in self.servers.items():
            os.close(pidfd)
            if other is not connection:
                other.close()
        for pending in self.pending.values():  # another client's pipes are not this server's
            for descriptor in pending.descriptors:
                os.close(descriptor)
            pending.connection.close()


def confined(connection: socket.socket) -> str:
    """Why this peer may not have a server: not this user, or confined (a sandboxed child's
    seccomp filter or no_new_privs, another PID, mount or user namespace, another cgroup or
    other resource limits: a kernel's eval, a child in its pids group) — a server forked here
    would be free of what confines it. Empty when it may."""
    pid, uid, _gid = peer_credentials(connection)
    if uid != os.getuid():
        return "another user"
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        if differs := _place_differs(pid):
            return differs
    except OSError:
        return "a peer that cannot be checked"
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("Seccomp", "0").strip() != "0" or fields.get("NoNewPrivs", "0").strip() != "0":
        return "a confined peer (seccomp or no_new_privs)"
    return ""


def _place_differs(pid: int) -> str:
    """What of where the peer runs is not where this process runs: a namespace, its cgroup or
    its resource limits (what `warm_start.fingerprint` holds, so an honest client with other
    ones never connects here; a process that connects all the same is refused)."""
    for namespace in ("pid", "mnt", "user"):
        theirs, ours = (os.readlink(f"/proc/{who}/ns/{namespace}") for who in (pid, "self"))
        if theirs != ours:
            return f"a peer in another {namespace} namespace"
    if Path(f"/proc/{pid}/cgroup").read_text() != Path("/proc/self/cgroup").read_text():
        return "a peer in another cgroup"
    for limit in FINGERPRINTED_LIMITS:
        if resource.prlimit(pid, limit) != resource.getrlimit(limit):
            return "a peer under other resource limits"
    return ""


def refuse(connection: socket.socket, descriptors: list[int], reason: str) -> None:
    """The client starts cold: told why, its descriptors and connection closed."""
    logger.info("request refused: %s", reason)
    for descriptor in descriptors:
        os.close(descriptor)
    with contextlib.suppress(OSError):
        connection.sendall(f"{REFUSED} {reason}\n".encode())
    connection.close()


@attrs.define
class PendingRequest:
    """A connection's request as it comes (non-blocking): the header with the four
    descriptors, then the payload, all of it before `deadline`."""

    connection: socket.socket
    deadline: float
    descriptors: list[int] = attrs.field(factory=list)
    length: int | None = None
    payload: bytearray = attrs.field(factory=bytearray)

    def received(self) -> ServerRequest | None:
        """The request once whole (None: more to come); ValueError or OSError: refused."""
        try:
            if self.length is None:
                self._receive_header()
            else:
                self._receive_payload()
        except BlockingIOError:
            return None
        if self.length is None or len(self.payload) < self.length:
            return None
        request = parse_request(bytes(self.payload))
        if self._client_left():  # it waited too long (this process was busy or stopped)
            raise ValueError("the client stopped waiting: it started cold")
        return request

    def _client_left(self) -> bool:
        """Whether the client has closed its end: a server forked now would serve the
        editor's pipes beside the cold server the client became."""
        try:
            return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False

    def _receive_header(self) -> None:
        header, self.descriptors, _flags, _address = socket.recv_fds(
            self.connection, HEADER.size, 4
        )
        if len(self.descriptors) != 4 or len(header) != HEADER.size:
            raise ValueError("a request is a header and four descriptors")
        (length,) = HEADER.unpack(header)
        if length > MAX_PAYLOAD_BYTES:
            raise ValueError("the request is too long")
        self.length = length

    def _receive_payload(self) -> None:
        assert self.length is not None
        chunk = self.connection.recv(min(self.length - len(self.payload), 1 << 16))
        if not chunk:
            raise ValueError("the request ended early")
        self.payload += chunk


@attrs.frozen
class ServerRequest:
    """What a `parley serve` asks of the warm process: its arguments, environment, umask,
    and the forwarded signals it ignores."""

    argv: list[str]
    env: dict[str, str]
    umask: int
    ignored: list[int] = attrs.field(factory=list)


def parse_request(payload: bytes) -> ServerRequest:
    """The request in `payload`, or ValueError saying what is wrong with it. Only `serve`
    is served: the warm process starts servers, nothing else of the CLI."""
    try:
        request = json.loads(payload.decode("utf-8", "surrogateescape"))
    except (UnicodeDecodeError, RecursionError, json.JSONDecodeError) as error:
        raise ValueError("the request is not JSON") from error
    if not isinstance(request, dict):
        raise ValueError("the request is not an object")
    argv, env, umask = request.get("argv"), request.get("env"), request.get("umask")
    if not isinstance(argv, list) or argv[:1] != ["serve"]:
        raise ValueError("only `parley serve` is served")
    if not all(isinstance(argument, str) and "\0" not in argument for argument in argv):
        raise ValueError("an argument is not text")
    if not isinstance(env, dict) or not all(
        isinstance(value, str) and name and "=" not in name and "\0" not in name + value
        for name, value in env.items()
    ):
        raise ValueError("the environment is not names and texts")
    if not isinstance(umask, int) or isinstance(umask, bool) or not 0 <= umask <= 0o777:
        raise ValueError("the umask is not a mode")
    ignored = request.get("ignored", [])
    if not isinstance(ignored, list) or not all(
        type(signum) is int and signum in FORWARDED_SIGNALS for signum in ignored
    ):
        raise ValueError("the ignored signals are not forwarded signals")
    return ServerRequest(argv, env, umask, ignored)


def become_server(
    connection: socket.socket, request: ServerRequest, descriptors: list[int]
) -> None:
    """In the forked child: take the client's stdio, directory, umask, environment and
    arguments, run `parley serve` as a cold start would, and exit with its status."""
    code = 1
    try:
        for target, descriptor in enumerate(descriptors[:3]):
            os.dup2(descriptor, target)
        os.fchdir(descriptors[3])
        for descriptor in descriptors:
            os.close(descriptor)
        os.umask(request.umask)
        for signum in request.ignored:
            signal.signal(signum, signal.SIG_IGN)
        os.environ.clear()
        os.environ.update(request.env)
        time.tzset()  # local times in the client's TZ, as a cold start reads it at its start
        sys.argv = ["parley", *request.argv]
        from parley.core.redact import remember_secrets, secrets_in

        remember_secrets(secrets_in(os.environ))  # its own redactor knew the warm env only
        logging.getLogger().handlers.clear()  # the warm process's log is not the server's
        threading.Thread(target=_follow_client, args=(connection,), daemon=True).start()
        from parley.cli import main as cli_main

        code = cli_main(request.argv)
    except SystemExit as exit_:
        code = _exit_status(exit_.code)
    except BaseException:  # the child must never return to the warm process's loop
        logger.exception("the server failed")
    finally:
        _exit_as_a_cold_server(connection, code)


def _exit_status(code: object) -> int:
    """What an interpreter exits with for `SystemExit(code)` (a text is printed, then 1)."""
    if code is None or isinstance(code, int):
        return code or 0
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _exit_as_a_cold_server(connection: socket.socket, code: int) -> NoReturn:
    """What an interpreter does at its end, as a fork cannot return to one: the functions
    the server registered with `atexit` run (the seccomp filter's directory is removed), the
    streams are flushed; then its client is told its status itself, so it ends as the server
    did even when the warm process is gone or stopped."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()  # the interpreter's own step; a fork ends with os._exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(OSError):
        connection.sendall(f"{EXITED} {code}\n".encode())
    os._exit(code)


def _follow_client(connection: socket.socket) -> None:
    """The client forwards the signals it gets. When it is gone without a word, it was killed
    outright (SIGKILL: nothing to forward), and so is the server, as a cold server would
    have been: ending gracefully, it would go on writing a turn's end to the editor, which
    took it for dead."""
    pending = b""
    while True:
        try:
            chunk = connection.recv(256)
        except OSError:
            chunk = b""
        if not chunk:
            os.kill(os.getpid(), signal.SIGKILL)
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            word, _, number = line.decode("ascii", "replace").partition(" ")
            if word == SIGNAL and number.isdigit() and int(number) in FORWARDED_SIGNALS:
                os.kill(os.getpid(), int(number))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
