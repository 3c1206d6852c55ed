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
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from parley.protocol.dispatch import ParleyJsonRPCClient

Update = dict[str, Any]
PermissionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]
EditorToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]] | dict[str, Any]]


def reject_all(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


def allow_all(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class ParleyClient(ParleyJsonRPCClient):
    def __init__(self) -> None:
        super().__init__()
        self.updates: dict[str, list[Update]] = {}
        self.permission_requests: list[dict[str, Any]] = []
        self.editor_calls: list[dict[str, Any]] = []
        self.on_update: Callable[[str, Update], None] | None = None
        self.permission_handler: PermissionHandler = reject_all
        self.editor_tool_handler: EditorToolHandler | None = None
        self._update_event = asyncio.Event()
        self._options: dict[str, list[dict[str, Any]]] = {}

        def _on_update(params: dict[str, Any]) -> None:
            session_id = params.get("sessionId", "")
            update = params.get("update", {})
            self.updates.setdefault(session_id, []).append(update)
            self._update_event.set()
            if self.on_update is not None:
                self.on_update(session_id, update)

        # Straight from the reader, not through pygls' dispatch: a replay is thousands.
        self.protocol.plain_notification_handlers["session/update"] = _on_update

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
        await client.spawn_server(command, env={**os.environ, **(env or {})}, cwd=cwd)
        return client

    # --- requests -----------------------------------------------------------------------

    async def request(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        return await asyncio.wait_for(self.protocol.send_request_async(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.protocol.notify(method, params)

    async def initialize(self, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        # Parley's own client replaces streamed text with a hybrid round's revision.
        parley: dict[str, Any] = {"revisions": True}
        if tools:
            parley["tools"] = tools
        capabilities: dict[str, Any] = {"_meta": {"parley": parley}}
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
        self._options[result["sessionId"]] = result.get("configOptions", [])
        return result["sessionId"]

    def options_of(self, session_id: str) -> list[dict[str, Any]]:
        """The `configOptions` `session/new` answered for the session."""
        return self._options.get(session_id, [])

    async def load_session(
        self, session_id: str, cwd: str, kernel: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Reopen a stored session in `cwd`; its conversation is replayed as updates.
        `kernel`: attach it to this kernel (`_meta.parley.kernel`)."""
        params: dict[str, Any] = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        if kernel is not None:
            params["_meta"] = {"parley": {"kernel": kernel}}
        return await self.request("session/load", params)

    async def prompt(
        self,
        session_id: str,
        text: str,
        resources: Sequence[dict[str, Any]] = (),
        timeout: float | None = None,
        literal: bool = False,
        retry: bool = False,
    ) -> dict[str, Any]:
        """`literal`: the text is sent as it is, never run as a slash command. `retry`: it
        replaces the last turn if that was cut off (docs/protocol.md)."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        blocks += [{"type": "resource", "resource": dict(resource)} for resource in resources]
        params: dict[str, Any] = {"sessionId": session_id, "prompt": blocks}
        flags = {"literal": literal, "retry": retry}
        if any(flags.values()):
            params["_meta"] = {"parley": {name: True for name, on in flags.items() if on}}
        return await self.request("session/prompt", params, timeout)

    def cancel(self, session_id: str) -> None:
        self.notify("session/cancel", {"sessionId": session_id})

    # --- reading updates ----------------------------------------------------------------

    def updates_of(self, session_id: str, kind: str | None = None) -> list[Update]:
        updates = self.updates.get(session_id, [])
        return [u for u in updates if kind is None or u.get("sessionUpdate") == kind]

    def text_of(self, session_id: str) -> str:
        """The agent's text as a client shows it: chunks appended, revisions applied; the
        notices are not part of it (`notices_of`)."""
        messages: dict[str, str] = {}
        for update in self.updates_of(session_id, "agent_message_chunk"):
            if _notice_level(update) is not None:
                continue
            replaces = update.get("_meta", {}).get("parley", {}).get("replaces")
            text = update["content"]["text"]
            if replaces is not None:
                messages[replaces] = text
            else:
                message_id = update.get("messageId", "")
                messages[message_id] = messages.get(message_id, "") + text
        return "".join(messages.values())

    def notices_of(self, session_id: str) -> list[tuple[str, str]]:
        """What Parley said about the session's turns (why they stopped): (level, text)."""
        return [
            (level, update["content"]["text"])
            for update in self.updates_of(session_id, "agent_message_chunk")
            if (level := _notice_level(update)) is not None
        ]

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


def _notice_level(update: Update) -> str | None:
    """The level of a notice (`_meta.parley.notice`); None for any other update."""
    notice = update.get("_meta", {}).get("parley", {}).get("notice")
    return str(notice.get("level")) if isinstance(notice, dict) else None
