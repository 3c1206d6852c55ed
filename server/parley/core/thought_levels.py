"""How hard a model thinks: which well-known models take a thinking level, and what a level
is on each provider's wire.

Two styles. Anthropic's extended thinking takes a token budget (`thinking.budget_tokens`):
its levels are `off`, `low`, `medium`, `high`, each a budget. OpenAI's reasoning models take
`reasoning_effort`: `low`, `medium`, `high` (they always reason; `medium` is the API's
default). `config.toml` may say a model thinks or not (`[models."ID"] thinking = true`).
"""

from __future__ import annotations

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


@attrs.frozen
class Thinking:
    """What a request asks of the model's thinking; None: nothing is sent."""

    budget_tokens: int | None = None  # Anthropic: thinking enabled with this budget
    reasoning_effort: str | None = None  # OpenAI: low | medium | high


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
