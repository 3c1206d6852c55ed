"""From a raw message body to a pygls handler, so that every request gets exactly one answer.

pygls 2 parses with an object hook that drops, without a reply, a message that is not JSON,
lacks `params`, or whose params fail to structure. Here Parley parses the JSON itself, answers
what is malformed with the proper JSON-RPC error, and passes pygls plain messages whose params
are the JSON as sent (handlers structure and validate them: see `params.py`).

No message stops the server: JSON nested deeper than Python reads, an oversized frame, a
response of any shape or with an id the server never sent are answered or logged and dropped.
Text enters with every lone surrogate replaced (U+FFFD), so nothing downstream holds a string
that cannot be encoded. Answers leave without tracebacks and with secrets redacted.

This is Parley's adapter to pygls: every use of pygls internals in the server is here, and
pygls is pinned to the version they were written against (`pygls==2.1.1`):
`_send_handler_result` and `_send_response` (how a handler's outcome is answered, both
overridden; `after_the_answer` hooks the first, and reads the request's id from pygls'
`msg_id`), `_handle_cancel_notification` and `_request_futures` (pending requests),
`_include_headers` (set by `set_writer`); and for the client side, `ParleyJsonRPCClient`
(what `client.py` builds on) uses `JsonRPCClient`'s `_server`, `_stop_event`, `_async_tasks`
and `_server_exit`. tests/protocol/test_pygls_adapter.py fails when an upgrade changes any of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import reprlib
import sys
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import cattrs
from lsprotocol.types import ResponseError
from pygls.client import JsonRPCClient
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled
from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, MsgId

from parley.core.off_loop import off_loop
from parley.core.redact import redact, redact_json
from parley.protocol.framing import MAX_FRAME_BYTES, Frame, OversizedFrame, read_frames

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603

REQUEST_ID_PREFIX = "parley-"  # the ids of the requests Parley sends the client
CANCEL_METHODS = ("$/cancelRequest", "$/cancel_request")

# Recovers the id of a message that cannot be read, to answer it with the error.
_ID_PATTERN = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?![\d.eE]))')
# A `\uD800`-`\uDFFF` escape: the only way JSON text decoded from valid UTF-8 can hold a lone
# surrogate (a pair decodes to one character; the escape may still be a lone half).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A message's text in a log line or an error message is cut to this.
_QUOTE_CHARS = 200


class _NotJson(ValueError):
    pass


def _reject_constant(name: str) -> None:
    raise _NotJson(f"{name} is not JSON")


# A frame at least this large is decoded and parsed off the event loop (27 MB: about 0.1 s).
OFF_LOOP_FRAME_BYTES = 1024 * 1024

# One decoder for every message: `json.loads` with an option builds a new one per call.
_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _decode(body: bytes) -> str:
    """The body as text; bytes that are not UTF-8 become U+FFFD rather than fail the message."""
    try:
        return body.decode()
    except UnicodeDecodeError:
        return body.decode(errors="replace")


def _without_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {
            _without_lone_surrogates(key): _without_lone_surrogates(item)
            for key, item in value.items()
        }
    return value


def parse_json(text: str) -> Any:
    """JSON text as Python values, lone surrogates repaired; raises ValueError or
    RecursionError (nested deeper than Python reads)."""
    value = _JSON_DECODER.decode(text)
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        value = _without_lone_surrogates(value)
    return value


def _parsed(body: bytes) -> tuple[str, Any, Exception | None]:
    """A frame's text and its JSON, or the error that kept it from being read."""
    text = _decode(body)
    try:
        return text, parse_json(text), None
    except (RecursionError, ValueError) as error:
        return text, None, error


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


class ParleyProtocol(JsonRPCProtocol):
    """pygls' JSON-RPC protocol, fed by `receive` instead of pygls' own reader."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The requests this side sent and awaits an answer to, by id. pygls keeps its own
        # handlers' futures under the same ids (`_request_futures`): a response must only
        # ever settle one of these.
        self._awaiting: dict[MsgId, Future[Any]] = {}
        # What runs once a request of the client's is answered (`after_the_answer`), by id.
        self._after_answer: dict[MsgId, list[Callable[[], None]]] = {}
        # Notifications handled by a plain function, called at once with the params: pygls'
        # dispatch costs about 0.1 ms a message, which a replay of thousands of updates pays
        # in full (the client's side; the server registers none).
        self.plain_notification_handlers: dict[str, Callable[[Any], None]] = {}

    # --- in --------------------------------------------------------------------------------

    def receive(self, frame: Frame) -> None:
        """Handle one frame; never raises (the reader goes on to the next)."""
        try:
            if isinstance(frame, OversizedFrame):
                self._receive_oversized(frame)
            else:
                self._receive_body(frame)
        except Exception:
            logger.exception("Failed to handle a message")

    async def receive_in_order(self, frame: Frame) -> None:
        """As `receive`, but a large frame (an attached image, a big file) is decoded and
        parsed off the event loop: that grows with the frame. The reader awaits it, so
        messages are still handled in the order they came."""
        if isinstance(frame, OversizedFrame) or len(frame) < OFF_LOOP_FRAME_BYTES:
            self.receive(frame)
            return
        try:
            self._receive_parsed(*await off_loop(_parsed, frame))
        except Exception:
            logger.exception("Failed to handle a message")

    def _receive_body(self, body: bytes) -> None:
        self._receive_parsed(*_parsed(body))

    def _receive_parsed(self, text: str, data: Any, error: Exception | None) -> None:
        if isinstance(error, RecursionError):
            self._refuse(text, INVALID_REQUEST, "Invalid request: the JSON is nested too deeply")
        elif error is not None:
            self._refuse(text, PARSE_ERROR, f"Parse error: the message is not JSON ({error})")
        else:
            self._receive_object(data)

    def _receive_oversized(self, frame: OversizedFrame) -> None:
        limit = MAX_FRAME_BYTES // (1024 * 1024)
        self._refuse(
            _decode(frame.head),
            INVALID_REQUEST,
            f"Invalid request: the message is {frame.size} bytes, over the limit of {limit} MB",
        )

    def _refuse(self, text: str, code: int, message: str) -> None:
        """Answer a message that cannot be read, if its id can be found; else log it. An
        unreadable answer to a request of ours fails that request instead."""
        match = _ID_PATTERN.search(text)
        try:
            msg_id = parse_json(match.group(1)) if match is not None else None
        except ValueError:  # an id string with a bad escape
            msg_id = None
        if msg_id is None:
            logger.error("Skipped a message (%s): %.*r", message, _QUOTE_CHARS, text)
            return
        pending = self._awaiting.get(msg_id)
        if pending is None:
            self.send_error(msg_id, code, message)
        elif not pending.done():
            pending.set_exception(JsonRpcException(f"The client's answer: {message}", code))

    def _receive_object(self, data: Any) -> None:
        if not isinstance(data, dict):
            what = "batches are not supported" if isinstance(data, list) else "not an object"
            self.send_error(None, INVALID_REQUEST, f"Invalid request: {what}")
            return
        if "method" not in data:
            self._receive_response(data)
            return
        msg_id = data.get("id")
        method = data["method"]
        if data.get("jsonrpc") != "2.0":
            self._invalid(data, 'the message must have "jsonrpc": "2.0"')
            return
        if not isinstance(method, str):
            self._invalid(data, '"method" must be a string')
            return
        if "id" in data and not _is_id(msg_id):
            self.send_error(
                None, INVALID_REQUEST, 'Invalid request: "id" must be a string or number'
            )
            return

        params = data.get("params")
        if "id" in data:
            self.handle_message(JsonRPCRequestMessage(msg_id, method, "2.0", params))
        elif method in CANCEL_METHODS:
            self._receive_cancel(params)
        elif (plain := self.plain_notification_handlers.get(method)) is not None:
            try:
                plain(params)
            except Exception:
                logger.exception("Failed to handle the notification %s", method)
        else:
            self.handle_message(JsonRPCNotification(method, "2.0", params))

    def _receive_cancel(self, params: Any) -> None:
        # LSP names the request `id`, ACP `requestId`.
        request_id = None
        if isinstance(params, dict):
            request_id = params.get("requestId", params.get("id"))
        if not _is_id(request_id):
            logger.warning("Ignored a cancel notification without a request id")
        elif request_id in self._awaiting:  # the id of a request of ours, not of the client's
            logger.warning("Ignored a cancel notification for %.*r", _QUOTE_CHARS, request_id)
        else:
            self._handle_cancel_notification(request_id)

    def _invalid(self, data: dict[str, Any], why: str) -> None:
        msg_id = data.get("id")
        if _is_id(msg_id):
            self.send_error(msg_id, INVALID_REQUEST, f"Invalid request: {why}")
        elif "id" in data:
            self.send_error(None, INVALID_REQUEST, f"Invalid request: {why}")
        else:
            logger.error("Skipped an invalid notification: %s", why)

    def _receive_response(self, data: dict[str, Any]) -> None:
        """A message without a method answers one of ours; it is never answered itself."""
        msg_id = data.get("id")
        future = self._awaiting.get(msg_id) if _is_id(msg_id) else None
        if future is None:
            if not ("result" in data or "error" in data) and _is_id(msg_id):
                self.send_error(
                    msg_id, INVALID_REQUEST, 'Invalid request: a request needs a "method"'
                )
            else:
                # A late answer to a request of ours that timed out (the user was told then) is
                # no news; an answer to an id we never sent is, to whoever runs the server.
                ours = isinstance(msg_id, str) and msg_id.startswith(REQUEST_ID_PREFIX)
                (logger.info if ours else logger.warning)(
                    "Dropped a response to id %.*r: no request of ours is waiting for it",
                    _QUOTE_CHARS,
                    msg_id,
                )
            return
        if future.done():
            return
        if "error" in data:
            future.set_exception(_response_error(data))
        elif "result" in data and data.get("jsonrpc") == "2.0":
            future.set_result(data["result"])
        else:
            future.set_exception(_malformed_response(data))

    # --- out -------------------------------------------------------------------------------

    def send_request(  # type: ignore[override]  # no callback: callers await the future
        self, method: str, params: Any | None = None, msg_id: MsgId | None = None
    ) -> Future[Any]:
        """Send a request; the future is settled by its response only."""
        if msg_id is None:
            msg_id = str(uuid.uuid4())
        future: Future[Any] = Future()
        self._awaiting[msg_id] = future
        # pygls fails what it finds there when the peer's process ends (the client side).
        self._request_futures[msg_id] = future

        def forget(done: Future[Any]) -> None:  # answered, or abandoned (cancelled)
            if self._awaiting.get(msg_id) is done:
                del self._awaiting[msg_id]
            if self._request_futures.get(msg_id) is done:
                del self._request_futures[msg_id]

        future.add_done_callback(forget)
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return future

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """A request to the peer, awaited at most `timeout` seconds. A request abandoned
        (cancelled, timed out) is forgotten, so the peer's late answer is dropped instead of
        failing inside pygls."""
        msg_id = f"{REQUEST_ID_PREFIX}{uuid.uuid4().hex}"
        answer = self.send_request_async(method, params, msg_id=msg_id)
        try:
            return await asyncio.wait_for(answer, timeout)
        finally:
            self._request_futures.pop(msg_id, None)

    def _send_handler_result(
        self, future: Future[Any] | asyncio.Future[Any], *, msg_id: MsgId
    ) -> None:
        """Answer a request from its handler's outcome (pygls' version logs a traceback for
        every error and sends one to the client for an unexpected one).

        An expected error (a `JsonRpcException`: bad params, a provider failure, a busy
        session) is one log line; an unexpected one logs its traceback to stderr and answers
        `-32603` with only the exception's type and message.
        """
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]
        after_answer = self._after_answer.pop(msg_id, [])
        if future.cancelled():
            logger.info("Request %.*r was cancelled", _QUOTE_CHARS, msg_id)
            self._send_response(
                msg_id,
                error=JsonRpcRequestCancelled("The request was cancelled.").to_response_error(),
            )
            return
        error = future.exception()
        if error is None:
            self._send_response(msg_id, result=future.result())
            for callback in after_answer:
                try:
                    callback()
                except Exception:
                    logger.exception("After answering %.*r", _QUOTE_CHARS, msg_id)
        elif isinstance(error, JsonRpcException):
            # The client is told in the answer: stderr (which ACP clients show as notices)
            # need not say it twice. WARNING is for what no one else was told.
            logger.info("Request %.*r: %s (%d)", _QUOTE_CHARS, msg_id, error.message, error.code)
            self._send_response(msg_id, error=error.to_response_error())
        else:
            logger.error("Request %.*r failed", _QUOTE_CHARS, msg_id, exc_info=error)
            message = f"Internal error: {type(error).__name__}: {error}"[:500]
            self._send_response(msg_id, error=ResponseError(INTERNAL_ERROR, message))

    def _send_response(
        self, msg_id: MsgId | None, result: Any | None = None, error: ResponseError | None = None
    ) -> None:
        """Every answer leaves here: an error without traceback, its text redacted."""
        if error is not None:
            self.send_error(msg_id, error.code, error.message, error.data)
            return
        try:
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except (TypeError, ValueError, RecursionError) as encoding_error:
            logger.error(
                "Could not encode the answer to %.*r: %s", _QUOTE_CHARS, msg_id, encoding_error
            )
            self.send_error(
                msg_id, INTERNAL_ERROR, "Internal error: the answer could not be encoded"
            )

    def send_error(self, msg_id: MsgId | None, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": redact(message)}
        if isinstance(data, dict):
            data = {key: value for key, value in data.items() if key != "traceback"}
        if data is not None:
            error["data"] = redact_json(data)
        self._write({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def after_the_answer(self, callback: Callable[[], None]) -> None:
        """Run `callback` right after the request being handled is answered with a result
        (say, a notification about the session the answer starts); not if it fails."""
        msg_id = self.msg_id  # pygls keeps the request's id in the handler's context
        if msg_id is None:
            raise RuntimeError("after_the_answer outside of a request's handler")
        self._after_answer.setdefault(msg_id, []).append(callback)

    def notify_json(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification whose params are plain JSON already.

        pygls' `notify` builds an attrs message and unstructures it through cattrs, which
        costs more than the encoding itself; this is the per-token path, so encode directly.
        """
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def _write(self, message: dict[str, Any]) -> None:
        if self.writer is None:
            return
        try:
            body = json.dumps(message, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate from elsewhere: escaped, it is valid JSON
            body = json.dumps(message).encode()
        if self._include_headers:
            body = b"Content-Length: %d\r\n\r\n" % len(body) + body
        self.writer.write(body)


def _response_error(data: dict[str, Any]) -> JsonRpcException:
    error = data["error"]
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not (isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str)):
        return _malformed_response(data)
    return JsonRpcException.from_error(ResponseError(code, message, error.get("data")))


def _malformed_response(data: dict[str, Any]) -> JsonRpcException:
    # reprlib: bounded in depth and length, whatever the peer sent.
    shown = reprlib.repr(data)
    return JsonRpcException(f"The client sent a malformed response: {shown}", INTERNAL_ERROR)


class ParleyJsonRPCClient(JsonRPCClient):
    """pygls' JSON-RPC client around a `parley serve` child process, reading frames with the
    server's own reader and `ParleyProtocol` (params and results stay the JSON they are;
    pygls' reader would make namedtuples of them). `client.py` builds on this, without
    touching pygls' internals."""

    protocol: ParleyProtocol

    def __init__(self) -> None:
        super().__init__(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
        self.stderr_lines: list[str] = []

    async def start_io(self, cmd: str, *args: Any, **kwargs: Any) -> None:
        """Start the server process and read its stdout (LSP framing) and stderr."""
        server = await asyncio.create_subprocess_exec(
            cmd,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=MAX_FRAME_BYTES,
            **kwargs,
        )
        self.attach(server)

    def attach(self, server: asyncio.subprocess.Process) -> None:
        """Talk to a server process already started with pipes for stdin, stdout, stderr
        (`parley chat` starts it before importing this module, to overlap the two imports)."""
        assert server.stdin is not None and server.stdout is not None
        self._server = server
        self.protocol.set_writer(server.stdin)
        self._async_tasks += [
            asyncio.create_task(self._read_messages(server.stdout)),
            asyncio.create_task(self._server_exit()),  # fails pending requests if it dies
            asyncio.create_task(self._collect_stderr(server)),
        ]

    async def spawn_server(self, command: Sequence[str], **kwargs: Any) -> None:
        await self.start_io(*command, **kwargs)

    async def _read_messages(self, stdout: asyncio.StreamReader) -> None:
        async for body in read_frames(stdout, "lsp"):
            self.protocol.receive(body)

    async def _collect_stderr(self, server: asyncio.subprocess.Process) -> None:
        assert server.stderr is not None
        while line := await server.stderr.readline():
            text = line.decode(errors="replace").rstrip()
            self.stderr_lines.append(text)
            if os.environ.get("PARLEY_CLIENT_ECHO_STDERR"):
                print(f"[server] {text}", file=sys.stderr)

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self._server

    async def stop(self, timeout: float = 5.0) -> int | None:
        """Close the server's stdin (it exits on EOF); kill it if it does not."""
        server = self._server
        if server is not None and server.returncode is None:
            if server.stdin is not None:
                with contextlib.suppress(Exception):
                    server.stdin.close()
            try:
                await asyncio.wait_for(server.wait(), timeout)
            except TimeoutError:
                server.kill()
                await server.wait()
        self._stop_event.set()
        for task in self._async_tasks:
            task.cancel()
        await asyncio.gather(*self._async_tasks, return_exceptions=True)
        return server.returncode if server is not None else None
