"""Rows 9c and 9d: the hybrid policy's synchronous call after a long history, beside the bare
SDK's `create`. The call carries the whole history; the SDKs transform their parameters on
the event loop, message by message, where Parley builds and encodes the body off it
(`OpenAIProvider.request_body`, `AnthropicProvider.request_body`). Measured in one process,
interleaved, against the fake LLM: each call's time, and the longest the event loop waited
for its turn meanwhile (a 1 ms heartbeat). The request is made, and frozen out of the
collector's passes (`gc.freeze`), first: a full pass over this process's heap (the fake's,
both SDKs', the 10,001 messages) holds the loop 150 ms whichever side set it off."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from parley.bench.harness import Row, ms, verdict
from parley.core.conversation import AssistantMessage, TextBlock, UserMessage
from parley.fakellm import FakeLLM, Reply
from parley.providers.anthropic_provider import AnthropicProvider
from parley.providers.base import ModelRequest
from parley.providers.openai_provider import OpenAIProvider

HISTORY_ROUNDS = 5000  # a question and an answer each: 10,001 messages with the last prompt
REPEATS = 5
LOOP_TARGET_SECONDS = 0.05  # the suite's watchdog threshold for a blocked loop


def long_request() -> ModelRequest:
    messages: list[Any] = []
    for n in range(HISTORY_ROUNDS):
        messages.append(UserMessage((TextBlock(f"Question {n}: what does area do? " * 4),)))
        messages.append(AssistantMessage(text=f"Answer {n}: width times height. " * 8))
    messages.append(UserMessage((TextBlock("And perimeter?"),)))
    return ModelRequest("bench-model", "Answer briefly.", tuple(messages))


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """The call's time, and the longest gap between the loop's 1 ms heartbeats meanwhile."""
    done, worst = asyncio.Event(), 0.0

    async def heartbeat() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now

    beating = asyncio.ensure_future(heartbeat())
    await asyncio.sleep(0.005)
    started = time.perf_counter()
    await call()
    elapsed = time.perf_counter() - started
    done.set()
    await beating
    return elapsed, worst


async def synchronous_call_rows(fake: FakeLLM) -> list[Row]:
    request = long_request()
    gc.collect()
    gc.freeze()
    fake.set_script([Reply(text="Twice the sum of the sides.")] * (4 * REPEATS * 2))
    rows = []
    openai_provider = OpenAIProvider(name="openai", api_key="k", base_url=fake.openai_base_url)
    anthropic_provider = AnthropicProvider(
        name="anthropic", api_key="k", base_url=fake.anthropic_base_url
    )
    sides: list[tuple[str, Any, Callable[[], Awaitable[Any]]]] = [
        (
            "9c. OpenAI",
            openai_provider,
            lambda: openai_provider._client.chat.completions.create(
                **openai_provider._arguments(request)
            ),
        ),
        (
            "9d. Anthropic",
            anthropic_provider,
            lambda: anthropic_provider._client.messages.create(
                **anthropic_provider._arguments(request)
            ),
        ),
    ]
    for label, provider, bare in sides:
        ours: list[tuple[float, float]] = []
        sdks: list[tuple[float, float]] = []
        try:
            for _ in range(REPEATS):  # interleaved: the machine's weather hits both alike
                ours.append(await timed(lambda provider=provider: provider.complete(request)))
                sdks.append(await timed(bare))
        finally:
            await provider.aclose()
        rows.append(_row(label, ours, sdks))
    return rows


def _row(label: str, ours: list[tuple[float, float]], sdks: list[tuple[float, float]]) -> Row:
    our_time = statistics.median(t for t, _ in ours)
    sdk_time = statistics.median(t for t, _ in sdks)
    our_wait, sdk_wait = max(w for _, w in ours), max(w for _, w in sdks)
    return Row(
        measure=f"{label}: the hybrid policy's synchronous call after a history of "
        f"{2 * HISTORY_ROUNDS + 1:,} messages, `complete()` beside the bare SDK's `create` "
        f"(median of {REPEATS}; in brackets the event loop's longest wait meanwhile)",
        parley=f"{ms(our_time)} (loop {ms(our_wait)})",
        baseline=f"{ms(sdk_time)} (loop {ms(sdk_wait)})",
        compared=f"{our_time / sdk_time:.2f}x",
        target=verdict("loop < 50 ms", our_wait < LOOP_TARGET_SECONDS),
    )
