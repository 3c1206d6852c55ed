"""Rows 7 and 8: loading a long session (time, the server's memory), and the first prompt of
a fresh server."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

from parley.agent.session import now_iso
from parley.bench.harness import BenchSizes, ParleyUnderTest, Row, ms, server_environment, verdict
from parley.client import ParleyClient
from parley.core.conversation import (
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.core.session_settings import SessionSettings
from parley.fakellm import FakeLLM, Reply
from parley.store import Store, StoredSession

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
            SessionSettings(model="openai:gpt-4.1-mini"),
            {},
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


async def first_prompt_at_once_rows(
    fake: FakeLLM, home: Path, sizes: BenchSizes, warm: dict[str, str] | None = None
) -> list[Row]:
    """No pause: `session/new` right after `initialize` and the prompt right after it (a
    script, `parley chat`, a quick typist). From `session/new` to the prompt's result, the
    SDK's import included wherever it is waited for; the same server's second session is
    the baseline. And `session/new` alone, on the cold server (8c). With `warm` (the
    environment of a running warm process): row 8w, a server forked by it."""
    firsts: list[tuple[float, float]] = []
    seconds: list[tuple[float, float]] = []
    for _ in range(sizes.cold_starts):
        parley = await ParleyUnderTest.start(fake, home, warm)
        try:
            for times in (firsts, seconds):
                fake.set_script([Reply(text="ok")])
                started = time.monotonic()
                prompt = await parley.timed_prompt(lambda _update, _arrived: None)
                times.append((time.monotonic() - started, prompt))
        finally:
            await parley.stop()
    first = statistics.median(total for total, _ in firsts)
    second = statistics.median(total for total, _ in seconds)
    first_prompt = statistics.median(prompt for _, prompt in firsts)
    # `timed_prompt` times the prompt; what comes before it is `session/new`.
    first_new = statistics.median(total - prompt for total, prompt in firsts)
    second_new = statistics.median(total - prompt for total, prompt in seconds)
    if warm:
        return [
            Row(
                measure="8w. First prompt of a server the warm process forked, sent at once: "
                f"`session/new` → the prompt's result, median of {sizes.cold_starts} (baseline: "
                f"the same server's second session); of it, the prompt alone: {ms(first_prompt)}",
                parley=ms(first),
                baseline=ms(second),
                compared=f"{(first - second) * 1000:+,.1f} ms",
                target=verdict("added ≤ 300 ms", first - second <= 0.3),
            )
        ]
    return [
        Row(
            measure="8b. First prompt of a fresh server sent at once: `session/new` → the "
            f"prompt's result, a one-chunk reply, median of {sizes.cold_starts} (baseline: the "
            f"same server's second session); of it, the prompt alone: {ms(first_prompt)}",
            parley=ms(first),
            baseline=ms(second),
            compared=f"{(first - second) * 1000:+,.1f} ms",
            target="— (8w's: a cold server pays the SDK's import)",
        ),
        Row(
            measure="8c. `session/new` on a fresh server, sent right after `initialize`: its "
            f"answer, median of {sizes.cold_starts} (baseline: the same server's second)",
            parley=ms(first_new),
            baseline=ms(second_new),
            compared=f"{(first_new - second_new) * 1000:+,.1f} ms",
            target=verdict("≤ 100 ms", first_new <= 0.1),
        ),
    ]
