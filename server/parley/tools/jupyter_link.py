"""The wire to a kernel the user runs: a local Jupyter kernel through `jupyter_client`, named
by its connection file (a kernel of a Jupyter Server: `jupyter_remote.py`).

A `KernelLink` sends Jupyter messages on a channel and yields what the kernel sends back, as
plain dicts of the Jupyter messaging protocol; what they mean is `user_kernel.py`'s. A
connection file is input Parley does not trust: `read_connection_file` reads at most 64 KiB
of a regular file and keeps only fields of the right types (a hostile file is refused in a
sentence, never a traceback); a message that does not decode or whose signature is wrong is
dropped by the pump, never raised into a tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from collections.abc import AsyncIterator
from typing import Any, Protocol

logger = logging.getLogger(__name__)

MAX_CONNECTION_FILE_BYTES = 64 * 1024
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
SIGNATURE_SCHEMES = frozenset({"hmac-sha256", "hmac-sha512", "hmac-sha1", "hmac-md5"})
HEARTBEAT_SECONDS = 1.0  # a kernel that answers no ping within this is not beating


class ConnectionRefused(ValueError):
    """A connection file (or a server's address) Parley will not use: the sentence says why."""


class LinkClosed(Exception):
    """The link ended (the socket closed, the server went away)."""


# (channel, message): channel is "shell", "iopub", "control" or "stdin"
Incoming = tuple[str, dict[str, Any]]


class KernelLink(Protocol):
    """A connection to one running kernel, local or remote."""

    where: str  # how the user knows this kernel ("kernel-123.json", "kernel 1a2b on host")

    async def open(self) -> None:
        """Connect; raises `ConnectionRefused` or `OSError` when it cannot."""

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Send a request; returns its msg_id."""
        ...

    def messages(self) -> AsyncIterator[Incoming]:
        """What the kernel sends, until the link closes (`LinkClosed` then)."""
        ...

    async def interrupt(self) -> None:
        """Ask the kernel to interrupt what it runs (never a kill)."""

    async def is_alive(self) -> bool:
        """Whether the kernel still answers (its heartbeat, or its server says so)."""
        ...

    async def close(self) -> None:
        """Disconnect; the kernel itself runs on (it is the user's)."""


def read_connection_file(path: str) -> dict[str, Any]:
    """The connection info of `path`, checked field by field (blocking: call it off the
    event loop). Raises `ConnectionRefused` saying what is wrong."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ConnectionRefused(f"{path} cannot be opened: {error.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConnectionRefused(f"{path} is not a regular file")
        data = file.read(MAX_CONNECTION_FILE_BYTES + 1)
    if len(data) > MAX_CONNECTION_FILE_BYTES:
        raise ConnectionRefused(f"{path} is over 64 KiB: not a connection file")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConnectionRefused(f"{path} is not JSON: not a connection file") from None
    return checked_connection_info(parsed, path)


def checked_connection_info(parsed: Any, path: str) -> dict[str, Any]:
    """The fields of a connection file `jupyter_client` needs, each of its type and range."""
    if not isinstance(parsed, dict):
        raise ConnectionRefused(f"{path} holds no JSON object: not a connection file")
    transport = parsed.get("transport", "tcp")
    if transport not in ("tcp", "ipc"):
        raise ConnectionRefused(f"{path}: transport must be tcp or ipc")
    ip = parsed.get("ip", "127.0.0.1")
    if not isinstance(ip, str) or not ip or len(ip) > 255 or not ip.isprintable() or " " in ip:
        raise ConnectionRefused(f"{path}: ip must be an address")
    info: dict[str, Any] = {"transport": transport, "ip": ip}
    for name in PORTS:
        port = parsed.get(name)
        if type(port) is not int or not 0 < port < 65536:
            raise ConnectionRefused(f"{path}: {name} must be a port number (1-65535)")
        info[name] = port
    key = parsed.get("key", "")
    if not isinstance(key, str) or len(key) > 4096:
        raise ConnectionRefused(f"{path}: key must be a string")
    scheme = parsed.get("signature_scheme", "hmac-sha256")
    if scheme not in SIGNATURE_SCHEMES:
        raise ConnectionRefused(f"{path}: signature_scheme must be one of hmac-sha256, …")
    info.update(key=key, signature_scheme=scheme)
    return info


class LocalLink:
    """A local kernel, through `jupyter_client`'s `AsyncKernelClient` (ZeroMQ): the
    connection file's ports; interrupt by the protocol's `interrupt_request` on the control
    channel, as the kernel is not Parley's to signal."""

    def __init__(self, connection_file: str) -> None:
        self.connection_file = connection_file
        self.where = os.path.basename(connection_file)
        self._client: Any = None
        self._heart: Any = None
        self._heart_lock = asyncio.Lock()

    async def open(self) -> None:
        info = await asyncio.to_thread(read_connection_file, self.connection_file)
        from jupyter_client.asynchronous import AsyncKernelClient  # ~0.2 s: on first attach

        client = AsyncKernelClient()
        client.load_connection_info(info)
        client.session.username = "parley"
        client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=True)
        self._client = client

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        message = self._client.session.msg(msg_type, content)
        getattr(self._client, f"{channel}_channel").send(message)
        return str(message["header"]["msg_id"])

    async def messages(self) -> AsyncIterator[Incoming]:
        queue: asyncio.Queue[Incoming] = asyncio.Queue()
        pumps = [
            asyncio.create_task(self._pump(name, queue)) for name in ("shell", "iopub", "control")
        ]
        try:
            while True:
                yield await queue.get()
        finally:
            for pump in pumps:
                pump.cancel()

    async def _pump(self, name: str, queue: asyncio.Queue[Incoming]) -> None:
        channel = getattr(self._client, f"{name}_channel")
        while True:
            try:
                message = await channel.get_msg()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a bad signature, bytes that are no message
                logger.warning("A message from the user's kernel was dropped: %s", error)
                continue
            if isinstance(message, dict):
                queue.put_nowait((name, message))

    async def interrupt(self) -> None:
        self.send("control", "interrupt_request", {})

    async def is_alive(self) -> bool:
        async with self._heart_lock:  # one ping at a time on the REQ socket
            if self._heart is None:
                self._heart = self._client.connect_hb()
            try:
                await self._heart.send(b"ping")
                if await self._heart.poll(int(HEARTBEAT_SECONDS * 1000)):
                    await self._heart.recv()
                    return True
            except Exception as error:
                logger.info("The heartbeat of %s failed: %s", self.where, error)
            # A REQ socket without its reply cannot send again: the next ping gets a new one.
            self._heart.close(linger=0)
            self._heart = None
            return False

    async def close(self) -> None:
        if self._heart is not None:
            self._heart.close(linger=0)
            self._heart = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.stop_channels()
                self._client.context.destroy(linger=0)  # the client's own: its I/O thread
            self._client = None
