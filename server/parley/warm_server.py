"""The child the warm process forks for a connection: it reads the request, then becomes the server.

The warm process (`parley.warm_process`) checks a peer on its connection alone and forks at
once: it never reads a request, so a client's environment, its keys with it, never enters
the long-lived process's memory (docs/security.md, "The warm process serves only its user's
unconfined starts"). This child reads the request within the warm process's deadline (a
silent client holds only its own child), checks it (`parse_request`), tells the warm process
it serves, and takes the client's stdio, directory, umask, environment and arguments to run
`parley serve` as a cold start would (`become_server`). It never returns to the warm
process's loop: it ends with `os._exit`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import NoReturn

import attrs

from parley.warm_start import (
    EXITED,
    FORWARDED_SIGNALS,
    HEADER,
    MAX_PAYLOAD_BYTES,
    REFUSED,
    SIGNAL,
    STARTED,
    peer_credentials,
)

logger = logging.getLogger("parley.warm")
SERVING = b"s"  # what the child writes to the warm process once it serves


def serve_connection(connection: socket.socket, deadline: float, serving: int) -> NoReturn:
    """In the forked child: the request read and checked by `deadline` (else refused: the
    client starts cold), the warm process told on the pipe `serving` that this child serves,
    the client told STARTED, then the server. Never returns."""
    reader = RequestReader(connection, deadline)
    try:
        request = reader.read()
    except (OSError, ValueError) as error:
        refuse(connection, reader.descriptors, str(error))
        os._exit(0)
    with contextlib.suppress(OSError):  # first: a client told STARTED gets its server's end
        os.write(serving, SERVING)
    os.close(serving)
    logger.info("server %d started for %d", os.getpid(), peer_credentials(connection)[0])
    connection.setblocking(True)
    with contextlib.suppress(OSError):
        connection.sendall(f"{STARTED} {os.getpid()}\n".encode())
    become_server(connection, request, reader.descriptors)


def refuse(connection: socket.socket, descriptors: list[int], reason: str) -> None:
    """The client starts cold: told why, its descriptors and connection closed."""
    logger.info("request refused: %s", reason)
    for descriptor in descriptors:
        os.close(descriptor)
    with contextlib.suppress(OSError):
        connection.sendall(f"{REFUSED} {reason}\n".encode())
    connection.close()


@attrs.define
class RequestReader:
    """A connection's request: the header with the four descriptors, then the payload, all
    of it before `deadline`, however slowly it comes."""

    connection: socket.socket
    deadline: float
    descriptors: list[int] = attrs.field(factory=list)

    def read(self) -> ServerRequest:
        """The request; ValueError or OSError: refused (the descriptors received are kept in
        `descriptors`, for the refusal to close)."""
        self._wait()
        header, self.descriptors, _flags, _address = socket.recv_fds(
            self.connection, HEADER.size, 4
        )
        if len(self.descriptors) != 4 or len(header) != HEADER.size:
            raise ValueError("a request is a header and four descriptors")
        (length,) = HEADER.unpack(header)
        if length > MAX_PAYLOAD_BYTES:
            raise ValueError("the request is too long")
        payload = bytearray()
        while len(payload) < length:
            self._wait()
            chunk = self.connection.recv(min(length - len(payload), 1 << 16))
            if not chunk:
                raise ValueError("the request ended early")
            payload += chunk
        request = parse_request(bytes(payload))
        self.connection.setblocking(False)  # a peek that waits for nothing
        if self._client_left():  # it waited too long (the warm process was busy or stopped)
            raise ValueError("the client stopped waiting: it started cold")
        return request

    def _wait(self) -> None:
        """The next read may wait until the deadline, no longer."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ValueError("timed out")
        self.connection.settimeout(left)

    def _client_left(self) -> bool:
        """Whether the client has closed its end: a server started now would serve the
        editor's pipes beside the cold server the client became."""
        try:
            return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False


@attrs.frozen
class ServerRequest:
    """What a `parley serve` asks for: its arguments, environment, umask, and the forwarded
    signals it ignores."""

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
) -> NoReturn:
    """Take the client's stdio, directory, umask, environment and arguments, run `parley
    serve` as a cold start would, and exit with its status."""
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
