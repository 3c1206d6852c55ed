"""How hard a model thinks: which well-known models take a thinking level, and what a level
is on each provider's wire.

Two styles. Anthropic's extended thinking takes a token budget (`thinking.budget_tokens`):
its levels are `off`, `low`, `medium`, `high`, each a budget. OpenAI's reasoning models take
`reasoning_effort`: `low`, `medium`, `high` (they always reason; `medium` is the API's
default). `config.toml` may say a model thinks or not (`[models."ID"] thinking = true`).
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

ThoughtLevel = Literal["off", "low", "medium", "high"]
ThinkingStyle = Literal["budget", "effort"]  # Anthropic's budget_tokens; OpenAI's effort

LEVELS: dict[ThinkingStyle, tuple[ThoughtLevel, ...]] = {
    "budget": ("off", "low", "medium", "high"),
    "effort": ("low", "medium", "high"),
}
# A level's thinking budget in tokens (Anthropic's minimum is 1024).
BUDGETS: dict[ThoughtLevel, int] = {"low": 2048, "medium": 8192, "high": 24576}

# Models known to think, by the model's name (after `provider:`, and after the last `/`):
# Claude 3.7 Sonnet and every Claude 4 and later; OpenAI's o-series and GPT-5 (not its chat
# variant, which does not reason; nor o1-mini and o1-preview, which take no effort).
_BUDGET_MODELS = re.compile(r"claude-3-7-sonnet.* | claude-[a-z]+-[4-9].*", re.VERBOSE)
_EFFORT_MODELS = re.compile(
    r"""
      o1(-pro)?(-\d{4}-\d{2}-\d{2})? | o3(-mini|-pro)?(-\d{4}-\d{2}-\d{2})? | o4-mini.*
    | gpt-5(?!.*-chat).*
    """,
    re.VERBOSE,
)


@attrs.frozen
class Thinking:
    """What a request asks of the model's thinking; None: nothing is sent."""

    budget_tokens: int | None = None  # Anthropic: thinking enabled with this budget
    reasoning_effort: str | None = None  # OpenAI: low | medium | high


def thinks_by_default(model_id: str, provider_kind: str) -> bool:
    """Whether a model of a provider of this kind ("anthropic" or "openai") is known to
    take a thinking level."""
    name = model_id.partition(":")[2].rsplit("/", 1)[-1].lower()
    known = _BUDGET_MODELS if provider_kind == "anthropic" else _EFFORT_MODELS
    return known.fullmatch(name) is not None


def nearest_level(budget: int | None) -> ThoughtLevel:
    """The budget level closest to a configured `thinking_budget` (`off` for none)."""
    if not budget:
        return "off"
    return min(BUDGETS, key=lambda level: abs(BUDGETS[level] - budget))


def thinking_of(
    style: ThinkingStyle | None, level: ThoughtLevel | None, configured_budget: int | None
) -> Thinking:
    """What to send for a chosen `level` (None: the model's default, which is the
    configured budget, or the API's own default effort)."""
    if style == "budget":
        if level is None:
            return Thinking(budget_tokens=configured_budget or None)
        return Thinking(budget_tokens=BUDGETS.get(level))
    if style == "effort" and level is not None and level != "off":
        return Thinking(reasoning_effort=level)
    return Thinking()
