"""One usage sum, one rule for a call of unknown price (core/usage.py, `UsageSum`): its
tokens count, its cost is left out, and the sum's cost is then incomplete. A turn's
`cost` (`TurnStats`), the session's `usage_update` cost, `/compact`'s summary and the store's
totals are all that sum.

Over the wire: a session whose second turn runs on a model with no known price. In-process,
a Hypothesis property of the sum over any calls, priced or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parley.core.usage import Price, Usage, UsageSum
from parley.fakellm import FakeLLM, Reply
from test_sessions import started

UNPRICED = "openai:house-model"  # no built-in price, none configured


async def test_a_call_of_unknown_price_makes_the_turns_and_sessions_cost_unknown(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text(f'[models."{UNPRICED}"]\ncontext_window = 100000\n')
    client = await started(start_server, home, extra_env={"PARLEY_CONFIG": str(config)})
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="Priced.", usage=(1000, 100))])
    priced = (await client.prompt(session, "One"))["_meta"]["parley"]
    amount = (1000 * 0.4 + 100 * 1.6) / 1e6  # gpt-4.1-mini's list price
    assert priced["turn"]["cost"]["amount"] == pytest.approx(amount)
    assert priced["session"]["cost"]["amount"] == pytest.approx(amount)

    await client.request("_parley/session/configure", {"sessionId": session, "model": UNPRICED})
    before = len(client.updates_of(session))
    fake.set_script([Reply(text="Priced."), Reply(text="Unpriced.", usage=(500, 50))])
    unpriced = (await client.prompt(session, "Two"))["_meta"]["parley"]
    assert unpriced["turn"]["cost"] is None  # the turn's cost is unknown
    assert unpriced["turn"]["costBreakdown"]["output"] == 0  # no priced call in it
    # The session's totals keep what the priced calls cost; its cost as a whole is unknown.
    assert unpriced["session"]["cost"]["amount"] == pytest.approx(amount)
    assert unpriced["session"]["inputTokens"] == 1500
    (usage_update,) = [
        u for u in client.updates_of(session)[before:] if u["sessionUpdate"] == "usage_update"
    ]
    assert "cost" not in usage_update  # unknown: absent, never the priced part alone
    assert usage_update["size"] == 100000


calls = st.lists(
    st.tuples(
        st.builds(
            Usage,
            input_tokens=st.integers(0, 10**6),
            output_tokens=st.integers(0, 10**5),
            thought_tokens=st.one_of(st.none(), st.integers(0, 10**4)),
        ),
        st.one_of(st.none(), st.builds(Price, st.floats(0, 100), st.floats(0, 100))),
    ),
    max_size=8,
)


@given(calls)
def test_the_sum_of_any_calls_follows_the_one_rule(
    priced_calls: list[tuple[Usage, Price | None]],
) -> None:
    summed = UsageSum()
    for usage, price in priced_calls:
        breakdown = None if price is None else price.breakdown(usage)
        summed.add_call(usage, None if breakdown is None else breakdown.total, breakdown)
    costs = [price.cost(usage) for usage, price in priced_calls if price is not None]
    unpriced = len(costs) < len(priced_calls)
    assert summed.cost_complete is not unpriced
    assert (summed.known_cost is None) is unpriced
    if not unpriced:
        assert summed.known_cost == pytest.approx(sum(costs))
    assert (summed.cost is None) is (not costs)  # the priced calls' cost, kept either way
    assert (summed.cost_breakdown is None) is (summed.cost is None)
    if costs:
        assert summed.cost == pytest.approx(sum(costs))
        assert summed.cost_breakdown.total == pytest.approx(sum(costs), abs=1e-6)
    assert summed.usage.input_tokens == sum(usage.input_tokens for usage, _ in priced_calls)
    thoughts = [usage.thought_tokens for usage, _ in priced_calls]
    assert summed.usage.thought_tokens == (None if None in thoughts else sum(thoughts))


# --- /cost: parts a person can add up -------------------------------------------------------

PRICE_PART = st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=50, allow_nan=False))


@given(PRICE_PART, PRICE_PART, PRICE_PART, PRICE_PART, st.floats(min_value=0, max_value=1))
def test_the_cost_parts_shown_add_up_to_the_total_shown(
    uncached: float, reads: float, writes: float, output: float, earlier: float
) -> None:
    """`/cost`'s "$T (uncached input $a, …)": every part that is not zero is visible (no
    `$0.0000` beside a non-zero total), and the parts as shown sum to the total as shown."""
    from decimal import Decimal

    from parley.agent.commands import _cost_with_parts
    from parley.core.usage import CostBreakdown, UsageTotals

    split = CostBreakdown(uncached, reads, writes, output)
    totals = UsageTotals(cost=split.total + earlier, cost_breakdown=split, rounds=1)
    text = _cost_with_parts(totals)
    if not split.total:
        return
    total, _, listed = text.partition(" (")
    amounts = [Decimal(part.rsplit("$", 1)[1]) for part in listed.rstrip(")").split(", ")]
    assert all(amount > 0 for amount in amounts), text
    assert sum(amounts) == Decimal(total.lstrip("$")), text


def test_tiny_costs_show_their_parts() -> None:
    from parley.agent.commands import _cost_with_parts
    from parley.core.usage import CostBreakdown, UsageTotals

    split = CostBreakdown(uncached_input=0.00003, output=0.00007)
    totals = UsageTotals(cost=split.total, cost_breakdown=split, rounds=1)
    assert _cost_with_parts(totals) == "$0.000100 (uncached input $0.000030, output $0.000070)"
