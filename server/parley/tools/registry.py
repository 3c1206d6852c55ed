"""A session's tools: the server's own and the editor's, by name."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from parley.core.call_view import CallView
from parley.tools.base import Tool, ToolSpec, describe_call

logger = logging.getLogger(__name__)


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Add a tool; a later tool of the same name (the editor's) replaces an earlier one."""
        self._tools[tool.spec.name] = tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec for tool in self._tools.values())

    def kind_of(self, name: str) -> str:
        tool = self._tools.get(name)
        return tool.spec.kind if tool else "other"

    def view_of(self, name: str, arguments: Any) -> CallView:
        """How the editor shows a call of `name` with `arguments`."""
        return describe_call(self._tools.get(name), name, arguments)

    def forget_file_texts(self) -> None:
        """The turn in which the model read files is gone from its conversation (a retry
        replaced it): no file's text counts as read, so an edit asks for a read first, as
        in a session reopened after a restart."""
        for tool in self._tools.values():
            forget = getattr(tool, "forget_file_texts", None)
            if forget is not None:
                forget()

    def forget_files(self, paths: Iterable[str]) -> None:
        """`paths` changed behind the model (a restore): each must be read again before an
        edit, and an edit's diff is shown against the file as it is now."""
        for tool in self._tools.values():
            forget = getattr(tool, "forget_files", None)
            if forget is not None:
                forget(paths)

    async def aclose(self) -> None:
        """Release what the tools hold. Tools that share a resource (one kernel behind
        several Python tools) close it idempotently, so each tool's aclose is called."""
        for tool in self._tools.values():
            close = getattr(tool, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                logger.exception("Closing tool %s failed", tool.spec.name)
