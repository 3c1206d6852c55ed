"""The kernel's fd-level output pipe (what is written below `sys.stdout`: subprocesses, C code,
`os.write(1, ...)`), read by a thread of its own.

While a call is in flight, it keeps the head of the output, up to its limit
(`CapturedBytes`); the rest is read and dropped at once, so a flood (200 MB written to fd 1,
`yes`) is cut where the limit is hit and the writer goes on at the pipe's speed rather than
waiting for the server to drain it, while the event loop sees none of it and the server's
memory stays flat. Between calls nothing is read: a background flood fills the pipe and its
writers wait, costing the server nothing. After each call the kernel writes an end marker to
the pipe; the thread sets that call's event when it reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import select
import threading

END_MARKER = re.compile(rb"\x00parley-kernel-done-(\d+)\x00")
MARKER_LONGEST = 40  # bytes: a marker split across reads is held back at most this much
DEATH_OUTPUT_TAIL = 4000  # bytes of the dead kernel's last fd-level output shown to the model
READ_SIZE = 1024 * 1024
PIPE_SIZE = 1024 * 1024  # fewer wake-ups per megabyte; the system may grant less


class CapturedBytes:
    """The head of a byte stream, up to a limit; the rest is only counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.cut = 0

    def add(self, data: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.cut += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        return f"{text}\n[… {self.cut:,} more bytes cut]" if self.cut else text


class OutputPipe:
    """Reads the read end `fd` (which it owns and closes) until EOF or `close()`."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._loop = loop
        self._wake_read, self._wake_write = os.pipe()
        self._lock = threading.Lock()
        self._capture: CapturedBytes | None = None
        self._markers: dict[int, asyncio.Event] = {}
        self._tail = bytearray()
        self._reading = threading.Event()  # a call in flight, or the kernel starting or gone
        self._reading.set()
        self._closed = False
        self._fds_closed = False  # by the thread, under the lock: close() then writes nowhere
        self.finished = asyncio.Event()  # set at EOF (every writer gone) or after close()
        os.set_blocking(fd, False)
        with contextlib.suppress(OSError, AttributeError):  # F_SETPIPE_SZ: Linux only
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self._thread = threading.Thread(target=self._run, name="kernel-output", daemon=True)
        self._thread.start()

    def capture(self, request_id: int, capture: CapturedBytes) -> asyncio.Event:
        """Keep the coming output in `capture`; the event is set at the call's end marker."""
        event = asyncio.Event()
        with self._lock:
            self._capture = capture
            self._markers[request_id] = event
        self._reading.set()
        return event

    def stop_capturing(self) -> None:
        """Between calls: keep nothing, read nothing."""
        with self._lock:
            self._capture = None
        self._reading.clear()

    def read_to_the_end(self) -> None:
        """Read again, whatever is left (the kernel ended: its last words are the tail)."""
        self._reading.set()

    def tail(self) -> str:
        with self._lock:
            return self._tail.decode("utf-8", "replace").strip()

    def close(self) -> None:
        """Stop reading (a grandchild may hold the pipe open for ever); idempotent."""
        self._closed = True
        self._reading.set()
        with self._lock, contextlib.suppress(OSError):
            if not self._fds_closed:  # else its number may be another file's by now
                os.write(self._wake_write, b"x")

    # --- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        pending = b""
        try:
            while True:
                self._reading.wait()
                ready = {fd for fd, _ in poller.poll()}
                if self._closed or self._wake_read in ready:
                    break
                try:
                    chunk = os.read(self._fd, READ_SIZE)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                pending = self._take(pending + chunk)
            self._record(pending)
        finally:
            with self._lock:
                for fd in (self._fd, self._wake_read, self._wake_write):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._fds_closed = True
            self._on_loop(self.finished.set)

    def _take(self, data: bytes) -> bytes:
        """Record `data` up to its last complete marker; returns what may start a marker."""
        while match := END_MARKER.search(data):
            self._record(data[: match.start()])
            with self._lock:
                event = self._markers.pop(int(match.group(1)), None)
            if event is not None:
                self._on_loop(event.set)
            data = data[match.end() :]
        start = data.rfind(b"\x00", max(0, len(data) - MARKER_LONGEST))
        if start >= 0 and b"\x00" not in data[start + 1 :]:
            self._record(data[:start])
            return data[start:]
        self._record(data)
        return b""

    def _record(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            if self._capture is not None:
                self._capture.add(data)
            self._tail += data[-DEATH_OUTPUT_TAIL:]
            del self._tail[:-DEATH_OUTPUT_TAIL]

    def _on_loop(self, callback: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(callback)  # type: ignore[arg-type]
