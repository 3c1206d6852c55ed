"""Budgets: what a session and the day may spend, in US dollars, and whether a turn may go on.

A session's limit is its `budget` option (`Session.budget`: USD as text, or "none"), else
config.toml's `[budget] session_usd`; the day's is `[budget] day_usd`, over every session's
counted calls since local midnight (the store's `usage` rows). Calls whose price is unknown
count nothing, so they never block. A turn checks before its first round (past a budget, it
does not start), after each round that calls tools and after a summary it made for a round
(past a budget, it stops there); a call made outside a turn (the summary of `/compact`)
checks before it is made.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from parley.agent.session import Session
from parley.config import Settings


@attrs.frozen
class Overrun:
    """A budget that is spent: which one, what was spent, its limit."""

    which: str  # "session" | "day"
    spent: float
    limit: float

    def explain(self, *, starting: bool, not_done: str | None = None) -> str:
        """For the user: why the turn does not start (`starting`) or stops, or why what the
        user asked for was `not_done` (it needs a model call), and what to do."""
        what = "This session" if self.which == "session" else "Today's model calls"
        done = "so this prompt was not sent to the model" if starting else "so the turn stops here"
        if not_done is not None:
            done = f"so {not_done}"
        raise_it = (
            "choose a higher Budget in the session's options (or `budget.session_usd` in "
            "config.toml)"
            if self.which == "session"
            else "raise `budget.day_usd` in config.toml (the day starts at local midnight)"
        )
        return (
            f"{what} spent ${self.spent:.4f} of its ${self.limit:.2f} budget, {done}. "
            f"To go on, {raise_it}."
        )


class BudgetSpent(Exception):
    """A billed call (a summary for `/compact`) that is not made: a budget is spent."""

    def __init__(self, spent: Overrun, not_done: str) -> None:
        self.spent = spent
        self.message = spent.explain(starting=True, not_done=not_done)
        super().__init__(self.message)


def session_limit(session: Session, settings: Settings) -> float | None:
    """The session's limit in USD; None: none."""
    if session.settings.budget is None:
        return settings.budget.session_usd
    try:
        limit = float(session.settings.budget)
    except ValueError:  # "none"
        return None
    return limit if limit > 0 else None


def day_start() -> str:
    """Local midnight as the store writes times (ISO, UTC, milliseconds, `Z`)."""
    midnight = datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def day_spent(session: Session) -> float:
    return session.store.spent_since(day_start())


def session_spent(session: Session) -> float:
    """What the session's counted calls of known price cost."""
    return session.totals.cost or 0.0


def overrun(session: Session, settings: Settings) -> Overrun | None:
    """The first budget that is spent (session, then day), or None."""
    limit = session_limit(session, settings)
    if limit is not None and (spent := session_spent(session)) >= limit:
        return Overrun("session", spent, limit)
    day_limit = settings.budget.day_usd
    if day_limit is not None and (spent := day_spent(session)) >= day_limit:
        return Overrun("day", spent, day_limit)
    return None


def describe_budgets(session: Session, settings: Settings) -> str | None:
    """The budgets and what remains of them, in a sentence; None when none is set."""
    parts = []
    limit = session_limit(session, settings)
    if limit is not None:
        left = max(limit - session_spent(session), 0.0)
        parts.append(f"session budget ${limit:.2f}, ${left:.4f} left")
    day_limit = settings.budget.day_usd
    if day_limit is not None:
        spent = day_spent(session)
        left = max(day_limit - spent, 0.0)
        parts.append(f"today ${spent:.4f} spent of ${day_limit:.2f}, ${left:.4f} left")
    if not parts:
        return None
    return "Budgets: " + "; ".join(parts) + "."
