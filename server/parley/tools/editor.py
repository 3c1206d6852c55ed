"""Tools the editor runs itself (Emacs Lisp evaluation, VS Code diagnostics ...).

The client declares them in `initialize`; a call becomes a `_parley/editor/callTool`
request to the client, whose answer (or error, or silence past the timeout) becomes the
tool's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from parley.tools.base import TOOL_KINDS, ToolContext, ToolResult, ToolSpec

CallEditor = Callable[[dict[str, Any], float], Awaitable[Any]]


class EditorTool:
    def __init__(self, spec: ToolSpec, call_editor: CallEditor, timeout_seconds: float) -> None:
        if spec.kind not in TOOL_KINDS:
            spec = ToolSpec(
                spec.name, spec.description, spec.input_schema, "other", spec.needs_permission
            )
        self.spec = spec
        self._call_editor = call_editor
        self._timeout = timeout_seconds

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        params = {
            "sessionId": context.session_id,
            "toolCallId": context.tool_call_id,
            "name": self.spec.name,
            "arguments": arguments,
        }
        try:
            answer = await self._call_editor(params, self._timeout)
        except TimeoutError:
            return ToolResult(
                f"The editor did not answer {self.spec.name} within {self._timeout:g} s.",
                is_error=True,
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the editor answered with a JSON-RPC error
            message = getattr(error, "message", None) or str(error)
            return ToolResult(
                f"The editor failed to run {self.spec.name}: {message}", is_error=True
            )
        if not isinstance(answer, dict) or not isinstance(answer.get("content"), str):
            return ToolResult(
                f"The editor's answer to {self.spec.name} had no text content.", is_error=True
            )
        return ToolResult(answer["content"], is_error=bool(answer.get("isError")))
