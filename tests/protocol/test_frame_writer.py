"""The server's writer: messages of one event-loop turn leave in one write, but a long burst
(a replay of thousands of updates) leaves as it is built, every `FLUSH_BYTES`, in order; a
large message, encoded off the loop, keeps its place. And how a message is encoded and
weighed (`dispatch._is_large`) on its way there."""

from __future__ import annotations

import asyncio
import io
import json

from parley.protocol.dispatch import OFF_LOOP_MESSAGE_CHARS, _is_large
from parley.protocol.framing import FLUSH_BYTES, FrameWriter, encode_message


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


async def test_what_is_written_behind_a_message_still_being_encoded_waits_its_turn() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "ndjson")
    encoded: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    writer.write(b'{"n": 1}')
    writer.write_later(encoded)  # a large message, encoded off the loop
    writer.write(b'{"n": 3}')
    await asyncio.sleep(0.01)
    assert stream.getvalue() == b'{"n": 1}\n'
    encoded.set_result(b'{"n": 2}')
    await asyncio.sleep(0.01)
    assert stream.getvalue() == b'{"n": 1}\n{"n": 2}\n{"n": 3}\n'


async def test_a_message_that_could_not_be_encoded_holds_nothing_back() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "lsp")
    failed: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    writer.write_later(failed)
    writer.write(b"after")
    failed.set_exception(TypeError("not JSON"))
    await asyncio.sleep(0.01)
    assert stream.getvalue() == b"after"


def test_a_message_is_encoded_as_json_would_and_a_lone_surrogate_is_escaped() -> None:
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "café ✓"}}
    assert (
        encode_message(message, headers=False) == json.dumps(message, ensure_ascii=False).encode()
    )
    framed = encode_message(message, headers=True)
    header, _, body = framed.partition(b"\r\n\r\n")
    assert header == b"Content-Length: %d" % len(body) and json.loads(body) == message
    lone = {"text": "a\ud800b"}
    assert json.loads(encode_message(lone, headers=False)) == lone


def test_a_streamed_delta_is_small_unless_its_text_is_large() -> None:
    def delta(text: str) -> dict[str, object]:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        return {"method": "session/update", "params": {"sessionId": "s", "update": update}}

    assert not _is_large(delta("Width times height."))
    assert _is_large(delta("x" * (OFF_LOOP_MESSAGE_CHARS + 1)))
    # Any other message is weighed whole.
    assert _is_large({"id": 1, "result": {"text": "z" * (OFF_LOOP_MESSAGE_CHARS + 1)}})
    assert not _is_large({"id": 1, "result": {"text": "z" * 1000}})
