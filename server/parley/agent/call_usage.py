"""A model call counted: priced, added to its session's totals and the store, and told the
client (`usage_update`). A turn's calls and `/compact`'s summary are counted here alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from parley.agent.session import Session
from parley.config import Settings
from parley.core import updates
from parley.core.usage import CostBreakdown, Usage, cost_to_wire, find_price


@attrs.frozen
class CountedCall:
    usage: Usage
    cost: float | None  # None: the model's price is unknown
    breakdown: CostBreakdown | None  # the split of `cost`; None exactly when `cost` is


def count_call(
    session: Session,
    settings: Settings,
    send: Callable[[dict[str, Any]], None],
    model_id: str,
    usage: Usage | None,
    call: str,
    window: int | None,
) -> CountedCall:
    """Count one model call of `model_id` (`call`: "stream" or "sync"; `usage` None: the
    provider reported none, counted as nothing) in `session`, and send the client a
    `usage_update` when the context window (`window`, else the configured one) is known."""
    if usage is None:
        usage = Usage()
    price = find_price(model_id, settings.prices)
    breakdown = price.breakdown(usage) if price is not None else None
    cost = breakdown.total if breakdown is not None else None
    session.count_usage(call, model_id, usage, cost, breakdown)
    totals = session.totals
    window = window or settings.context_window(model_id)
    if window is not None:  # ACP's usage_update requires `size`: never sent as 0
        send(
            updates.usage_update(
                used=usage.total_tokens,
                size=window,
                cost=cost_to_wire(totals.known_cost),
                call=usage.to_wire(),
                session=totals.to_wire(),
            )
        )
    return CountedCall(usage, cost, breakdown)
