"""What a provider's bill would show, computed as Parley computes it (core/usage.py): a call's
cost by kind of token at the listed prices, the sum over calls, the usage the client is sent.
In-process, fast enough to run against every mutant of core/usage.py (scripts/mutation)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parley.core.usage import (
    DEFAULT_PRICES,
    CostBreakdown,
    Price,
    Usage,
    UsageTotals,
    cost_to_wire,
    estimate_tokens,
    find_price,
)

MILLION = 1_000_000

# The providers' published list prices, USD per million tokens: input, output, cache read,
# cache write (OpenAI bills no cache writes: its cache writes cost the input price).
LIST_PRICES = {
    "openai:gpt-4.1": (2.0, 8.0, 0.5, 2.0),
    "openai:gpt-4.1-mini": (0.4, 1.6, 0.1, 0.4),
    "openai:gpt-4.1-nano": (0.1, 0.4, 0.025, 0.1),
    "openai:gpt-4o": (2.5, 10.0, 1.25, 2.5),
    "openai:gpt-4o-mini": (0.15, 0.6, 0.075, 0.15),
    "openai:gpt-5": (1.25, 10.0, 0.125, 1.25),
    "openai:gpt-5-mini": (0.25, 2.0, 0.025, 0.25),
    "openai:o4-mini": (1.1, 4.4, 0.275, 1.1),
    "anthropic:claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75),
    "anthropic:claude-sonnet-4": (3.0, 15.0, 0.3, 3.75),
    "anthropic:claude-haiku-4-5": (1.0, 5.0, 0.1, 1.25),
    "anthropic:claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "anthropic:claude-opus-4-1": (15.0, 75.0, 1.5, 18.75),
}


@pytest.mark.parametrize("model", sorted(LIST_PRICES))
def test_a_million_tokens_of_each_kind_cost_the_list_price(model: str) -> None:
    price = DEFAULT_PRICES[model]
    uncached, output, read, write = LIST_PRICES[model]
    assert price.cost(Usage(input_tokens=MILLION)) == uncached
    assert price.cost(Usage(output_tokens=MILLION)) == output
    assert price.cost(Usage(input_tokens=MILLION, cached_read_tokens=MILLION)) == read
    assert price.cost(Usage(input_tokens=MILLION, cached_write_tokens=MILLION)) == write


def test_a_calls_bill_splits_into_uncached_input_cache_reads_writes_and_output() -> None:
    price = Price(3.0, 15.0, cached_read=0.3, cached_write=3.75)
    usage = Usage(input_tokens=10_000, output_tokens=2_000, cached_read_tokens=6_000,
                  cached_write_tokens=3_000)  # fmt: skip
    bill = price.breakdown(usage)
    assert bill == CostBreakdown(
        uncached_input=0.003, cache_reads=0.0018, cache_writes=0.01125, output=0.03
    )
    assert price.cost(usage) == 0.04605
    assert bill.to_wire() == {
        "uncachedInput": 0.003,
        "cacheReads": 0.0018,
        "cacheWrites": 0.01125,
        "output": 0.03,
        "currency": "USD",
    }


def test_cached_tokens_cost_the_input_price_when_no_cache_price_is_listed() -> None:
    price = Price(2.0, 8.0)
    usage = Usage(input_tokens=MILLION, cached_read_tokens=250_000, cached_write_tokens=250_000)
    assert price.breakdown(usage) == CostBreakdown(1.0, 0.5, 0.5, 0.0)


def test_more_cached_tokens_than_input_never_bill_a_negative_amount() -> None:
    bill = Price(2.0, 8.0, cached_read=0.5).breakdown(
        Usage(input_tokens=100, cached_read_tokens=MILLION)
    )
    assert bill.uncached_input == 0 and bill.cache_reads == 0.5


def test_a_cost_is_rounded_to_a_hundredth_of_a_micro_dollar() -> None:
    assert CostBreakdown(0.1, 0.2, 0.0, 0.000000004).total == 0.3
    assert cost_to_wire(0.123456789) == {"amount": 0.12345679, "currency": "USD"}
    assert cost_to_wire(None) is None


def test_a_dated_model_takes_the_price_of_its_longest_listed_prefix() -> None:
    assert find_price("openai:gpt-4.1-mini-2025-04-14", DEFAULT_PRICES) == Price(
        0.4, 1.6, cached_read=0.1
    )
    assert find_price("openai:gpt-4.1-2025-04-14", DEFAULT_PRICES) == Price(
        2.0, 8.0, cached_read=0.5
    )
    assert find_price("openai:gpt-4.10", DEFAULT_PRICES) is None  # no dash: another model
    assert find_price("openai:unknown", DEFAULT_PRICES) is None
    free = {"ollama:*": Price(0.0, 0.0), "openai:gpt-4.1": Price(2.0, 8.0)}
    assert find_price("ollama:llama3", free) == Price(0.0, 0.0)
    assert find_price("openai:gpt-4.1", free) == Price(2.0, 8.0)
    assert find_price("openai:gpt-5", free) is None  # another provider's `*` is not its


def test_a_turns_usage_sums_its_calls_and_is_sent_with_the_total() -> None:
    first = Usage(100, 20, thought_tokens=5, cached_read_tokens=60, cached_write_tokens=10)
    second = Usage(300, 40, thought_tokens=7, cached_read_tokens=200, cached_write_tokens=30)
    assert (first + second).to_wire() == {
        "inputTokens": 400,
        "outputTokens": 60,
        "totalTokens": 460,
        "thoughtTokens": 12,
        "cachedReadTokens": 260,
        "cachedWriteTokens": 40,
    }


def test_session_totals_sum_calls_and_say_when_a_price_was_unknown() -> None:
    totals = UsageTotals()
    assert totals.to_wire()["cost"] is None and totals.to_wire()["costBreakdown"] is None
    totals.add_call(Usage(100, 10), None)  # unknown price: tokens count, cost does not
    assert (totals.cost, totals.cost_complete) == (None, False)
    assert totals.to_wire()["inputTokens"] == 100
    totals.add_call(Usage(200, 20), 0.5, CostBreakdown(0.2, 0.1, 0.05, 0.15))
    totals.add_call(Usage(300, 30), 0.25, CostBreakdown(0.1, 0.0, 0.0, 0.15))
    totals.turns, totals.rounds = 2, 3
    assert totals.to_wire() == {
        "inputTokens": 600,
        "outputTokens": 60,
        "totalTokens": 660,
        "thoughtTokens": 0,
        "cachedReadTokens": 0,
        "cachedWriteTokens": 0,
        "cost": {"amount": 0.75, "currency": "USD"},
        "costBreakdown": {
            "uncachedInput": 0.3,
            "cacheReads": 0.1,
            "cacheWrites": 0.05,
            "output": 0.3,
            "currency": "USD",
        },
        "turns": 2,
        "rounds": 3,
    }
    assert totals.cost_complete is False  # one call stays unpriced


def test_calls_priced_before_the_split_was_kept_show_a_zero_split() -> None:
    totals = UsageTotals()
    totals.add_call(Usage(10, 1), 0.01)
    assert totals.to_wire()["costBreakdown"] == CostBreakdown().to_wire()
    assert totals.cost == 0.01


@given(st.integers(min_value=0, max_value=10**9))
def test_an_estimate_is_about_four_characters_a_token_rounded_up(characters: int) -> None:
    tokens = estimate_tokens(characters)
    assert 4 * tokens >= characters > 4 * (tokens - 1)


def test_the_smallest_bill_is_shown_to_the_hundred_millionth_of_a_dollar() -> None:
    # One token of each kind, priced so that each part has a digit in its eighth place.
    price = Price(0.15, 0.61, cached_read=0.12, cached_write=0.33)
    usage = Usage(input_tokens=3, output_tokens=1, cached_read_tokens=1, cached_write_tokens=1)
    totals = UsageTotals()
    totals.add_call(usage, price.cost(usage), price.breakdown(usage))
    shown = totals.to_wire()
    assert shown["cost"] == {"amount": 1.21e-06, "currency": "USD"}
    assert shown["costBreakdown"] == {
        "uncachedInput": 1.5e-07,
        "cacheReads": 1.2e-07,
        "cacheWrites": 3.3e-07,
        "output": 6.1e-07,
        "currency": "USD",
    }


def test_a_part_under_a_hundred_millionth_of_a_dollar_is_shown_as_nothing() -> None:
    price = Price(0.004, 0.004, cached_read=0.004, cached_write=0.004)  # $4e-9 a token
    usage = Usage(input_tokens=3, output_tokens=1, cached_read_tokens=1, cached_write_tokens=1)
    assert price.breakdown(usage).to_wire() == {
        "uncachedInput": 0.0,
        "cacheReads": 0.0,
        "cacheWrites": 0.0,
        "output": 0.0,
        "currency": "USD",
    }


def test_a_new_sessions_totals_are_zero_and_complete() -> None:
    totals = UsageTotals()
    shown = totals.to_wire()
    assert (shown["turns"], shown["rounds"], shown["totalTokens"]) == (0, 0, 0)
    totals.add_call(Usage(10, 1), 0.01)
    assert totals.cost_complete  # every call had a known price: its cost is the whole cost
