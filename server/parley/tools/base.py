"""What a tool is: its description for the model, and how it runs.

Every tool Parley offers the model, whether it runs in the server (the Python kernel, the
workspace files) or in the editor (declared by the client in `initialize`), implements
`Tool`. The agent loop only ever sees this interface.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from parley.core.call_view import CallView, Diff
from parley.tools.arguments import InvalidArguments, json_schema, read_arguments

logger = logging.getLogger(__name__)

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
    # Asked at every call: no "always allow", mode or `autoApprove` skips the question (an
    # evaluation in the user's own kernel, outside the sandbox).
    always_asks: bool = False


@attrs.frozen
class ToolResult:
    """The outcome of one tool call.

    `content` is what the model is sent back. `raw_output` is what the editor is shown as
    `rawOutput` (defaults to `{"content": ..., "isError": ...}` when None).
    """

    content: str
    is_error: bool = False
    raw_output: Any = None
    diffs: tuple[Diff, ...] = ()  # the changes made (an edit's), shown with the result
    # ACP content blocks shown before the result's text (a command's `{"type": "terminal",
    # "terminalId": ...}`, which a client keeps showing after the call ends).
    shown_first: tuple[dict[str, Any], ...] = ()


class ClientFiles(Protocol):
    """The editor's view of the workspace's files (ACP `fs/read_text_file`): what its
    buffers hold, saved or not. The server implements it when the editor offers it."""

    async def read_text_file(self, session_id: str, path: str) -> str:
        """The whole text of the file at the absolute `path`; raises when the editor
        cannot answer (an error, or no answer in time)."""
        ...


class ClientWrites(Protocol):
    """The editor writes the workspace's files (ACP `fs/write_text_file`): into the buffer
    visiting the file, so that its undo works and no buffer goes stale. The server
    implements it when the editor offers it."""

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        """Make `content` the whole text of the file at the absolute `path`; raises when the
        editor cannot (an error, or no answer in time)."""
        ...


class ClientTerminals(Protocol):
    """The editor runs commands in terminals of its own (ACP `terminal/*`), which the user
    watches live. The server implements it when the editor offers it (`terminal: true`).
    Each method raises when the editor answers with an error or not at all."""

    async def create_terminal(self, session_id: str, params: dict[str, Any]) -> str:
        """`terminal/create` with `params` (command, args, env, cwd, outputByteLimit);
        answers the terminal's id."""
        ...

    async def terminal_request(
        self, method: str, session_id: str, terminal_id: str
    ) -> dict[str, Any]:
        """`terminal/output`, `terminal/wait_for_exit`, `terminal/kill` or
        `terminal/release` of one terminal; answers the editor's result."""
        ...


class EditJournal(Protocol):
    """Keeps what a turn's edits overwrite, so that the turn can be undone (checkpoints).
    The agent implements it; edit tools call it before they change a file."""

    def before_write(self, path: Path) -> None:
        """`path` (absolute, inside the workspace) is about to be written or created: the
        first time in a turn, keep its current bytes (or that it did not exist)."""
        ...

    def runs_later_found(self) -> tuple[Path, ...]:
        """The places below the roots that run later outside the sandbox, as the turn's
        last snapshot found them (a command's sandbox keeps them read-only)."""
        ...


# A title quotes at most this much of an argument (a pattern, a dotted name).
TITLE_QUOTE_CHARS = 60


def quoted(text: str) -> str:
    """`text` for a title, in backticks: its first line, cut to a readable length."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) > TITLE_QUOTE_CHARS:
        line = line[: TITLE_QUOTE_CHARS - 1] + "…"
    return "`" + line.replace("`", "'") + "`"


def describe_call(tool: Tool | None, name: str, arguments: Any) -> CallView:
    """How to show a call of `tool` (None: no such tool) with `arguments`. A tool without
    `describe_call` (an editor's) is shown by its name; its arguments go as `rawInput`."""
    describe = getattr(tool, "describe_call", None)
    if describe is None or not isinstance(arguments, dict):
        return CallView(name)
    try:
        return describe(arguments)
    except Exception:  # a title must never cost the call
        logger.exception("Describing a call of %s failed", name)
        return CallView(name)


@attrs.frozen
class ToolContext:
    """Where and for whom a call runs."""

    session_id: str
    tool_call_id: str
    cwd: Path
    client_files: ClientFiles | None = None  # None: read the files on disk
    client_writes: ClientWrites | None = None  # None: write the files on disk
    edit_journal: EditJournal | None = None  # None: edits are not checkpointed
    # Sends a `session/update` of this session to the editor while the call runs (a
    # command's output as it comes, a plan): None where nobody is shown (the bench).
    send_update: Callable[[dict[str, Any]], None] | None = None
    terminals: ClientTerminals | None = None  # None: commands run in Parley's own runner
    # The session's workspace roots, each resolved: the cwd's first, then the client's
    # `additionalDirectories` (a command's sandbox makes them all writable).
    roots: tuple[Path, ...] = attrs.field(
        kw_only=True, default=attrs.Factory(lambda self: (self.cwd,), takes_self=True)
    )


@runtime_checkable
class Tool(Protocol):
    """A tool the model may call.

    `run` must not raise for ordinary failures (bad arguments, a missing file, code that
    raises): it returns `ToolResult(is_error=True)` with a message the model can act on.
    Anything it does raise is turned into such a result by the agent loop. It may be
    cancelled (asyncio) at any await, when the user cancels the turn.

    A tool that holds resources (a kernel process) may also define `async def aclose()`;
    the session's registry calls it once when the session ends. A tool may define
    `describe_call(arguments) -> CallView` to be shown to the user by more than its name,
    and `async def precheck(arguments, context) -> ToolResult | None`: a call that would
    fail (an edit of a file the model has not read) is answered with that error before the
    user is asked about it.
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

    def describe_call(self, arguments: dict[str, Any]) -> CallView:
        """How the editor shows a call: `view` of its arguments; the tool's name when they
        cannot be read (the call will fail and say why)."""
        try:
            declared = read_arguments(self.Arguments, arguments)
        except InvalidArguments:
            return CallView(self.spec.name)
        return self.view(declared)

    def view(self, arguments: Any) -> CallView:
        """The `CallView` of a call with these (valid) arguments; by default, the name."""
        return CallView(self.spec.name)


def declared_spec(
    name: str,
    description: str,
    arguments: type,
    *,
    kind: str = "other",
    needs_permission: bool = False,
    always_asks: bool = False,
) -> ToolSpec:
    """The spec of a `DeclaredTool`: its input schema is its `Arguments` class's."""
    return ToolSpec(name, description, json_schema(arguments), kind, needs_permission, always_asks)
