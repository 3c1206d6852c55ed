"""Row 4: from a prompt to its tool's start, by policy (`hybrid`, `stream`, `hybrid` with
continuation), and against a real llama.cpp server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs

from parley.bench.harness import (
    BENCH_MODEL,
    EVENTS_BEFORE_TEXT,
    TOOL_START_PACE,
    WEATHER_CALL,
    BenchSizes,
    ParleyUnderTest,
    Row,
    ms,
    numbered_chunks,
    verdict,
)
from parley.fakellm import FakeLLM, Fault, Reply

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
