"""`parley serve` through the warm process: a start no one notices.

Importing what a server needs (pygls with LSP's thousand types, the provider SDKs) takes a
second or more on every start. A warm process (`parley.warm_process`, one per user and per
installed Parley) has imported it all once; `parley serve` then only connects to its socket,
hands over its stdin, stdout, stderr and working directory (SCM_RIGHTS) with its arguments,
environment and umask, and a child the warm process forks (before anything is read) adopts
them and becomes the server: the editor's process talks to that server as to a cold one.
This module is that thin client, so it imports nothing but the standard library's small
modules.

When there is no warm process (the first start, after an upgrade, after it has been idle
for `PARLEY_WARM_IDLE_SECONDS`), or it cannot be trusted or used, `parley serve` starts
cold, as it always could, and starts a warm process for the next time. `PARLEY_WARM=0`
turns all of this off. The security of it is in docs/security.md ("The warm process").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import socket
import stat
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from parley.core.redact import SECRET_NAME
from parley.undumpable import make_undumpable

# The wire between `parley serve` (the client), the warm process and the server it forks.
# Client → the child the warm process forked for the connection: HEADER (the payload's
# length) with the four descriptors, then the payload (JSON: argv, env, umask, ignored: the
# forwarded signals the client ignores). To the client, a line each: STARTED first (from the
# child, once it serves), then EXITED or KILLED from the warm process when the server has
# ended; REFUSED instead of STARTED (from either): start cold. The server itself sends EXITED
# as it exits. Client → server: SIGNAL lines (what the editor sent the client, forwarded).
HEADER = struct.Struct("!Q")
MAX_PAYLOAD_BYTES = 4 << 20  # an environment is kilobytes; this bounds what the process reads
STARTED, EXITED, KILLED, REFUSED, SIGNAL = "started", "exited", "killed", "refused", "signal"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
ANSWER_TIMEOUT_SECONDS = 10.0  # for STARTED: a warm process that does not answer is skipped
# A Unix socket's path is at most 108 bytes (sun_path) on Linux; a longer one starts cold.
MAX_SOCKET_PATH = 100
DEFAULT_IDLE_SECONDS = 1800  # the warm process ends after this long with no server running
# What the warm process keeps of the environment of the start that launched it: no key, no
# token, nothing of the user's but these and `interpreter_variables` (each server it forks
# takes its own client's whole environment).
WARM_PROCESS_VARIABLES = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "PARLEY_WARM_IDLE_SECONDS",
)


def idle_seconds(environ: os._Environ[str] | dict[str, str]) -> float:
    """`PARLEY_WARM_IDLE_SECONDS`, a positive number of seconds; the default otherwise (a
    typo must not make each start launch a warm process that imports all and then fails)."""
    try:
        seconds = float(environ.get("PARLEY_WARM_IDLE_SECONDS") or DEFAULT_IDLE_SECONDS)
    except ValueError:
        return DEFAULT_IDLE_SECONDS
    return seconds if 0 < seconds < 1e9 else DEFAULT_IDLE_SECONDS


def warm_enabled(environ: os._Environ[str] | dict[str, str]) -> bool:
    return environ.get("PARLEY_WARM", "1").strip().lower() not in ("0", "off", "no", "false")


def runtime_directory(environ: os._Environ[str] | dict[str, str]) -> Path | None:
    """Where the warm process's socket lives: `$XDG_RUNTIME_DIR/parley`, else Parley's data
    directory's `run/` — both hidden from every sandboxed child (sandbox_policy.hidden_paths).
    None when it is not a directory of this user's alone (0700): then no warm start."""
    if runtime := environ.get("XDG_RUNTIME_DIR"):
        place = Path(runtime, "parley")
    else:
        home = environ.get("HOME") or os.path.expanduser("~")
        data = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
        place = Path(environ.get("PARLEY_HOME") or os.path.join(data, "parley"), "run")
    if not place.is_absolute():
        return None
    try:
        place.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = os.lstat(place)
    except OSError:
        return None
    private = stat.S_ISDIR(status.st_mode) and not status.st_mode & 0o077
    return place if private and status.st_uid == os.getuid() else None


def fingerprint() -> str:
    """What the warm process must share with this start to serve it as a cold start would be
    served: the interpreter and what changes how it starts (`PYTHON*`, `LD_*`), where Python
    finds packages, Parley's own files (their sizes and times), and where the process runs
    (its cgroup, its resource limits: what the user set on the editor holds for its server).
    An upgrade, an edit of Parley, a package installed beside it, another editor's scope give
    another fingerprint, so another warm process: none serves with code older than the
    command's, or outside the limits of the editor that started it."""
    package = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    parts = [sys.executable, sys.version, package, *interpreter_variables(os.environ)]
    parts += [_cgroup(), *(str(resource.getrlimit(limit)) for limit in FINGERPRINTED_LIMITS)]
    for part in parts:
        digest.update(part.encode(errors="surrogateescape") + b"\0")
    for folder, folders, files in os.walk(package):
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                status = os.stat(os.path.join(folder, name))
                digest.update(f"{folder}/{name}:{status.st_size}:{status.st_mtime_ns}\0".encode())
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry):
            digest.update(f"{entry}:{os.stat(entry).st_mtime_ns}\0".encode())
    return digest.hexdigest()[:24]


# The resource limits a start's fingerprint holds (and the warm process checks a peer's).
FINGERPRINTED_LIMITS = [
    getattr(resource, f"RLIMIT_{name}")
    for name in ("AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "STACK")
    if hasattr(resource, f"RLIMIT_{name}")
]


def interpreter_variables(environ: os._Environ[str] | dict[str, str]) -> list[str]:
    """The variables read when an interpreter starts (`PYTHONPATH`, `PYTHONHASHSEED`,
    `LD_PRELOAD`, …): a forked server never starts one, so the warm process must have
    started with the same. None named like a secret: those stay out of the warm process."""
    return sorted(
        f"{name}={value}"
        for name, value in environ.items()
        if name.startswith(("PYTHON", "LD_")) and not SECRET_NAME.search(name)
    )


def _cgroup() -> str:
    try:
        with open("/proc/self/cgroup") as cgroup:
            return cgroup.read()
    except OSError:
        return ""


def socket_path(directory: Path, print_: str) -> Path:
    return directory / f"warm-{print_}.sock"


def warm_start_status(environ: os._Environ[str] | dict[str, str]) -> str:
    """`parley doctor`'s line: whether `parley serve` starts warm here, and why not."""
    if not warm_enabled(environ):
        return "off (PARLEY_WARM=0): every `parley serve` starts cold"
    directory = runtime_directory(environ)
    if directory is None:
        return "off: no runtime directory of this user's alone (0700) to put its socket in"
    path = socket_path(directory, fingerprint())
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return f"off: the socket's path would be too long ({path})"
    running = "running" if path.exists() else "not running (the next `parley serve` starts it)"
    return f"on, {running}; its socket {path}"


def serve_warm(argv: list[str]) -> int | None:
    """Serve `argv` (`serve …`) through the warm process: its exit status, once the server
    it forked has ended. None: start cold here (a warm process was started for the next
    time where none runs)."""
    if not warm_enabled(os.environ):
        return None
    directory = runtime_directory(os.environ)
    if directory is None:
        return None
    print_ = fingerprint()
    path = socket_path(directory, print_)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return None
    try:
        connection = _connected(path)
    except (BlockingIOError, TimeoutError):  # one runs but accepts nothing now: start cold,
        return None  # and launch no other (it would find the lock held)
    if connection is None:
        start_warm_process(directory, print_)
        return None
    with connection:
        if not _handed_over(connection, argv):
            return None
        # This process holds the editor's environment, keys included, while its server runs:
        # hidden from the user's other processes as a cold server's is (docs/security.md).
        # Not before: the warm process reads this process's namespaces to check it.
        make_undumpable()
        return _served(connection)


def _connected(path: Path) -> socket.socket | None:
    """A connection to the warm process at `path`, if one listens there and is this user's;
    BlockingIOError or TimeoutError if one is there but does not accept now (stopped, or its
    backlog full): never a connect that waits for it."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_TIMEOUT_SECONDS)
    try:
        connection.connect(os.fspath(path))
        uid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[
            1
        ]
    except (BlockingIOError, TimeoutError):
        connection.close()
        raise
    except OSError:
        connection.close()
        return None
    if uid != os.getuid():
        connection.close()
        return None
    return connection


def peer_credentials(connection: socket.socket) -> tuple[int, int, int]:
    """The pid, uid and gid of the process at the other end, as the kernel says (SO_PEERCRED)."""
    pid, uid, gid = struct.unpack(
        "3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    )
    return pid, uid, gid


def _handed_over(connection: socket.socket, argv: list[str]) -> bool:
    """Sends the request and waits for the server to be forked: False if the warm process
    refused it or did not answer (start cold: it did not fork)."""
    payload = json.dumps(
        {"argv": argv, "env": dict(os.environ), "umask": _umask(), "ignored": _ignored()},
        ensure_ascii=False,
    ).encode("utf-8", "surrogateescape")
    if len(payload) > MAX_PAYLOAD_BYTES:
        return False
    try:  # O_PATH: a directory the user may enter but not read (0711) is a cwd all the same
        here = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        connection.settimeout(ANSWER_TIMEOUT_SECONDS)
        socket.send_fds(connection, [HEADER.pack(len(payload))], [0, 1, 2, here])
        connection.sendall(payload)
        answer = _lines(connection)
        first = next(answer, "")
    except OSError:
        return False
    finally:
        os.close(here)
    return first.startswith(STARTED + " ")


def _served(connection: socket.socket) -> int:
    """Forwards the signals the editor sends this process to the server, then ends as the
    server ended."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            connection.sendall(f"{SIGNAL} {signum}\n".encode())

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    connection.settimeout(None)
    for line in _lines(connection):
        word, _, number = line.partition(" ")
        if word == EXITED:
            return int(number)
        if word == KILLED:
            for signum in FORWARDED_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), int(number))
            return 128 + int(number)
    print("parley: the warm process ended before the server it started", file=sys.stderr)
    return 1


def _lines(connection: socket.socket) -> Iterator[str]:
    """The lines the warm process sends, as they come; ends at end of file."""
    pending = b""
    while True:
        try:
            chunk = connection.recv(4096)
        except InterruptedError:
            continue
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("ascii", "replace")


def _ignored() -> list[int]:
    """The forwarded signals the editor started this process ignoring (`nohup`: SIGHUP): its
    server ignores them too, as a cold one would have from its start."""
    return [signum for signum in FORWARDED_SIGNALS if signal.getsignal(signum) == signal.SIG_IGN]


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def start_warm_process(directory: Path, print_: str) -> None:
    """Starts the warm process in the background, detached from this one's terminal and
    session, with none of its environment but WARM_PROCESS_VARIABLES, in `/` (never the
    repository: `-P` and `/` keep a folder's own modules out of what it imports)."""
    import subprocess
    import threading

    environment = {name: os.environ[name] for name in WARM_PROCESS_VARIABLES if name in os.environ}
    environment.update(variable.split("=", 1) for variable in interpreter_variables(os.environ))
    # Appended to: a warm process that loses the race for the lock must not cut the log of
    # the one that won (the winner empties it once it holds the lock).
    log = os.open(directory / f"warm-{print_}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(  # our own interpreter and module
            [sys.executable, "-P", "-m", "parley.warm_process", os.fspath(directory), print_],
            cwd="/",
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return
    finally:
        os.close(log)
    # This process goes on as a cold server, maybe for days: the warm process it launched is
    # reaped when it ends (idle, or another one held the lock), not left a zombie under it.
    threading.Thread(target=process.wait, name="warm-process-reaper", daemon=True).start()
