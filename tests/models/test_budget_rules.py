"""The budget rules as the user sees them (`/cost`'s sentence, the stop text, the notice),
in-process over a real store: when a turn may go on, against which limit, with what words.
The same rules over the wire are in test_budgets.py; these are fast enough to run against
every mutant of agent/budgets.py (scripts/mutation)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from parley.agent.budgets import Overrun, describe_budgets, overrun
from parley.agent.notices import Notice, budget_spent
from parley.agent.session import Session, now_iso
from parley.config import Budget, Settings
from parley.core.session_settings import SessionSettings
from parley.core.usage import Usage
from parley.store import Store, StoredSession
from parley.tools.registry import ToolRegistry


def settings_with(session_usd: float | None = None, day_usd: float | None = None) -> Settings:
    return Settings(
        home=Path("/nonexistent"),
        default_model="openai:gpt-4.1-mini",
        providers={},
        models={},
        prices={},
        budget=Budget(session_usd=session_usd, day_usd=day_usd),
    )


@pytest.fixture
def store(tmp_path: Path):
    store = Store.open_in(tmp_path / "data")
    yield store
    store.close()


def session_of(
    store: Store, tmp_path: Path, spent: float | None, budget: str | None = None
) -> Session:
    """A session whose counted calls cost `spent` (None: no call of known price)."""
    session_id = f"sess_{uuid.uuid4().hex[:12]}"
    now = now_iso()
    store.save_session(
        StoredSession(
            session_id, str(tmp_path), None, SessionSettings("openai:m", "sync"), {}, 0, 0, now, now
        )
    )
    session = Session(
        id=session_id,
        cwd=tmp_path,
        settings=SessionSettings("openai:m", "sync", budget=budget),
        tools=ToolRegistry([]),
        store=store,
    )
    session.totals.add_call(Usage(1000, 100), spent)
    store.record_usage(session_id, "sync", "openai:m", Usage(1000, 100), spent, now)
    return session


def test_a_session_is_stopped_exactly_when_its_spending_reaches_its_limit(
    store: Store, tmp_path: Path
) -> None:
    settings = settings_with(session_usd=1.0)
    assert overrun(session_of(store, tmp_path, 0.99), settings) is None
    at_limit = overrun(session_of(store, tmp_path, 1.0), settings)
    assert at_limit == Overrun("session", 1.0, 1.0)
    assert budget_spent(at_limit, starting=True) == Notice(
        "warning",
        "This session spent $1.0000 of its $1.00 budget, so this prompt was not sent to the "
        "model. To go on, choose a higher Budget in the session's options (or "
        "`budget.session_usd` in config.toml).",
    )


def test_the_sessions_own_budget_option_overrides_config_and_none_or_zero_lift_it(
    store: Store, tmp_path: Path
) -> None:
    settings = settings_with(session_usd=100.0)
    assert overrun(session_of(store, tmp_path, 0.5, budget="0.25"), settings) == Overrun(
        "session", 0.5, 0.25
    )
    for lifted in ("none", "0", "-1"):
        assert overrun(session_of(store, tmp_path, 50.0, budget=lifted), settings) is None
    # No option: config.toml's limit, and no config limit: none at all.
    assert overrun(session_of(store, tmp_path, 50.0), settings) is None
    assert overrun(session_of(store, tmp_path, 500.0), settings_with()) is None


def test_calls_of_unknown_price_count_nothing(store: Store, tmp_path: Path) -> None:
    assert overrun(session_of(store, tmp_path, None), settings_with(0.01, 0.01)) is None


def test_the_day_counts_every_sessions_calls_since_local_midnight_only(
    store: Store, tmp_path: Path
) -> None:
    settings = settings_with(day_usd=1.0)
    session_of(store, tmp_path, 0.6)
    quiet = session_of(store, tmp_path, 0.0)
    assert overrun(quiet, settings) is None  # $0.60 of $1 today
    midnight = datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday = (midnight - timedelta(milliseconds=1)).astimezone(UTC)
    stamp = yesterday.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    store.record_usage(quiet.id, "sync", "openai:m", Usage(1, 1), 5.0, stamp)
    assert overrun(quiet, settings) is None  # yesterday's $5 is not today's
    session_of(store, tmp_path, 0.4)  # another session: today reaches $1.00
    spent = overrun(quiet, settings)
    assert spent == Overrun("day", pytest.approx(1.0), 1.0)
    assert budget_spent(spent, starting=False).text.startswith(
        "Today's model calls spent $1.0000 of its $1.00 budget, so the turn stops here."
    )


def test_the_session_budget_is_named_before_the_days(store: Store, tmp_path: Path) -> None:
    spent = overrun(session_of(store, tmp_path, 3.0), settings_with(session_usd=2, day_usd=1))
    assert spent is not None and spent.which == "session"


def test_the_explanation_says_what_was_spent_what_stopped_and_what_to_raise() -> None:
    session = Overrun("session", 1.0234, 1.0)
    day = Overrun("day", 0.5, 0.25)
    assert session.explain(starting=True) == (
        "This session spent $1.0234 of its $1.00 budget, so this prompt was not sent to the "
        "model. To go on, choose a higher Budget in the session's options (or "
        "`budget.session_usd` in config.toml)."
    )
    assert day.explain(starting=False) == (
        "Today's model calls spent $0.5000 of its $0.25 budget, so the turn stops here. To go "
        "on, raise `budget.day_usd` in config.toml (the day starts at local midnight)."
    )
    assert day.explain(starting=True, not_done="the conversation is not compacted").startswith(
        "Today's model calls spent $0.5000 of its $0.25 budget, so the conversation is not "
        "compacted. "
    )
    assert budget_spent(session, starting=False) == Notice(
        "warning",
        "This session spent $1.0234 of its $1.00 budget, so the turn stops here. To go on, "
        "choose a higher Budget in the session's options (or `budget.session_usd` in "
        "config.toml).",
    )


def test_cost_tells_what_is_left_of_each_budget_and_never_less_than_nothing(
    store: Store, tmp_path: Path
) -> None:
    session = session_of(store, tmp_path, 0.25)
    assert describe_budgets(session, settings_with()) is None
    assert describe_budgets(session, settings_with(session_usd=1.0)) == (
        "Budgets: session budget $1.00, $0.7500 left."
    )
    assert describe_budgets(session, settings_with(session_usd=0.1, day_usd=2.0)) == (
        "Budgets: session budget $0.10, $0.0000 left; today $0.2500 spent of $2.00, $1.7500 left."
    )
    assert describe_budgets(session, settings_with(day_usd=0.2)) == (
        "Budgets: today $0.2500 spent of $0.20, $0.0000 left."
    )


def test_a_session_whose_calls_have_no_known_price_has_its_whole_budget_left(
    store: Store, tmp_path: Path
) -> None:
    session = session_of(store, tmp_path, None)
    assert describe_budgets(session, settings_with(session_usd=1.0)) == (
        "Budgets: session budget $1.00, $1.0000 left."
    )
