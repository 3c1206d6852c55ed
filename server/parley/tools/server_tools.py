"""The tools that run in the server: the Python kernel's tools, the workspace files and
the edit tools."""

from __future__ import annotations

from pathlib import Path

from parley.tools.base import Tool
from parley.tools.confined import Roots, resolved_roots
from parley.tools.edits import edit_tools
from parley.tools.file_ledger import FileLedger
from parley.tools.kernel import KernelSettings, PythonKernel
from parley.tools.python_tools import python_tools
from parley.tools.workspace import workspace_tools


def server_tools(workspace: Roots | Path, settings: KernelSettings | None = None) -> list[Tool]:
    """All server-side tools for one session in `workspace` (its roots).

    The Python tools share one kernel, whose process starts on first use. Each of them has an
    idempotent `aclose` that stops that kernel; the registry calls it when the session ends.
    """
    roots = resolved_roots(workspace)
    kernel = PythonKernel(roots.cwd, settings, writable=roots.others)
    ledger = FileLedger()  # what read_file read, for the edit tools' stale check
    return [
        *python_tools(kernel, roots),
        *workspace_tools(roots, ledger),
        *edit_tools(roots, ledger),
    ]
