"""`parley bench`: how fast Parley is, measured against the bare SDK. Prints a Markdown table.

Everything runs in one process against a `FakeLLM` on 127.0.0.1: the fake serves the streams,
the bare `openai` SDK reads them directly for the baseline, and `parley serve` (a child
process, driven by `ParleyClient` exactly as an editor drives it) reads the same streams for
the Parley figures. The fake and the client share one clock (`time.monotonic()`), so a chunk
can be timed from the fake's write to the client's notification.

The rows, what each measures and how, are explained in docs/benchmarks.md. Here: the run and
the table; the rows by concern in `streaming.py` (1-3, 1a, 2a), `tool_start.py` (4),
`tools.py` (5, 6), `sessions.py` (7, 8), `context.py` (9a, 9b, 10), `synchronous_call.py` (9c,
9d), `snapshots.py` (11a-d) and
`snapshot_share.py` (11e); what they share in `harness.py`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from parley.bench.context import cache_rows, compaction_row
from parley.bench.harness import FULL, QUICK, BenchSizes, ParleyUnderTest, Row
from parley.bench.sessions import first_prompt_at_once_rows, first_prompt_row, session_load_rows
from parley.bench.snapshot_share import share_row
from parley.bench.snapshots import snapshot_rows
from parley.bench.streaming import (
    anthropic_streaming_rows,
    cold_start_row,
    latency_rows,
    throughput_row,
)
from parley.bench.synchronous_call import synchronous_call_rows
from parley.bench.tool_start import real_server_row, tool_start_rows
from parley.bench.tools import kernel_rows, parser_rows, static_introspection_rows
from parley.bench.user_kernel import user_kernel_row
from parley.bench.warm import warm_rows
from parley.fakellm import FakeLLM

# --- the table ---------------------------------------------------------------------------------

METHOD_NOTES = (
    "Row 2 timing: the fake LLM records when it wrote each chunk; each chunk's text carries "
    "its number, and the client (or the bare SDK) records when it got it; both run in this "
    "process, on one clock; the comparison is Parley's percentile minus the SDK's.",
    "Row 4: the synchronous call is made as slow as a real one (the time to generate the "
    "whole reply at the same pace; in 4d, where it continues the streamed text, the time to "
    "generate the call alone), and in 4b the stream pauses while the model generates the "
    "call it does not show.",
)


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| Benchmark | Parley | Baseline | Parley vs baseline | Target |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {row.measure} | {row.parley} | {row.baseline} | {row.compared} | {row.target} |"
        for row in rows
    ]
    return "\n".join(lines)


async def collect_rows(sizes: BenchSizes, home: Path) -> list[Row]:
    with FakeLLM() as fake:
        parley = await ParleyUnderTest.start(fake, home)
        try:
            throughput = await throughput_row(parley, fake, sizes)
            latency = await latency_rows(parley, fake, sizes)
            tool_start = await tool_start_rows(parley, fake, sizes, home)
            tool_start.append(await real_server_row(home, sizes, tool_start[-1].parley))
        finally:
            await parley.stop()
        anthropic_streaming = await anthropic_streaming_rows(fake, home, sizes)
        cold_start = await cold_start_row(fake, home, sizes)
        session_load = await session_load_rows(fake, home, sizes)
        first_prompt = await first_prompt_row(fake, home, sizes)
        first_prompt_at_once = await first_prompt_at_once_rows(fake, home, sizes)
        warm = await warm_rows(fake, home, sizes)
        caching = await cache_rows(fake, home)
        caching += await synchronous_call_rows(fake)
        compaction = await compaction_row(fake, home, sizes)
    kernel = await kernel_rows(home, sizes)
    static_introspection = await static_introspection_rows(home, sizes)
    snapshots = await collect_snapshot_rows(sizes, home)
    static_introspection.append(await user_kernel_row(home, sizes))
    return [
        throughput,
        *latency,
        *anthropic_streaming,
        cold_start,
        warm[0],
        *tool_start,
        *kernel,
        *static_introspection,
        *parser_rows(sizes),
        *session_load,
        first_prompt,
        *first_prompt_at_once,
        *warm[1:],
        *caching,
        compaction,
        *snapshots,
    ]


async def collect_session_load_rows(sizes: BenchSizes, home: Path) -> list[Row]:
    with FakeLLM() as fake:
        return await session_load_rows(fake, home, sizes)


async def collect_streaming_rows(sizes: BenchSizes, home: Path) -> list[Row]:
    with FakeLLM() as fake:
        parley = await ParleyUnderTest.start(fake, home)
        try:
            throughput = await throughput_row(parley, fake, sizes)
            latency = await latency_rows(parley, fake, sizes)
        finally:
            await parley.stop()
        return [throughput, *latency, *await anthropic_streaming_rows(fake, home, sizes)]


async def collect_snapshot_rows(sizes: BenchSizes, home: Path) -> list[Row]:
    return [*await snapshot_rows(home, sizes), await share_row(home, sizes)]


def run_benchmarks(
    quick: bool = False,
    only_session_load: bool = False,
    only_streaming: bool = False,
    only_snapshots: bool = False,
) -> int:
    sizes = QUICK if quick else FULL
    collect = collect_rows
    if only_session_load:
        collect = collect_session_load_rows
    elif only_streaming:
        collect = collect_streaming_rows
    elif only_snapshots:
        collect = collect_snapshot_rows
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="parley-bench-") as home:
        rows = asyncio.run(collect(sizes, Path(home)))
    print(markdown_table(rows))
    print()
    for note in METHOD_NOTES:
        print(note)
        print()
    mode = " (--quick)" if quick else ""
    print(
        f"Measured in {time.monotonic() - started:.0f} s{mode} with Python "
        f"{sys.version.split()[0]} on {os.cpu_count()} CPUs."
    )
    return 0
