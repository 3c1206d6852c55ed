"""`parley serve`: the JSON-RPC server. Each handler maps a protocol message to the agent.

See docs/protocol.md for the contract. The server reads frames itself (`protocol/framing.py`,
`protocol/dispatch.py`) and uses pygls for dispatch, cancellation and server→client requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import functools
import inspect
import logging
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import cattrs
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcMethodNotFound,
    JsonRpcServerError,
)
from pygls.server import JsonRPCServer

import parley
from parley import sandbox_policy
from parley.agent import notices
from parley.agent.budgets import BudgetSpent
from parley.agent.checkpoints import RestoreResult
from parley.agent.commands import describe_restore, went_wrong
from parley.agent.export import export_json, export_markdown
from parley.agent.fork import fork_session
from parley.agent.modes import mode_state
from parley.agent.session import Session
from parley.agent.sessions import (
    InvalidOptions,
    SessionInUse,
    Sessions,
    UnknownSession,
    UnsupportedContent,
)
from parley.agent.snapshot_gc import collect_after_start
from parley.agent.turn import TurnResult
from parley.agent.user_kernels import KERNEL_OPTION, UserKernels, chosen_kernel
from parley.config import Settings
from parley.core import updates
from parley.core.call_view import CallView
from parley.core.choices import CommandOffer, PermissionDecision
from parley.core.conversation import ToolCall
from parley.core.errors import ProviderError
from parley.core.kernel_choice import KernelChoice, kernel_choice
from parley.core.loop_watchdog import LoopWatchdog
from parley.core.session_settings import CONFIGURE
from parley.protocol import client_answers, permission, v2
from parley.protocol.dispatch import ParleyProtocol
from parley.protocol.framing import (
    FrameWriter,
    Framing,
    open_frame_writer,
    read_frames,
    stdin_reader,
)
from parley.protocol.params import (
    CompactParams,
    ConfigureParams,
    ExportParams,
    InitializeParams,
    ListSessionsParams,
    LoadSessionParams,
    McpServerParams,
    NewSessionParams,
    PromptParams,
    RedoParams,
    RestoreParams,
    SessionIdParams,
    SetConfigOptionParams,
    SetModeParams,
    UsageParams,
    additional_roots,
    check_mcp_servers,
    kernel_param,
    parse_params,
    prompt_content,
    session_options,
    settings_given,
)
from parley.providers.registry import ProviderRegistry
from parley.server_mcp import McpPorts, start_listed
from parley.store import Store
from parley.tools.attachments import attach_link
from parley.tools.base import ClientFiles, ClientTerminals, ClientWrites, Tool, ToolSpec
from parley.tools.confined import Roots
from parley.tools.editor import EditorTool
from parley.tools.kernel import KernelSettings
from parley.tools.run_command import CommandSettings
from parley.tools.server_tools import server_tools
from parley.tools.user_kernel import UserKernelSettings

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
PROVIDER_ERROR_CODE = -32001
RESOURCE_NOT_FOUND_CODE = -32002  # ACP's: an unknown or deleted session
SESSION_BUSY_CODE = -32003  # Parley's: a turn runs in the session, here or in another window
BUDGET_SPENT_CODE = -32004  # Parley's: a call on the user's behalf is past a budget
# The last turn `_parley/session/restore` takes: SQLite's largest integer, the store's turn numbers.
LAST_TURN = 2**63 - 1
SESSIONS_PAGE_SIZE = 50
# The SDK's import starts this long after `initialize` (or sooner, see `_preload_sdk`).
PRELOAD_DELAY_SECONDS = 0.3


class ParleyServer(JsonRPCServer):
    protocol: ParleyProtocol

    def __init__(self, settings: Settings) -> None:
        # Handlers take and return plain JSON, so a plain converter serves (lsprotocol's
        # registers hooks for every LSP type: start-up time for nothing).
        super().__init__(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
        self.settings = settings
        sandbox_policy.configure_hidden(settings.sandbox.hidden)  # the file tools refuse them
        self.providers = ProviderRegistry(settings)
        self.store = Store.open_in(settings.home)
        self.sessions = Sessions(self.store, self.providers, settings, self, self._tools_for)
        self.user_kernels = UserKernels(user_kernel_settings(settings))
        self.client_tools: list[ToolSpec] = []
        self.client_reads_files = False  # the client offers fs/read_text_file
        self.client_writes_files = False  # the client offers fs/write_text_file
        self.client_runs_terminals = False  # the client offers terminal/*
        self.wants_revisions = False  # TurnPorts: set by the client in `initialize`
        self.sdk_preload_started = False  # see `_preload_sdk`
        self.loads_running = 0  # `session/load`s not yet answered: no preload meanwhile
        self.output: FrameWriter | None = None  # set by `serve`
        self.mcp_reports: set[asyncio.Task[None]] = set()  # see `server_mcp.start_listed`
        # A connection that negotiated ACP v2 (behind its switch, v2.py): its updates' shapes.
        self.v2_updates: v2.UpdateReshaper | None = None
        handlers = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/fork": self.fork_session,
            "session/close": self.close_session,
            "session/set_config_option": self.set_config_option,
            "session/set_mode": self.set_mode,
            "session/list": self.list_sessions,
            "session/delete": self.delete_session,
            "_parley/session/configure": self.configure_session,
            "_parley/session/restore": self.restore_session,
            "_parley/session/redo": self.redo_session,
            "_parley/session/compact": self.compact_session,
            "_parley/session/export": self.export_session,
            "_parley/usage": self.usage,
            "_parley/models": self.models,
        }
        for method, handler in handlers.items():
            self._register(method, handler)

    def _register(self, method: str, handler: Callable[[Any], Any]) -> None:
        # pygls tags the function it registers, which a bound method does not allow.
        if inspect.iscoroutinefunction(handler):

            async def feature(params: Any) -> Any:
                with _as_json_rpc_errors():
                    return await handler(params)
        else:

            def feature(params: Any) -> Any:
                with _as_json_rpc_errors():
                    return handler(params)

        self.feature(method)(feature)

    # --- running ------------------------------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader, output: BinaryIO, framing: Framing) -> None:
        """Serve until the input ends or SIGTERM/SIGINT, then release everything: pending
        prompts are answered `cancelled` (their turns settle the history) before exit."""
        writer = self.output = await open_frame_writer(output, framing)
        self.protocol.set_writer(writer, include_headers=framing == "lsp")
        reading = asyncio.ensure_future(self._receive(reader, framing))
        loop = asyncio.get_running_loop()
        stop_signals = (signal.SIGTERM, signal.SIGINT)
        for signum in stop_signals:
            loop.add_signal_handler(signum, reading.cancel)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            # Still under the handlers: a client that sends SIGTERM while we close (their
            # usual escalation after a grace period) must not cut short the closing of the
            # MCP servers, which live in process groups of their own.
            await self.close()
        finally:
            for signum in stop_signals:
                loop.remove_signal_handler(signum)
        await writer.aclose()

    async def _receive(self, reader: asyncio.StreamReader, framing: Framing) -> None:
        async for body in read_frames(reader, framing):
            await self.protocol.receive_in_order(body)

    async def close(self) -> None:
        await self.sessions.close()
        await self.providers.aclose()
        # Closing checkpoints the WAL into the database: a disk write, not the loop's.
        await asyncio.to_thread(self.store.close)

    # --- the connection's side of a turn (TurnPorts) ------------------------------------

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        if self.v2_updates is None:
            self.protocol.notify_json("session/update", {"sessionId": session_id, "update": update})
            return
        for reshaped in self.v2_updates.reshape(session_id, update):
            self.protocol.notify_json(
                "session/update", {"sessionId": session_id, "update": reshaped}
            )

    async def drained(self) -> None:
        """Wait while the client is behind with what was sent (a replay goes at its pace)."""
        if self.output is not None:
            await self.output.drained()

    async def request_permission(
        self,
        session_id: str,
        call: ToolCall,
        kind: str,
        view: CallView,
        command: CommandOffer | None = None,
    ) -> PermissionDecision:
        params = permission.permission_request(session_id, call, kind, view, command)
        if self.v2_updates is not None:
            params = v2.permission_request(params)
        return permission.permission_decision(
            await self.protocol.request(permission.METHOD, params), command
        )

    @property
    def client_files(self) -> ClientFiles | None:
        return self if self.client_reads_files else None

    async def read_text_file(self, session_id: str, path: str) -> str:
        """The editor's text of a file (its buffer, saved or not): `fs/read_text_file`."""
        answer = await self.protocol.request(
            "fs/read_text_file", {"sessionId": session_id, "path": path}
        )
        return client_answers.file_content(answer)

    @property
    def client_writes(self) -> ClientWrites | None:
        return self if self.client_writes_files else None

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        """The editor writes a file (into its buffer): `fs/write_text_file`."""
        answer = await self.protocol.request(
            "fs/write_text_file", {"sessionId": session_id, "path": path, "content": content}
        )
        client_answers.check_written(answer)

    @property
    def client_terminals(self) -> ClientTerminals | None:
        return self if self.client_runs_terminals else None

    async def create_terminal(self, session_id: str, params: dict[str, Any]) -> str:
        """The editor runs a command in a terminal of its own: `terminal/create`."""
        answer = await self.protocol.request("terminal/create", {"sessionId": session_id, **params})
        return client_answers.terminal_id(answer)

    async def terminal_request(
        self, method: str, session_id: str, terminal_id: str
    ) -> dict[str, Any]:
        """`terminal/output`, `wait_for_exit`, `kill` or `release` of one terminal."""
        answer = await self.protocol.request(
            method, {"sessionId": session_id, "terminalId": terminal_id}
        )
        return client_answers.terminal_fields(answer)

    # --- handlers -----------------------------------------------------------------------

    def initialize(self, raw: Any) -> dict[str, Any]:
        params = parse_params(InitializeParams, raw)
        capabilities = params.client_capabilities
        self.v2_updates = None
        if v2.negotiated(params.protocol_version) == v2.VERSION:
            # v2's client has no files nor terminals to offer: only Parley's `_meta`.
            capabilities = v2.client_capabilities(params.capabilities)
            self.v2_updates = v2.UpdateReshaper()
        self.client_tools = list(capabilities.meta.parley.tools)
        self.client_reads_files = (capabilities.fs or {}).get("readTextFile") is True
        self.client_writes_files = (capabilities.fs or {}).get("writeTextFile") is True
        self.client_runs_terminals = capabilities.terminal is True
        self.wants_revisions = capabilities.meta.parley.revisions
        asyncio.get_running_loop().call_later(PRELOAD_DELAY_SECONDS, self._preload_sdk)
        collect_after_start(self.settings)  # the snapshot store's garbage, in a while
        result = self._initialize_result()
        return v2.initialize_result(result) if self.v2_updates is not None else result

    def _initialize_result(self) -> dict[str, Any]:
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True},
                "sessionCapabilities": {
                    "list": {},
                    "delete": {},
                    "resume": {},
                    "fork": {},  # the session-fork RFD (ACP's unstable schema)
                    "close": {},
                    "additionalDirectories": {},
                },
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

    async def new_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(NewSessionParams, raw)
        check_mcp_servers(params.mcp_servers)
        additional = additional_roots(params.additional_directories)
        kernel = kernel_param(raw)
        options = session_options(params.meta.parley)
        session = self.sessions.new(Path(params.cwd), options, additional)
        await self._attach_kernel(session, kernel)
        await self.start_mcp_servers(session.id, params.mcp_servers)
        # The SDK's import starts now if it has not; only a request that needs it waits.
        self._preload_sdk(at_once=True)
        return self._as_spoken({"sessionId": session.id, **self._started(session)})

    async def load_session(self, raw: Any) -> dict[str, Any]:
        """Replay the stored conversation as updates, then answer; prompts may follow."""
        self._not_in_v2("session/load", "session/resume with replayFrom")
        params = parse_params(LoadSessionParams, raw)
        check_mcp_servers(params.mcp_servers)
        additional = additional_roots(params.additional_directories)
        kernel = kernel_param(raw)
        self.loads_running += 1
        try:
            session = await self.sessions.load(
                params.session_id, Path(params.cwd), additional=additional
            )
            await self._attach_kernel(session, kernel, loaded=True)
            await self.start_mcp_servers(session.id, params.mcp_servers, loaded=True)
        finally:
            self.loads_running -= 1
        totals = self.store.usage_totals(session.id)
        return {
            **self._started(session, loaded=True),
            "_meta": {"parley": {"usage": totals.to_wire(), "model": session.settings.model}},
        }

    async def resume_session(self, raw: Any) -> dict[str, Any]:
        """Reattach a stored session without replaying it."""
        params = parse_params(LoadSessionParams, raw)
        check_mcp_servers(params.mcp_servers)
        additional = additional_roots(params.additional_directories)
        kernel = kernel_param(raw)
        if self.v2_updates is not None:
            return await self._resume_v2(params, additional)
        session = await self.sessions.load(
            params.session_id, Path(params.cwd), replay=False, additional=additional
        )
        await self._attach_kernel(session, kernel)
        await self.start_mcp_servers(session.id, params.mcp_servers)
        return self._started(session)

    async def _resume_v2(self, params: LoadSessionParams, additional: list[Path]) -> dict[str, Any]:
        """ACP v2's `session/resume`, which also replaces `session/load`: replayed from the
        turn its `replayFrom` names (none: no replay), then the session's state (idle)."""
        turn = v2.replay_start(params.replay_from)
        self.loads_running += 1
        try:
            session = await self.sessions.resume_from(
                params.session_id, Path(params.cwd), turn, additional
            )
            await self.start_mcp_servers(session.id, params.mcp_servers, loaded=turn is not None)
        finally:
            self.loads_running -= 1
        answer = self._started(session, loaded=turn is not None)
        self.send_update(session.id, v2.state_update("idle"))
        return v2.session_answer(answer)

    async def fork_session(self, raw: Any) -> dict[str, Any]:
        """A new session with the stored one's history and settings (agent/fork.py); its
        params are `session/load`'s, its answer `session/new`'s."""
        params = parse_params(LoadSessionParams, raw)
        check_mcp_servers(params.mcp_servers)
        additional = additional_roots(params.additional_directories)
        kernel = kernel_param(raw)
        session = await fork_session(self.sessions, params.session_id, Path(params.cwd), additional)
        await self._attach_kernel(session, kernel)  # the parent's kernel, unless one is named
        await self.start_mcp_servers(session.id, params.mcp_servers)
        return self._as_spoken({"sessionId": session.id, **self._started(session)})

    async def close_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(SessionIdParams, raw)
        await self.sessions.close_session(params.session_id)
        return {}

    async def set_config_option(self, raw: Any) -> dict[str, Any]:
        params = parse_params(SetConfigOptionParams, raw)
        if params.config_id == KERNEL_OPTION:
            return await self._choose_kernel(params.session_id, params.value)
        options = await self.sessions.set_config_option(
            params.session_id, params.config_id, params.value
        )
        return self._as_spoken({"configOptions": options})

    async def set_mode(self, raw: Any) -> dict[str, Any]:
        """ACP's `session/set_mode`: the same change as the `mode` config option."""
        self._not_in_v2("session/set_mode", "session/set_config_option with configId mode")
        params = parse_params(SetModeParams, raw)
        await self.sessions.configure(params.session_id, mode=params.mode_id)
        return {}

    async def prompt(self, raw: Any) -> dict[str, Any]:
        params = parse_params(PromptParams, raw)
        literal, retry = params.literal, params.retry  # checked first: refused before any work
        # Linked files are read and images decoded: off the event loop.
        session = self.sessions.get(params.session_id)
        link_reader = functools.partial(attach_link, session.roots, given=session.cwd)
        content = await asyncio.to_thread(prompt_content, params.prompt, link_reader)
        turn = self.sessions.prompt(params.session_id, content, literal=literal, retry=retry)
        if self.v2_updates is not None:
            return await self._prompt_v2(params.session_id, raw["prompt"], turn)
        return (await turn).to_wire()

    async def _prompt_v2(
        self, session_id: str, blocks: list[Any], turn: Awaitable[TurnResult]
    ) -> dict[str, Any]:
        """ACP v2's prompt: the prompt echoed as the user's message, the work `running`, and
        `idle` with the stop reason (and Parley's usage) when the turn ends. The answer comes
        then too (v2 answers at once; docs/protocol.md says so)."""
        message_id = f"user_{uuid.uuid4().hex[:20]}"
        self.send_update(session_id, v2.user_message(message_id, blocks))
        self.send_update(session_id, v2.state_update("running"))
        try:
            result = (await turn).to_wire()
        except ProviderError:  # the turn failed: the prompt's error says how
            self.send_update(session_id, v2.state_update("idle", stopReason="error"))
            raise
        except BaseException:  # refused, or the request cancelled: the work ended all the same
            self.send_update(session_id, v2.state_update("idle"))
            raise
        ended = v2.state_update("idle", stopReason=result["stopReason"], _meta=result["_meta"])
        self.send_update(session_id, ended)
        return {"messageId": message_id, "_meta": result["_meta"]}

    def cancel(self, raw: Any) -> None:
        try:
            params = parse_params(SessionIdParams, raw)
        except JsonRpcException as error:
            logger.warning("Ignored session/cancel: %s", error.message)
            return
        self.sessions.cancel(params.session_id)

    def list_sessions(self, raw: Any) -> dict[str, Any]:
        """Every stored session (also other servers'), newest first, a page at a time."""
        params = parse_params(ListSessionsParams, raw if raw is not None else {})
        start = _page_start(params.cursor)
        page = self.store.list_sessions(params.cwd, start, SESSIONS_PAGE_SIZE + 1)
        costs = self.store.session_costs([s.id for s in page[:SESSIONS_PAGE_SIZE]])
        result: dict[str, Any] = {
            "sessions": [
                {
                    "sessionId": s.id,
                    "cwd": s.cwd,
                    "title": s.title or "Untitled",
                    "updatedAt": s.updated_at,
                    # For a picker's line: the model, how many turns, what it cost.
                    "_meta": {
                        "parley": {"model": s.settings.model, "turns": s.turns}
                        | ({"cost": costs[s.id]} if s.id in costs else {})
                    },
                }
                for s in page[:SESSIONS_PAGE_SIZE]
            ]
        }
        if len(page) > SESSIONS_PAGE_SIZE:
            result["nextCursor"] = str(start + SESSIONS_PAGE_SIZE)
        return result

    async def delete_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(SessionIdParams, raw)
        await self.sessions.delete(params.session_id)
        return {}

    async def configure_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(ConfigureParams, raw)
        await self.sessions.configure(
            params.session_id,
            auto_approve=params.auto_approve,
            **settings_given(params, CONFIGURE),
        )
        return {}

    async def restore_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(RestoreParams, raw)
        if params.turn < 1:
            raise JsonRpcInvalidParams(
                f"invalid params: turn: 1 is the first turn, not {params.turn}"
            )
        if params.turn > LAST_TURN:  # the store's integers stop there: no session gets past
            raise JsonRpcInvalidParams(f"invalid params: turn: {params.turn} is past any turn")
        result = await self.sessions.restore(params.session_id, params.turn)
        return self._restored(params.session_id, result, "/undo")

    async def redo_session(self, raw: Any) -> dict[str, Any]:
        """The last restore undone: `{turn, files, …}` as a restore answers (`turn` null:
        nothing to redo)."""
        params = parse_params(RedoParams, raw)
        result = await self.sessions.restore(params.session_id, None, redo=True)
        return {"turn": result.turn, **self._restored(params.session_id, result, "/redo")}

    def _restored(self, session_id: str, result: RestoreResult, command: str) -> dict[str, Any]:
        # The words a client shows (it composes none), the same as replayed when kept.
        text = describe_restore(result)
        done = result.files or result.failures or result.rejected  # else nothing to mark
        if done and not result.cancelled and session_id in self.sessions:
            # Kept as `/undo` is, at its place: a reopened session shows the mark where it was.
            session = self.sessions.get(session_id)
            notices.keep_command_turn(session, command, text, warning=went_wrong(result))
        return {**result.to_wire(), "text": text}

    async def compact_session(self, raw: Any) -> dict[str, Any]:
        params = parse_params(CompactParams, raw)
        before, after = await self.sessions.compact(params.session_id)
        return {"tokensBefore": before, "tokensAfter": after}

    async def export_session(self, raw: Any) -> dict[str, Any]:
        """A stored session as one document (`agent/export.py`): the same Markdown from every
        client. Read and rendered off the loop: it grows with the history."""
        params = parse_params(ExportParams, raw)
        stored = self.store.session(params.session_id)
        if stored is None:
            raise _not_found(
                f"Unknown session {params.session_id!r} (a session is stored from its first prompt)"
            )
        render = export_json if params.format == "json" else export_markdown
        return {
            "text": await asyncio.to_thread(render, self.store, stored),
            "format": params.format,
        }

    def usage(self, raw: Any) -> dict[str, Any]:
        """Totals from the store: since the session began, and across every session."""
        params = parse_params(UsageParams, raw if raw is not None else {})
        result: dict[str, Any] = {"total": self.store.usage_totals().to_wire()}
        if params.session_id is not None:
            if self.store.session(params.session_id) is None and not self.sessions.is_unprompted(
                params.session_id
            ):
                raise _not_found(f"Unknown session {params.session_id!r}")
            result["session"] = self.store.usage_totals(params.session_id).to_wire()
        return result

    def models(self, raw: Any) -> dict[str, Any]:
        return {
            "models": self.providers.model_infos(),
            "defaultModel": self.settings.default_model,
        }

    # --- helpers ------------------------------------------------------------------------

    def _as_spoken(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A session's answer in the connection's version (v2: no `modes`, `configId`)."""
        return v2.session_answer(answer) if self.v2_updates is not None else answer

    def _not_in_v2(self, method: str, instead: str) -> None:
        if self.v2_updates is not None:
            raise JsonRpcMethodNotFound(f"{method} is not part of ACP v2: use {instead}")

    def _started(self, session: Session, *, loaded: bool = False) -> dict[str, Any]:
        """What the answer to a session's start holds (its mode and config options). Its
        slash commands are announced when the client knows the session: right after the
        answer, or before a `session/load`'s (`loaded`: nothing of a loaded session may
        follow the answer to its replay)."""
        if loaded:
            self.sessions.announce_commands(session.id)
        else:
            self.protocol.after_the_answer(lambda: self.sessions.announce_commands(session.id))
        self.protocol.after_the_answer(self._preload_sdk)
        return {
            "modes": mode_state(session.settings.mode),
            "configOptions": self.sessions.config_options(session),
        }

    def _preload_sdk(self, *, at_once: bool = False) -> None:
        """The first prompt need not wait for the SDK's import: it starts in a thread
        PRELOAD_DELAY_SECONDS after `initialize`, or once a loaded session is answered, and
        `session/new` starts it (`at_once`) if it has not started, without waiting for it
        (the first prompt that needs the SDK waits for what is left of the import,
        `ProviderRegistry.resolved`). Not at `initialize` itself, nor while a load runs: an editor
        that reopens a session sends `session/load` at once, and the import (a second of
        CPU, under the GIL) would slow its replay (the timer's call, during a load, leaves
        it to the answer's), or `initialize`'s answer."""
        if not self.sdk_preload_started and not self.loads_running:
            self.sdk_preload_started = True
            if at_once:
                self.providers.preload()
            else:  # after the answer is flushed (the flush is already scheduled)
                asyncio.get_running_loop().call_soon(self.providers.preload)

    async def start_mcp_servers(
        self, session_id: str, servers: list[McpServerParams], *, loaded: bool = False
    ) -> None:
        """Start the MCP servers a client listed for an open session (session/new, load,
        resume: call it last, before the handler answers): `server_mcp.start_listed`."""
        ports = McpPorts(
            self.sessions, self.send_update, self.protocol.after_the_answer, self.mcp_reports
        )
        await start_listed(ports, self.sessions.get(session_id), servers, loaded=loaded)

    async def _choose_kernel(self, session_id: str, value: Any) -> dict[str, Any]:
        """The `kernel` config option set: the session attached to that kernel (or Parley's
        own); one that cannot be used is said in a notice."""
        session = self.sessions.get(session_id)
        try:
            choice = chosen_kernel(value, session)
        except ValueError as error:
            raise JsonRpcInvalidParams(f"invalid params: {error}") from None
        await self._attach_kernel(session, (True, choice), loaded=True)
        return {"configOptions": self.sessions.config_options(session)}

    async def _attach_kernel(
        self, session: Session, kernel: tuple[bool, KernelChoice | None], *, loaded: bool = False
    ) -> None:
        """The session's Python tools on the kernel `_meta.parley.kernel` named (given), else
        on the one it is stored with (agent/user_kernels.py); a kernel that cannot be used is
        said in a warning notice, when the session is known to the client (as MCP's)."""
        given, choice = kernel
        if not given:
            if session.settings.kernel is None:
                return
            try:  # the stored address, checked as a client's would be
                choice = kernel_choice(session.settings.kernel.wire())
            except ValueError as error:
                logger.warning("A stored kernel address was not used: %s", error)
                choice = None
        problem = await self.user_kernels.attach(session, choice)
        if problem is not None:
            notice = updates.notice_chunk(f"notice_{uuid.uuid4().hex[:20]}", "warning", problem)
            if loaded:
                self.send_update(session.id, notice)
            else:
                self.protocol.after_the_answer(lambda: self.send_update(session.id, notice))

    def _tools_for(self, cwd: Roots | Path, eval_timeout: float | None = None) -> list[Tool]:
        """The tools of a session in `cwd` (its roots): the server's own (a Python kernel,
        the workspace files), then the editor's (which win a name clash: the user chose that
        editor)."""
        kernel = kernel_settings(self.settings, eval_timeout)
        editor_tools = [
            EditorTool(spec, self._call_editor, self.settings.tool_timeout_seconds)
            for spec in self.client_tools
        ]
        return [*server_tools(cwd, kernel, command_settings(self.settings)), *editor_tools]

    async def _call_editor(self, params: dict[str, Any], timeout: float) -> Any:
        return await self.protocol.request("_parley/editor/callTool", params, timeout)


def kernel_settings(settings: Settings, eval_timeout: float | None = None) -> KernelSettings:
    """A session's kernel: config.toml's `[kernel]` (`cpu_seconds` 0: no cap) in its
    `[sandbox]`, never seeing the providers' key variables; `eval_timeout`, the session's
    own limit per call, over the configured one."""
    kernel = settings.kernel
    return KernelSettings(
        python=kernel.python,
        timeout_seconds=kernel.timeout_seconds if eval_timeout is None else eval_timeout,
        output_limit=kernel.output_limit,
        memory_limit_bytes=kernel.memory_limit_bytes,
        cpu_seconds=kernel.cpu_seconds or None,
        secret_env_names=settings.secret_env_names(),
        sandbox=settings.sandbox,
    )


def user_kernel_settings(settings: Settings) -> UserKernelSettings:
    """The user's own kernel's limits: config.toml's `[kernel]` (a session's own limit per
    call is applied when it attaches)."""
    kernel = settings.kernel
    return UserKernelSettings(
        timeout_seconds=kernel.timeout_seconds,
        busy_wait_seconds=kernel.busy_wait_seconds,
        output_limit=kernel.output_limit,
    )


def command_settings(settings: Settings) -> CommandSettings:
    """`run_command`'s: config.toml's `[commands]` in its `[sandbox]`, without the providers'
    key variables."""
    return CommandSettings(
        timeout_seconds=settings.commands.timeout_seconds,
        max_timeout_seconds=settings.commands.max_timeout_seconds,
        secret_env_names=settings.secret_env_names(),
        sandbox=settings.sandbox,
    )


@contextlib.contextmanager
def _as_json_rpc_errors() -> Iterator[None]:
    """The agent's errors as the JSON-RPC errors the protocol gives them."""
    try:
        yield
    except UnknownSession as error:
        raise _not_found(error.message) from error
    except SessionInUse as error:
        raise JsonRpcServerError(error.message, SESSION_BUSY_CODE) from error
    except BudgetSpent as error:
        raise JsonRpcServerError(error.message, BUDGET_SPENT_CODE) from error
    except (InvalidOptions, UnsupportedContent) as error:
        raise JsonRpcInvalidParams(error.message) from error
    except ProviderError as error:
        raise JsonRpcServerError(
            error.message, PROVIDER_ERROR_CODE, error.to_wire_data()
        ) from error


def _page_start(cursor: str | None) -> int:
    """Where a `session/list` page starts: 0, or a cursor this server issued (the offset of
    a later page, in decimal); any other cursor is invalid params."""
    if cursor is None:
        return 0
    if cursor.isascii() and cursor.isdigit() and cursor == str(int(cursor)):
        start = int(cursor)
        if start > 0 and start % SESSIONS_PAGE_SIZE == 0:
            return start
    raise JsonRpcInvalidParams(f"cursor: {cursor[:40]!r} is not a cursor this server issued")


def _tool_info(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "kind": spec.kind,
        "needsPermission": spec.needs_permission,
    }


def _not_found(message: str) -> JsonRpcServerError:
    return JsonRpcServerError(message, RESOURCE_NOT_FOUND_CODE)


def run_stdio(settings: Settings, framing: Framing) -> None:
    """Serve on this process's stdin/stdout until stdin closes or SIGTERM/SIGINT."""
    # A crash in a library's C code (a segfault) leaves every thread's traceback on stderr:
    # the editor's log of the server says where, instead of only that it died.
    faulthandler.enable()

    async def main() -> None:
        server = ParleyServer(settings)
        # Off unless PARLEY_LOOP_WATCHDOG_MS is set (the tests set it): reports every time
        # the loop is blocked past it, and what blocked it (core/loop_watchdog.py).
        watchdog = LoopWatchdog.from_environment()
        if watchdog is not None:
            watchdog.start()
        try:
            await server.serve(await stdin_reader(), sys.stdout.buffer, framing)
        finally:
            if watchdog is not None:
                watchdog.stop()

    asyncio.run(main())
