"""Each open session's MCP servers, started in the background.

A server takes from a fraction of a second to its whole start timeout to answer (a hanging
one): `session/new` does not wait for them, so an editor's chat opens at once. Their tools
join the session's once its servers have started; a turn waits for servers still starting
before its first request (`Session.mcp_starting`, awaited by `Turn.run`), so a prompt sent
at once is answered with every tool that could start. A session's servers are replaced
(`session/load`, `resume`) or closed (`session/close`, `delete`, the server's end) only
once a start in progress is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from parley.agent.session import Session
from parley.config import Settings
from parley.core.off_loop import import_off_loop
from parley.tools.mcp import McpConnections, McpServerConfig

# What the MCP SDK imports as its servers start (tools/mcp.py imports it at first use).
MCP_MODULES = (
    "anyio",
    "anyio._backends._asyncio",
    "httpx2",
    # Imported by the SDK inside its first `call_tool` (validate_tool_result): with its format
    # extras installed (rfc3987-syntax, which jupyter_server brings) it compiles a grammar for
    # a second, which would be on the event loop.
    "jsonschema",
    "mcp.client.session",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.types",
)


class SessionMcpServers:
    """The MCP servers of every open session of this server."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._connections: dict[str, McpConnections] = {}

    async def replace(
        self, session: Session, servers: Sequence[McpServerConfig]
    ) -> asyncio.Task[list[str]] | None:
        """Close the session's servers, then start `servers` in a task of its own (None when
        there are none): its result is a sentence for the user per server that did not
        start; the session works without it."""
        await self.close(session)
        if not servers:
            return None
        task = asyncio.create_task(self._start(session, servers), name=f"mcp-start:{session.id}")
        session.mcp_starting = task
        return task

    async def _start(self, session: Session, servers: Sequence[McpServerConfig]) -> list[str]:
        await import_off_loop(*MCP_MODULES)  # the SDK, a second to import: not on the loop
        connections = McpConnections(
            session.cwd,
            tool_timeout=self._settings.tool_timeout_seconds,
            start_timeout=self._settings.mcp_start_timeout_seconds,
            sandbox=self._settings.sandbox,
        )
        self._connections[session.id] = connections
        failures = await connections.start(servers)
        for tool in connections.tools:
            session.tools.add(tool)
        return failures

    async def close(self, session: Session) -> None:
        """Stop the session's servers, those still starting too (their start is cancelled:
        each connection closes what it had begun)."""
        starting, session.mcp_starting = session.mcp_starting, None
        if starting is not None and not starting.done():
            starting.cancel()
        if starting is not None:
            await asyncio.gather(starting, return_exceptions=True)
        connections = self._connections.pop(session.id, None)
        if connections is not None:
            for tool in connections.tools:
                session.tools.remove(tool.spec.name)
            await connections.aclose()
