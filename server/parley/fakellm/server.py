"""`FakeLLM`: a local HTTP server speaking the OpenAI and Anthropic wire formats.

One thread per connection (`ThreadingHTTPServer`), HTTP/1.1 keep-alive. JSON answers carry a
Content-Length; streams use `Transfer-Encoding: chunked`, one HTTP chunk per SSE event, so a
connection dropped mid-stream is a protocol error the SDKs raise (an unterminated chunked
body) rather than a clean end of the body.

Endpoints: `POST /v1/chat/completions` (OpenAI; also `/beta/chat/completions`, as under
DeepSeek's beta base URL), `POST /v1/messages` (Anthropic), and for tests written in other
languages `POST /_fake/script` (replace the script with a JSON list of replies, see `codec`)
and `GET /_fake/requests` (the recorded requests as JSON). With a `context_limit`
(`context_limit.py`): longer requests refused, and `GET /props` (llama.cpp) and
`POST /api/show` (Ollama) when it says so.
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

import attrs

from parley.fakellm import anthropic_wire, openai_wire
from parley.fakellm.codec import recorded_requests_to_json, replies_from_json
from parley.fakellm.connection import LAST_CHUNK, ClientSocket, chunk_frame
from parley.fakellm.context_limit import ContextLimit, ollama_show_body, props_body, refusal
from parley.fakellm.prompt_cache import PromptCache
from parley.fakellm.recordings import json_file_body, sse_file_events
from parley.fakellm.script import Fault, RecordedRequest, Reply
from parley.fakellm.wire import WireFormat, compact_json, cut_stream

_WIRES: dict[str, WireFormat] = {
    openai_wire.WIRE.path: openai_wire.WIRE,
    # Under DeepSeek's beta base URL (`…/beta`, its chat prefix completion): the OpenAI wire.
    "/beta/chat/completions": openai_wire.WIRE,
    anthropic_wire.WIRE.path: anthropic_wire.WIRE,
}
FAULT_KINDS = frozenset({"http", "drop", "error_event", "stall", "hold", "echo_headers"})
_REASON_PHRASES = {529: "Overloaded"}  # http.server knows no phrase for Anthropic's 529
NO_RESPONSE = 0  # RecordedRequest.status when the connection closed before any status line


@attrs.frozen
class _Choice:
    """The reply chosen for one request, and the fault that applies to this request, if any."""

    index: int
    reply: Reply
    fault: Fault | None


def check_script(replies: Sequence[Reply]) -> None:
    """Raise ValueError for what would otherwise fail later, mid-request."""
    for index, reply in enumerate(replies):
        for variant in (reply, reply.sync):
            if variant is None:
                continue
            if variant.fault is not None and variant.fault.kind not in FAULT_KINDS:
                raise ValueError(
                    f"reply {index}: unknown fault kind {variant.fault.kind!r}, "
                    f"expected one of {sorted(FAULT_KINDS)}"
                )
            for path in (variant.raw_stream, variant.raw_json):
                if path is not None and not path.is_file():
                    raise ValueError(f"reply {index}: no such file {path}")


class _ScriptState:
    """The current script and how often each reply's fault has fired (thread-safe)."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        check_script(replies)
        self._lock = threading.Lock()
        self._replies = list(replies)
        self._fault_uses: collections.Counter[tuple[int, bool]] = collections.Counter()

    def replace(self, replies: Sequence[Reply]) -> None:
        check_script(replies)
        with self._lock:
            self._replies = list(replies)
            self._fault_uses.clear()

    def choose(self, body: dict[str, Any], stream: bool) -> _Choice | None:
        """The reply for a request: index = its number of assistant messages (see script.py)."""
        messages = body.get("messages")
        assistant_turns = sum(
            1
            for message in (messages if isinstance(messages, list) else [])
            if isinstance(message, dict) and message.get("role") == "assistant"
        )
        if assistant_turns and messages[-1].get("role") == "assistant":
            assistant_turns -= 1  # a final assistant message to continue is no earlier turn
        with self._lock:
            if not self._replies:
                return None
            index = min(assistant_turns, len(self._replies) - 1)
            reply = self._replies[index]
            uses_sync = not stream and reply.sync is not None
            if uses_sync:
                assert reply.sync is not None
                reply = reply.sync
            fault = reply.fault
            fault_key = (index, uses_sync)
            if fault is not None and (stream or not fault.streaming_only):
                if self._fault_uses[fault_key] < fault.times:
                    self._fault_uses[fault_key] += 1
                else:
                    fault = None
            else:
                fault = None
            return _Choice(index, reply, fault)


class _Recorder:
    """Recorded requests in arrival order, and a way to wait for them (thread-safe)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next_arrival = 0
        self._ended: dict[int, RecordedRequest] = {}

    def arrival(self) -> int:
        """A number for a request that has just arrived, to keep arrival order."""
        with self._changed:
            self._next_arrival += 1
            return self._next_arrival

    def put(self, arrival: int, request: RecordedRequest) -> None:
        with self._changed:
            self._ended[arrival] = request
            self._changed.notify_all()

    def amend(self, arrival: int, **changes: Any) -> None:
        with self._changed:
            if arrival in self._ended:
                self._ended[arrival] = attrs.evolve(self._ended[arrival], **changes)

    def clear(self) -> None:
        with self._changed:
            self._ended.clear()

    def snapshot(self) -> list[RecordedRequest]:
        with self._changed:
            return [self._ended[arrival] for arrival in sorted(self._ended)]

    def wait_for(self, count: int, timeout: float) -> list[RecordedRequest]:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._ended) >= count, timeout):
                raise TimeoutError(
                    f"fake LLM: waited {timeout}s for {count} requests, got {len(self._ended)}"
                )
            return [self._ended[arrival] for arrival in sorted(self._ended)]


@attrs.define
class _Exchange:
    """What is known about one LLM request while it is answered; becomes a RecordedRequest."""

    arrival: int
    path: str
    api: str
    started_at: float
    stream: bool = False
    body: dict[str, Any] = attrs.field(factory=dict)
    reply_index: int = -1
    chunks_total: int = 0
    status: int = 200
    chunk_write_times: list[float] = attrs.field(factory=list)

    def recorded(self, chunks_sent: int = 0, client_hung_up: bool = False) -> RecordedRequest:
        return RecordedRequest(
            path=self.path,
            api=self.api,
            stream=self.stream,
            body=self.body,
            reply_index=self.reply_index,
            chunks_total=self.chunks_total,
            chunks_sent=chunks_sent,
            client_hung_up=client_hung_up,
            status=self.status,
            started_at=self.started_at,
            ended_at=time.monotonic(),
            chunk_write_times=tuple(self.chunk_write_times[:chunks_sent]),
        )


class _FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # benchmarks open many connections at once

    def __init__(self, address: tuple[str, int], fake: FakeLLM) -> None:
        self.fake = fake
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def close_open_connections(self) -> None:
        """Unblock handler threads (idle keep-alive reads, stalls) so they end."""
        with self.connections_lock:
            connections = list(self.open_connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client going away is normal for this server; anything else is a bug worth seeing.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


_WRITE_SIZE = 64 * 1024


def _unpaced_batch_end(frames: list[bytes], start: int, limit: int) -> int:
    """Where the next write of an unpaced stream ends: one write per ~64 KiB, not per event.

    Writing each of 10,000 small events on its own costs a system call (and a hang-up check)
    each; the client cannot tell the difference, since nothing paces them anyway.
    """
    end, size = start, 0
    while end < limit and (end == start or size + len(frames[end]) <= _WRITE_SIZE):
        size += len(frames[end])
        end += 1
    return end


def _stream_pieces(wire: WireFormat, reply: Reply, request_body: dict[str, Any]) -> list[bytes]:
    """What a streamed reply writes, one HTTP chunk each: its events, or its `byte_cuts`."""
    if reply.raw_stream is not None:
        events = sse_file_events(reply.raw_stream)
    else:
        events = wire.stream_events(reply, request_body)
    return events if reply.byte_cuts is None else cut_stream(events, reply.byte_cuts)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FakeHTTPServer

    def setup(self) -> None:
        super().setup()
        self.client_socket = ClientSocket(self.connection)
        with self.server.connections_lock:
            self.server.open_connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.open_connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and benchmarks would drown in access logs

    # --- routing ---------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        wire = _WIRES.get(path)
        if wire is not None:
            self._answer_llm_request(wire, path)
        elif path == "/_fake/script":
            self._set_script()
        elif path == "/api/show" and (limit := self._limit_serving("ollama_show")):
            self._read_body()
            self._send_json(200, ollama_show_body(limit))
        else:
            self._read_body()
            self._send_json(404, {"error": f"fake LLM: no endpoint POST {path}"})

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_fake/requests":
            self._send_json(200, recorded_requests_to_json(self.server.fake.requests))
        elif path == "/props" and (limit := self._limit_serving("props")):
            self._send_json(200, props_body(limit))
        else:
            self._send_json(404, {"error": f"fake LLM: no endpoint GET {path}"})

    def _limit_serving(self, endpoint: str) -> ContextLimit | None:
        """The context limit, when it serves a server's own `endpoint` (the ask recorded)."""
        limit = self.server.fake.context_limit
        if limit is None or not getattr(limit, endpoint):
            return None
        self.server.fake.window_questions.append(endpoint)
        return limit

    # --- control endpoints -----------------------------------------------------------------

    def _set_script(self) -> None:
        try:
            replies = replies_from_json(json.loads(self._read_body()))
            self.server.fake.set_script(replies)
        except ValueError as error:  # includes JSONDecodeError
            self._send_json(400, {"error": str(error)})
            return
        self._send_json(200, {"replies": len(replies)})

    # --- LLM requests ----------------------------------------------------------------------

    def _answer_llm_request(self, wire: WireFormat, path: str) -> None:
        fake = self.server.fake
        exchange = _Exchange(
            arrival=fake._recorder.arrival(),
            path=path,
            api=wire.api,
            started_at=time.monotonic(),
        )
        try:
            body = json.loads(self._read_body())
            if not isinstance(body, dict):
                raise ValueError("the request body is not a JSON object")
        except ValueError as error:
            self._send_error(exchange, wire, 400, message=f"fake LLM: {error}")
            return
        exchange.body = body
        exchange.stream = bool(body.get("stream"))
        too_long = refusal(fake.context_limit, wire.api, body) if fake.context_limit else None
        if too_long is not None:
            self._send_bytes(exchange, 400, compact_json(too_long).encode())
            return
        choice = fake._script.choose(body, exchange.stream)
        if choice is None:
            self._send_error(exchange, wire, 500, message="fake LLM: no script is set")
            return
        exchange.reply_index = choice.index
        reply = choice.reply
        if fake.prompt_cache is not None and reply.raw_stream is None and reply.raw_json is None:
            reply = fake.prompt_cache.apply(wire.api, body, reply)
        fault = choice.fault
        if fault is not None and fault.kind == "http":
            self._send_error(exchange, wire, fault.status, fault.retry_after, fault.message)
        elif fault is not None and fault.kind == "echo_headers":
            headers = "; ".join(f"{name}: {value}" for name, value in self.headers.items())
            message = f"The gateway could not route this request. Request headers: {headers}"
            self._send_error(exchange, wire, fault.status, message=message)
        elif exchange.stream:
            self._stream_reply(exchange, wire, reply, fault)
        else:
            self._answer_json_reply(exchange, wire, reply, fault)

    def _answer_json_reply(
        self, exchange: _Exchange, wire: WireFormat, reply: Reply, fault: Fault | None
    ) -> None:
        if fault is not None and fault.kind == "drop":
            self._drop_connection(exchange, chunks_sent=0, status=NO_RESPONSE)
            return
        if fault is not None and fault.kind == "error_event":
            # There is no stream to put an error event in; the closest is an error status.
            self._send_error(exchange, wire, fault.status)
            return
        stalled = fault is not None and fault.kind == "stall"
        held = fault is not None and fault.kind == "hold"
        if (stalled and self.client_socket.wait(fault.stall_seconds)) or (
            held and not self._released()
        ):
            exchange.status = NO_RESPONSE
            self._record_hang_up(exchange, chunks_sent=0)
            return
        if reply.raw_json is not None:
            body = json_file_body(reply.raw_json)
        else:
            body = compact_json(wire.message_body(reply, exchange.body)).encode()
        self._send_bytes(exchange, 200, body)

    def _stream_reply(
        self, exchange: _Exchange, wire: WireFormat, reply: Reply, fault: Fault | None
    ) -> None:
        # All bytes are built before the first write, so unpaced streams go out at socket speed.
        frames = [chunk_frame(piece) for piece in _stream_pieces(wire, reply, exchange.body)]
        total = exchange.chunks_total = len(frames)
        fault_at = min(fault.after_chunks, total) if fault is not None else None

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        if not self.client_socket.send(self._finished_headers()):
            self._record_hang_up(exchange, chunks_sent=0)
            return

        pacing = reply.pacing
        interval = 1.0 / pacing.chunks_per_second if pacing.chunks_per_second else 0.0
        # Cut pieces go out one write each, as paced ones do, or they would be joined again.
        paced = pacing.first_token_delay > 0 or interval > 0 or reply.byte_cuts is not None
        # Absolute send times, so pacing does not drift by the time each write takes.
        next_send_at = time.monotonic() + pacing.first_token_delay
        sent = 0
        while True:
            if sent == fault_at:
                assert fault is not None
                if not self._stream_fault(exchange, wire, fault, chunks_sent=sent):
                    return
                next_send_at = time.monotonic()  # a stall is over: resume at once
                fault_at = None
            if sent == total:
                break
            if paced:
                delay = next_send_at - time.monotonic()
                if delay > 0 and self.client_socket.wait(delay):
                    self._record_hang_up(exchange, chunks_sent=sent)
                    return
                next_send_at += interval
                batch_end = sent + 1
            else:
                batch_end = _unpaced_batch_end(
                    frames, sent, total if fault_at is None else fault_at
                )
            data = b"".join(frames[sent:batch_end])
            exchange.chunk_write_times.extend([time.monotonic()] * (batch_end - sent))
            if batch_end == total and fault_at is None:
                # The last event and the end of the body go out together; record first, so a
                # test that has just read the whole stream finds the request recorded.
                self._record(exchange, chunks_sent=total)
                if not self.client_socket.send(data + LAST_CHUNK):
                    self._amend_hung_up(exchange, chunks_sent=sent)
                    self.close_connection = True
                return
            if not self.client_socket.send(data):
                self._record_hang_up(exchange, chunks_sent=sent)
                return
            sent = batch_end
        # Only reached when the stream has no events, or after a stall at its very end.
        self._record(exchange, chunks_sent=sent)
        self.client_socket.send(LAST_CHUNK)

    def _stream_fault(
        self, exchange: _Exchange, wire: WireFormat, fault: Fault, chunks_sent: int
    ) -> bool:
        """Make `fault` happen in a stream; True if the stream goes on afterwards."""
        if fault.kind == "drop":
            self._drop_connection(exchange, chunks_sent=chunks_sent, status=200)
            return False
        if fault.kind == "error_event":
            self._record(exchange, chunks_sent=chunks_sent)
            if not self.client_socket.send(chunk_frame(wire.error_event(fault.status))):
                self._amend_hung_up(exchange)
            self.client_socket.send(LAST_CHUNK)  # the provider ends the stream after an error
            return False
        if (fault.kind == "stall" and self.client_socket.wait(fault.stall_seconds)) or (
            fault.kind == "hold" and not self._released()
        ):
            self._record_hang_up(exchange, chunks_sent=chunks_sent)
            return False
        return True

    def _released(self) -> bool:
        """Send nothing until the test calls `FakeLLM.release()`: True then, False if the
        client hung up first."""
        released = self.server.fake.released
        while not released.is_set():
            if self.client_socket.wait(0.02):
                return False
        return True

    # --- writing responses -----------------------------------------------------------------

    def _send_error(
        self,
        exchange: _Exchange,
        wire: WireFormat,
        status: int,
        retry_after: float | None = None,
        message: str | None = None,
    ) -> None:
        headers = dict(wire.error_headers(status))
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        body = compact_json(wire.error_body(status, message)).encode()
        self._send_bytes(exchange, status, body, headers)

    def _send_bytes(
        self,
        exchange: _Exchange,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
    ) -> None:
        exchange.status = status
        self._record(exchange)  # before writing: the client may look as soon as it has read
        self.send_response(status, _REASON_PHRASES.get(status))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if not self.client_socket.send(self._finished_headers() + body):
            self._amend_hung_up(exchange)
            self.close_connection = True

    def _finished_headers(self) -> bytes:
        """The status line and headers queued by send_response/send_header, taken for one
        write of our own (`end_headers` would write them itself, and raise if the client
        has gone)."""
        self._headers_buffer.append(b"\r\n")
        head = b"".join(self._headers_buffer)
        self._headers_buffer = []
        return head

    def _send_json(self, status: int, value: Any) -> None:
        """A control-endpoint answer (not recorded)."""
        body = compact_json(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drop_connection(self, exchange: _Exchange, chunks_sent: int, status: int) -> None:
        exchange.status = status
        self._record(exchange, chunks_sent=chunks_sent)
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _record(
        self, exchange: _Exchange, chunks_sent: int = 0, client_hung_up: bool = False
    ) -> None:
        recorded = exchange.recorded(chunks_sent, client_hung_up)
        self.server.fake._recorder.put(exchange.arrival, recorded)

    def _record_hang_up(self, exchange: _Exchange, chunks_sent: int) -> None:
        self._record(exchange, chunks_sent=chunks_sent, client_hung_up=True)
        self.close_connection = True

    def _amend_hung_up(self, exchange: _Exchange, **changes: Any) -> None:
        self.server.fake._recorder.amend(exchange.arrival, client_hung_up=True, **changes)

    # --- reading requests ------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked_body(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF after each chunk


class FakeLLM:
    """A fake LLM provider on 127.0.0.1, serving from a daemon thread.

    >>> with FakeLLM(script=[Reply(text="hi")]) as fake:
    ...     client = AsyncOpenAI(base_url=fake.openai_base_url, api_key="test-key")
    """

    def __init__(
        self,
        script: Sequence[Reply] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        prompt_cache: PromptCache | None = None,
        context_limit: ContextLimit | None = None,
    ) -> None:
        # When set, usage is computed from each request as a provider's prompt cache would.
        self.prompt_cache = prompt_cache
        # When set, longer requests are refused as the limit's server does (may be changed).
        self.context_limit = context_limit
        # The server endpoints asked about the window ("props", "ollama_show"), in order.
        self.window_questions: list[str] = []
        self._host = host
        self._port = port
        self._script = _ScriptState(script or [])
        self._recorder = _Recorder()
        self._server: _FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Set by `release()`: a "hold" fault's stream goes on (see script.Fault).
        self.released = threading.Event()

    def start(self) -> Self:
        if self._server is not None:
            return self
        self._server = _FakeHTTPServer((self._host, self._port), self)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fakellm:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_open_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def set_script(self, script: Sequence[Reply]) -> None:
        """Replace the script, reset fault counts and forget the recorded requests."""
        self._script.replace(script)
        self._recorder.clear()
        self.released.clear()

    def release(self) -> None:
        """Let every held stream ("hold" faults, this script's) go on, and later ones not wait."""
        self.released.set()

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests answered so far (a copy), in arrival order."""
        return self._recorder.snapshot()

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until `count` requests have ended; all recorded requests. TimeoutError if not."""
        return self._recorder.wait_for(count, timeout)
