"""Rows 1 to 3: streaming throughput and the latency Parley adds per chunk, against the bare
SDK (1 and 2: OpenAI's; 1a and 2a: Anthropic's), and a cold start."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from parley.bench.harness import (
    BENCH_MODEL,
    EVENTS_BEFORE_TEXT,
    LATENCY_PACE,
    USER_TURN,
    BenchSizes,
    ParleyUnderTest,
    Row,
    chunk_number,
    ms,
    numbered_chunks,
    per_second,
    percentile,
    server_environment,
    verdict,
)
from parley.child_env import child_environment
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Pacing, Reply

# --- the two APIs, as the bare SDKs read them ----------------------------------------------

ANTHROPIC_BENCH_MODEL = "claude-sonnet-4-5"


async def openai_sdk_texts(fake: FakeLLM, on_text: Callable[[str], None]) -> None:
    """The bare `openai` SDK's stream of the script's reply (the request Parley makes): each
    text chunk's text to `on_text`."""
    import openai

    async with openai.AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-bench") as sdk:
        stream = await sdk.chat.completions.create(
            model=BENCH_MODEL,
            messages=USER_TURN,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                on_text(chunk.choices[0].delta.content)


async def anthropic_sdk_texts(fake: FakeLLM, on_text: Callable[[str], None]) -> None:
    """The bare `anthropic` SDK's own stream (`messages.create(stream=True)`, its typed
    events) of the script's reply: each text delta's text to `on_text`."""
    import anthropic

    async with anthropic.AsyncAnthropic(
        base_url=fake.anthropic_base_url, api_key="sk-ant-bench"
    ) as sdk:
        stream = await sdk.messages.create(
            model=ANTHROPIC_BENCH_MODEL,
            max_tokens=8192,
            messages=USER_TURN,  # type: ignore[arg-type]
            stream=True,
        )
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                on_text(event.delta.text)


@attrs.frozen
class StreamedAPI:
    """One provider API as rows 1 and 2 (OpenAI) or 1a and 2a (Anthropic) measure it."""

    row: str  # the throughput row's number; the latency rows' is one more
    name: str  # as the rows name the baseline: the bare `openai` SDK ...
    model: str  # Parley's model, `provider:model`
    sdk_texts: Callable[[FakeLLM, Callable[[str], None]], Awaitable[None]]
    events_before_text: int  # in the stream the fake sends: text chunk k is event k - 1 + this


OPENAI = StreamedAPI("1", "openai", f"openai:{BENCH_MODEL}", openai_sdk_texts, EVENTS_BEFORE_TEXT)
# message_start, the text block's content_block_start, a ping: then the text deltas.
ANTHROPIC = StreamedAPI(
    "1a", "anthropic", f"anthropic:{ANTHROPIC_BENCH_MODEL}", anthropic_sdk_texts, 3
)


def parley_environment(fake: FakeLLM, api: StreamedAPI) -> dict[str, str]:
    """What points `parley serve` at the fake for `api` (besides `server_environment`)."""
    return {
        "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
        "ANTHROPIC_API_KEY": "sk-ant-bench-parley",
        "PARLEY_MODEL": api.model,
    }


# --- 1, 1a. streaming throughput -----------------------------------------------------------


async def sdk_stream_throughput(fake: FakeLLM, count: int, api: StreamedAPI = OPENAI) -> float:
    """Text chunks per second as the bare SDK reads them (the same request Parley makes)."""
    fake.set_script([Reply(chunks=("tok ",) * count)])
    received = 0

    def on_text(_text: str) -> None:
        nonlocal received
        received += 1

    started = time.monotonic()
    await api.sdk_texts(fake, on_text)
    elapsed = time.monotonic() - started
    if received != count:
        raise RuntimeError(f"the bare SDK read {received} text chunks of {count}")
    return received / elapsed


async def parley_stream_throughput(parley: ParleyUnderTest, fake: FakeLLM, count: int) -> float:
    """Text chunks per second as `agent_message_chunk` notifications reach the client."""
    fake.set_script([Reply(chunks=("tok ",) * count)])
    received = 0

    def on_update(update: dict[str, Any], _arrived: float) -> None:
        nonlocal received
        if update.get("sessionUpdate") == "agent_message_chunk":
            received += 1

    elapsed = await parley.timed_prompt(on_update)
    if received != count:
        raise RuntimeError(f"the client received {received} text chunks of {count}")
    return received / elapsed


async def throughput_row(
    parley: ParleyUnderTest, fake: FakeLLM, sizes: BenchSizes, api: StreamedAPI = OPENAI
) -> Row:
    # A small stream first, so both sides have their connection and code paths warm.
    await sdk_stream_throughput(fake, 50, api)
    await parley_stream_throughput(parley, fake, 50)
    sdk_rates, parley_rates = [], []
    for _ in range(sizes.throughput_runs):  # interleaved, so background load hits both alike
        sdk_rates.append(await sdk_stream_throughput(fake, sizes.throughput_chunks, api))
        parley_rates.append(await parley_stream_throughput(parley, fake, sizes.throughput_chunks))
    sdk_rate, parley_rate = statistics.median(sdk_rates), statistics.median(parley_rates)
    runs = f", median of {sizes.throughput_runs}" if sizes.throughput_runs > 1 else ""
    of_api = "" if api is OPENAI else f", {api.model}"
    return Row(
        measure=f"{api.row}. Streaming throughput{of_api}: {sizes.throughput_chunks:,} text "
        f"chunks, unpaced (Parley: into a JSON-RPC client; baseline: bare `{api.name}` "
        f"SDK{runs})",
        parley=per_second(parley_rate),
        baseline=per_second(sdk_rate),
        compared=f"{parley_rate / sdk_rate:.2f}x",
        target=verdict("≥ 0.95x", parley_rate / sdk_rate >= 0.95),
    )


# --- 2, 2a. added latency per chunk ----------------------------------------------------------


def paced_numbered_reply(count: int) -> Reply:
    return Reply(chunks=numbered_chunks(count), pacing=Pacing(chunks_per_second=LATENCY_PACE))


def chunk_latencies(
    fake: FakeLLM, arrivals: dict[int, float], api: StreamedAPI = OPENAI
) -> list[float]:
    """For each text chunk: when the reader had it, minus when the fake wrote it."""
    (request,) = fake.wait_for_requests(1)
    written = request.chunk_write_times
    return [
        arrived - written[number - 1 + api.events_before_text]
        for number, arrived in arrivals.items()
    ]


async def sdk_chunk_latencies(fake: FakeLLM, count: int, api: StreamedAPI = OPENAI) -> list[float]:
    fake.set_script([paced_numbered_reply(count)])
    arrivals: dict[int, float] = {}

    def on_text(text: str) -> None:
        arrivals[chunk_number(text)] = time.monotonic()

    await api.sdk_texts(fake, on_text)
    return chunk_latencies(fake, arrivals, api)


async def parley_chunk_latencies(
    parley: ParleyUnderTest, fake: FakeLLM, count: int, api: StreamedAPI = OPENAI
) -> list[float]:
    fake.set_script([paced_numbered_reply(count)])
    arrivals: dict[int, float] = {}

    def on_update(update: dict[str, Any], arrived: float) -> None:
        if update.get("sessionUpdate") == "agent_message_chunk":
            arrivals[chunk_number(update["content"]["text"])] = arrived

    await parley.timed_prompt(on_update)
    return chunk_latencies(fake, arrivals, api)


async def latency_rows(
    parley: ParleyUnderTest, fake: FakeLLM, sizes: BenchSizes, api: StreamedAPI = OPENAI
) -> list[Row]:
    count = sizes.latency_chunks
    sdk = await sdk_chunk_latencies(fake, count, api)
    through_parley = await parley_chunk_latencies(parley, fake, count, api)
    row = "2" + api.row.removeprefix("1")
    of_api = "" if api is OPENAI else f", {api.model}"
    rows = []
    for label, fraction in (("p50", 0.50), ("p99", 0.99)):
        parley_figure, sdk_figure = percentile(through_parley, fraction), percentile(sdk, fraction)
        added = parley_figure - sdk_figure
        rows.append(
            Row(
                measure=f"{row}. Latency per chunk{of_api}, {label}: the fake's write → the "
                f"client's notification, {count} chunks at {LATENCY_PACE:.0f} chunks/s "
                f"(baseline: the bare `{api.name}` SDK's read of the same stream)",
                parley=ms(parley_figure),
                baseline=ms(sdk_figure),
                compared=f"{added * 1000:+,.1f} ms",
                target=verdict("added ≤ 0.5 ms", added <= 0.0005) if label == "p99" else "—",
            )
        )
    return rows


async def anthropic_streaming_rows(fake: FakeLLM, home: Path, sizes: BenchSizes) -> list[Row]:
    """Rows 1a and 2a: rows 1 and 2 for an Anthropic model, on a `parley serve` of its own."""
    parley = await ParleyUnderTest.start(fake, home, parley_environment(fake, ANTHROPIC))
    try:
        throughput = await throughput_row(parley, fake, sizes, ANTHROPIC)
        return [throughput, *await latency_rows(parley, fake, sizes, ANTHROPIC)]
    finally:
        await parley.stop()


# --- 3. cold start -------------------------------------------------------------------------------


async def cold_start_row(
    fake: FakeLLM, home: Path, sizes: BenchSizes, warm: dict[str, str] | None = None
) -> Row:
    """Row 3, or with `warm` (the environment of a running warm process) row 3w."""
    env = {**server_environment(fake, home), **(warm or {})}
    starts = []
    for _ in range(sizes.cold_starts):
        started = time.monotonic()
        client = await ParleyClient.spawn(env=env)
        await client.initialize()
        starts.append(time.monotonic() - started)
        await client.stop()
    imports = []
    for _ in range(sizes.cold_starts):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import openai"], check=True, env=child_environment())
        imports.append(time.monotonic() - started)
    ratio = statistics.median(starts) / statistics.median(imports)
    if warm:
        measure = "3w. Warm start: spawning `parley serve` with its warm process running (any "
        "start but the first of the day or after an upgrade) → the `initialize` response"
    else:
        measure = "3. Cold start: spawning `parley serve`, no warm process (`PARLEY_WARM=0`, or "
        "the first start) → the `initialize` response"
    return Row(
        measure=f"{measure}, median of {sizes.cold_starts} (baseline: `python -c 'import openai'`)",
        parley=ms(statistics.median(starts)),
        baseline=ms(statistics.median(imports)),
        compared=f"{ratio:.2f}x",
        # A cold start pays the imports; the start's target is the warm one's (row 3w).
        target=verdict("≤ 0.3x", ratio <= 0.3) if warm else "— (3w's)",
    )
