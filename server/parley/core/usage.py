"""Token usage and what it costs.

`Usage` is one counted model call's tokens, normalised across providers: `input_tokens`
counts every prompt token, cached or not (OpenAI's `prompt_tokens`, which includes its
`prompt_tokens_details.cached_tokens`; Anthropic's `input_tokens + cache_read_input_tokens +
cache_creation_input_tokens`, since Anthropic's `input_tokens` leaves both out), and the
cached counts are parts of it. Prices are US dollars per million tokens; a call's cost splits
into uncached input, cache reads, cache writes and output (`CostBreakdown`).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    # Part of output_tokens; None when the reply had thoughts and the provider didn't say
    # how many tokens they took (llama.cpp, Ollama, Anthropic report only the total).
    thought_tokens: int | None = 0
    cached_read_tokens: int = 0  # part of input_tokens
    cached_write_tokens: int = 0  # part of input_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            thought_tokens=None
            if self.thought_tokens is None or other.thought_tokens is None
            else self.thought_tokens + other.thought_tokens,
            cached_read_tokens=self.cached_read_tokens + other.cached_read_tokens,
            cached_write_tokens=self.cached_write_tokens + other.cached_write_tokens,
        )

    def to_wire(self) -> dict[str, int]:
        wire = {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens,
            "cachedReadTokens": self.cached_read_tokens,
            "cachedWriteTokens": self.cached_write_tokens,
        }
        if self.thought_tokens is not None:  # optional on the wire: absent when unknown
            wire["thoughtTokens"] = self.thought_tokens
        return wire

    def with_known_thoughts(self, had_thoughts: bool) -> Usage:
        """A reply without thoughts took no tokens thinking, whatever the provider said."""
        if self.thought_tokens is None and not had_thoughts:
            return attrs.evolve(self, thought_tokens=0)
        return self


@attrs.frozen
class CostBreakdown:
    """What calls cost in US dollars, by the kind of token paid for."""

    uncached_input: float = 0.0
    cache_reads: float = 0.0
    cache_writes: float = 0.0
    output: float = 0.0

    @property
    def total(self) -> float:
        return round(self.uncached_input + self.cache_reads + self.cache_writes + self.output, 8)

    def __add__(self, other: CostBreakdown) -> CostBreakdown:
        return CostBreakdown(
            uncached_input=self.uncached_input + other.uncached_input,
            cache_reads=self.cache_reads + other.cache_reads,
            cache_writes=self.cache_writes + other.cache_writes,
            output=self.output + other.output,
        )

    def to_wire(self) -> dict[str, object]:
        return {
            "uncachedInput": round(self.uncached_input, 8),
            "cacheReads": round(self.cache_reads, 8),
            "cacheWrites": round(self.cache_writes, 8),
            "output": round(self.output, 8),
            "currency": "USD",
        }


@attrs.frozen
class Price:
    """US dollars per million tokens. Cached prices default to the input price."""

    input: float
    output: float
    cached_read: float | None = None
    cached_write: float | None = None

    def breakdown(self, usage: Usage) -> CostBreakdown:
        cached_read = self.input if self.cached_read is None else self.cached_read
        cached_write = self.input if self.cached_write is None else self.cached_write
        uncached_input = usage.input_tokens - usage.cached_read_tokens - usage.cached_write_tokens
        return CostBreakdown(
            uncached_input=max(uncached_input, 0) * self.input / 1_000_000,
            cache_reads=usage.cached_read_tokens * cached_read / 1_000_000,
            cache_writes=usage.cached_write_tokens * cached_write / 1_000_000,
            output=usage.output_tokens * self.output / 1_000_000,
        )

    def cost(self, usage: Usage) -> float:
        return self.breakdown(usage).total


# List prices of well-known models (USD per million tokens), overridable in config.toml.
# Cache reads: Anthropic 0.1x input, 5-minute cache writes 1.25x input; OpenAI's cached input
# at its published discount (gpt-4.1 family 0.25x, gpt-4o 0.5x, gpt-5 family 0.1x, o4-mini 0.25x);
# OpenAI bills no cache writes (its caching is automatic), so none are ever counted there.
# A dated model id ("gpt-4o-2024-08-06") takes the price of its longest listed prefix.
DEFAULT_PRICES: dict[str, Price] = {
    "openai:gpt-4.1": Price(2.0, 8.0, cached_read=0.5),
    "openai:gpt-4.1-mini": Price(0.4, 1.6, cached_read=0.1),
    "openai:gpt-4.1-nano": Price(0.1, 0.4, cached_read=0.025),
    "openai:gpt-4o": Price(2.5, 10.0, cached_read=1.25),
    "openai:gpt-4o-mini": Price(0.15, 0.6, cached_read=0.075),
    "openai:gpt-5": Price(1.25, 10.0, cached_read=0.125),
    "openai:gpt-5-mini": Price(0.25, 2.0, cached_read=0.025),
    "openai:o4-mini": Price(1.1, 4.4, cached_read=0.275),
    "anthropic:claude-sonnet-4-5": Price(3.0, 15.0, cached_read=0.3, cached_write=3.75),
    "anthropic:claude-sonnet-4": Price(3.0, 15.0, cached_read=0.3, cached_write=3.75),
    "anthropic:claude-haiku-4-5": Price(1.0, 5.0, cached_read=0.1, cached_write=1.25),
    "anthropic:claude-opus-4-5": Price(5.0, 25.0, cached_read=0.5, cached_write=6.25),
    "anthropic:claude-opus-4-1": Price(15.0, 75.0, cached_read=1.5, cached_write=18.75),
}


def find_price(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `provider:model`, by exact id or the longest listed prefix.

    A provider whose every model is free (a local server) may be priced as `provider:*`.
    """
    if model in prices:
        return prices[model]
    prefixes = [key for key in prices if model.startswith(key + "-")]
    if prefixes:
        return prices[max(prefixes, key=len)]
    provider = model.split(":", 1)[0]
    return prices.get(f"{provider}:*")


CHARS_PER_TOKEN = 4  # about, for English text and code: what the estimates below assume


def estimate_tokens(characters: int) -> int:
    """A rough token count for text of this many characters (about four per token)."""
    return (characters + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def cost_to_wire(amount: float | None) -> dict[str, object] | None:
    return None if amount is None else {"amount": round(amount, 8), "currency": "USD"}


@attrs.define
class UsageSum:
    """Model calls' usage and cost summed, by the one rule for a call of unknown price: its
    tokens count, its cost is left out, and the sum's cost is then incomplete."""

    usage: Usage = attrs.field(factory=Usage)
    cost: float | None = None  # the priced calls' cost; None while no counted call had a price
    cost_complete: bool = True  # False once some counted call had no known price
    # `cost` by kind of token: None exactly when `cost` is. Calls stored before the store
    # kept the split (its migration 8) are in `cost` and in no part of it.
    cost_breakdown: CostBreakdown | None = None
    # Calls cut off (a Stop, a stream that broke) whose usage is Parley's estimate, not the
    # provider's report: the provider bills what it read and generated all the same.
    estimated_calls: int = 0

    def add_call(
        self,
        usage: Usage,
        cost: float | None,
        breakdown: CostBreakdown | None = None,
        estimated: bool = False,
    ) -> None:
        """Add a counted call: its usage (`estimated`: Parley's estimate of a call cut off),
        and its cost (None: no known price) with the cost's split when known."""
        self.estimated_calls += estimated
        self.usage = self.usage + usage
        if cost is None:
            self.cost_complete = False
            return
        self.cost = (self.cost or 0.0) + cost
        self.cost_breakdown = (self.cost_breakdown or CostBreakdown()) + (
            breakdown or CostBreakdown()
        )

    @property
    def known_cost(self) -> float | None:
        """What the calls cost: None once some call had no known price (0 for no call)."""
        return (self.cost or 0.0) if self.cost_complete else None


@attrs.define
class UsageTotals(UsageSum):
    """Usage summed over turns: a session's, or the whole store's."""

    turns: int = 0
    rounds: int = 0

    def to_wire(self) -> dict[str, object]:
        breakdown = self.cost_breakdown
        if breakdown is None and self.cost is not None:
            breakdown = CostBreakdown()  # priced calls, none of them split
        return {
            **self.usage.to_wire(),
            "cost": cost_to_wire(self.cost),
            "costBreakdown": None if breakdown is None else breakdown.to_wire(),
            "turns": self.turns,
            "rounds": self.rounds,
            # Only when some are: the usage of calls cut off is an estimate.
            **({"estimatedCalls": self.estimated_calls} if self.estimated_calls else {}),
        }
