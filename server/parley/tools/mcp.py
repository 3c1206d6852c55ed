"""The tools of the MCP servers a client lists in `session/new` or `session/load` (ACP's
`mcpServers`), run with the official MCP SDK (`mcp`).

Each server gets one long-lived task (`McpConnection._serve`) that enters the SDK's transport
and `ClientSession`, lists the tools, waits for the session's end, then leaves them: anyio
requires a context manager to be left in the task that entered it. The turn calls a tool from
its own task through that `ClientSession` (its streams are not tied to a task).

What the user is promised: a server that cannot start (a bad command, a crash or a hang in
its initialisation, past START_TIMEOUT_SECONDS) is reported and the session goes on without
it; a call that hangs ends at the tool timeout, one whose server crashed ends at once, both as
error results; the servers end with the session. A stdio server gets only the variables the
client listed for it and a minimal base (`child_env.mcp_server_environment`), never Parley's
keys; it starts through `parley.sandbox` (bubblewrap where it runs, with the network only if
config.toml's `[sandbox] mcp_network` names it); its stderr goes to a temporary file, whose end
is quoted when it fails to start.

The SDK is imported when a session first lists a server: it takes about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from parley.child_env import mcp_server_environment
from parley.core.call_view import CallView
from parley.core.redact import redact
from parley.sandbox import (
    UNSANDBOXED_MARK,
    ChildSpec,
    Launch,
    SandboxSettings,
    prepare,
    sandbox_status,
)
from parley.tools.base import ToolContext, ToolResult, ToolSpec

logger = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 10.0  # the default of config.toml's mcp_start_timeout_seconds
# How long closing a server may take: the SDK closes a stdio server's stdin, waits 2 s, then
# sends SIGTERM and SIGKILL to its process group, 2 s apart.
CLOSE_TIMEOUT_SECONDS = 10.0
# Past the call's own timeout (the SDK's), a last bound in case the SDK does not end it.
CALL_GRACE_SECONDS = 5.0
# OpenAI and Anthropic take tool names of 1 to 64 letters, digits, `_` and `-`.
NAME_LIMIT = 64
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")
STDERR_TAIL_CHARS = 400
# MCP's error codes (mcp.types), for the SDK's MCPError, whose import is deferred.
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


@attrs.frozen
class McpServerConfig:
    """A server as the client listed it: stdio (`command`, `args`, `env`) or HTTP (`url`,
    `headers`)."""

    name: str
    transport: str = "stdio"  # "stdio", "http"; another is reported as not supported
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()


class McpStartFailed(Exception):
    """A server that did not start; the message says why, for the user."""


@attrs.frozen
class RemoteTool:
    """A tool as its server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    kind: str


class McpConnection:
    """One MCP server of a session: started once, called by its tools, closed once."""

    def __init__(
        self, config: McpServerConfig, cwd: Path, sandbox: SandboxSettings | None = None
    ) -> None:
        self.config = config
        self._cwd = cwd
        self.sandbox = sandbox or SandboxSettings()
        self._session: Any = None  # the SDK's ClientSession, while the server runs
        self._task: asyncio.Task[None] | None = None
        self._scope: Any = None  # the anyio CancelScope around the task's work
        self._stop = asyncio.Event()
        self._stderr: Any = None  # a stdio server's stderr (a temporary file)
        self._exited = False  # the connection closed under a call: the server is gone

    async def start(self, timeout: float) -> list[RemoteTool]:
        """Start the server and list its tools; raises McpStartFailed."""
        ready: asyncio.Future[list[RemoteTool]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp:{self.config.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            tail = self._stderr_tail()
            await self._close_failed(ready)
            raise McpStartFailed(f"it did not answer within {timeout:g} s{tail}") from None
        except BaseException:
            await self._close_failed(ready)
            raise

    async def _close_failed(self, ready: asyncio.Future[list[RemoteTool]]) -> None:
        await self.aclose()
        if ready.done() and not ready.cancelled():
            ready.exception()  # seen: asyncio would log it as never retrieved

    async def _serve(self, ready: asyncio.Future[list[RemoteTool]]) -> None:
        import anyio
        from mcp.client.session import ClientSession

        try:
            with anyio.CancelScope() as self._scope:
                async with contextlib.AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._transport())
                    session = await stack.enter_async_context(ClientSession(read, write))
                    await session.initialize()
                    tools = await _listed_tools(session)
                    self._session = session
                    ready.set_result(tools)
                    await self._stop.wait()
        except Exception as error:  # whatever it was, the user is told why
            if not ready.done():
                ready.set_exception(McpStartFailed(_reason(error) + self._stderr_tail()))
            else:
                logger.warning("MCP server %s ended: %s", self.config.name, _reason(error))
        finally:
            self._session = None
            if not ready.done():
                ready.set_exception(McpStartFailed("it was stopped before it started"))
            if self._stderr is not None:
                self._stderr.close()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        config = self.config
        if config.transport == "stdio":
            spec = ChildSpec(
                (config.command, *config.args),
                self._cwd,
                mcp_server_environment(dict(config.env)),
                network=self.sandbox.mcp_may_use_network(config.name),
                label=f"mcp-{config.name}",
            )
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by _serve
            return _stdio_transport(spec, self.sandbox, self._stderr)
        if config.transport == "http":
            return _http_transport(config.url, dict(config.headers))
        raise McpStartFailed(
            f"its transport, {config.transport}, is not supported (stdio and http are)"
        )

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Call tool `name`; every failure (a hang, a crash, an error) is an error result."""
        server = self.config.name
        session = self._session
        if session is None or self._exited:
            return ToolResult(
                f"The MCP server {server!r} is not running (it stopped earlier in this "
                "session), so its tools cannot be used.",
                is_error=True,
            )
        try:
            result = await asyncio.wait_for(
                session.call_tool(name, arguments, read_timeout_seconds=timeout),
                timeout + CALL_GRACE_SECONDS,
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the SDK's MCPError, a transport error
            if getattr(error, "code", None) == CONNECTION_CLOSED:
                self._exited = True
            return ToolResult(_call_failure(server, name, error, timeout), is_error=True)
        return tool_result(result)

    async def aclose(self) -> None:
        """Stop the server (idempotent); bounded, whatever the server does."""
        task = self._task
        if task is None or task.done():
            return
        self._stop.set()  # a running server: leave the contexts in order
        if self._session is None:  # still starting: interrupt what it waits for
            if self._scope is not None:
                self._scope.cancel()
            else:
                task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_SECONDS)
        except TimeoutError:
            logger.warning("MCP server %s did not stop in time", self.config.name)
        except asyncio.CancelledError:
            if not task.done():
                raise

    def _stderr_tail(self) -> str:
        """The end of a stdio server's stderr, to quote in a failure ("" if none)."""
        if self._stderr is None or self._stderr.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read().strip()
            if text:
                return f". Its last output:\n{text[-STDERR_TAIL_CHARS:]}"
        return ""


@contextlib.asynccontextmanager
async def _stdio_transport(
    spec: ChildSpec, sandbox: SandboxSettings, errlog: Any
) -> AsyncIterator[Any]:
    """The SDK's stdio transport to a server started through the sandbox's launcher; its
    pids group is emptied and removed when the transport closes."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    launch: Launch = await asyncio.to_thread(prepare, spec, sandbox)
    parameters = StdioServerParameters(
        command=launch.argv[0], args=list(launch.argv[1:]), env=launch.env, cwd=launch.cwd
    )
    try:
        async with stdio_client(parameters, errlog=errlog) as streams:
            yield streams
    finally:
        await asyncio.shield(asyncio.to_thread(launch.end))


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults: a long read timeout, since a server may hold a stream open.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


async def _listed_tools(session: Any) -> list[RemoteTool]:
    capabilities = session.server_capabilities
    if capabilities is not None and capabilities.tools is None:
        return []  # a server of prompts or resources only
    from mcp.types import PaginatedRequestParams

    tools: list[RemoteTool] = []
    cursor = None
    while True:
        page = await session.list_tools(
            params=PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        tools += [_remote_tool(tool) for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return tools


def _remote_tool(tool: Any) -> RemoteTool:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {}}
    return RemoteTool(
        name=tool.name,
        description=tool.description or tool.title or "",
        input_schema=schema,
        kind=_kind(tool.annotations),
    )


def _kind(annotations: Any) -> str:
    """The ACP kind from the tool's annotations (hints only: permission is asked anyway)."""
    if annotations is None or not annotations.read_only_hint:
        return "other"
    return "fetch" if annotations.open_world_hint else "read"


def tool_result(result: Any) -> ToolResult:
    """An MCP `CallToolResult` as the model's tool result: its text, and a short note for
    each block that is not text."""
    parts = [_block_text(block) for block in result.content]
    text = "\n".join(part for part in parts if part)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    return ToolResult(text or "(no output)", is_error=bool(result.is_error))


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return text if isinstance(text, str) else f"[resource: {resource.uri}]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    return f"[{kind or 'unknown'} content]"


def _call_failure(server: str, name: str, error: Exception, timeout: float) -> str:
    code = getattr(error, "code", None)
    if isinstance(error, TimeoutError) or code == REQUEST_TIMEOUT:
        return f"The MCP server {server!r} did not answer {name} within {timeout:g} s."
    if code == CONNECTION_CLOSED:  # the server's process ended
        return f"The MCP server {server!r} stopped while running {name}; it is not running now."
    return f"The MCP server {server!r} failed to run {name}: {_reason(error)}"


def _reason(error: BaseException) -> str:
    """What went wrong, in a line: the first real error inside anyio's exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, McpStartFailed):
        return str(error)
    if isinstance(error, FileNotFoundError):
        return f"its command was not found ({error.filename or error})"
    if isinstance(error, PermissionError):
        return f"its command cannot be run ({error.filename or error})"
    message = str(error) or type(error).__name__
    if type(error).__name__ == "MCPError" and message == "Connection closed":
        return "it exited before it answered"
    return f"{type(error).__name__}: {message}"


class McpTool:
    """One tool of an MCP server, offered to the model under a namespaced name; every call
    asks permission (unless allowed always): the server's annotations are only hints."""

    def __init__(
        self, connection: McpConnection, remote: RemoteTool, name: str, timeout: float
    ) -> None:
        server = connection.config.name
        description = remote.description or f"The tool {remote.name}"
        self.spec = ToolSpec(
            name,
            f"{description} (tool {remote.name!r} of the MCP server {server!r})",
            remote.input_schema,
            remote.kind,
            needs_permission=True,
        )
        self.server = server
        self._connection = connection
        self._remote_name = remote.name
        self._timeout = timeout

    def describe_call(self, arguments: dict[str, Any]) -> CallView:
        """The tool's name; a stdio server outside the sandbox says so in the question."""
        config = self._connection.config
        if config.transport == "stdio" and not sandbox_status(self._connection.sandbox).sandboxed:
            return CallView(self.spec.name + UNSANDBOXED_MARK)
        return CallView(self.spec.name)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return await self._connection.call(self._remote_name, arguments, self._timeout)


def namespaced_name(server: str, tool: str, taken: Iterable[str] = ()) -> str:
    """`mcp__SERVER__TOOL`, within the providers' rules for names (letters, digits, `_`,
    `-`; at most NAME_LIMIT), and unlike every name in `taken`."""
    full = f"mcp__{_NOT_IN_A_NAME.sub('_', server)}__{_NOT_IN_A_NAME.sub('_', tool)}"
    name = full
    if len(name) > NAME_LIMIT:
        digest = hashlib.sha256(full.encode()).hexdigest()[:8]
        name = f"{full[: NAME_LIMIT - 9]}_{digest}"
    taken = set(taken)
    number = 2
    unique = name
    while unique in taken:
        suffix = f"_{number}"
        unique = name[: NAME_LIMIT - len(suffix)] + suffix
        number += 1
    return unique


class McpConnections:
    """A session's MCP servers: started together, their tools, closed together."""

    def __init__(
        self,
        cwd: Path,
        tool_timeout: float,
        start_timeout: float = START_TIMEOUT_SECONDS,
        sandbox: SandboxSettings | None = None,
    ) -> None:
        self._cwd = cwd
        self._sandbox = sandbox
        self._tool_timeout = tool_timeout
        self._start_timeout = start_timeout
        self._connections: list[McpConnection] = []
        self.tools: list[McpTool] = []

    async def start(self, servers: Sequence[McpServerConfig]) -> list[str]:
        """Start every server at once; their tools go to `tools`. Returns, for each server
        that did not start, a sentence for the user."""
        connections = [McpConnection(server, self._cwd, self._sandbox) for server in servers]
        self._connections += connections
        outcomes = await asyncio.gather(
            *(connection.start(self._start_timeout) for connection in connections),
            return_exceptions=True,
        )
        failures = []
        for connection, outcome in zip(connections, outcomes, strict=True):
            name = connection.config.name
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, McpStartFailed):
                    logger.error("MCP server %s failed to start", name, exc_info=outcome)
                reason = redact(_reason(outcome))  # it may quote the server's stderr
                # The user is told, in the chat: for an operator, INFO.
                logger.info("MCP server %s did not start: %s", name, reason.splitlines()[0])
                failures.append(
                    f"The MCP server `{name}` could not start: {reason}\n"
                    "This session goes on without its tools."
                )
                continue
            self._add_tools(connection, outcome)
        return failures

    def _add_tools(self, connection: McpConnection, remote_tools: list[RemoteTool]) -> None:
        taken = {tool.spec.name for tool in self.tools}
        for remote in remote_tools:
            name = namespaced_name(connection.config.name, remote.name, taken)
            taken.add(name)
            self.tools.append(McpTool(connection, remote, name, self._tool_timeout))

    async def aclose(self) -> None:
        """Stop every server (at once: each may take seconds to stop)."""
        connections, self._connections = self._connections, []
        self.tools = []
        await asyncio.gather(*(connection.aclose() for connection in connections))
