"""`parley serve`: the JSON-RPC server. Each handler maps a protocol message to the agent.

See docs/protocol.md for the contract. The server reads frames itself (`protocol/framing.py`,
`protocol/dispatch.py`) and uses pygls for dispatch, cancellation and server→client requests.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import attrs
from lsprotocol import converters
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcServerError
from pygls.server import JsonRPCServer

import parley
from parley.agent.conversation import UserMessage
from parley.agent.session import Session, new_id
from parley.agent.turn import Turn
from parley.agent.usage import UsageTotals
from parley.config import Settings
from parley.protocol.dispatch import ParleyProtocol
from parley.protocol.framing import FrameWriter, Framing, read_frames, stdin_reader
from parley.protocol.params import (
    ClientToolSpec,
    ConfigureParams,
    InitializeParams,
    ListSessionsParams,
    NewSessionParams,
    PromptParams,
    SessionIdParams,
    UsageParams,
    check_tool_policy,
    parse_params,
    prompt_content,
)
from parley.providers.base import ProviderError
from parley.providers.registry import ProviderRegistry, split_model_id
from parley.tools.base import Tool, ToolSpec
from parley.tools.editor import EditorTool
from parley.tools.registry import ToolRegistry
from parley.tools.server_tools import server_tools

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
PROVIDER_ERROR_CODE = -32001
SESSION_BUSY_CODE = -32000
SESSIONS_PAGE_SIZE = 50


class ParleyServer(JsonRPCServer):
    protocol: ParleyProtocol

    def __init__(self, settings: Settings) -> None:
        super().__init__(protocol_cls=ParleyProtocol, converter_factory=converters.get_converter)
        self.settings = settings
        self.providers = ProviderRegistry(settings)
        self.sessions: dict[str, Session] = {}
        self.client_tools: list[ClientToolSpec] = []
        self.closed_session_totals = UsageTotals()
        handlers = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/list": self.list_sessions,
            "session/delete": self.delete_session,
            "_parley/session/configure": self.configure_session,
            "_parley/usage": self.usage,
            "_parley/models": self.models,
        }
        for method, handler in handlers.items():
            self._register(method, handler)

    def _register(self, method: str, handler: Callable[[Any], Any]) -> None:
        # pygls tags the function it registers, which a bound method does not allow.
        if inspect.iscoroutinefunction(handler):

            async def feature(params: Any) -> Any:
                return await handler(params)
        else:

            def feature(params: Any) -> Any:
                return handler(params)

        self.feature(method)(feature)

    # --- running ------------------------------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader, output: BinaryIO, framing: Framing) -> None:
        """Serve until the input ends, then release everything."""
        self.protocol.set_writer(FrameWriter(output, framing), include_headers=framing == "lsp")
        async for body in read_frames(reader, framing):
            self.protocol.receive(body)
        await self.close()

    async def close(self) -> None:
        turns = [s.running_turn for s in self.sessions.values() if s.running_turn is not None]
        for turn in turns:
            turn.cancel()
        await asyncio.gather(*turns, return_exceptions=True)
        for session in self.sessions.values():
            await session.tools.aclose()
        await self.providers.aclose()

    # --- the connection's side of a turn (TurnPorts) ------------------------------------

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        self.protocol.notify("session/update", {"sessionId": session_id, "update": update})

    async def request_permission(self, params: dict[str, Any]) -> Any:
        return await self.request_client("session/request_permission", params)

    async def request_client(
        self, method: str, params: dict[str, Any], timeout: float | None = None
    ) -> Any:
        """A request to the client. A request abandoned (cancelled, timed out) is forgotten,
        so the client's late answer is ignored instead of failing inside pygls."""
        msg_id = f"parley-{uuid.uuid4().hex}"
        answer = self.protocol.send_request_async(method, params, msg_id=msg_id)
        try:
            return await asyncio.wait_for(answer, timeout)
        finally:
            self.protocol._request_futures.pop(msg_id, None)

    # --- handlers -----------------------------------------------------------------------

    def initialize(self, raw: Any) -> dict[str, Any]:
        params = parse_params(InitializeParams, raw)
        meta = params.client_capabilities.meta
        self.client_tools = list(meta.parley.tools) if meta and meta.parley else []
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "sessionCapabilities": {"list": {}},
            },
            "agentInfo": {"name": "parley", "version": parley.__version__},
            "authMethods": [],
            "_meta": {
                "parley": {
                    "models": self.providers.model_infos(),
                    "defaultModel": self.settings.default_model,
                    "tools": [_tool_info(tool.spec) for tool in self._tools_for(Path.cwd())],
                }
            },
        }

    def new_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(NewSessionParams, raw)
        cwd = Path(params.cwd)
        if not cwd.is_absolute():
            raise JsonRpcInvalidParams(f"cwd must be an absolute path, not {params.cwd!r}")
        if not cwd.is_dir():
            raise JsonRpcInvalidParams(f"cwd {params.cwd!r} is not a directory")
        settings = params.meta.parley if params.meta and params.meta.parley else None
        model = (settings.model if settings else None) or self.settings.default_model
        _check_model_id(model)
        tool_policy = (settings.tool_policy if settings else None) or "hybrid"
        check_tool_policy(tool_policy)
        session = Session(
            id=new_id("sess"),
            cwd=cwd,
            model=model,
            tool_policy=tool_policy,
            tools=ToolRegistry(
                self._tools_for(cwd, settings.eval_timeout_seconds if settings else None)
            ),
            system_prompt=settings.system_prompt if settings else None,
            auto_approve=set(settings.auto_approve or []) if settings else set(),
        )
        self.sessions[session.id] = session
        return {"sessionId": session.id}

    async def prompt(self, raw: Any) -> dict[str, Any]:
        params = parse_params(PromptParams, raw)
        session = self._session(params.session_id)
        content = prompt_content(params.prompt)
        if session.running_turn is not None:
            raise JsonRpcServerError(
                "A turn is already running in this session; cancel it or wait for it to end.",
                SESSION_BUSY_CODE,
            )
        turn = Turn(session, UserMessage(content), self, self.providers, self.settings)
        session.running_turn = asyncio.ensure_future(turn.run())
        try:
            result = await session.running_turn
        except ProviderError as error:
            raise JsonRpcServerError(
                error.message, PROVIDER_ERROR_CODE, error.to_wire_data()
            ) from error
        finally:
            session.running_turn = None
        return result.to_wire()

    def cancel(self, raw: Any) -> None:
        try:
            params = parse_params(SessionIdParams, raw)
        except JsonRpcException as error:
            logger.warning("Ignored session/cancel: %s", error.message)
            return
        session = self.sessions.get(params.session_id)
        if session is not None and session.running_turn is not None:
            session.running_turn.cancel()

    def list_sessions(self, raw: Any) -> dict[str, Any]:
        params = parse_params(ListSessionsParams, raw if raw is not None else {})
        sessions = sorted(self.sessions.values(), key=lambda s: s.updated_at, reverse=True)
        if params.cwd:
            sessions = [s for s in sessions if str(s.cwd) == params.cwd]
        start = int(params.cursor) if params.cursor and params.cursor.isdigit() else 0
        page = sessions[start : start + SESSIONS_PAGE_SIZE]
        result: dict[str, Any] = {
            "sessions": [
                {
                    "sessionId": s.id,
                    "cwd": str(s.cwd),
                    "title": s.title or "Untitled",
                    "updatedAt": s.updated_at,
                }
                for s in page
            ]
        }
        if start + SESSIONS_PAGE_SIZE < len(sessions):
            result["nextCursor"] = str(start + SESSIONS_PAGE_SIZE)
        return result

    async def delete_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(SessionIdParams, raw)
        session = self._session(params.session_id)
        if session.running_turn is not None:
            session.running_turn.cancel()
            await asyncio.gather(session.running_turn, return_exceptions=True)
        del self.sessions[session.id]
        await session.tools.aclose()
        return {}

    def configure_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(ConfigureParams, raw)
        session = self._session(params.session_id)
        if params.model is not None:
            _check_model_id(params.model)
        check_tool_policy(params.tool_policy)
        if params.model is not None:
            session.model = params.model
        if params.tool_policy is not None:
            session.tool_policy = params.tool_policy
        if params.auto_approve is not None:
            session.auto_approve = set(params.auto_approve)
        return {}

    def usage(self, raw: Any) -> dict[str, Any]:
        params = parse_params(UsageParams, raw if raw is not None else {})
        total = UsageTotals()
        for session in self.sessions.values():
            totals = session.totals
            total.usage = total.usage + totals.usage
            total.turns += totals.turns
            total.rounds += totals.rounds
            if totals.cost is not None:
                total.cost = (total.cost or 0.0) + totals.cost
        result: dict[str, Any] = {"total": total.to_wire()}
        if params.session_id is not None:
            result["session"] = self._session(params.session_id).totals.to_wire()
        return result

    def models(self, raw: Any) -> dict[str, Any]:
        return {
            "models": self.providers.model_infos(),
            "defaultModel": self.settings.default_model,
        }

    # --- helpers ------------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise JsonRpcInvalidParams(f"Unknown session {session_id!r}")
        return session

    def _tools_for(self, cwd: Path, eval_timeout: float | None = None) -> list[Tool]:
        """The tools of a session in `cwd`: the server's own (a Python kernel, the workspace
        files), then the editor's (which win a name clash: the user chose that editor)."""
        kernel = self.settings.kernel
        if eval_timeout is not None:
            kernel = attrs.evolve(kernel, timeout_seconds=eval_timeout)
        editor_tools = [
            EditorTool(
                ToolSpec(
                    spec.name,
                    spec.description,
                    spec.input_schema,
                    spec.kind,
                    spec.needs_permission,
                ),
                self._call_editor,
                self.settings.tool_timeout_seconds,
            )
            for spec in self.client_tools
        ]
        return [*server_tools(cwd, kernel), *editor_tools]

    async def _call_editor(self, params: dict[str, Any], timeout: float) -> Any:
        return await self.request_client("_parley/editor/callTool", params, timeout)


def _tool_info(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "kind": spec.kind,
        "needsPermission": spec.needs_permission,
    }


def _check_model_id(model: str) -> None:
    try:
        split_model_id(model)
    except ValueError as error:
        raise JsonRpcInvalidParams(str(error)) from error


def run_stdio(settings: Settings, framing: Framing) -> None:
    """Serve on this process's stdin/stdout until stdin closes."""

    async def main() -> None:
        server = ParleyServer(settings)
        await server.serve(await stdin_reader(), sys.stdout.buffer, framing)

    asyncio.run(main())
