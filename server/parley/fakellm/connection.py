"""Writing a response to one client socket and noticing when the client hangs up.

An SDK that stops reading a stream closes its connection; the fake must notice before it
writes the next chunk so it can record `client_hung_up` and how many chunks got out. A closed
peer makes the socket readable with an empty read (EOF), which `MSG_PEEK` sees without taking
any bytes of a following request off the socket.
"""

from __future__ import annotations

import select
import socket
import time

LAST_CHUNK = b"0\r\n\r\n"  # ends a `Transfer-Encoding: chunked` body


def chunk_frame(data: bytes) -> bytes:
    """`data` framed as one HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


class ClientSocket:
    """The server's side of one client connection."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        # Paced chunks must leave at once, not wait for Nagle to coalesce them.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def peer_has_closed(self) -> bool:
        """Whether the client has closed (or reset) its end of the connection."""
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return False
            return self._sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # reset, or our own socket already closed
            return True

    def send(self, data: bytes) -> bool:
        """Write `data`; False if the client is gone (checked before and during the write)."""
        if self.peer_has_closed():
            return False
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            return False
        return True

    def wait(self, seconds: float) -> bool:
        """Sleep `seconds`, waking early if the client hangs up; True if it did."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                readable, _, _ = select.select([self._sock], [], [], remaining)
            except (OSError, ValueError):
                return True
            if readable:
                if self.peer_has_closed():
                    return True
                # The client sent bytes early (not a hang-up); select would keep firing.
                time.sleep(min(remaining, 0.01))
        return self.peer_has_closed()
