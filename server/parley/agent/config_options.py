"""A session's settings as ACP `SessionConfigOption`s, and a client's choice among them.

What an editor's pickers show (`configOptions` in the results of `session/new`, `load` and
`resume`, and in `config_option_update`), and what `session/set_config_option` may set. The
options are plain dicts in the protocol's shape; a change is applied by `Sessions.configure`.

The options: `model` (category `model`), `thought_level` (category `thought_level`) when the
session's model takes a thinking level (`Settings.thought_levels`: Anthropic's extended
thinking `off`/`low`/`medium`/`high`, OpenAI's reasoning effort `low`/`medium`/`high`), and
`tool_policy`. A model without one has no `thought_level` option, so setting it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from parley.core.choices import ToolPolicy
from parley.core.thought_levels import ThoughtLevel

MODEL = "model"
TOOL_POLICY = "tool_policy"
THOUGHT_LEVEL = "thought_level"

# What `Sessions.configure` is given for each option.
_CONFIGURE_ARGUMENT = {MODEL: "model", TOOL_POLICY: "tool_policy", THOUGHT_LEVEL: "thought_level"}

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
) -> list[dict[str, Any]]:
    """The options of a session whose model and tool policy are these. `model_infos` are
    the configured models (`ProviderRegistry.model_infos`): each available one is offered,
    and the session's own model even when it is not listed. `thought_levels` are those the
    model takes (none: no `thought_level` option), `thought_level` the session's (its
    current value)."""
    models = [info["id"] for info in model_infos if info.get("available")]
    if model not in models:
        models.insert(0, model)
    options = [
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
    return options


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
