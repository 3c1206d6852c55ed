"""`parley serve --framing ndjson` driven by the official ACP Python SDK's client side, with
every message on the wire recorded for the schema check (tests/acp_schema.py).

The SDK spawns the server (`acp.transports.spawn_stdio_transport`) and speaks to it through
`acp.ClientSideConnection`; a tee between the server's stdout and the SDK's reader keeps each
line the server writes, exactly as written, and the SDK's stream observer keeps what the
client sends (which request a response answers). `EditorClient` is the SDK `Client` a test
plays the editor with: it answers permission requests and file reads, and keeps the updates
as the SDK parsed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
    WriteTextFileResponse,
)
from acp.transports import spawn_stdio_transport
from acp_schema import Violation, acp_schema

READ_CHUNK = 1 << 16
STREAM_LIMIT = 50 * 1024 * 1024  # the SDK's own default for stdio


@dataclass
class NotJson:
    """A line the server wrote that is not JSON: itself a violation of the framing."""

    line: str


@dataclass
class Recording:
    """What crossed the wire, in order, each direction apart."""

    from_agent: list[Any] = field(default_factory=list)  # a dict per message, or NotJson
    from_client: list[dict[str, Any]] = field(default_factory=list)

    def add_agent_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            self.from_agent.append(json.loads(line))
        except ValueError:
            self.from_agent.append(NotJson(line.decode("utf-8", "replace")))

    def observe(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.OUTGOING:
            self.from_client.append(event.message)

    def violations(self) -> list[Violation]:
        found = [
            Violation({"line": m.line}, "$", "not JSON (ndjson: one JSON object per line)")
            for m in self.from_agent
            if isinstance(m, NotJson)
        ]
        agent = [m for m in self.from_agent if not isinstance(m, NotJson)]
        return found + acp_schema().check_agent_messages(self.from_client, agent)

    def assert_conformant(self, only: str | None = None, but: str | None = None) -> None:
        """No violation in the messages of method `only` (or of every method `but` one;
        a response counts as its request's method)."""
        found = [
            v
            for v in self.violations()
            if (only is None or v.method == only) and (but is None or v.method != but)
        ]
        assert not found, f"{len(found)} message(s) break ACP's schema:\n" + "\n".join(
            f"- {violation}" for violation in found
        )

    def agent_messages(self, method: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for m in self.from_agent
            if isinstance(m, dict) and (method is None or m.get("method") == method)
        ]

    def result_of(self, method: str) -> dict[str, Any]:
        """The raw result of the last `method` request the client sent."""
        ids = [m["id"] for m in self.from_client if m.get("method") == method and "id" in m]
        assert ids, f"the client sent no {method}"
        (answer,) = [
            m for m in self.agent_messages() if m.get("id") == ids[-1] and "method" not in m
        ]
        return answer["result"]

    def raw_updates(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.agent_messages("session/update")
            if m["params"].get("sessionId") == session_id
            and (kind is None or m["params"]["update"].get("sessionUpdate") == kind)
        ]


class EditorClient:
    """The editor, as an implementation of the SDK's `acp.Client` protocol."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []  # (sessionId, the SDK's update model)
        self.permission_requests: list[ToolCallUpdate] = []
        self.permission_answer: str | None = "allow_once"  # an optionId; None: `cancelled`
        self.buffers: dict[str, str] = {}  # path → unsaved text, served by fs/read_text_file
        self.file_reads: list[str] = []
        self.file_writes: list[tuple[str, str]] = []  # (path, content), in order

    # --- the acp.Client protocol -------------------------------------------------------

    async def request_permission(
        self,
        options: list[PermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        answer = self.permission_answer
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        assert answer in [option.option_id for option in options], options
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def read_text_file(
        self,
        path: str,
        session_id: str,
        limit: int | None = None,
        line: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.file_reads.append(path)
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        lines = self.buffers[path].splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def write_text_file(
        self, content: str, path: str, session_id: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.file_writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # --- what the user sees -------------------------------------------------------------

    def updates_of(self, session_id: str, kind: str | None = None) -> list[Any]:
        return [
            update
            for sid, update in self.updates
            if sid == session_id and (kind is None or update.session_update == kind)
        ]

    def text_of(self, session_id: str) -> str:
        """The agent's reply as an ACP client without Parley's extensions shows it."""
        return "".join(
            chunk.content.text
            for chunk in self.updates_of(session_id, "agent_message_chunk")
            if isinstance(chunk, AgentMessageChunk) and isinstance(chunk.content, TextContentBlock)
        )

    async def wait_for_update(self, session_id: str, kind: str, timeout: float = 10.0) -> Any:
        async with asyncio.timeout(timeout):
            while not self.updates_of(session_id, kind):
                await asyncio.sleep(0.01)
        return self.updates_of(session_id, kind)[0]


@dataclass
class AcpRun:
    """A connection to one `parley serve`: the SDK connection, the editor, the recording."""

    conn: ClientSideConnection
    editor: EditorClient
    recording: Recording

    async def initialize(
        self, read_files: bool = False, write_files: bool = False
    ) -> InitializeResponse:
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=read_files, write_text_file=write_files)
        )
        return await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=capabilities,
            client_info=Implementation(name="acp-conformance", version="1"),
        )

    # The SDK's client has no method for `session/delete` nor `$/cancel_request`: these go
    # through its connection's own JSON-RPC layer (`ext_method` would prefix an underscore).

    async def raw_request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.conn._conn.send_request(method, params)

    async def raw_notification(self, method: str, params: dict[str, Any]) -> None:
        await self.conn._conn.send_notification(method, params)


async def _tee(
    source: asyncio.StreamReader, sink: asyncio.StreamReader, recording: Recording
) -> None:
    """Copy the server's stdout to the SDK's reader, keeping each line on the way."""
    pending = b""
    try:
        while chunk := await source.read(READ_CHUNK):
            sink.feed_data(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                recording.add_agent_line(line)
        recording.add_agent_line(pending)
    finally:
        sink.feed_eof()


@contextlib.asynccontextmanager
async def acp_server(
    env: dict[str, str],
    editor: EditorClient | None = None,
    interpreter: Sequence[str] = (sys.executable,),
) -> AsyncIterator[AcpRun]:
    """`parley serve --framing ndjson` with `env`, connected to the SDK's client side;
    `interpreter` the Python that runs it (another user's: `sandbox_probe.as_user`)."""
    recording = Recording()
    editor = editor or EditorClient()
    tee: asyncio.Future[None] | None = None
    try:
        # The SDK's spawner: on exit it closes the server's stdin and waits for it to end.
        command = [*interpreter, "-m", "parley", "serve", "--framing", "ndjson"]
        async with spawn_stdio_transport(*command, env=env, stderr=None) as (
            stdout,
            stdin,
            _process,
        ):
            teed = asyncio.StreamReader(limit=STREAM_LIMIT)
            tee = asyncio.ensure_future(_tee(stdout, teed, recording))
            conn = ClientSideConnection(editor, stdin, teed, observers=[recording.observe])
            try:
                yield AcpRun(conn, editor, recording)
            finally:
                await conn.close()
    finally:
        if tee is not None:  # the server has exited: its last lines are in
            await asyncio.wait_for(tee, 10)
