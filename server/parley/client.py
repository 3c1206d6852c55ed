"""A small async client for `parley serve`, for programs, the CLI and the tests.

    client = await ParleyClient.spawn(env=...)
    await client.initialize()
    session_id = await client.new_session("/path/to/project")
    result = await client.prompt(session_id, "What does geometry.area do?")
    for update in client.updates_of(session_id): ...
    await client.stop()

Notifications are collected per session (and passed to `on_update`); the server's requests
(permission, editor tools) are answered by the handlers you set.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import cattrs
from pygls.client import JsonRPCClient

from parley.protocol.dispatch import ParleyProtocol
from parley.protocol.framing import MAX_FRAME_BYTES, read_frames

Update = dict[str, Any]
PermissionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]
EditorToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]


def reject_all(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


def allow_all(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class ParleyClient(JsonRPCClient):
    protocol: ParleyProtocol

    def __init__(self) -> None:
        # The server's own reader and dispatch: params and results stay the JSON they are
        # (pygls' reader makes namedtuples of them, with a hook on every nested object).
        super().__init__(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
        self.updates: dict[str, list[Update]] = {}
        self.permission_requests: list[dict[str, Any]] = []
        self.editor_calls: list[dict[str, Any]] = []
        self.on_update: Callable[[str, Update], None] | None = None
        self.permission_handler: PermissionHandler = reject_all
        self.editor_tool_handler: EditorToolHandler | None = None
        self.stderr_lines: list[str] = []
        self._update_event = asyncio.Event()

        @self.feature("session/update")
        def _on_update(params: dict[str, Any]) -> None:
            session_id = params.get("sessionId", "")
            update = params.get("update", {})
            self.updates.setdefault(session_id, []).append(update)
            self._update_event.set()
            if self.on_update is not None:
                self.on_update(session_id, update)

        @self.feature("session/request_permission")
        async def _on_permission(params: dict[str, Any]) -> dict[str, Any]:
            self.permission_requests.append(params)
            return await _maybe_await(self.permission_handler(params))

        @self.feature("_parley/editor/callTool")
        async def _on_editor_tool(params: dict[str, Any]) -> dict[str, Any]:
            self.editor_calls.append(params)
            if self.editor_tool_handler is None:
                return {"content": f"No handler for {params.get('name')}", "isError": True}
            return await _maybe_await(self.editor_tool_handler(params))

    # --- the server process -------------------------------------------------------------

    @classmethod
    async def spawn(
        cls,
        *,
        env: dict[str, str] | None = None,
        command: Sequence[str] | None = None,
        cwd: str | None = None,
    ) -> ParleyClient:
        client = cls()
        command = list(command or [sys.executable, "-m", "parley", "serve"])
        await client.start_io(*command, env={**os.environ, **(env or {})}, cwd=cwd)
        return client

    async def start_io(self, cmd: str, *args: Any, **kwargs: Any) -> None:
        server = await asyncio.create_subprocess_exec(
            cmd,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=MAX_FRAME_BYTES,
            **kwargs,
        )
        assert server.stdin is not None and server.stdout is not None
        self._server = server
        self.protocol.set_writer(server.stdin)
        self._async_tasks += [
            asyncio.create_task(self._read_messages(server.stdout)),
            asyncio.create_task(self._server_exit()),  # fails pending requests if it dies
            asyncio.create_task(self._collect_stderr()),
        ]

    async def _read_messages(self, stdout: asyncio.StreamReader) -> None:
        async for body in read_frames(stdout, "lsp"):
            self.protocol.receive(body)

    async def _collect_stderr(self) -> None:
        assert self._server is not None and self._server.stderr is not None
        while line := await self._server.stderr.readline():
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

    # --- requests -----------------------------------------------------------------------

    async def request(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        return await asyncio.wait_for(self.protocol.send_request_async(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.protocol.notify(method, params)

    async def initialize(self, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        capabilities: dict[str, Any] = {}
        if tools:
            capabilities["_meta"] = {"parley": {"tools": tools}}
        return await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": capabilities,
                "clientInfo": {"name": "parley.client", "version": "1"},
            },
        )

    async def new_session(self, cwd: str, **settings: Any) -> str:
        params: dict[str, Any] = {"cwd": cwd, "mcpServers": []}
        if settings:
            params["_meta"] = {"parley": settings}
        result = await self.request("session/new", params)
        return result["sessionId"]

    async def load_session(self, session_id: str, cwd: str) -> dict[str, Any]:
        """Reopen a stored session in `cwd`; its conversation is replayed as updates."""
        params = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        return await self.request("session/load", params)

    async def prompt(
        self,
        session_id: str,
        text: str,
        resources: Sequence[dict[str, Any]] = (),
        timeout: float | None = None,
    ) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        blocks += [{"type": "resource", "resource": dict(resource)} for resource in resources]
        return await self.request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}, timeout
        )

    def cancel(self, session_id: str) -> None:
        self.notify("session/cancel", {"sessionId": session_id})

    # --- reading updates ----------------------------------------------------------------

    def updates_of(self, session_id: str, kind: str | None = None) -> list[Update]:
        updates = self.updates.get(session_id, [])
        return [u for u in updates if kind is None or u.get("sessionUpdate") == kind]

    def text_of(self, session_id: str) -> str:
        """The agent's text as a client shows it: chunks appended, revisions applied."""
        messages: dict[str, str] = {}
        for update in self.updates_of(session_id, "agent_message_chunk"):
            replaces = update.get("_meta", {}).get("parley", {}).get("replaces")
            text = update["content"]["text"]
            if replaces is not None:
                messages[replaces] = text
            else:
                message_id = update.get("messageId", "")
                messages[message_id] = messages.get(message_id, "") + text
        return "".join(messages.values())

    async def wait_for_update(
        self, session_id: str, predicate: Callable[[Update], bool], timeout: float = 10.0
    ) -> Update:
        async def wait() -> Update:
            while True:
                for update in self.updates_of(session_id):
                    if predicate(update):
                        return update
                self._update_event.clear()
                await self._update_event.wait()

        return await asyncio.wait_for(wait(), timeout)


async def _maybe_await(value: Any) -> Any:
    # A handler may return a coroutine or a future (a test holding the answer back).
    return await value if inspect.isawaitable(value) else value
