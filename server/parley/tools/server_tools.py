"""The tools that run in the server: the Python kernel's tools, the workspace files, the
edit tools, shell commands and the plan."""

from __future__ import annotations

from pathlib import Path

from parley.tools.base import Tool
from parley.tools.confined import Roots, resolved_roots
from parley.tools.edits import edit_tools
from parley.tools.file_ledger import FileLedger
from parley.tools.kernel import KernelSettings, PythonKernel
from parley.tools.plan import UpdatePlanTool
from parley.tools.python_tools import python_tools
from parley.tools.run_command import CommandSettings, RunCommandTool
from parley.tools.workspace import workspace_tools


def server_tools(
    workspace: Roots | Path,
    settings: KernelSettings | None = None,
    commands: CommandSettings | None = None,
) -> list[Tool]:
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
        RunCommandTool(roots, commands or _commands_like(settings)),
        UpdatePlanTool(),
    ]


def _commands_like(kernel: KernelSettings | None) -> CommandSettings:
    """Commands in the kernel's sandbox, without its secrets, when only that is given."""
    if kernel is None:
        return CommandSettings()
    return CommandSettings(secret_env_names=kernel.secret_env_names, sandbox=kernel.sandbox)
