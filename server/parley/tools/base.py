"""What a tool is: its description for the model, and how it runs.

Every tool Parley offers the model, whether it runs in the server (the Python kernel, the
workspace files) or in the editor (declared by the client in `initialize`), implements
`Tool`. The agent loop only ever sees this interface.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from parley.tools.arguments import InvalidArguments, json_schema, read_arguments

# ACP ToolKind values: how an editor may show a call (icon, grouping).
TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode"}
    | {"other"}
)


@attrs.frozen
class ToolSpec:
    """What the model and the editor are told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]
    kind: str = "other"
    needs_permission: bool = False


@attrs.frozen
class ToolResult:
    """The outcome of one tool call.

    `content` is what the model is sent back. `raw_output` is what the editor is shown as
    `rawOutput` (defaults to `{"content": ..., "isError": ...}` when None).
    """

    content: str
    is_error: bool = False
    raw_output: Any = None


class ClientFiles(Protocol):
    """The editor's view of the workspace's files (ACP `fs/read_text_file`): what its
    buffers hold, saved or not. The server implements it when the editor offers it."""

    async def read_text_file(self, session_id: str, path: str) -> str:
        """The whole text of the file at the absolute `path`; raises when the editor
        cannot answer (an error, or no answer in time)."""
        ...


@attrs.frozen
class ToolContext:
    """Where and for whom a call runs."""

    session_id: str
    tool_call_id: str
    cwd: Path
    client_files: ClientFiles | None = None  # None: read the files on disk


@runtime_checkable
class Tool(Protocol):
    """A tool the model may call.

    `run` must not raise for ordinary failures (bad arguments, a missing file, code that
    raises): it returns `ToolResult(is_error=True)` with a message the model can act on.
    Anything it does raise is turned into such a result by the agent loop. It may be
    cancelled (asyncio) at any await, when the user cancels the turn.

    A tool that holds resources (a kernel process) may also define `async def aclose()`;
    the session's registry calls it once when the session ends.
    """

    spec: ToolSpec

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult: ...


class DeclaredTool:
    """A server tool whose arguments are declared once, as the attrs class `Arguments` (see
    `arguments.py`): its `spec` shows the model `json_schema(Arguments)`, and `run` reads a
    call's arguments into an `Arguments` (a wrong one is an error result that says which)
    for `execute`, where the tool's work is."""

    spec: ToolSpec
    Arguments: type

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            declared = read_arguments(self.Arguments, arguments)
        except InvalidArguments as exc:
            return ToolResult(str(exc), is_error=True)
        return await self.execute(declared, context)

    async def execute(self, arguments: Any, context: ToolContext) -> ToolResult:
        raise NotImplementedError


def declared_spec(
    name: str,
    description: str,
    arguments: type,
    *,
    kind: str = "other",
    needs_permission: bool = False,
) -> ToolSpec:
    """The spec of a `DeclaredTool`: its input schema is its `Arguments` class's."""
    return ToolSpec(name, description, json_schema(arguments), kind, needs_permission)
