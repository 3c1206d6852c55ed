"""The server's writer: messages of one event-loop turn leave in one write, but a long burst
(a replay of thousands of updates) leaves as it is built, every `FLUSH_BYTES`, in order."""

from __future__ import annotations

import asyncio
import io

from parley.protocol.framing import FLUSH_BYTES, FrameWriter


async def test_a_short_burst_leaves_in_one_write_at_the_end_of_the_turn() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "ndjson")
    for n in range(3):
        writer.write(b'{"n": %d}' % n)
    assert stream.getvalue() == b""  # not yet: the flush is scheduled for the turn's end
    await asyncio.sleep(0)
    assert stream.getvalue() == b'{"n": 0}\n{"n": 1}\n{"n": 2}\n'


async def test_a_long_burst_is_written_as_it_is_built_in_order() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "ndjson")
    message = b'{"update": "%s"}' % (b"x" * 1000)
    count = 3 * FLUSH_BYTES // len(message)
    for _ in range(count):
        writer.write(message)
    written_in_the_turn = len(stream.getvalue())
    assert written_in_the_turn >= 2 * FLUSH_BYTES  # the client can read while we go on
    await asyncio.sleep(0)
    assert stream.getvalue() == (message + b"\n") * count
