"""Which messages the server's reader hands on (protocol/framing.py), in-process: every
well-formed frame, in order, however the bytes arrive; a broken one skipped without losing the
next; an oversized one refused with enough of its start to answer it. The same rules against
the running server are in test_server_robustness.py; these run against every mutant of
framing.py (scripts/mutation)."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import pty
import select
import signal
import subprocess
import sys
import tty
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parley.protocol.framing import (
    FLUSH_BYTES,
    MAX_FRAME_BYTES,
    MAX_HEADER_LINE_BYTES,
    MAX_HEADER_LINES,
    OVERSIZED_HEAD_BYTES,
    Frame,
    FrameWriter,
    OversizedFrame,
    read_frames,
    stdin_reader,
)

HELLO = b'{"jsonrpc":"2.0","id":1,"method":"hello"}'
AFTER = b'{"jsonrpc":"2.0","id":2,"method":"after"}'


def lsp(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def frames_of(data: bytes, framing: str, cuts: list[int] | None = None) -> list[Frame]:
    """The frames read from `data`, which arrives in pieces cut at `cuts`."""
    reader = asyncio.StreamReader()
    bounds = [0, *sorted({cut % (len(data) + 1) for cut in cuts or []}), len(data)]
    for start, end in itertools.pairwise(bounds):
        reader.feed_data(data[start:end])
    reader.feed_eof()
    return [frame async for frame in read_frames(reader, framing)]  # type: ignore[arg-type]


@given(
    bodies=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
    extra_header=st.booleans(),
)
async def test_lsp_frames_come_whole_and_in_order_however_the_bytes_arrive(
    bodies: list[bytes], cuts: list[int], extra_header: bool
) -> None:
    extra = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" if extra_header else b""
    data = b"\r\n".join(
        b"Content-Length: %d\r\n%s\r\n%s" % (len(body), extra, body) for body in bodies
    )
    assert await frames_of(data, "lsp", cuts) == bodies


@given(
    lines=st.lists(
        st.binary(min_size=1, max_size=200).filter(lambda b: b"\n" not in b and b.strip()),
        min_size=1,
        max_size=5,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=1200), max_size=8),
)
async def test_ndjson_lines_come_whole_and_in_order_and_blank_lines_are_skipped(
    lines: list[bytes], cuts: list[int]
) -> None:
    data = b"\n \n".join(line for line in lines) + b"\n\n"
    assert await frames_of(data, "ndjson", cuts) == [line + b"\n" for line in lines]


async def test_the_last_ndjson_line_needs_no_newline() -> None:
    assert await frames_of(HELLO + b"\n" + AFTER, "ndjson") == [HELLO + b"\n", AFTER]


async def test_a_header_is_read_whatever_its_case_and_spacing() -> None:
    data = b"content-LENGTH:\t %d \r\n\r\n%s" % (len(HELLO), HELLO) + lsp(AFTER)
    assert await frames_of(data, "lsp") == [HELLO, AFTER]


@pytest.mark.parametrize(
    "broken",
    [
        b"Content-Length: abc\r\n\r\n{}",  # not a number
        b"Content-Length: -5\r\n\r\n{}",
        b"Content-Length: 1234567890123456\r\n\r\n{}",  # more digits than any real length
        b"Content-Type: text/plain\r\n\r\n{}",  # no Content-Length
        b"Content Length: 2\r\n\r\n{}",  # not a header line
    ],
)
async def test_a_broken_header_block_is_skipped_and_the_next_message_is_read(
    broken: bytes,
) -> None:
    assert await frames_of(lsp(HELLO) + broken + lsp(AFTER), "lsp") == [HELLO, AFTER]


async def test_a_header_line_up_to_the_limit_is_read_one_byte_more_is_not() -> None:
    def padded(size: int) -> bytes:  # a header line of `size` bytes with its CRLF
        return b"X-Pad: " + b"a" * (size - len(b"X-Pad: \r\n")) + b"\r\n"

    at_limit = b"Content-Length: %d\r\n%s\r\n%s" % (
        len(HELLO),
        padded(MAX_HEADER_LINE_BYTES),
        HELLO,
    )
    over = b"Content-Length: %d\r\n%s\r\n%s" % (
        len(HELLO),
        padded(MAX_HEADER_LINE_BYTES + 1),
        HELLO,
    )
    assert await frames_of(at_limit + lsp(AFTER), "lsp") == [HELLO, AFTER]
    assert await frames_of(over + lsp(AFTER), "lsp") == [AFTER]


async def test_up_to_the_limit_of_header_lines_is_read_one_more_is_not() -> None:
    def block(lines: int) -> bytes:
        extra = b"".join(b"X-%d: y\r\n" % n for n in range(lines - 1))
        return b"Content-Length: %d\r\n%s\r\n%s" % (len(HELLO), extra, HELLO)

    assert await frames_of(block(MAX_HEADER_LINES) + lsp(AFTER), "lsp") == [HELLO, AFTER]
    assert await frames_of(block(MAX_HEADER_LINES + 1) + lsp(AFTER), "lsp") == [AFTER]


async def test_a_header_after_too_many_garbage_lines_starts_the_next_message() -> None:
    garbage = b"".join(b"X-%d: y\r\n" % n for n in range(MAX_HEADER_LINES))
    assert await frames_of(garbage + lsp(HELLO) + lsp(AFTER), "lsp") == [HELLO, AFTER]


async def test_a_header_glued_to_garbage_is_still_found() -> None:
    assert await frames_of(b"garbage" + lsp(HELLO) + lsp(AFTER), "lsp") == [HELLO, AFTER]


async def test_a_header_at_the_end_of_a_long_garbage_line_is_still_found() -> None:
    # The reader keeps the last 1024 bytes of a line too long to be a header: a header
    # that starts exactly there is found.
    header = b"Content-Length:" + b" " * (1024 - len(b"Content-Length:") - len(b"41\r\n"))
    header += b"%d\r\n" % len(HELLO)
    assert len(header) == 1024
    data = b"x" * (2 * MAX_HEADER_LINE_BYTES) + header + b"\r\n" + HELLO + lsp(AFTER)
    assert await frames_of(data, "lsp") == [HELLO, AFTER]


async def test_blank_lines_between_messages_are_allowed(caplog: pytest.LogCaptureFixture) -> None:
    assert await frames_of(b"\r\n\r\n" + lsp(HELLO) + b"\n" + lsp(AFTER), "lsp") == [HELLO, AFTER]
    assert caplog.records == []  # no framing error in the server's log


async def test_a_bad_length_is_named_in_the_log_cut_at_forty_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    value = b"9" * 16 + b"x" * 40
    assert await frames_of(b"Content-Length: %s\r\n\r\n" % value + lsp(AFTER), "lsp") == [AFTER]
    assert [record.getMessage() for record in caplog.records] == [
        f"LSP framing error (a bad Content-Length: {value[:40]!r}); skipping to the next "
        "Content-Length header"
    ]


@pytest.mark.parametrize("extra", [b"", b"Content-Type: x\r\n"])
async def test_a_declared_length_over_the_limit_is_refused_with_its_start(extra: bytes) -> None:
    body = b'{"jsonrpc":"2.0","id":7,"method":"big","params":"' + b"z" * 10_000
    header = b"Content-Length: %d\r\n%s\r\n" % (MAX_FRAME_BYTES + 1, extra)
    frames = await frames_of(header + body + lsp(AFTER), "lsp")
    assert frames == [OversizedFrame(body[:OVERSIZED_HEAD_BYTES], MAX_FRAME_BYTES + 1), AFTER]


async def test_the_start_of_an_oversized_frame_stops_where_the_next_message_starts() -> None:
    header = b"Content-Length: %d\r\n\r\n" % (MAX_FRAME_BYTES + 1)
    frames = await frames_of(header + HELLO + lsp(AFTER), "lsp")
    assert frames == [OversizedFrame(HELLO, MAX_FRAME_BYTES + 1), AFTER]


@pytest.mark.parametrize("extra", [b"", b"Content-Type: x\r\n"])
async def test_a_length_at_the_limit_is_read_not_refused(extra: bytes) -> None:
    # The input ends before the frame does: nothing is handed on, and nothing is refused.
    header = b"Content-Length: %d\r\n%s\r\n" % (MAX_FRAME_BYTES, extra)
    assert await frames_of(header + HELLO, "lsp") == []


async def test_a_frame_cut_short_by_the_end_of_the_input_is_dropped() -> None:
    assert await frames_of(lsp(HELLO) + lsp(AFTER)[:-1], "lsp") == [HELLO]
    unusual = b"Content-Length: 99\r\nX: y\r\n\r\n" + HELLO
    assert await frames_of(lsp(HELLO) + unusual, "lsp") == [HELLO]
    assert await frames_of(lsp(HELLO) + b"Content-Length: 5\r\n", "lsp") == [HELLO]


async def test_an_ndjson_line_over_the_limit_is_refused_with_its_start() -> None:
    # Longer than the limit by more than one read: it is skipped to its very end.
    line = b'{"id":3,' + b" " * (MAX_FRAME_BYTES + 300_000) + b"}\n"
    frames = await frames_of(line + AFTER + b"\n", "ndjson")
    assert frames == [OversizedFrame(line[:OVERSIZED_HEAD_BYTES], len(line)), AFTER + b"\n"]


async def test_an_ndjson_line_at_the_limit_is_read_whole() -> None:
    line = b'{"id":3,' + b" " * (MAX_FRAME_BYTES - 10) + b"}\n"
    assert len(line) == MAX_FRAME_BYTES
    frames = await frames_of(line + AFTER + b"\n", "ndjson")
    assert [len(frame) for frame in frames] == [MAX_FRAME_BYTES, len(AFTER) + 1]  # type: ignore[arg-type]


async def test_lsp_framing_adds_no_newline_and_ndjson_one() -> None:
    for framing, written in (("lsp", HELLO), ("ndjson", HELLO + b"\n")):
        stream = io.BytesIO()
        writer = FrameWriter(stream, framing)  # type: ignore[arg-type]
        writer.write(HELLO)
        await asyncio.sleep(0)
        assert stream.getvalue() == written


def test_without_an_event_loop_a_message_is_written_at_once() -> None:
    stream = io.BytesIO()
    FrameWriter(stream, "ndjson").write(HELLO)
    assert stream.getvalue() == HELLO + b"\n"


async def test_close_sends_what_is_pending_then_closes() -> None:
    class Recorder(io.BytesIO):
        def close(self) -> None:
            self.sent = self.getvalue()
            super().close()

    stream = Recorder()
    writer = FrameWriter(stream, "ndjson")
    writer.write(HELLO)
    writer.close()
    assert stream.sent == HELLO + b"\n" and stream.closed


async def test_empty_ndjson_lines_between_messages_are_skipped() -> None:
    assert await frames_of(HELLO + b"\n\n\n" + AFTER + b"\n", "ndjson") == [
        HELLO + b"\n",
        AFTER + b"\n",
    ]


async def test_a_header_after_one_byte_of_garbage_is_still_found() -> None:
    assert await frames_of(b"x" + lsp(HELLO) + lsp(AFTER), "lsp") == [HELLO, AFTER]


async def test_an_oversized_frame_keeps_its_first_four_kibibytes() -> None:
    body = b'{"jsonrpc":"2.0","id":7,' + b" " * 20_000
    header = b"Content-Length: %d\r\n\r\n" % (MAX_FRAME_BYTES + 1)
    frames = await frames_of(header + body, "lsp")
    assert [len(frame.head) for frame in frames] == [4096]  # type: ignore[union-attr]


async def test_a_burst_of_the_flush_size_leaves_at_once() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "lsp", clock=lambda: 0.0)  # a burst: no time passes
    writer.write(b"w")  # leaves at once; what follows it waits to leave together
    writer.write(b"x" * (FLUSH_BYTES - 1))
    assert stream.getvalue() == b"w"  # under the size: at the end of the loop's turn
    writer.write(b"y")
    assert stream.getvalue() == b"w" + b"x" * (FLUSH_BYTES - 1) + b"y"  # at the size: at once
    writer.write(b"z" * FLUSH_BYTES)  # and so is the next burst of that size
    assert stream.getvalue().endswith(b"y" + b"z" * FLUSH_BYTES)


@pytest.mark.parametrize("source", ["pipe", "file"])
async def test_the_server_reads_its_input_from_a_pipe_or_a_file(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = lsp(HELLO) + lsp(AFTER)
    if source == "file":
        (tmp_path / "input").write_bytes(data)
        stdin = open(tmp_path / "input", "rb")  # noqa: SIM115  # closed below
    else:
        read_end, write_end = os.pipe()
        os.write(write_end, data)
        os.close(write_end)
        stdin = open(read_end, "rb")  # noqa: SIM115
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    try:
        reader = await stdin_reader()
        frames = [frame async for frame in read_frames(reader, "lsp")]
    finally:
        stdin.close()
    assert frames == [HELLO, AFTER]


async def test_a_line_that_is_no_header_is_named_in_the_log_cut_at_eighty_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    line = b"no header here " + b"y" * 100 + b"\r\n"
    assert await frames_of(line + b"\r\n" + lsp(AFTER), "lsp") == [AFTER]
    assert [record.getMessage() for record in caplog.records] == [
        f"LSP framing error (not a header line: {line[:80]!r}); skipping to the next "
        "Content-Length header"
    ]


@pytest.mark.parametrize("extra", [b"", b"Content-Type: x\r\n"])
async def test_the_limit_is_64_mib(extra: bytes) -> None:
    at_limit = b"Content-Length: 67108864\r\n%s\r\n" % extra
    over = b"Content-Length: 67108865\r\n%s\r\n" % extra
    assert await frames_of(at_limit + HELLO, "lsp") == []  # waits for the rest: not refused
    assert await frames_of(over + HELLO, "lsp") == [OversizedFrame(HELLO, 67_108_865)]


async def test_garbage_before_a_header_is_named_in_the_log_cut_at_eighty_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    garbage = b"g" * 100
    assert await frames_of(garbage + lsp(HELLO), "lsp") == [HELLO]
    assert [record.getMessage() for record in caplog.records] == [
        f"LSP framing error (garbage before a header: {garbage[:80]!r}); skipping to the next "
        "Content-Length header"
    ]


async def test_the_header_limits_are_eight_kibibytes_a_line_and_32_lines() -> None:
    # The numbers themselves, not the module's constants: a client whose headers fit these
    # limits is read, whatever the constants are changed to.
    def block(padding: int, lines: int) -> bytes:
        pad = b"X-Pad: " + b"a" * (padding - len(b"X-Pad: \r\n")) + b"\r\n"
        extra = b"".join(b"X-%d: y\r\n" % n for n in range(lines - 2))
        return b"Content-Length: %d\r\n%s%s\r\n%s" % (len(HELLO), pad, extra, HELLO)

    assert await frames_of(block(8192, 32) + lsp(AFTER), "lsp") == [HELLO, AFTER]
    assert await frames_of(block(8193, 2) + lsp(AFTER), "lsp") == [AFTER]
    assert await frames_of(block(100, 33) + lsp(AFTER), "lsp") == [AFTER]


@pytest.mark.parametrize("extra", [b"", b"Content-Type: x\r\n"])
async def test_a_frame_larger_than_one_read_comes_whole(extra: bytes) -> None:
    # The reader asks for 64 KiB at a time: the rest of this body is read past its buffer.
    body = b'{"jsonrpc":"2.0","id":5,"method":"big","params":"' + b"b" * 200_000 + b'"}'
    data = b"Content-Length: %d\r\n%s\r\n%s" % (len(body), extra, body) + lsp(AFTER)
    assert await frames_of(data, "lsp") == [body, AFTER]
    assert await frames_of(data, "lsp", cuts=[70_000, 150_000]) == [body, AFTER]


async def test_after_a_flush_a_burst_under_the_flush_size_waits_for_the_end_of_the_turn() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "lsp")
    writer.write(b"x" * FLUSH_BYTES)  # leaves at once
    writer.write(b"y" * (FLUSH_BYTES - 1))
    assert stream.getvalue() == b"x" * FLUSH_BYTES  # the count began again at zero
    await asyncio.sleep(0)
    assert stream.getvalue() == b"x" * FLUSH_BYTES + b"y" * (FLUSH_BYTES - 1)


def test_a_server_reading_a_terminal_ends_on_sigterm(tmp_path: Path) -> None:
    # A terminal cannot be polled: a thread reads it, blocked in a read no signal ends.
    # The server must still exit when told to stop, with the terminal still open.
    controller, terminal = pty.openpty()
    tty.setraw(terminal)  # bytes pass as written: no echo, no CR to LF
    env = {
        **os.environ,
        "PARLEY_HOME": str(tmp_path / "home"),
        "PARLEY_CONFIG": str(tmp_path / "no-config.toml"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "parley", "serve", "--framing", "ndjson"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
        request["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
        os.write(controller, json.dumps(request).encode() + b"\n")
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        assert ready, "no answer to initialize"
        assert json.loads(server.stdout.readline())["id"] == 1
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) is not None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        os.close(controller)
        os.close(terminal)


async def test_a_client_writing_faster_than_the_server_reads_is_held_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a pipe the reader stops taking bytes while 128 KiB wait unread: the client's writes
    # then block instead of the server buffering without bound.
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    stdin = open(read_end, "rb")  # noqa: SIM115  # closed below
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    written = 0
    try:
        reader = await stdin_reader()
        full_for = 0
        while full_for < 20 and written < 4 * 1024 * 1024:
            try:
                written += os.write(write_end, b"x" * 65536)
                full_for = 0
            except BlockingIOError:
                full_for += 1  # full for a second on end: nothing takes the bytes
            await asyncio.sleep(0.05)
        assert written < 1024 * 1024
        assert len(await reader.read(65536)) > 0
    finally:
        os.close(write_end)
        stdin.close()


async def test_a_last_ndjson_line_over_the_limit_without_a_newline_is_refused() -> None:
    line = b'{"id":4,' + b" " * MAX_FRAME_BYTES
    frames = await frames_of(HELLO + b"\n" + line, "ndjson")
    assert frames == [HELLO + b"\n", OversizedFrame(line[:OVERSIZED_HEAD_BYTES], len(line))]


async def test_a_long_lines_newline_at_the_start_of_a_read_ends_it() -> None:
    # The reader takes 64 KiB at a time: this line's newline is the first byte of a read,
    # after the line was found too long. The next message is not part of it.
    line = b'{"id":5,' + b" " * (65536 * 1026 - 8)
    more = [AFTER + b"\n"] * 3000  # past the end of that read
    frames = await frames_of(line + b"\n" + b"".join(more), "ndjson")
    assert frames == [OversizedFrame(line[:OVERSIZED_HEAD_BYTES], len(line) + 1), *more]


@pytest.mark.parametrize("size", [MAX_FRAME_BYTES + 1, 10**12])
async def test_an_oversized_frame_after_another_is_refused_not_waited_for(size: int) -> None:
    # A usual header after a message is read at once: over the limit, it is refused too.
    data = lsp(HELLO) + b"Content-Length: %d\r\n\r\n" % size + AFTER + lsp(HELLO)
    assert await frames_of(data, "lsp") == [HELLO, OversizedFrame(AFTER, size), HELLO]
