"""`parley serve`: the JSON-RPC server. Each handler maps a protocol message to the agent.

See docs/protocol.md for the contract. The server reads frames itself (`protocol/framing.py`,
`protocol/dispatch.py`) and uses pygls for dispatch, cancellation and server→client requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import cattrs
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcServerError
from pygls.server import JsonRPCServer

import parley
from parley.agent.replay import replay_updates, unanswered_calls
from parley.agent.session import Session, new_id
from parley.agent.turn import Turn
from parley.config import Settings
from parley.core.conversation import UserMessage
from parley.core.errors import ProviderError
from parley.protocol.dispatch import ParleyProtocol
from parley.protocol.framing import FrameWriter, Framing, read_frames, stdin_reader
from parley.protocol.params import (
    ClientToolSpec,
    ConfigureParams,
    InitializeParams,
    ListSessionsParams,
    LoadSessionParams,
    NewSessionParams,
    PromptParams,
    SessionIdParams,
    UsageParams,
    check_tool_format,
    check_tool_policy,
    parse_params,
    prompt_content,
)
from parley.providers.registry import ProviderRegistry, split_model_id
from parley.store import SessionBusy, SessionGone, Store, StoredSession
from parley.tools.base import Tool, ToolSpec
from parley.tools.editor import EditorTool
from parley.tools.registry import ToolRegistry
from parley.tools.server_tools import server_tools

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
PROVIDER_ERROR_CODE = -32001
RESOURCE_NOT_FOUND_CODE = -32002  # ACP's: an unknown or deleted session
SESSION_BUSY_CODE = -32003  # Parley's: a turn runs in the session, here or in another window
SESSIONS_PAGE_SIZE = 50
# How long a turn holds its session against other servers without renewing (it renews every
# third of it); a holder that died is taken over at once.
LEASE_SECONDS = 30.0
BUSY_HERE = "A turn is already running in this session; cancel it or wait for it to end."
BUSY_ELSEWHERE = (
    "This session is busy in another window; wait for its turn to end (or cancel it there), "
    "then try again."
)


class ParleyServer(JsonRPCServer):
    protocol: ParleyProtocol

    def __init__(self, settings: Settings) -> None:
        # Handlers take and return plain JSON, so a plain converter serves (lsprotocol's
        # registers hooks for every LSP type: start-up time for nothing).
        super().__init__(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
        self.settings = settings
        self.providers = ProviderRegistry(settings)
        self.store = Store.open_in(settings.home)
        self.instance_id = new_id("srv")  # names this server in the sessions' leases
        self.sessions: dict[str, Session] = {}  # the sessions this server has open
        self._prompts: set[asyncio.Task[Any]] = set()  # pending session/prompt requests
        self.client_tools: list[ClientToolSpec] = []
        handlers = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/load": self.load_session,
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
        """Serve until the input ends or SIGTERM/SIGINT, then release everything: pending
        prompts are answered `cancelled` (their turns settle the history) before exit."""
        writer = FrameWriter(output, framing)
        self.protocol.set_writer(writer, include_headers=framing == "lsp")
        reading = asyncio.ensure_future(self._receive(reader, framing))
        loop = asyncio.get_running_loop()
        stop_signals = (signal.SIGTERM, signal.SIGINT)
        for signum in stop_signals:
            loop.add_signal_handler(signum, reading.cancel)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        finally:
            for signum in stop_signals:
                loop.remove_signal_handler(signum)
        await self.close()
        writer.flush()

    async def _receive(self, reader: asyncio.StreamReader, framing: Framing) -> None:
        async for body in read_frames(reader, framing):
            self.protocol.receive(body)

    async def close(self) -> None:
        turns = [s.running_turn for s in self.sessions.values() if s.running_turn is not None]
        for turn in turns:
            turn.cancel()
        await asyncio.gather(*turns, return_exceptions=True)
        # The prompts' answers go out as their handlers end (they release the leases too).
        await asyncio.gather(*self._prompts, return_exceptions=True)
        for session in self.sessions.values():
            await session.tools.aclose()
        await self.providers.aclose()
        self.store.close()

    # --- the connection's side of a turn (TurnPorts) ------------------------------------

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        self.protocol.notify_json("session/update", {"sessionId": session_id, "update": update})

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
        tool_format = settings.tool_format if settings else None
        check_tool_format(tool_format)
        session = Session(
            id=new_id("sess"),
            cwd=cwd,
            model=model,
            tool_policy=tool_policy,
            tools=ToolRegistry(
                self._tools_for(cwd, settings.eval_timeout_seconds if settings else None)
            ),
            store=self.store,
            system_prompt=settings.system_prompt if settings else None,
            tool_format=tool_format,
            auto_approve=set(settings.auto_approve or []) if settings else set(),
        )
        session.save()
        self.sessions[session.id] = session
        return {"sessionId": session.id}

    async def load_session(self, raw: Any) -> dict[str, Any]:
        """Replay the stored conversation as updates, then answer; prompts may follow."""
        params = parse_params(LoadSessionParams, raw)
        stored = self.store.session(params.session_id)
        if stored is None:
            await self._forget(params.session_id)  # deleted in another window
            raise _not_found(params.session_id)
        # The client's cwd is where the user is now; fall back to where the session began.
        cwd = Path(params.cwd) if Path(params.cwd).is_dir() else Path(stored.cwd)
        session = self.sessions.get(stored.id)
        if session is not None and session.running_turn is not None:
            raise JsonRpcServerError(BUSY_HERE, SESSION_BUSY_CODE)
        if session is not None and session.cwd != cwd:
            await self._forget(session.id)  # its tools and approvals belong to its workspace
            session = None
        if session is None:
            session = self._open_stored(stored, cwd)
        else:
            session.catch_up()
        try:
            self.store.take_lease(session.id, self.instance_id, LEASE_SECONDS)
        except (SessionBusy, SessionGone):
            pass  # a turn runs in another window: its calls are not stranded, they run
        else:
            try:
                _mend_unanswered(session)
            finally:
                self.store.release_lease(session.id, self.instance_id)
        for update in replay_updates(session.history, session.tools.kind_of):
            self.send_update(session.id, update)
        totals = self.store.usage_totals(session.id)
        return {"_meta": {"parley": {"usage": totals.to_wire(), "model": session.model}}}

    def _open_stored(self, stored: StoredSession, cwd: Path) -> Session:
        totals = self.store.usage_totals(stored.id)
        session = Session(
            id=stored.id,
            cwd=cwd,
            model=stored.model,
            tool_policy=stored.tool_policy,
            tools=ToolRegistry(self._tools_for(cwd)),
            store=self.store,
            system_prompt=stored.system_prompt,
            tool_format=stored.tool_format,
            auto_approve=set(stored.approvals.get(str(cwd), [])),  # this workspace's only
            history=self.store.messages(stored.id),
            title=stored.title,
            created_at=stored.created_at,
            updated_at=stored.updated_at,
            totals=totals,
        )
        self.sessions[session.id] = session
        return session

    async def prompt(self, raw: Any) -> dict[str, Any]:
        params = parse_params(PromptParams, raw)
        session = self._session(params.session_id)
        content = prompt_content(params.prompt)
        if session.running_turn is not None:
            raise JsonRpcServerError(BUSY_HERE, SESSION_BUSY_CODE)
        try:
            self.store.take_lease(session.id, self.instance_id, LEASE_SECONDS)
        except SessionBusy as busy:
            logger.info("Session %s is busy in another server: %s", session.id, busy)
            raise JsonRpcServerError(BUSY_ELSEWHERE, SESSION_BUSY_CODE) from busy
        except SessionGone as gone:
            await self._forget(session.id)
            raise _not_found(session.id) from gone
        this_request = asyncio.current_task()
        assert this_request is not None
        self._prompts.add(this_request)
        try:
            self._show_missed_turns(session)
            return await self._run_turn(session, UserMessage(content), this_request)
        finally:
            self._prompts.discard(this_request)
            self.store.release_lease(session.id, self.instance_id)

    def _show_missed_turns(self, session: Session) -> None:
        """Another window may have added turns since this one read the session: take them
        in and show them, so the user and the model see the same conversation."""
        start = session.catch_up()
        _mend_unanswered(session)  # the other window may have died mid-turn
        for update in replay_updates(session.history, session.tools.kind_of, start):
            self.send_update(session.id, update)

    async def _run_turn(
        self, session: Session, prompt: UserMessage, this_request: asyncio.Task[Any]
    ) -> dict[str, Any]:
        turn = Turn(session, prompt, self, self.providers, self.settings)
        session.running_turn = asyncio.ensure_future(turn.run())
        renewing = asyncio.ensure_future(self._renew_lease(session.id))
        try:
            result = await session.running_turn
            # `$/cancelRequest` cancelled this handler: the turn absorbed the cancellation
            # (and settled its history); the request itself is answered -32800.
            if this_request.cancelling():
                raise asyncio.CancelledError
        except ProviderError as error:
            raise JsonRpcServerError(
                error.message, PROVIDER_ERROR_CODE, error.to_wire_data()
            ) from error
        finally:
            renewing.cancel()
            session.running_turn = None
        return result.to_wire()

    async def _renew_lease(self, session_id: str) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            self.store.renew_lease(session_id, self.instance_id, LEASE_SECONDS)

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
        """Every stored session (also other servers'), newest first, a page at a time."""
        params = parse_params(ListSessionsParams, raw if raw is not None else {})
        start = int(params.cursor) if params.cursor and params.cursor.isdigit() else 0
        page = self.store.list_sessions(params.cwd, start, SESSIONS_PAGE_SIZE + 1)
        result: dict[str, Any] = {
            "sessions": [
                {
                    "sessionId": s.id,
                    "cwd": s.cwd,
                    "title": s.title or "Untitled",
                    "updatedAt": s.updated_at,
                }
                for s in page[:SESSIONS_PAGE_SIZE]
            ]
        }
        if len(page) > SESSIONS_PAGE_SIZE:
            result["nextCursor"] = str(start + SESSIONS_PAGE_SIZE)
        return result

    async def delete_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(SessionIdParams, raw)
        session = self.sessions.get(params.session_id)
        if session is not None and session.running_turn is not None:
            session.running_turn.cancel()  # this window's turn ends with its session
            await asyncio.gather(session.running_turn, return_exceptions=True)
        try:
            deleted = self.store.delete_session(params.session_id, self.instance_id)
        except SessionBusy as busy:
            raise JsonRpcServerError(BUSY_ELSEWHERE, SESSION_BUSY_CODE) from busy
        await self._forget(params.session_id)
        if not deleted:
            raise _not_found(params.session_id)
        return {}

    async def configure_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(ConfigureParams, raw)
        session = self._session(params.session_id)
        if self.store.session(session.id) is None:
            await self._forget(session.id)  # deleted in another window: don't bring it back
            raise _not_found(session.id)
        if params.model is not None:
            _check_model_id(params.model)
        check_tool_policy(params.tool_policy)
        check_tool_format(params.tool_format)
        if params.model is not None:
            session.model = params.model
        if params.tool_format is not None:
            session.tool_format = params.tool_format
        if params.tool_policy is not None:
            session.tool_policy = params.tool_policy
        if params.auto_approve is not None:
            session.auto_approve = set(params.auto_approve)
        session.save()
        return {}

    def usage(self, raw: Any) -> dict[str, Any]:
        """Totals from the store: since the session began, and across every session."""
        params = parse_params(UsageParams, raw if raw is not None else {})
        result: dict[str, Any] = {"total": self.store.usage_totals().to_wire()}
        if params.session_id is not None:
            if self.store.session(params.session_id) is None:
                raise _not_found(params.session_id)
            result["session"] = self.store.usage_totals(params.session_id).to_wire()
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
            hint = " (load it first with session/load)" if self.store.session(session_id) else ""
            raise _not_found(session_id, hint)
        return session

    async def _forget(self, session_id: str) -> None:
        """Close this server's copy of a session (the store keeps it, unless deleted)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        if session.running_turn is not None:
            session.running_turn.cancel()
            await asyncio.gather(session.running_turn, return_exceptions=True)
        await session.tools.aclose()

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


def _mend_unanswered(session: Session) -> None:
    """A killed server leaves calls without results: answer them, so the provider takes the
    history. Only under the session's lease: another window's running calls are not dead."""
    for result in unanswered_calls(session.history):
        session.add_message(result)


def _not_found(session_id: str, hint: str = "") -> JsonRpcServerError:
    return JsonRpcServerError(f"Unknown session {session_id!r}{hint}", RESOURCE_NOT_FOUND_CODE)


def _check_model_id(model: str) -> None:
    try:
        split_model_id(model)
    except ValueError as error:
        raise JsonRpcInvalidParams(str(error)) from error


def run_stdio(settings: Settings, framing: Framing) -> None:
    """Serve on this process's stdin/stdout until stdin closes or SIGTERM/SIGINT."""

    async def main() -> None:
        server = ParleyServer(settings)
        await server.serve(await stdin_reader(), sys.stdout.buffer, framing)

    asyncio.run(main())
