"""The warm process: everything a server imports, imported once; a server forked per start.

Started by `parley serve` (`warm_start.start_warm_process`) as
`python -P -m parley.warm_process DIRECTORY FINGERPRINT`, in `/`, with no key in its
environment. It takes `warm-FINGERPRINT.lock` (one warm process per fingerprint), imports
what a server and its first prompt need, then listens on `warm-FINGERPRINT.sock` (0600, in
a 0700 directory of the user's). For each connection it checks the peer on the connection
itself (this user, and not a confined process: see `confined`) and forks at once: the child
alone reads the request, its environment and keys with it, and becomes the server of that
`parley serve` (`warm_server.serve_connection`). It never reads a request. It reports each
server's end to its client and ends itself after `PARLEY_WARM_IDLE_SECONDS` with no child
running. Single-threaded, as a process that forks must be.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import logging
import os
import pkgutil
import resource
import selectors
import socket
import sys
import threading
import time
from pathlib import Path

import attrs

from parley.undumpable import make_undumpable
from parley.warm_server import SERVING, refuse, serve_connection
from parley.warm_start import (
    EXITED,
    FINGERPRINTED_LIMITS,
    KILLED,
    fingerprint,
    idle_seconds,
    peer_credentials,
    socket_path,
)

logger = logging.getLogger("parley.warm")
REQUEST_TIMEOUT_SECONDS = 5.0  # for a whole request, however slowly it comes (its child's)
MAX_STARTING_CHILDREN = 32  # children reading a request at once; more connections wait
PRELOAD_DELAY_SECONDS = 1.5  # the cold start that launched this one imports meanwhile
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


@attrs.define
class Child:
    """A child forked for a connection: reading its request, then (once it says so on its
    pipe) serving. The warm process keeps only this, never the request."""

    pid: int
    pidfd: int
    connection: socket.socket  # kept to tell the client how its server ended
    told: int | None  # the pipe the child says it serves on; None once it has (or has not)
    serving: bool = False


class WarmProcess:
    def __init__(self, directory: Path, print_: str, lock: object) -> None:
        self.path = socket_path(directory, print_)
        self.lock = lock
        self.idle_seconds = idle_seconds(os.environ)
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, Child] = {}  # by pid
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.idle_since = time.monotonic()  # when the last child ended

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
        while self.children or time.monotonic() < self.idle_since + self.idle_seconds:
            idle_left = self.idle_since + self.idle_seconds - time.monotonic()
            for key, _events in self.selector.select(None if self.children else max(idle_left, 0)):
                self.handle(key)
        self.close()

    def handle(self, key: selectors.SelectorKey) -> None:
        """One event of a batch; an earlier one of the same batch may have made it stale (a
        child reaped before its pipe was heard, the listener left for the backlog)."""
        if key.fileobj is self.listener:
            if self.listening():
                self.accept()
        elif key.fd == key.data.pidfd:
            self.reap(key.data)
        elif key.data.told is not None:
            self.hear(key.data)

    def close(self) -> None:
        """The socket is removed first, so no client connects to a process that is ending."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.listener.close()
        logger.info("idle for %.0f s: ending", self.idle_seconds)

    def accept(self) -> None:
        """A connection's peer checked on the connection itself, then a child forked at once
        to read its request: this process never reads one (a client's environment, its keys,
        never enters its memory), and a slow or silent client holds only its own child."""
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        reason = confined(connection)
        if reason:
            refuse(connection, [], reason)
            return
        try:
            self.fork_child(connection, time.monotonic() + REQUEST_TIMEOUT_SECONDS)
        except OSError as error:  # no fork now (a process limit): the client starts cold
            refuse(connection, [], f"no server can be forked ({error.strerror})")

    def fork_child(self, connection: socket.socket, deadline: float) -> None:
        told, tell = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(told)
            os.close(tell)
            raise
        if pid == 0:  # the child: it never comes back here
            try:
                os.close(told)
                self.forget_in_child()
                serve_connection(connection, deadline, tell)
            finally:
                os._exit(1)
        os.close(tell)
        child = Child(pid, os.pidfd_open(pid), connection, told)
        self.children[pid] = child
        self.selector.register(child.pidfd, selectors.EVENT_READ, child)
        self.selector.register(told, selectors.EVENT_READ, child)
        self.listen_while_room()

    def listen_while_room(self) -> None:
        """Accept while fewer than MAX_STARTING_CHILDREN children read a request; beyond, the
        connections wait in the backlog."""
        starting = sum(child.told is not None for child in self.children.values())
        if starting < MAX_STARTING_CHILDREN and not self.listening():
            self.selector.register(self.listener, selectors.EVENT_READ)
        elif starting >= MAX_STARTING_CHILDREN and self.listening():
            self.selector.unregister(self.listener)

    def listening(self) -> bool:
        return self.listener in self.selector.get_map()

    def hear(self, child: Child) -> None:
        """What the child says on its pipe: that it serves, or nothing (it refused the
        request, or died reading it: its client starts cold)."""
        assert child.told is not None
        child.serving = os.read(child.told, 1) == SERVING
        self.selector.unregister(child.told)
        os.close(child.told)
        child.told = None
        self.listen_while_room()

    def reap(self, child: Child) -> None:
        """A child ended: a server's client is told how (a refusing child's was told why)."""
        if child.told is not None:  # its pipe not heard yet: it is closed now, or holds a word
            self.hear(child)
        del self.children[child.pid]
        self.selector.unregister(child.pidfd)
        os.close(child.pidfd)
        _, status = os.waitpid(child.pid, 0)
        if os.WIFSIGNALED(status):
            line = f"{KILLED} {os.WTERMSIG(status)}\n"
        else:
            line = f"{EXITED} {os.waitstatus_to_exitcode(status)}\n"
        if child.serving:
            with contextlib.suppress(OSError):
                child.connection.sendall(line.encode())
        child.connection.close()
        if not self.children:
            self.idle_since = time.monotonic()

    def forget_in_child(self) -> None:
        """A child keeps nothing of the warm process's: not its socket, not its lock, not
        the connections of the other children (each would hold the other's client open)."""
        self.selector.close()
        self.listener.close()
        self.lock.close()  # type: ignore[attr-defined]
        for other in self.children.values():
            os.close(other.pidfd)
            if other.told is not None:
                os.close(other.told)
            other.connection.close()


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
