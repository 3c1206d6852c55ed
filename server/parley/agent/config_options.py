"""A session's settings as ACP `SessionConfigOption`s, and a client's choice among them.

What an editor's pickers show (`configOptions` in the results of `session/new`, `load` and
`resume`, and in `config_option_update`), and what `session/set_config_option` may set. The
options are plain dicts in the protocol's shape; a change is applied by `Sessions.configure`.

The options: `mode` (category `mode`, first: agent/modes.py), `model` (category `model`),
`thought_level` (category `thought_level`) when the session's model takes a thinking level
(`Settings.thought_levels`: Anthropic's extended thinking `off`/`low`/`medium`/`high`,
OpenAI's reasoning effort `low`/`medium`/`high`), and `tool_policy`, and `budget` (always
offered, so a budget can be set without config.toml): what the session may spend in US
dollars, "none" or one of `BUDGETS` (and config.toml's `[budget] session_usd`, the
session's value until it chooses another). A model without a thinking level has no
`thought_level` option, so setting it is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from parley.agent.modes import DEFAULT_MODE, MODES
from parley.core.choices import Mode, ToolPolicy
from parley.core.thought_levels import ThoughtLevel

MODE = "mode"
MODEL = "model"
TOOL_POLICY = "tool_policy"
THOUGHT_LEVEL = "thought_level"
BUDGET = "budget"
NO_BUDGET = "none"
# The session budgets offered, in USD.
BUDGETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)

# What `Sessions.configure` is given for each option.
_CONFIGURE_ARGUMENT = {
    MODE: "mode",
    MODEL: "model",
    TOOL_POLICY: "tool_policy",
    THOUGHT_LEVEL: "thought_level",
    BUDGET: "budget",
}

TOOL_POLICIES: Mapping[ToolPolicy, tuple[str, str]] = {
    "hybrid": (
        "Hybrid",
        "Stream the reply; when it turns to tools, one synchronous call fetches them",
    ),
    "stream": ("Stream", "Stream every reply, tool calls included"),
    "sync": ("Synchronous", "Never stream: each reply arrives whole"),
}

THOUGHT_LEVEL_NAMES: Mapping[ThoughtLevel, tuple[str, str]] = {
    "off": ("Off", "No extended thinking"),
    "low": ("Low", "Think briefly before answering"),
    "medium": ("Medium", "Think before answering"),
    "high": ("High", "Think at length before answering: slower, more tokens"),
}


class InvalidChoice(ValueError):
    """A configId or value the session's options do not offer; the message says which."""


def session_config_options(
    model: str,
    tool_policy: ToolPolicy,
    model_infos: Iterable[Mapping[str, Any]],
    thought_levels: Iterable[ThoughtLevel] = (),
    thought_level: ThoughtLevel | None = None,
    *,
    budget: str = NO_BUDGET,
    configured_budget: float | None = None,
    mode: Mode = DEFAULT_MODE,
) -> list[dict[str, Any]]:
    """The options of a session whose model and tool policy are these. `model_infos` are
    the configured models (`ProviderRegistry.model_infos`): each available one is offered,
    and the session's own model even when it is not listed. `thought_levels` are those the
    model takes (none: no `thought_level` option), `thought_level` the session's (its
    current value); `budget` the session's (`budget_value`), `configured_budget` config.toml's
    `session_usd`, offered too; `mode` the session's mode."""
    models = [info["id"] for info in model_infos if info.get("available")]
    if model not in models:
        models.insert(0, model)
    options = [
        {
            "id": MODE,
            "name": "Mode",
            "description": "What the tools may do without asking you first",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": [
                {"value": value, "name": name, "description": description}
                for value, (name, description) in MODES.items()
            ],
        },
        {
            "id": MODEL,
            "name": "Model",
            "description": "The model that answers, from the next round on",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": [{"value": choice, "name": choice} for choice in models],
        },
    ]
    levels = list(thought_levels)
    if levels:
        options.append(
            {
                "id": THOUGHT_LEVEL,
                "name": "Thinking",
                "description": "How much the model thinks before it answers",
                "category": "thought_level",
                "type": "select",
                "currentValue": thought_level if thought_level in levels else levels[0],
                "options": [
                    {"value": level, "name": name, "description": description}
                    for level, (name, description) in THOUGHT_LEVEL_NAMES.items()
                    if level in levels
                ],
            }
        )
    options.append(
        {
            "id": TOOL_POLICY,
            "name": "Tool calls",
            "description": "How a round that calls tools is read from the model",
            "type": "select",
            "currentValue": tool_policy,
            "options": [
                {"value": value, "name": name, "description": description}
                for value, (name, description) in TOOL_POLICIES.items()
            ],
        }
    )
    options.append(_budget_option(budget, configured_budget))
    return options


def usd_value(dollars: float) -> str:
    """A budget as an option's value: "0.5", "2", "12.75"."""
    return f"{dollars:g}"


def budget_value(budget: str | None, configured: float | None) -> str:
    """The session's `budget` option value: its own, else config.toml's, else "none"."""
    if budget is not None:
        return budget
    return NO_BUDGET if configured is None else usd_value(configured)


def _budget_option(budget: str, configured: float | None) -> dict[str, Any]:
    amounts = {usd_value(dollars): dollars for dollars in BUDGETS}
    if configured is not None:
        amounts[usd_value(configured)] = configured
    if budget != NO_BUDGET:
        with contextlib.suppress(ValueError):  # a value Parley never stores
            amounts.setdefault(budget, float(budget))
    choices = [{"value": NO_BUDGET, "name": "No budget", "description": "Spend without a limit"}]
    for value, dollars in sorted(amounts.items(), key=lambda item: item[1]):
        description = "config.toml's session_usd" if dollars == configured else None
        choice = {"value": value, "name": f"${dollars:.2f}"}
        if description:
            choice["description"] = description
        choices.append(choice)
    return {
        "id": BUDGET,
        "name": "Budget",
        "description": "What this session may spend (USD); a turn past it does not start",
        "type": "select",
        "currentValue": budget,
        "options": choices,
    }


def requested_change(config_id: str, value: Any, options: list[dict[str, Any]]) -> dict[str, Any]:
    """What `Sessions.configure` is to change for `session/set_config_option`: one of the
    `options`' values, by configId. Raises `InvalidChoice` for anything else."""
    option = next((option for option in options if option["id"] == config_id), None)
    if option is None:
        known = ", ".join(option["id"] for option in options)
        raise InvalidChoice(f"configId: no option {config_id!r} (the options: {known})")
    allowed = [choice["value"] for choice in option["options"]]
    if not isinstance(value, str) or value not in allowed:
        raise InvalidChoice(
            f"value: {config_id} must be one of {', '.join(allowed)}, not {value!r}"
        )
    return {_CONFIGURE_ARGUMENT[config_id]: value}
