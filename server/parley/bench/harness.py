"""The benchmark's harness: its sizes, a table row, small helpers, and `parley serve`
under test (`ParleyUnderTest`, a client that times its notifications)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Pacing, ScriptedToolCall

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
    # Row 11: the workspace snapshotted, and how many later snapshots are timed.
    snapshot_files: int = 10_000
    snapshot_repeats: int = 20
    # Row 11e: the turns that run the test command, timed after one that warms up.
    share_runs: int = 5


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
    snapshot_repeats=5,
    share_runs=2,
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
        "PARLEY_WARM": "0",  # every row's server is cold but rows 3w and 8w (bench/warm.py)
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
