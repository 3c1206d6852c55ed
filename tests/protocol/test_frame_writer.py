"""The server's writer: a message to a quiet pipe leaves at once; those that follow it closely
leave together, in order, within `COALESCE_SECONDS` or at the end of the loop's turn; a long
burst (a replay of thousands of updates) leaves as it is built, every `FLUSH_BYTES`; a
large message, encoded off the loop, keeps its place. And how a message is encoded and
weighed (`dispatch._is_large`) on its way there."""

from __future__ import annotations

import asyncio
import io
import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st
from parley.protocol.dispatch import OFF_LOOP_MESSAGE_CHARS, _is_large
from parley.protocol.framing import (
    COALESCE_SECONDS,
    FLUSH_BYTES,
    FrameWriter,
    encode_message,
    open_frame_writer,
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_message_to_a_quiet_pipe_leaves_before_the_loop_turns() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    with open(write_end, "wb", buffering=0) as pipe, open(read_end, "rb", buffering=0) as out:
        writer = await open_frame_writer(pipe, "ndjson")
        writer.write(b'{"n": 1}')
        assert out.read() == b'{"n": 1}\n'  # already in the pipe: the reader need not wait
        await writer.aclose()


async def test_a_burst_leaves_its_first_message_at_once_and_the_rest_in_one_write() -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream, "ndjson", clock=Clock())
    for n in range(4):
        writer.write(b'{"n": %d}' % n)
    assert stream.getvalue() == b'{"n": 0}\n'  # the rest wait for the turn's end
    await asyncio.sleep(0)
    assert stream.getvalue() == b'{"n": 0}\n{"n": 1}\n{"n": 2}\n{"n": 3}\n'


async def test_a_message_waits_behind_another_no_longer_than_the_coalescing_bound() -> None:
    clock = Clock()
    stream = io.BytesIO()
    writer = FrameWriter(stream, "ndjson", clock=clock)
    writer.write(b'{"n": 0}')
    writer.write(b'{"n": 1}')  # waits: n 0 has just left
    clock.now += COALESCE_SECONDS / 2
    writer.write(b'{"n": 2}')
    assert stream.getvalue() == b'{"n": 0}\n'
    clock.now += COALESCE_SECONDS / 2  # n 1 has waited the bound: it leaves, with n 3
    writer.write(b'{"n": 3}')
    assert stream.getvalue() == b'{"n": 0}\n{"n": 1}\n{"n": 2}\n{"n": 3}\n'
    clock.now += COALESCE_SECONDS  # quiet since: the next leaves at once
    writer.write(b'{"n": 4}')
    assert stream.getvalue().endswith(b'{"n": 3}\n{"n": 4}\n')


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(st.binary(min_size=1, max_size=300), max_size=40),
    gaps=st.lists(st.sampled_from([0.0, COALESCE_SECONDS / 3, COALESCE_SECONDS]), max_size=40),
)
def test_coalesced_messages_keep_their_order_and_bytes(
    messages: list[bytes], gaps: list[float]
) -> None:
    async def written() -> bytes:
        clock = Clock()
        stream = io.BytesIO()
        writer = FrameWriter(stream, "lsp", clock=clock)
        for message, gap in zip(messages, gaps + [0.0] * len(messages), strict=False):
            clock.now += gap
            writer.write(message)
        await asyncio.sleep(0)
        return stream.getvalue()

    assert asyncio.run(written()) == b"".join(messages)


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
