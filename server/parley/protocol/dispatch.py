"""From a raw message body to a pygls handler, so that every request gets exactly one answer.

pygls 2 parses with an object hook that drops, without a reply, a message that is not JSON,
lacks `params`, or whose params fail to structure. Here Parley parses the JSON itself, answers
what is malformed with the proper JSON-RPC error, and passes pygls plain messages whose params
are the JSON as sent (handlers structure and validate them: see `params.py`).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from lsprotocol.types import ResponseError, ResponseErrorMessage
from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

CANCEL_METHODS = ("$/cancelRequest", "$/cancel_request")

# Recovers the id of a message that is not valid JSON, to answer it with a parse error.
_ID_PATTERN = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


class ParleyProtocol(JsonRPCProtocol):
    """pygls' JSON-RPC protocol, fed by `receive` instead of pygls' own reader."""

    def receive(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as error:
            match = _ID_PATTERN.search(body)
            if match is None:
                logger.error("Skipped a message that is not JSON (%s): %.200r", error, body)
                return
            msg_id = json.loads(match.group(1))
            self.send_error(msg_id, PARSE_ERROR, f"Parse error: the message is not JSON ({error})")
            return
        self._receive_object(data)

    def _receive_object(self, data: Any) -> None:
        if not isinstance(data, dict):
            what = "batches are not supported" if isinstance(data, list) else "not an object"
            self.send_error(None, INVALID_REQUEST, f"Invalid request: {what}")
            return
        msg_id = data.get("id")
        has_id = "id" in data and (isinstance(msg_id, str | int) and not isinstance(msg_id, bool))
        method = data.get("method")

        if data.get("jsonrpc") != "2.0":
            self._invalid(data, 'the message must have "jsonrpc": "2.0"')
            return
        if method is None:
            if has_id and "error" in data:
                self._receive_error_response(msg_id, data["error"])
            elif has_id and "result" in data:
                self.handle_message(JsonRPCResponseMessage(msg_id, "2.0", data["result"]))
            else:
                self._invalid(data, 'a request needs a "method"')
            return
        if not isinstance(method, str):
            self._invalid(data, '"method" must be a string')
            return
        if "id" in data and not has_id:
            self.send_error(
                None, INVALID_REQUEST, 'Invalid request: "id" must be a string or number'
            )
            return

        params = data.get("params")
        if has_id:
            self.handle_message(JsonRPCRequestMessage(msg_id, method, "2.0", params))
        elif method in CANCEL_METHODS:
            request_id = params.get("id") if isinstance(params, dict) else None
            if request_id is not None:
                self._handle_cancel_notification(request_id)
        else:
            self.handle_message(JsonRPCNotification(method, "2.0", params))

    def _invalid(self, data: dict[str, Any], why: str) -> None:
        msg_id = data.get("id")
        if isinstance(msg_id, str | int) and not isinstance(msg_id, bool):
            self.send_error(msg_id, INVALID_REQUEST, f"Invalid request: {why}")
        elif "id" in data:
            self.send_error(None, INVALID_REQUEST, f"Invalid request: {why}")
        else:
            logger.error("Skipped an invalid notification: %s", why)

    def _receive_error_response(self, msg_id: str | int, error: Any) -> None:
        if not isinstance(error, dict):
            error = {"code": -32603, "message": str(error)}
        response_error = ResponseError(
            code=int(error.get("code", -32603)),
            message=str(error.get("message", "")),
            data=error.get("data"),
        )
        self.handle_message(ResponseErrorMessage(id=msg_id, error=response_error))

    def notify_json(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification whose params are plain JSON already.

        pygls' `notify` builds an attrs message and unstructures it through cattrs, which
        costs more than the encoding itself; this is the per-token path, so encode directly.
        """
        if self.writer is None:
            return
        body = json.dumps(
            {"jsonrpc": "2.0", "method": method, "params": params}, ensure_ascii=False
        ).encode()
        if self._include_headers:
            body = b"Content-Length: %d\r\n\r\n" % len(body) + body
        self.writer.write(body)

    def send_error(self, msg_id: str | int | None, code: int, message: str) -> None:
        self._send_data(
            {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        )
