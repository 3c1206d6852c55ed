"""Reading and writing JSON-RPC messages on byte streams, in either framing.

- LSP base protocol: `Content-Length: N\\r\\n\\r\\n` + N bytes of UTF-8 JSON (jsonrpc.el,
  vscode-jsonrpc).
- NDJSON: one JSON object per line (ACP clients: Zed, agent-shell, CodeCompanion).

pygls reads only the first and drops what it cannot parse without answering, so Parley reads
frames itself and hands pygls only well-formed messages (see `dispatch.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator
from typing import BinaryIO, Literal

Framing = Literal["lsp", "ndjson"]

logger = logging.getLogger(__name__)

# A frame larger than this is refused: it is surely not a message meant for us.
MAX_FRAME_BYTES = 64 * 1024 * 1024


async def read_frames(reader: asyncio.StreamReader, framing: Framing) -> AsyncIterator[bytes]:
    """Yield each message body until the stream ends."""
    if framing == "ndjson":
        async for body in _read_ndjson(reader):
            yield body
    else:
        async for body in _read_lsp(reader):
            yield body


async def _read_ndjson(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # a line over the reader's limit
            logger.error("Skipped an NDJSON line longer than %d bytes", MAX_FRAME_BYTES)
            continue
        if not line:
            return
        if line.strip():
            yield line


async def _read_lsp(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        content_length: int | None = None
        saw_header = False
        while True:  # the header block, up to its blank line
            line = await reader.readline()
            if not line:
                return
            line = line.strip()
            if not line:
                if saw_header:
                    break
                continue  # stray blank lines between messages
            saw_header = True
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    content_length = int(value.strip())
                except ValueError:
                    content_length = None
        if content_length is None or not 0 <= content_length <= MAX_FRAME_BYTES:
            logger.error("Skipped a message with a missing or bad Content-Length header")
            continue
        try:
            yield await reader.readexactly(content_length)
        except asyncio.IncompleteReadError:
            return


class FrameWriter:
    """A pygls writer that frames and flushes messages.

    pygls adds the Content-Length header itself when told to (LSP framing); for NDJSON each
    message gets its newline here. Messages written in one turn of the event loop (a burst
    of deltas from one network read) leave in one write: a write per delta would cost a
    system call each, and sending them at the end of the same loop turn adds no latency.
    """

    def __init__(self, stream: BinaryIO, framing: Framing) -> None:
        self._stream = stream
        self._suffix = b"\n" if framing == "ndjson" else b""
        self._pending: list[bytes] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def write(self, data: bytes) -> None:
        self._pending.append(data + self._suffix if self._suffix else data)
        if len(self._pending) > 1:
            return  # a flush is already scheduled
        try:
            loop = self._loop or asyncio.get_running_loop()
        except RuntimeError:  # no loop (shutting down): write at once
            self.flush()
            return
        self._loop = loop
        loop.call_soon(self.flush)

    def flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._stream.write(data)
        self._stream.flush()

    def close(self) -> None:
        self.flush()
        self._stream.close()


async def stdin_reader() -> asyncio.StreamReader:
    """An asyncio reader over this process's stdin (a pipe, or a file or terminal)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME_BYTES)
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
        return reader

    # A file, a terminal or /dev/null cannot be polled: read it in a thread instead.
    def pump() -> None:
        while chunk := sys.stdin.buffer.read1(65536):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="stdin", daemon=True).start()
    return reader
