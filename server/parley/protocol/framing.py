"""Reading and writing JSON-RPC messages on byte streams, in either framing.

- LSP base protocol: `Content-Length: N\\r\\n\\r\\n` + N bytes of UTF-8 JSON (jsonrpc.el,
  vscode-jsonrpc).
- NDJSON: one JSON object per line (ACP clients: Zed, agent-shell, CodeCompanion).

pygls reads only the first and drops what it cannot parse without answering, so Parley reads
frames itself and hands pygls only well-formed messages (see `dispatch.py`).

No input stops the reader. A frame over `MAX_FRAME_BYTES` is skipped without being held
whole; its first bytes are passed on (`OversizedFrame`) so that its request can be answered.
After an LSP framing error (a bad or missing Content-Length, garbage, a missing blank line)
the reader resynchronises on the next `Content-Length:` header.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import os
import re
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, BinaryIO, Literal

import attrs

Framing = Literal["lsp", "ndjson"]

logger = logging.getLogger(__name__)

# A frame larger than this is refused: it is surely not a message meant for us.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# What is kept of a refused frame: enough to find its id.
OVERSIZED_HEAD_BYTES = 4096
# LSP headers are a few short lines; longer ones, or more of them, are garbage.
MAX_HEADER_LINE_BYTES = 8 * 1024
MAX_HEADER_LINES = 32
# What is kept of the end of a garbage line skipped unread: a header may follow it there.
_GARBAGE_TAIL_BYTES = 1024
_READ_BYTES = 64 * 1024

_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*(.*?)[ \t]*\r?\n?")
_LENGTH_VALUE = re.compile(rb"[0-9]{1,15}")
# The header block every client we know sends: one line, then the blank one.
_USUAL_HEADER = re.compile(rb"Content-Length: ([0-9]{1,15})\r\n\r\n")


@attrs.frozen
class OversizedFrame:
    """A message over `MAX_FRAME_BYTES`, skipped: its first bytes and its (declared) size."""

    head: bytes
    size: int


Frame = bytes | OversizedFrame


async def read_frames(reader: asyncio.StreamReader, framing: Framing) -> AsyncIterator[Frame]:
    """Yield each message body (or oversized frame) until the stream ends."""
    source = _Input(reader)
    if framing == "ndjson":
        async for frame in _read_ndjson(source):
            yield frame
    else:
        async for frame in _read_lsp(source):
            yield frame


@attrs.frozen
class _LongLine:
    """A line longer than the reader's limit, consumed in pieces: its start, end and size."""

    head: bytes
    tail: bytes
    size: int


class _Input:
    """Buffered bytes from a stream reader: bounded lines, exact reads, look-ahead, unread."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = bytearray()
        self._at_end = False

    async def _fill(self) -> bool:
        """Read what is available into the buffer; False at the end of the input."""
        if self._at_end:
            return False
        chunk = await self._reader.read(_READ_BYTES)
        if not chunk:
            self._at_end = True
            return False
        self._buffer += chunk
        return True

    def usual_header(self) -> int | None:
        """The length in a usual header block (`_USUAL_HEADER`) at the start of what has
        arrived, consumed; None, consuming nothing, for anything else. One match instead of
        a line-by-line parse: a replay sends thousands of messages."""
        header = _USUAL_HEADER.match(self._buffer)
        if header is None:
            return None
        length = int(header.group(1))
        if length > MAX_FRAME_BYTES:
            return None  # refused by the full parse
        del self._buffer[: header.end()]
        return length

    def unread(self, data: bytes) -> None:
        self._buffer[:0] = data

    async def line(self, limit: int) -> bytes | _LongLine | None:
        """The next line with its newline (the input's last may lack one); None at the end.
        A line longer than `limit` is consumed without being held whole."""
        scanned = 0
        while True:
            newline = self._buffer.find(b"\n", scanned)
            if 0 <= newline < limit:
                line = bytes(self._buffer[: newline + 1])
                del self._buffer[: newline + 1]
                return line
            if newline >= limit or len(self._buffer) > limit:
                return await self._skip_long_line()
            scanned = len(self._buffer)
            if not await self._fill():
                line = bytes(self._buffer)
                self._buffer.clear()
                return line or None

    async def _skip_long_line(self) -> _LongLine:
        head = bytes(self._buffer[:OVERSIZED_HEAD_BYTES])
        tail = b""
        size = 0
        while True:
            newline = self._buffer.find(b"\n")
            end = newline + 1 if newline >= 0 else len(self._buffer)
            size += end
            tail = (tail + bytes(self._buffer[max(0, end - _GARBAGE_TAIL_BYTES) : end]))[
                -_GARBAGE_TAIL_BYTES:
            ]
            del self._buffer[:end]
            if newline >= 0 or not await self._fill():
                return _LongLine(head, tail, size)

    async def exactly(self, size: int) -> bytes | None:
        """The next `size` bytes; None if the input ends first."""
        if len(self._buffer) >= size:
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data
        start = bytes(self._buffer)
        self._buffer.clear()
        try:
            return start + await self._reader.readexactly(size - len(start))
        except asyncio.IncompleteReadError:
            self._at_end = True
            return None

    async def peek(self, size: int) -> bytes:
        """Up to `size` bytes ahead, of what has arrived (waiting for some), left unread."""
        if not self._buffer:
            await self._fill()
        return bytes(self._buffer[:size])


async def _read_ndjson(source: _Input) -> AsyncIterator[Frame]:
    while (line := await source.line(MAX_FRAME_BYTES)) is not None:
        if isinstance(line, _LongLine):
            logger.error(
                "Skipped an NDJSON line of %d bytes (the limit is %d)", line.size, MAX_FRAME_BYTES
            )
            yield OversizedFrame(line.head, line.size)
        elif line.strip():
            yield line


class _FramingError(Exception):
    pass


async def _read_lsp(source: _Input) -> AsyncIterator[Frame]:
    while True:
        usual = source.usual_header()
        if usual is not None:
            body = await source.exactly(usual)
            if body is None:
                return
            yield body
            continue
        try:
            length = await _header_block(source)
        except _FramingError as error:
            logger.error(
                "LSP framing error (%s); skipping to the next Content-Length header", error
            )
            if not await _resynchronise(source):
                return
            continue
        if length is None:
            return
        if length > MAX_FRAME_BYTES:
            logger.error("Skipped a message of %d bytes (the limit is %d)", length, MAX_FRAME_BYTES)
            head = await source.peek(OVERSIZED_HEAD_BYTES)
            # A client that lied about the length: what follows is the next message, not ours.
            yield OversizedFrame(_CONTENT_LENGTH.split(head, maxsplit=1)[0], length)
            # Skipped by scanning for the next header, not by counting: memory stays bounded,
            # and a wrong length cannot swallow the messages after it.
            if not await _resynchronise(source):
                return
            continue
        body = await source.exactly(length)
        if body is None:
            return
        yield body


async def _header_block(source: _Input) -> int | None:
    """The Content-Length of the next header block (None at the end of the input).

    Raises `_FramingError` for a block that is not one; a `Content-Length:` found inside a
    broken line is left unread, so the next block starts there.
    """
    length: int | None = None
    lines = 0
    while True:
        line = await source.line(MAX_HEADER_LINE_BYTES)
        if line is None:
            return None
        if isinstance(line, _LongLine):
            source.unread(line.tail)
            raise _FramingError(f"a header line of {line.size} bytes")
        if not line.strip():
            if lines == 0:
                continue  # blank lines between messages
            if length is None:
                raise _FramingError("a header block without Content-Length")
            return length
        lines += 1
        value = _content_length(source, line, lines)
        if value is not None:
            length = value


def _content_length(source: _Input, line: bytes, lines: int) -> int | None:
    """Check the `lines`th line of a header block: its Content-Length, None for another
    header. Raises `_FramingError` for a line that is not a header (leaving a header found
    in it unread)."""
    if lines > MAX_HEADER_LINES:
        if _CONTENT_LENGTH.match(line):  # the next message's header, after garbage ones
            source.unread(line)
        raise _FramingError(f"more than {MAX_HEADER_LINES} header lines")
    embedded = _CONTENT_LENGTH.search(line, 1)
    if embedded is not None:  # "garbageContent-Length: 5": a header after garbage
        source.unread(line[embedded.start() :])
        raise _FramingError(f"garbage before a header: {line[: embedded.start()][:80]!r}")
    header = _HEADER_LINE.fullmatch(line)
    if header is None:
        raise _FramingError(f"not a header line: {line[:80]!r}")
    name, value = header.groups()
    if name.lower() != b"content-length":
        return None
    if _LENGTH_VALUE.fullmatch(value) is None:
        raise _FramingError(f"a bad Content-Length: {value[:40]!r}")
    return int(value)


async def _resynchronise(source: _Input) -> bool:
    """Skip to the next `Content-Length:` header and leave it unread; False at the end."""
    while (line := await source.line(MAX_HEADER_LINE_BYTES)) is not None:
        text = line.tail if isinstance(line, _LongLine) else line
        found = _CONTENT_LENGTH.search(text)
        if found is not None:
            source.unread(text[found.start() :])
            return True
    return False


# Made once: `json.dumps` with an option builds an encoder per call, a third of the cost
# of a streamed chunk's message. (Without the circular check: a cycle is a RecursionError.)
_to_json = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
_to_ascii_json = json.JSONEncoder(check_circular=False).encode


def encode_message(message: dict[str, Any], *, headers: bool) -> bytes:
    """A message as it leaves: UTF-8 JSON, with its LSP header when `headers`."""
    try:
        body = _to_json(message).encode()
    except UnicodeEncodeError:  # a lone surrogate from elsewhere: escaped, it is valid JSON
        body = _to_ascii_json(message).encode()
    if headers:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    return body


FLUSH_BYTES = 64 * 1024  # a pipe's buffer: a burst this long is written at once
# How long a message may wait behind another written just before it, to leave with what
# follows in one write (a burst of deltas from one network read, a replay): a write per
# message would cost a system call each, and a reader that waits gets it this soon.
COALESCE_SECONDS = 0.0005
# What waits unwritten for a slow reader before a producer that asks (`drained`) waits too.
HIGH_WATER_BYTES = 1024 * 1024


class _Output(asyncio.BaseProtocol):
    """The output pipe's flow control: not writable while its transport holds more than the
    high-water mark unwritten (the reader is slower than the server), closed at the end."""

    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()  # nobody reads any more: producers need not wait
        if not self.closed.done():
            self.closed.set_result(None)


class FrameWriter:
    """A writer that frames and flushes messages, without ever blocking the event loop.

    For NDJSON each message gets its newline here (the LSP header comes with the message).
    A message leaves at once, unless another left less than `COALESCE_SECONDS` ago: then it
    waits, with those that follow, until that much time has passed since the first of them
    waited, `FLUSH_BYTES` have gathered, or the event loop's turn ends, whichever is first,
    and they leave in one write. So a reader that waits is never kept waiting longer than
    that, and a burst (deltas from one network read, a replay of thousands of updates)
    costs a system call per batch, not per message.

    Built by `open_frame_writer` on a pipe or socket, it writes through a non-blocking
    transport: what the reader has no room for yet waits in memory, and a producer of many
    messages (a replay) awaits `drained` to go at the reader's pace, so that memory stays
    bounded. On anything else (a file) it writes directly: a file never waits for a reader.
    """

    def __init__(
        self,
        stream: BinaryIO,
        framing: Framing,
        transport: asyncio.WriteTransport | None = None,
        output: _Output | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._clock = clock
        self._last_write_at = -math.inf  # when the last write left
        self._first_waiting_at = 0.0  # when the first message now pending began to wait
        self._transport = transport
        self._output = output
        self._suffix = b"\n" if framing == "ndjson" else b""
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        # Behind a message still being encoded (`write_later`), what follows waits its turn.
        self._queued: collections.deque[bytes | asyncio.Future[bytes]] = collections.deque()

    def write_later(self, encoding: Awaitable[bytes]) -> None:
        """Write the bytes `encoding` gives (a large message encoded off the event loop)
        when they are ready, in order: what is written meanwhile follows them."""
        future = asyncio.ensure_future(encoding)
        self._queued.append(future)
        future.add_done_callback(self._release)

    def _release(self, _ready: object = None) -> None:
        """Pass on, in order, what no unfinished encoding holds back any more."""
        while self._queued:
            head = self._queued[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    return
                self._queued.popleft()
                failed = head.cancelled() or head.exception() is not None
                if not failed and head.result():  # (the message's writer logs a failure)
                    self._write_now(head.result())
            else:
                self._queued.popleft()
                self._write_now(head)

    def write(self, data: bytes) -> None:
        if self._queued:
            self._queued.append(data)
            return
        self._write_now(data)

    def _write_now(self, data: bytes) -> None:
        now = self._clock()
        if not self._pending:
            if now - self._last_write_at >= COALESCE_SECONDS:
                self._pending.append(data + self._suffix if self._suffix else data)
                self.flush()  # the pipe has been quiet: nothing to wait for
                return
            self._first_waiting_at = now
        self._pending.append(data + self._suffix if self._suffix else data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= FLUSH_BYTES or now - self._first_waiting_at >= COALESCE_SECONDS:
            # A long burst (a replay of thousands of updates) leaves as it is built: the
            # client parses while the server goes on, and it is never held whole in memory.
            self.flush()  # the flush scheduled for the end of this turn finds nothing left
            return
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
        data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending.clear()
        self._pending_bytes = 0
        self._last_write_at = self._clock()
        if self._transport is None:
            self._stream.write(data)
            self._stream.flush()
        elif not self._transport.is_closing():  # else the reader is gone: nothing to do
            self._transport.write(data)

    async def drained(self) -> None:
        """Wait while more than HIGH_WATER_BYTES wait for the reader."""
        if self._output is not None:
            await self._output.writable.wait()

    async def aclose(self, timeout: float = 5.0) -> None:
        """Write what is left and close, waiting at most `timeout` seconds for a reader
        that has stopped reading."""
        encodings = [item for item in self._queued if isinstance(item, asyncio.Future)]
        if encodings:
            await asyncio.wait(encodings, timeout=timeout)
        self.flush()
        if self._transport is None or self._output is None:
            return
        self._transport.close()  # writes what it holds, then closes
        try:
            await asyncio.wait_for(asyncio.shield(self._output.closed), timeout)
        except TimeoutError:
            self._transport.abort()

    def close(self) -> None:
        self.flush()
        if self._transport is not None:
            self._transport.close()
        else:
            self._stream.close()


async def open_frame_writer(stream: BinaryIO, framing: Framing) -> FrameWriter:
    """A `FrameWriter` on `stream`: non-blocking on a pipe or a socket, unless the stream is
    stderr's too (`2>&1`: non-blocking mode belongs to the open file, and a log line written
    then could fail); directly otherwise."""
    mode = os.fstat(stream.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) or _shared_with_stderr(stream):
        return FrameWriter(stream, framing)
    loop = asyncio.get_running_loop()
    transport, output = await loop.connect_write_pipe(_Output, stream)
    transport.set_write_buffer_limits(high=HIGH_WATER_BYTES)
    return FrameWriter(stream, framing, transport, output)


def _shared_with_stderr(stream: BinaryIO) -> bool:
    try:
        ours, theirs = os.fstat(stream.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # no stderr
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


async def stdin_reader() -> asyncio.StreamReader:
    """An asyncio reader over this process's stdin (a pipe, or a file or terminal)."""
    loop = asyncio.get_running_loop()
    # A small limit: the reader pauses the pipe while that much waits unread (backpressure).
    reader = asyncio.StreamReader(limit=_READ_BYTES)
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
