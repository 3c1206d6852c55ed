"""A session's mode: what its tools may do without asking the user first.

- `ask` (the default): every call of a tool that needs permission (an evaluation, an edit,
  a command, an MCP tool) asks the user.
- `accept_edits`: tools of kind `edit` run without a question (still checkpointed: `/undo`
  puts their files back per turn); every other such call still asks.
- `plan`: the model is offered only the tools that need no permission (reading, searching,
  introspecting, `update_plan`); a call of any other tool is refused unrun.

Offered to clients as ACP `modes` (`SessionModeState`, `session/set_mode`,
`current_mode_update`) and as the `mode` config option (agent/config_options.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard, get_args

from parley.core import updates
from parley.core.choices import Mode
from parley.core.session_settings import SessionSettings
from parley.tools.base import ToolSpec

DEFAULT_MODE: Mode = SessionSettings().mode  # declared with the other settings

# Each mode's name and description, as clients show them (in this order).
MODES: Mapping[Mode, tuple[str, str]] = {
    "ask": ("Ask", "Ask before every evaluation, edit and command"),
    "accept_edits": (
        "Accept edits",
        "Edits apply without a question (undoable per turn); evaluations and commands ask",
    ),
    "plan": (
        "Plan (read only)",
        "Only tools that read: the model investigates and proposes, nothing is changed or run",
    ),
}


# What the model is told in Plan mode, after the session's system prompt (which may say how
# to edit: in this mode it cannot).
PLAN_NOTE = (
    "This session is in Plan mode (read only): you are offered only the tools that read. "
    "Investigate, then propose the changes (their steps with update_plan); the user switches "
    "the mode to let them be made."
)


def is_mode(value: Any) -> TypeGuard[Mode]:
    return isinstance(value, str) and value in get_args(Mode)


def mode_state(current: Mode) -> dict[str, Any]:
    """ACP's `SessionModeState`: the `modes` of a session's start (new, load, resume)."""
    return {
        "currentModeId": current,
        "availableModes": [
            {"id": mode, "name": name, "description": description}
            for mode, (name, description) in MODES.items()
        ],
    }


def current_mode_update(current: Mode) -> dict[str, Any]:
    """The `session/update` that tells the client the mode changed."""
    return updates.current_mode(current)


def is_offered(spec: ToolSpec, mode: Mode) -> bool:
    """Whether the model is offered (and may call) the tool in `mode`."""
    return mode != "plan" or not spec.needs_permission


def system_text(base: str, mode: Mode) -> str:
    """The system prompt a request of a session in `mode` sends: Plan mode's says so."""
    return f"{base}\n\n{PLAN_NOTE}" if mode == "plan" else base


def offered_specs(specs: Iterable[ToolSpec], mode: Mode) -> tuple[ToolSpec, ...]:
    """The tools a request of a session in `mode` offers the model."""
    return tuple(spec for spec in specs if is_offered(spec, mode))


def refusal(spec: ToolSpec, mode: Mode) -> str | None:
    """What the model is told of a call of a tool `mode` does not offer (it is not run);
    None when the tool may run."""
    if is_offered(spec, mode):
        return None
    return (
        f"{spec.name} is not available in Plan mode: only tools that read may run. "
        "Propose the change instead; the user can switch the mode to let it run."
    )


def runs_unasked(spec: ToolSpec, mode: Mode) -> bool:
    """A call that needs permission runs without the question in `mode` (an edit, when
    edits are accepted)."""
    return mode == "accept_edits" and spec.kind == "edit"
