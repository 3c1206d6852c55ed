"""The tools that run in the server: the Python kernel's tools and the workspace files."""

from __future__ import annotations

from pathlib import Path

from parley.tools.base import Tool
from parley.tools.kernel import KernelSettings, PythonKernel
from parley.tools.python_tools import python_tools
from parley.tools.workspace import workspace_tools


def server_tools(workspace: Path, settings: KernelSettings | None = None) -> list[Tool]:
    """All server-side tools for one session in `workspace`.

    The Python tools share one kernel, whose process starts on first use. Each of them has an
    idempotent `aclose` that stops that kernel; the registry calls it when the session ends.
    """
    kernel = PythonKernel(workspace, settings)
    return [*python_tools(kernel, workspace), *workspace_tools(workspace)]
