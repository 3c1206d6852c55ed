"""A session's settings, each declared once: its type, its default, and where a client may set it.

Everything else follows from this declaration (docs/architecture.md, "Adding a session
setting"): `session/new` takes the settings marked `NEW` from `_meta.parley`, and
`_parley/session/configure` those marked `CONFIGURE` (protocol/params.py, `setting_changes`);
the store keeps them all as one JSON object and reads them back setting by setting
(store.py); a fork copies them (store_fork.py). A setting a client may not set directly is
changed by the server's own requests (a mode by `session/set_mode`, a budget by its config
option: agent/config_options.py).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import cattrs

from parley.core.choices import Mode, ToolFormat, ToolPolicy
from parley.core.kernel_choice import KernelAddress
from parley.core.thought_levels import ThoughtLevel

logger = logging.getLogger(__name__)

NEW = "new"  # `session/new`'s `_meta.parley`
CONFIGURE = "configure"  # `_parley/session/configure`


def where(*places: str) -> dict[str, frozenset[str]]:
    """A setting's metadata: where a client may set it (`NEW`, `CONFIGURE`; none: only the
    server's own requests change it)."""
    return {"where": frozenset(places)}


_positive = attrs.validators.gt(0)


@attrs.frozen
class SessionSettings:
    """What a session runs with; every one stored with the session and kept by its forks."""

    # "provider:model"; "": config.toml's `default_model`
    model: str = attrs.field(default="", metadata=where(NEW, CONFIGURE))
    tool_policy: ToolPolicy = attrs.field(default="hybrid", metadata=where(NEW, CONFIGURE))
    # None: Parley's own
    system_prompt: str | None = attrs.field(default=None, metadata=where(NEW))
    # None: the model's configured format
    tool_format: ToolFormat | None = attrs.field(default=None, metadata=where(NEW, CONFIGURE))
    # None: the model's default
    thought_level: ThoughtLevel | None = attrs.field(default=None, metadata=where(CONFIGURE))
    # USD as text, or "none"; None: config.toml's `[budget] session_usd` (agent/budgets.py)
    budget: str | None = attrs.field(default=None, metadata=where())
    # What the tools may do unasked (agent/modes.py)
    mode: Mode = attrs.field(default="ask", metadata=where())
    # The Python kernel's limit per call; None: config.toml's `[kernel] timeout_seconds`
    eval_timeout_seconds: float | None = attrs.field(
        default=None, metadata=where(NEW), validator=attrs.validators.optional(_positive)
    )
    # The model requests a turn may make; None: config.toml's `max_turn_requests`
    max_turn_requests: int | None = attrs.field(
        default=None, metadata=where(NEW, CONFIGURE), validator=attrs.validators.optional(_positive)
    )
    # The user's own kernel the Python tools use (never its token); None: Parley's own. Set
    # by `_meta.parley.kernel` of session/new, load and resume (agent/user_kernels.py).
    kernel: KernelAddress | None = attrs.field(default=None, metadata=where())


attrs.resolve_types(SessionSettings)  # the fields' types as objects: params.py structures by them


@attrs.frozen
class SessionOptions:
    """What a client chose for a new session: its settings, and the tools it always allows
    there (not a setting: approvals are kept per workspace, store.py)."""

    settings: SessionSettings = attrs.field(factory=SessionSettings)
    # Never `run_command`: a command is allowed always only by the workspace's prefix rules
    # (agent/session.py drops the name).
    auto_approve: list[str] = attrs.field(factory=list)


def settable(where: str) -> tuple[attrs.Attribute[Any], ...]:
    """The settings a client may set there (`NEW` or `CONFIGURE`)."""
    return tuple(f for f in attrs.fields(SessionSettings) if where in f.metadata["where"])


# --- stored: one JSON object ----------------------------------------------------------------

_stored = cattrs.Converter()


def stored_form(settings: SessionSettings) -> dict[str, Any]:
    """The settings as the store keeps them (JSON values)."""
    return _stored.unstructure(settings)


def from_stored(stored: dict[str, Any]) -> SessionSettings:
    """The settings a store kept, each read by its type and checked as a client's would be:
    a value another program (or a later Parley) wrote that this one cannot take is the
    setting's default, never a session lost."""
    values: dict[str, Any] = {}
    for field in attrs.fields(SessionSettings):
        if field.name not in stored:
            continue
        try:
            value = _checked(stored[field.name], field.type)
            SessionSettings(**{field.name: value})  # its validator
        # OverflowError: a stored infinity (JSON's `Infinity`) where a whole number goes.
        except (
            TypeError,
            ValueError,
            OverflowError,
            cattrs.BaseValidationError,
            cattrs.errors.CattrsError,
        ):
            logger.warning("A stored setting could not be read: %s", field.name)
        else:
            values[field.name] = value
    return SessionSettings(**values)


def _checked(value: Any, kind: Any) -> Any:
    structured = _stored.structure(value, kind)
    # cattrs converts ("1" to 1.0, true to 1); the store holds only what Parley wrote.
    same = _stored.unstructure(structured) == value
    if not same or isinstance(structured, bool) != isinstance(value, bool):
        raise ValueError(value)
    return structured
