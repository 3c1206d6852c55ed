"""What the user chooses: a session's options, and the answer to a permission question."""

from __future__ import annotations

from typing import Literal

import attrs

ToolPolicy = Literal["hybrid", "stream", "sync"]
ToolFormat = Literal["native", "text"]  # "text": for models without native tool calling
# A session's mode: what its tools may do without asking (agent/modes.py).
Mode = Literal["ask", "accept_edits", "plan"]


@attrs.frozen
class AllowPrefix:
    """The answer "always allow commands that start with `prefix`, in this workspace" (one
    of the prefixes the question offered: tools/command_rules.py)."""

    prefix: str


@attrs.frozen
class RejectWithNote:
    """The answer "reject", with the user's words for the model ("use pathlib instead"):
    bounded and without control characters (protocol/permission.py, `user_note`)."""

    note: str


# The user's answer to "may this tool call run?" ("cancelled": ACP's cancelled outcome, the
# user stopped the turn at the question)
PermissionDecision = (
    Literal["allow_once", "allow_always", "reject", "cancelled"] | AllowPrefix | RejectWithNote
)


def rejects(decision: PermissionDecision) -> bool:
    """Whether `decision` is a rejection, with a note or without."""
    return decision == "reject" or isinstance(decision, RejectWithNote)


@attrs.frozen
class CommandOffer:
    """What the question about a shell command offers besides "once": the prefixes the user
    may always allow (none for a compound command), and why the command would run
    unsandboxed (None: it runs sandboxed; otherwise nothing is offered always)."""

    prefixes: tuple[str, ...] = ()
    unsandboxed: str | None = None
