"""`parley bench`: how fast Parley is, measured against the bare SDK. Prints a Markdown table.

Everything runs in one process against a `FakeLLM` on 127.0.0.1: the fake serves the streams,
the bare `openai` SDK reads them directly for the baseline, and `parley serve` (a child
process, driven by `ParleyClient` exactly as an editor drives it) reads the same streams for
the Parley figures. The fake and the client share one clock (`time.monotonic()`), so a chunk
can be timed from the fake's write to the client's notification.

The rows, what each measures and how, are explained in docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from parley.agent.session import now_iso
from parley.child_env import child_environment
from parley.client import ParleyClient
from parley.core.conversation import (
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.fakellm import FakeLLM, Fault, Pacing, PromptCache, Reply, ScriptedToolCall
from parley.store import Store, StoredSession

BENCH_MODEL = "gpt-4.1-mini"
USER_TURN = [{"role": "user", "content": "Tell me a long story."}]

# An editor tool the benchmark client answers, as in the tests: the tool starts (its
# `in_progress` update) as soon as the server has the call's complete arguments.
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
        "required": ["city"],
    },
    "kind": "fetch",
    "needsPermission": False,
}
WEATHER_CALL = ScriptedToolCall("get_weather", {"city": "San Francisco", "units": "celsius"})

# In the OpenAI stream the fake sends, event 0 is the role chunk; text chunk k is event k.
EVENTS_BEFORE_TEXT = 1


@attrs.frozen
class BenchSizes:
    """How much work each row does: the full run, or `--quick`."""

    throughput_chunks: int
    throughput_runs: int
    latency_chunks: int
    cold_starts: int
    tool_start_text_chunks: int
    kernel_evals: int
    parser_chunks: int
    static_package_modules: int = 300
    # Row 7: the sessions loaded (`--quick` skips the 50,000-message one).
    session_sizes: tuple[int, ...] = (5000, 50000)
    # Row 10: the estimated tokens of the history compacted.
    compaction_tokens: int = 150_000
    # Row 4e: prompts timed against the real llama.cpp server, per form.
    real_server_prompts: int = 5


FULL = BenchSizes(
    throughput_chunks=5000,
    throughput_runs=3,
    latency_chunks=300,
    cold_starts=5,
    tool_start_text_chunks=60,
    kernel_evals=20,
    parser_chunks=20000,
)
QUICK = BenchSizes(
    throughput_chunks=1000,
    throughput_runs=1,
    latency_chunks=100,
    cold_starts=3,
    tool_start_text_chunks=20,
    kernel_evals=5,
    parser_chunks=5000,
    session_sizes=(5000,),
    real_server_prompts=2,
)

LATENCY_PACE = 100.0  # chunks per second: a fast model
TOOL_START_PACE = Pacing(first_token_delay=0.3, chunks_per_second=50)


@attrs.frozen
class Row:
    """One line of the table. `baseline` and `compared` are "—" where nothing is compared."""

    measure: str
    parley: str
    baseline: str = "—"
    compared: str = "—"  # Parley against the baseline: a ratio, or a difference
    target: str = "—"


def verdict(target: str, met: bool) -> str:
    return f"{target}: {'met' if met else 'not met'}"


# --- small helpers -------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with `fraction` of values at or below."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def per_second(rate: float) -> str:
    return f"{rate:,.0f} chunks/s"


def numbered_chunks(count: int) -> tuple[str, ...]:
    """Text chunks that say which they are ("c0001 ", "c0002 ", ...), to time each one."""
    return tuple(f"c{number:04d} " for number in range(1, count + 1))


def chunk_number(text: str) -> int:
    return int(text[1:5])


def server_environment(fake: FakeLLM, home: Path) -> dict[str, str]:
    """`parley serve` pointed at the fake, with its own data and no user configuration."""
    return {
        "OPENAI_BASE_URL": fake.openai_base_url,
        "OPENAI_API_KEY": "sk-bench-parley",
        "PARLEY_MODEL": f"openai:{BENCH_MODEL}",
        "PARLEY_HOME": str(home / "data"),
        "PARLEY_CONFIG": str(home / "no-config.toml"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": "Sunny, 21 °C"}


class ParleyUnderTest:
    """One `parley serve` child process and a client that times its notifications."""

    def __init__(self, client: ParleyClient, workspace: Path) -> None:
        self.client = client
        self.workspace = workspace
        client.editor_tool_handler = answer_weather

    @classmethod
    async def start(
        cls, fake: FakeLLM, home: Path, env: dict[str, str] | None = None
    ) -> ParleyUnderTest:
        client = await ParleyClient.spawn(env={**server_environment(fake, home), **(env or {})})
        await client.initialize(tools=[WEATHER_TOOL])
        workspace = home / "workspace"
        workspace.mkdir(exist_ok=True)
        return cls(client, workspace)

    async def timed_prompt(
        self, on_update: Callable[[dict[str, Any], float], None], **settings: Any
    ) -> float:
        """Seconds from sending a prompt (in a new session) to its result; `on_update` gets
        each notification with the time it arrived."""
        session = await self.client.new_session(str(self.workspace), **settings)
        self.client.on_update = lambda _session, update: on_update(update, time.monotonic())
        try:
            started = time.monotonic()
            result = await self.client.prompt(session, "Go.", timeout=120)
            elapsed = time.monotonic() - started
        finally:
            self.client.on_update = None
            self.client.updates.pop(session, None)  # the benchmark keeps its own figures
        if result.get("stopReason") != "end_turn":
            raise RuntimeError(f"the benchmark prompt ended with {result}")
        return elapsed

    async def stop(self) -> None:
        await self.client.stop()


# --- 1. streaming throughput -----------------------------------------------------------------


async def sdk_stream_throughput(fake: FakeLLM, count: int) -> float:
    """Text chunks per second as the bare SDK reads them (the same request Parley makes)."""
    import openai

    fake.set_script([Reply(chunks=("tok ",) * count)])
    async with openai.AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-bench") as sdk:
        started = time.monotonic()
        stream = await sdk.chat.completions.create(
            model=BENCH_MODEL,
            messages=USER_TURN,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        received = 0
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received += 1
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


async def throughput_row(parley: ParleyUnderTest, fake: FakeLLM, sizes: BenchSizes) -> Row:
    # A small stream first, so both sides have their connection and code paths warm.
    await sdk_stream_throughput(fake, 50)
    await parley_stream_throughput(parley, fake, 50)
    sdk_rates, parley_rates = [], []
    for _ in range(sizes.throughput_runs):  # interleaved, so background load hits both alike
        sdk_rates.append(await sdk_stream_throughput(fake, sizes.throughput_chunks))
        parley_rates.append(await parley_stream_throughput(parley, fake, sizes.throughput_chunks))
    sdk_rate, parley_rate = statistics.median(sdk_rates), statistics.median(parley_rates)
    runs = f", median of {sizes.throughput_runs}" if sizes.throughput_runs > 1 else ""
    return Row(
        measure=f"1. Streaming throughput: {sizes.throughput_chunks:,} text chunks, unpaced "
        f"(Parley: into a JSON-RPC client; baseline: bare `openai` SDK{runs})",
        parley=per_second(parley_rate),
        baseline=per_second(sdk_rate),
        compared=f"{parley_rate / sdk_rate:.2f}x",
        target=verdict("≥ 0.8x", parley_rate / sdk_rate >= 0.8),
    )


# --- 2. added latency per chunk ------------------------------------------------------------------


def paced_numbered_reply(count: int) -> Reply:
    return Reply(chunks=numbered_chunks(count), pacing=Pacing(chunks_per_second=LATENCY_PACE))


def chunk_latencies(fake: FakeLLM, arrivals: dict[int, float]) -> list[float]:
    """For each text chunk: when the reader had it, minus when the fake wrote it."""
    (request,) = fake.wait_for_requests(1)
    written = request.chunk_write_times
    return [
        arrived - written[number - 1 + EVENTS_BEFORE_TEXT] for number, arrived in arrivals.items()
    ]


async def sdk_chunk_latencies(fake: FakeLLM, count: int) -> list[float]:
    import openai

    fake.set_script([paced_numbered_reply(count)])
    arrivals: dict[int, float] = {}
    async with openai.AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-bench") as sdk:
        stream = await sdk.chat.completions.create(
            model=BENCH_MODEL,
            messages=USER_TURN,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals[chunk_number(chunk.choices[0].delta.content)] = time.monotonic()
    return chunk_latencies(fake, arrivals)


async def parley_chunk_latencies(parley: ParleyUnderTest, fake: FakeLLM, count: int) -> list[float]:
    fake.set_script([paced_numbered_reply(count)])
    arrivals: dict[int, float] = {}

    def on_update(update: dict[str, Any], arrived: float) -> None:
        if update.get("sessionUpdate") == "agent_message_chunk":
            arrivals[chunk_number(update["content"]["text"])] = arrived

    await parley.timed_prompt(on_update)
    return chunk_latencies(fake, arrivals)


async def latency_rows(parley: ParleyUnderTest, fake: FakeLLM, sizes: BenchSizes) -> list[Row]:
    count = sizes.latency_chunks
    sdk = await sdk_chunk_latencies(fake, count)
    through_parley = await parley_chunk_latencies(parley, fake, count)
    rows = []
    for label, fraction in (("p50", 0.50), ("p99", 0.99)):
        parley_figure, sdk_figure = percentile(through_parley, fraction), percentile(sdk, fraction)
        added = parley_figure - sdk_figure
        rows.append(
            Row(
                measure=f"2. Latency per chunk, {label}: the fake's write → the client's "
                f"notification, {count} chunks at {LATENCY_PACE:.0f} chunks/s (baseline: the "
                "bare SDK's read of the same stream)",
                parley=ms(parley_figure),
                baseline=ms(sdk_figure),
                compared=f"{added * 1000:+,.1f} ms",
                target=verdict("added < 5 ms", added < 0.005) if label == "p99" else "—",
            )
        )
    return rows


# --- 3. cold start -------------------------------------------------------------------------------


async def cold_start_row(fake: FakeLLM, home: Path, sizes: BenchSizes) -> Row:
    env = server_environment(fake, home)
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
    return Row(
        measure="3. Cold start: spawning `parley serve` → the `initialize` response, median of "
        f"{sizes.cold_starts} (baseline: `python -c 'import openai'`)",
        parley=ms(statistics.median(starts)),
        baseline=ms(statistics.median(imports)),
        compared=f"{statistics.median(starts) / statistics.median(imports):.2f}x",
        target=verdict("< 400 ms", statistics.median(starts) < 0.4),
    )


# --- 4. prompt to tool start ---------------------------------------------------------------------


def realistic_sync_reply(reply: Reply, streamed_chunks: int) -> Reply:
    """The synchronous call's answer, as slow as a real one: a real API answers a complete
    call only after generating the whole reply, at the same pace as it streams."""
    assert TOOL_START_PACE.chunks_per_second is not None
    generation = TOOL_START_PACE.first_token_delay + streamed_chunks / (
        TOOL_START_PACE.chunks_per_second
    )
    # A stall before a JSON answer delays it; `times` high enough to apply to every call.
    return attrs.evolve(reply, fault=Fault("stall", stall_seconds=generation, times=1000))


def fake_chunk_count(reply: Reply) -> int:
    """How many events the fake streams for `reply` (OpenAI wire, usage included)."""
    from parley.fakellm import openai_wire

    return len(openai_wire.stream_events(reply, {"stream_options": {"include_usage": True}}))


async def seconds_to_tool_start(
    parley: ParleyUnderTest, fake: FakeLLM, streamed: Reply, sync: Reply, tool_policy: str
) -> float:
    """From sending the prompt to the tool's `in_progress` update."""
    fake.set_script(
        [
            attrs.evolve(streamed, sync=sync),
            Reply(text="It is sunny."),  # the round after the tool: the turn ends
        ]
    )
    tool_started: list[float] = []

    def on_update(update: dict[str, Any], arrived: float) -> None:
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") == (
            "in_progress"
        ):
            tool_started.append(arrived)

    started = time.monotonic()
    await parley.timed_prompt(on_update, toolPolicy=tool_policy)
    if not tool_started:
        raise RuntimeError(f"the tool never started under {tool_policy!r}")
    return tool_started[0] - started


def continuation_environment(fake: FakeLLM, home: Path) -> dict[str, str]:
    """A server whose model is a `vllm` preset's (`continue_streamed` on), served by the
    fake, with its own data."""
    config = home / "continuation-config.toml"
    config.write_text(f'[providers.vllm]\nbase_url = "{fake.openai_base_url}"\n')
    return {
        "PARLEY_MODEL": f"vllm:{BENCH_MODEL}",
        "PARLEY_HOME": str(home / "continuation-data"),
        "PARLEY_CONFIG": str(config),
    }


async def tool_start_rows(
    parley: ParleyUnderTest, fake: FakeLLM, sizes: BenchSizes, home: Path
) -> list[Row]:
    text = numbered_chunks(sizes.tool_start_text_chunks)
    with_tool_call = Reply(chunks=text, tool_calls=(WEATHER_CALL,), pacing=TOOL_START_PACE)
    streamed_chunks = fake_chunk_count(with_tool_call)
    # The same reply, but the stream shows no tool call, only a `tool_calls` finish reason:
    # hybrid cannot close early, it waits for the finish. The model still takes the time to
    # generate the call, so the stream pauses that long after the text (a stall).
    finish_only = Reply(chunks=text, finish_reason="tool_calls", pacing=TOOL_START_PACE)
    unshown_chunks = streamed_chunks - fake_chunk_count(finish_only)
    assert TOOL_START_PACE.chunks_per_second is not None
    finish_only = attrs.evolve(
        finish_only,
        fault=Fault(
            "stall",
            after_chunks=EVENTS_BEFORE_TEXT + len(text),
            stall_seconds=unshown_chunks / TOOL_START_PACE.chunks_per_second,
        ),
    )
    sync = realistic_sync_reply(
        Reply(chunks=text, tool_calls=(WEATHER_CALL,)), streamed_chunks=streamed_chunks
    )
    early = await seconds_to_tool_start(parley, fake, with_tool_call, sync, "hybrid")
    waiting = await seconds_to_tool_start(parley, fake, finish_only, sync, "hybrid")
    streamed = await seconds_to_tool_start(parley, fake, with_tool_call, sync, "stream")
    # 4d: the synchronous call continues the streamed text, so the model generates only the
    # call: the fake answers with the call alone, after the time it takes to generate it.
    rest = realistic_sync_reply(Reply(tool_calls=(WEATHER_CALL,)), streamed_chunks=unshown_chunks)
    continuing = await ParleyUnderTest.start(fake, home, continuation_environment(fake, home))
    try:
        # Warmed up as the first server is by the rows before: its SDK imported, connected.
        fake.set_script([Reply(text="Ready.")])
        await continuing.timed_prompt(lambda _update, _arrived: None)
        continued = await seconds_to_tool_start(continuing, fake, with_tool_call, rest, "hybrid")
    finally:
        await continuing.stop()
    sync_calls = [request for request in fake.requests if not request.stream]
    if not sync_calls or not sync_calls[0].body.get("continue_final_message"):
        raise RuntimeError("4d: the synchronous call did not continue the streamed text")
    scenario = (
        f"{sizes.tool_start_text_chunks} text chunks then a tool call, first token after "
        f"{TOOL_START_PACE.first_token_delay:g} s, {TOOL_START_PACE.chunks_per_second:g} chunks/s"
    )
    soonest = min(
        (early, "hybrid, early close"),
        (waiting, "hybrid, waiting"),
        (streamed, "stream"),
        (continued, "hybrid with continuation"),
    )[1]
    return [
        Row(
            measure=f"4a. Prompt → tool start, `hybrid`, tool call seen in the stream (early "
            f"close + synchronous call); {scenario}",
            parley=ms(early),
            baseline=f"4b: {ms(waiting)}",
            compared=f"{early / waiting:.2f}x",
            target=verdict("sooner than 4b", early < waiting),
        ),
        Row(
            measure="4b. Prompt → tool start, `hybrid`, tool call shown only by the finish "
            "reason (waits for the finish + synchronous call)",
            parley=ms(waiting),
        ),
        Row(
            measure="4c. Prompt → tool start, `stream` (arguments assembled from the stream, "
            "no synchronous call)",
            parley=ms(streamed),
            baseline=f"4a: {ms(early)}",
            compared=f"{streamed / early:.2f}x",
            target=f"soonest of 4a to 4d: {soonest}",
        ),
        Row(
            measure="4d. Prompt → tool start, `hybrid` with continuation (`continue_streamed`, "
            "a `vllm` provider: early close + a synchronous call that continues the streamed "
            "text and generates only the call)",
            parley=ms(continued),
            baseline=f"4a: {ms(early)}; 4c: {ms(streamed)}",
            compared=f"{continued / early:.2f}x of 4a; {continued / streamed:.2f}x of 4c",
            target=verdict("sooner than 4a", continued < early),
        ),
    ]


async def real_server_row(home: Path, sizes: BenchSizes, fake_continued: str) -> Row:
    """4e: 4d's question against a real llama.cpp server (parley/bench_llamacpp.py)."""
    from parley.bench_llamacpp import real_server_tool_start

    measured = await real_server_tool_start(home, sizes.real_server_prompts)
    measure = (
        "4e. Prompt → tool start against a real llama.cpp server (the `xllamacpp` wheel, "
        "`parley.scriptllm`'s model: `Let me look.` then the call), `hybrid` with "
        f"continuation (`prefill`), median of {sizes.real_server_prompts}"
    )
    if isinstance(measured, str):
        return Row(measure=measure, parley=measured)
    return Row(
        measure=measure,
        parley=ms(measured["with"]),
        baseline=f"without continuation: {ms(measured['without'])}; fake (4d): {fake_continued}",
        compared=f"{measured['with'] / measured['without']:.2f}x",
    )


# --- 5, 6. the kernel and the text parsers ----------------------------------------------------


async def kernel_rows(home: Path, sizes: BenchSizes) -> list[Row]:
    from parley.tools.kernel_bench import bench_kernel

    workspace = home / "kernel-workspace"
    workspace.mkdir(exist_ok=True)
    figures = await bench_kernel(workspace, repeats=sizes.kernel_evals)
    return [
        Row(
            measure="5a. Python kernel cold start: process start to the first eval's answer",
            parley=f"{figures['cold_start_ms']:,.1f} ms",
        ),
        Row(
            measure=f"5b. Kernel round trip of a trivial eval (`1 + 1`), p50 of "
            f"{sizes.kernel_evals} (p90 {figures['eval_round_trip_p90_ms']:,.1f} ms)",
            parley=f"{figures['eval_round_trip_p50_ms']:,.2f} ms",
        ),
    ]


def write_big_package(root: Path, modules: int) -> str:
    """A package of `modules` modules, each with a docstring, a class and a few functions:
    the size of a real project's package."""
    package = root / "bigpkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""A generated package."""\n')
    for n in range(modules):
        functions = "".join(
            f"def f{n}_{k}(a: int, b: str = 'x', *rest, flag: bool = False) -> int:\n"
            f'    """Function {k} of module {n}."""\n    return a + {k}\n\n\n'
            for k in range(4)
        )
        klass = (
            f'class Thing{n}:\n    """A thing."""\n\n'
            "    def __init__(self, size):\n        self.size = size\n\n"
            "    def grow(self, by=1):\n        return self.size + by\n"
        )
        (package / f"mod{n}.py").write_text(f'"""Module {n}."""\n\n\n{functions}{klass}')
    return f"bigpkg.mod{modules // 2}.f{modules // 2}_2"


async def static_introspection_rows(home: Path, sizes: BenchSizes) -> list[Row]:
    from parley.tools.base import ToolContext
    from parley.tools.server_tools import server_tools

    workspace = home / "static-workspace"
    target = write_big_package(workspace, sizes.static_package_modules)
    tools = {tool.spec.name: tool for tool in server_tools(workspace)}
    describe = tools["python_describe"]
    context = ToolContext(session_id="bench", tool_call_id="bench", cwd=workspace)
    times = []
    for _ in range(2):  # cold: griffe reads every module; warm: only the files' times
        started = time.monotonic()
        result = await describe.run({"target": target}, context)
        times.append(time.monotonic() - started)
        assert not result.is_error, result.content
    await describe.aclose()
    label = (
        f"`python_describe` from the source (griffe, nothing imported) on a package of "
        f"{sizes.static_package_modules} modules"
    )
    return [
        Row(measure=f"5c. {label}, cold (first call)", parley=ms(times[0])),
        Row(measure=f"5d. {label}, warm (second call)", parley=ms(times[1])),
    ]


def parser_rows(sizes: BenchSizes) -> list[Row]:
    from parley.providers.text_parsers_bench import bench_parsers

    figures = bench_parsers(sizes.parser_chunks)
    return [
        Row(
            measure=f"6. Text parser `{name}`: {sizes.parser_chunks:,} 4-character chunks",
            parley=per_second(rate),
        )
        for name, rate in figures.items()
    ]


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


# --- 7. loading a long session ------------------------------------------------------------------


LONG_SESSION_ID = "sess_bench_long_session_{messages}"
TOOL_OUTPUT_LINE = "def area(w, h):\n    return w * h\n"


def write_long_session(
    home: Path, workspace: Path, messages: int, *, tool_output_lines: int = 5
) -> str:
    """A stored session of `messages` messages: rounds of a prompt, an assistant message with
    a tool call, the tool's result, and the answer — what a day of work leaves behind."""
    store = Store.open_in(home)
    session_id = LONG_SESSION_ID.format(messages=messages)
    now = now_iso()
    store.save_session(
        StoredSession(
            session_id,
            str(workspace),
            "A long session",
            "openai:gpt-4.1-mini",
            "hybrid",
            {},
            None,
            None,
            0,
            0,
            now,
            now,
        )
    )
    output = TOOL_OUTPUT_LINE * tool_output_lines
    # As a turn stores it: how the call was shown, so the replay computes no view.
    shown = {"title": "Read geometry.py", "locations": [{"path": str(workspace / "geometry.py")}]}
    for n in range(messages // 4):
        call = ToolCall(f"call_{n}", "read_file", {"path": "geometry.py"}, f"wire_{n}")
        for message in (
            UserMessage((TextBlock(f"Question {n}: what does area do here?"),)),
            AssistantMessage("Let me read the file.", (), (call,), f"msg_{n}_a"),
            ToolResultMessage(call.id, call.name, output, wire_id=call.wire_id, shown=shown),
            AssistantMessage(
                f"Answer {n}: it multiplies width by height. " * 4, message_id=f"msg_{n}_b"
            ),
        ):
            store.append_message(session_id, message, now)
    store.close()
    return session_id


def rss_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def timed_session_load(
    fake: FakeLLM, home: Path, messages: int
) -> tuple[float, int, float, float]:
    """A fresh server loads a stored session of `messages` messages: seconds of
    `session/load` (its replay included), the updates replayed, and the server's RSS in MB
    right after `initialize` and after the load."""
    workspace = home / "workspace"
    workspace.mkdir(exist_ok=True)
    session_id = write_long_session(home / "data", workspace, messages)
    client = await ParleyClient.spawn(env=server_environment(fake, home))
    try:
        await client.initialize()
        assert client.process is not None
        idle = rss_megabytes(client.process.pid)
        started = time.monotonic()
        await client.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []},
            timeout=600,
        )
        elapsed = time.monotonic() - started
        replayed = len(client.updates_of(session_id))
        loaded = rss_megabytes(client.process.pid)
    finally:
        await client.stop()
    return elapsed, replayed, idle, loaded


async def session_load_rows(fake: FakeLLM, home: Path, sizes: BenchSizes) -> list[Row]:
    rows = []
    for index, messages in enumerate(sizes.session_sizes):
        elapsed, replayed, idle, loaded = await timed_session_load(fake, home, messages)
        letters = "ab" if index == 0 else "cd"
        target = verdict("< 200 ms", elapsed < 0.2) if messages == 5000 else "—"
        rows += [
            Row(
                measure=f"7{letters[0]}. Loading a session of {messages:,} messages: "
                f"`session/load` reads it and replays {replayed:,} updates to the client",
                parley=ms(elapsed),
                target=target,
            ),
            Row(
                measure=f"7{letters[1]}. Server memory (RSS) after loading {messages:,} messages "
                "(baseline: right after `initialize`)",
                parley=f"{loaded:.0f} MB",
                baseline=f"{idle:.0f} MB",
                compared=f"+{loaded - idle:.0f} MB",
            ),
        ]
    return rows


# --- 8. the first prompt after start -------------------------------------------------------------

# An editor's user types the first prompt a few seconds after the server starts; the server
# uses them to import the provider's SDK in the background.
FIRST_PROMPT_IDLE_SECONDS = 2.0


async def first_prompt_row(fake: FakeLLM, home: Path, sizes: BenchSizes) -> Row:
    """A fresh server's first prompt (a one-chunk reply) against its second."""
    firsts, seconds = [], []
    for _ in range(sizes.cold_starts):
        parley = await ParleyUnderTest.start(fake, home)
        try:
            await asyncio.sleep(FIRST_PROMPT_IDLE_SECONDS)
            for times in (firsts, seconds):
                fake.set_script([Reply(text="ok")])
                times.append(await parley.timed_prompt(lambda _update, _arrived: None))
        finally:
            await parley.stop()
    first, second = statistics.median(firsts), statistics.median(seconds)
    return Row(
        measure=f"8. First prompt of a fresh server, {FIRST_PROMPT_IDLE_SECONDS:.0f} s after "
        f"`initialize`: `session/prompt` → its result, a one-chunk reply, median of "
        f"{sizes.cold_starts} (baseline: the same server's second prompt)",
        parley=ms(first),
        baseline=ms(second),
        compared=f"{(first - second) * 1000:+,.1f} ms",
        target=verdict("added < 100 ms", first - second < 0.1),
    )


# --- 9. prompt caching: the hybrid fallback's input ------------------------------------------

CACHE_MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": f"openai:{BENCH_MODEL}"}


async def fallback_cache_usage(fake: FakeLLM, home: Path, model: str) -> list[dict[str, Any]]:
    """The counted calls' usage of one hybrid tool round and the round after it, against a
    fake that caches like the real APIs (`PromptCache`, their 1,024-token minimum)."""
    env = {
        **server_environment(fake, home),
        "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
        "ANTHROPIC_API_KEY": "sk-ant-bench-parley",
        "PARLEY_MODEL": model,
    }
    client = await ParleyClient.spawn(env=env)
    fake.prompt_cache = PromptCache()
    try:
        client.editor_tool_handler = answer_weather
        await client.initialize(tools=[WEATHER_TOOL])
        workspace = home / "workspace"
        workspace.mkdir(exist_ok=True)
        fake.set_script([Reply(text="Let me look.", tool_calls=(WEATHER_CALL,)), Reply("Sunny.")])
        session = await client.new_session(str(workspace))
        await client.prompt(session, "Weather in Paris?", timeout=120)
        return [u["_meta"]["parley"]["call"] for u in client.updates_of(session, "usage_update")]
    finally:
        fake.prompt_cache = None
        await client.stop()


async def cache_rows(fake: FakeLLM, home: Path) -> list[Row]:
    rows = []
    for letter, (provider, model) in zip("ab", CACHE_MODELS.items(), strict=True):
        sync, _next_round = await fallback_cache_usage(fake, home, model)
        share = sync["cachedReadTokens"] / max(sync["inputTokens"], 1)
        how = "cache breakpoints" if provider == "anthropic" else "`prompt_cache_key`"
        rows.append(
            Row(
                measure=f"9{letter}. Hybrid fallback ({model}, {how}): share of the synchronous "
                f"call's {sync['inputTokens']:,} input tokens billed as cache reads, against a "
                "fake that caches like the real API",
                parley=f"{share:.0%}",
                baseline="0% (no caching asked for)" if provider == "anthropic" else "by luck",
                target=verdict("≥ 90%", share >= 0.9),
            )
        )
    return rows


# --- 10. compacting a long history ---------------------------------------------------------

# The window configured for row 10: the 150k-token history does not fit, so it must compact.
COMPACTION_WINDOW = 128_000
COMPACTION_MESSAGES = 200  # 50 rounds; the tool outputs make up the tokens


async def compaction_row(fake: FakeLLM, home: Path, sizes: BenchSizes) -> Row:
    """`_parley/session/compact` on a stored session of about `compaction_tokens` estimated
    tokens; the fake answers the summary call."""
    from parley.agent.compaction import CHARS_PER_TOKEN

    workspace = home / "workspace"
    workspace.mkdir(exist_ok=True)
    rounds = COMPACTION_MESSAGES // 4
    lines = sizes.compaction_tokens * CHARS_PER_TOKEN // (rounds * len(TOOL_OUTPUT_LINE))
    session_id = write_long_session(
        home / "compaction-data", workspace, COMPACTION_MESSAGES, tool_output_lines=lines
    )
    config = home / "compaction-config.toml"
    config.write_text(f'[models."openai:{BENCH_MODEL}"]\ncontext_window = {COMPACTION_WINDOW}\n')
    env = {
        **server_environment(fake, home),
        "PARLEY_HOME": str(home / "compaction-data"),
        "PARLEY_CONFIG": str(config),
    }
    fake.set_script([Reply(text="The user asked about `area` in geometry.py many times. " * 8)])
    client = await ParleyClient.spawn(env=env)
    try:
        await client.initialize()
        await client.request(
            "session/resume", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
        )
        started = time.monotonic()
        counts = await client.request(
            "_parley/session/compact", {"sessionId": session_id}, timeout=120
        )
        elapsed = time.monotonic() - started
    finally:
        await client.stop()
    before, after = counts["tokensBefore"], counts["tokensAfter"]
    return Row(
        measure=f"10. Compacting a history of {before:,} estimated tokens "
        f"({COMPACTION_MESSAGES} messages, window {COMPACTION_WINDOW:,}): "
        "`_parley/session/compact`, the summary call answered by the fake (baseline: the "
        "tokens before)",
        parley=f"{ms(elapsed)}, {after:,} tokens after",
        baseline=f"{before:,} tokens",
        compared=f"{after / max(before, 1):.1%} of the tokens",
        target=verdict("under the window", after < COMPACTION_WINDOW),
    )


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
        cold_start = await cold_start_row(fake, home, sizes)
        session_load = await session_load_rows(fake, home, sizes)
        first_prompt = await first_prompt_row(fake, home, sizes)
        caching = await cache_rows(fake, home)
        compaction = await compaction_row(fake, home, sizes)
    kernel = await kernel_rows(home, sizes)
    static_introspection = await static_introspection_rows(home, sizes)
    return [
        throughput,
        *latency,
        cold_start,
        *tool_start,
        *kernel,
        *static_introspection,
        *parser_rows(sizes),
        *session_load,
        first_prompt,
        *caching,
        compaction,
    ]


async def collect_session_load_rows(sizes: BenchSizes, home: Path) -> list[Row]:
    with FakeLLM() as fake:
        return await session_load_rows(fake, home, sizes)


def run_benchmarks(quick: bool = False, only_session_load: bool = False) -> int:
    sizes = QUICK if quick else FULL
    collect = collect_session_load_rows if only_session_load else collect_rows
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
