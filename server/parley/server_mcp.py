"""The MCP servers a client lists for a session (`session/new`, `load`, `resume`, `fork`),
started for it and their failures told (docs/protocol.md, "MCP servers")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from parley.agent.session import Session
from parley.agent.sessions import Sessions
from parley.core import updates
from parley.protocol.params import McpServerParams
from parley.tools.mcp import McpServerConfig


@attrs.frozen
class McpPorts:
    """What starting a session's MCP servers needs of the server."""

    sessions: Sessions
    send_update: Callable[[str, dict[str, Any]], None]
    after_the_answer: Callable[[Callable[[], None]], None]  # runs it once the answer is out
    reports: set[asyncio.Task[None]]  # the tasks that tell failures, held until done


async def start_listed(
    server: McpPorts, session: Session, listed: list[McpServerParams], *, loaded: bool
) -> None:
    """Start the session's MCP servers in the background (agent/mcp_servers.py). A server
    that did not start is told to the user as a message of its own once the start has ended
    and the answer has gone: an ACP client drops updates of a session it does not know yet.
    A loaded session's (`loaded`) start is waited for, and told before the answer: nothing of
    a loaded session may follow the answer to its replay. The handlers check the list
    (`check_mcp_servers`, -32602) before they open the session."""
    configs = [mcp_server_config(entry) for entry in listed]
    starting = await server.sessions.mcp.replace(session, configs)
    if starting is None:
        return
    if loaded:
        _tell_failures(server, session.id, await starting)
        return
    answered = asyncio.Event()
    server.after_the_answer(answered.set)

    async def tell_when_started() -> None:
        failures = await starting
        await answered.wait()
        _tell_failures(server, session.id, failures)

    # Held until done (the loop keeps only a weak reference); a session closed meanwhile
    # cancels its start, and with it this.
    task = asyncio.create_task(tell_when_started())
    server.reports.add(task)
    task.add_done_callback(server.reports.discard)


def _tell_failures(server: McpPorts, session_id: str, failures: list[str]) -> None:
    if failures and server.sessions.is_open(session_id):
        text = "\n\n".join(failures)
        chunk = updates.message_chunk(f"msg_{uuid.uuid4().hex[:20]}", text)
        server.send_update(session_id, chunk)


def mcp_server_config(server: McpServerParams) -> McpServerConfig:
    return McpServerConfig(
        name=server.name,
        transport=server.type,
        command=server.command or "",
        args=tuple(server.args or ()),
        env=tuple((variable.name, variable.value) for variable in server.env or ()),
        url=server.url or "",
        headers=tuple((header.name, header.value) for header in server.headers or ()),
    )
