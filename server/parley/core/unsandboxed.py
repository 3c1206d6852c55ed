"""What the permission question says about a call that would run a child unsandboxed: one
phrasing for every such call (Python, a shell command). The title's mark is
`sandbox.UNSANDBOXED_MARK`."""

from __future__ import annotations


def unsandboxed_warning(reason: str) -> str:
    """The warning, with why the child would run unsandboxed (`sandbox_status().reason`)."""
    return f"Runs UNSANDBOXED: {reason}. It can read, write and reach whatever your account can."
