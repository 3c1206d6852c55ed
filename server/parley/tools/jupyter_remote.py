"""A kernel of a Jupyter Server (or Enterprise Gateway): its REST API for the kernel's state
and interrupts, its websocket (`/api/kernels/ID/channels`) for the messages.

Messages are made by `jupyter_client`'s `Session` and travel as Jupyter Server's JSON
websocket frames (each with its `channel`); the websocket is tornado's (`jupyter_client`'s own
dependency), the REST calls httpx's, all on the event loop without blocking it. The token
goes only into the `Authorization` header of these requests: never into a URL, a log line
or an error (`redact` knows it: `remember_secrets`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from parley.core.redact import remember_secrets
from parley.tools.jupyter_link import ConnectionRefused, Incoming, LinkClosed

logger = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0
MAX_FRAME_BYTES = 16 * 1024 * 1024  # a frame over this is dropped unread by tornado
CHANNELS = frozenset({"shell", "iopub", "control", "stdin"})


class RemoteLink:
    """One kernel of a Jupyter Server, named by the server's URL and the kernel's id."""

    def __init__(self, server: str, kernel_id: str, token: str | None) -> None:
        self.server = server.rstrip("/")
        self.kernel_id = kernel_id
        self.where = f"kernel {kernel_id} on {self.server}"
        self._token = token
        if token:
            remember_secrets([token])
        self._headers = {"Authorization": f"token {token}"} if token else {}
        self._socket: Any = None
        self._session: Any = None

    def _url(self, suffix: str = "") -> str:
        return f"{self.server}/api/kernels/{quote(self.kernel_id, safe='')}{suffix}"

    async def _rest(self, method: str, suffix: str = "") -> httpx.Response:
        async with httpx.AsyncClient(timeout=CONNECT_SECONDS, follow_redirects=False) as http:
            return await http.request(method, self._url(suffix), headers=self._headers)

    async def open(self) -> None:
        try:
            response = await self._rest("GET")
        except httpx.HTTPError as error:  # refused, unreachable, timed out
            reason = f"the server cannot be reached ({type(error).__name__})"
            raise ConnectionRefused(reason) from None
        if response.status_code == 404:
            raise ConnectionRefused("the server has no such kernel (it was shut down?)")
        if response.status_code in (401, 403):
            raise ConnectionRefused("the server refused the token (give the right one)")
        if response.status_code != 200:
            raise ConnectionRefused(f"the server answered HTTP {response.status_code}")
        from jupyter_client.session import Session
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        self._session = Session(username="parley")
        ws_url = "ws" + self._url("/channels").removeprefix("http")
        request = HTTPRequest(
            f"{ws_url}?session_id={uuid.uuid4().hex}",
            headers=self._headers,
            connect_timeout=CONNECT_SECONDS,
            request_timeout=CONNECT_SECONDS,
        )
        try:
            self._socket = await websocket_connect(request, max_message_size=MAX_FRAME_BYTES)
        except Exception as error:  # tornado's HTTPClientError, a refused connection
            raise ConnectionRefused(f"its websocket could not be opened ({error})") from None

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        from jupyter_client.jsonutil import json_default

        message = self._session.msg(msg_type, content)
        frame = {
            "header": message["header"],
            "parent_header": {},
            "metadata": {},
            "content": content,
            "buffers": [],
            "channel": channel,
        }
        self._socket.write_message(json.dumps(frame, default=json_default))
        return str(message["header"]["msg_id"])

    async def messages(self) -> AsyncIterator[Incoming]:
        while True:
            frame = await self._socket.read_message()
            if frame is None:
                raise LinkClosed(f"the websocket of {self.where} closed")
            if not isinstance(frame, str):
                continue  # a binary frame (a message with buffers): nothing Parley reads
            try:
                message = json.loads(frame)
            except ValueError:
                logger.warning("A frame from %s that is not JSON was dropped", self.where)
                continue
            channel = message.get("channel") if isinstance(message, dict) else None
            if channel in CHANNELS:
                yield channel, message

    async def interrupt(self) -> None:
        try:
            response = await self._rest("POST", "/interrupt")
        except httpx.HTTPError as error:
            logger.warning("Interrupting %s failed: %s", self.where, type(error).__name__)
            return
        if response.status_code >= 400:
            logger.warning("Interrupting %s: HTTP %s", self.where, response.status_code)

    async def is_alive(self) -> bool:
        try:
            response = await self._rest("GET")
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        try:
            model = response.json()
        except ValueError:
            return False
        return isinstance(model, dict) and model.get("execution_state") != "dead"

    async def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
