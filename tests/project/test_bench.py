"""`parley bench --quick` prints its whole table. Only the table's shape is checked: the
figures depend on the machine, so no test asserts a time."""

from __future__ import annotations

import re
import subprocess
import sys

import openai
import pytest
from parley.bench.harness import percentile
from parley.fakellm import FakeLLM, Pacing, Reply

# Each row's label, as the first cell of its line begins.
ROW_LABELS = [
    "1. Streaming throughput",
    "2. Latency per chunk, p50",
    "2. Latency per chunk, p99",
    "1a. Streaming throughput, anthropic:",
    "2a. Latency per chunk, anthropic:claude-sonnet-4-5, p50",
    "2a. Latency per chunk, anthropic:claude-sonnet-4-5, p99",
    "3. Cold start",
    "3w. Warm start",
    "4a. Prompt → tool start, `hybrid`, tool call seen in the stream",
    "4b. Prompt → tool start, `hybrid`, tool call shown only by the finish reason",
    "4c. Prompt → tool start, `stream`",
    "4d. Prompt → tool start, `hybrid` with continuation",
    "4e. Prompt → tool start against a real llama.cpp server",
    "5a. Python kernel cold start",
    "5b. Kernel round trip",
    "5c. `python_describe` from the source (griffe, nothing imported) on a package of 300",
    "5d. `python_describe` from the source (griffe, nothing imported) on a package of 300",
    "5e. Attached kernel (a real ipykernel): round trip of an eval",
    "6. Text parser `ThinkTagParser`",
    "6. Text parser `TextToolCallParser`",
    "6. Text parser `LocalModelStreamParser`",
    "7a. Loading a session of 5,000 messages",
    "7b. Server memory (RSS) after loading 5,000 messages",  # --quick skips 7c, 7d (50,000)
    "8. First prompt of a fresh server",
    "8b. First prompt of a fresh server sent at once",
    "8c. `session/new` on a fresh server",
    "8w. First prompt of a server the warm process forked",
    "9a. Hybrid fallback (anthropic:",
    "9b. Hybrid fallback (openai:",
    "9c. OpenAI: the hybrid policy's synchronous call after a history of 10,001 messages",
    "9d. Anthropic: the hybrid policy's synchronous call after a history of 10,001 messages",
    "10. Compacting a history of",
    "11a. Snapshot of a workspace of 10,000 files, first",
    "11b. Snapshot of the 10,000 files, later, nothing changed",
    "11c. Snapshot of the 10,000 files after a turn changed 100",
    "11d. Restore of that turn",
    "11e. A turn's `run_command` of pytest (48 tests) in a workspace of 10,000 files",
]
# Rows with a baseline and a comparison.
COMPARED_ROWS = {
    "1.",
    "2.",
    "1a.",
    "2a.",
    "3.",
    "3w.",
    "4a.",
    "5e.",
    "4c.",
    "4d.",
    "4e.",
    "7b.",
    "8.",
    "8b.",
    "8w.",
    "9c.",
    "9d.",
    "10.",
    "11b.",
    "11e.",
}
NUMBER = re.compile(r"[+-]?\d[\d,]*(\.\d+)?")


@pytest.mark.slow
@pytest.mark.timeout(420)  # ~50 s, but the benchmark's own limit is 300 s: past the suite's
def test_quick_benchmark_prints_every_row_with_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    # The benchmark's servers run under the suite's load, beside one another and this process
    # (their writes no longer wait for a slow reader: docs/architecture.md, "The event loop
    # never blocks"); what this test checks is the rows, not the loop watchdog's reports.
    monkeypatch.delenv("PARLEY_LOOP_WATCHDOG_MS")
    finished = subprocess.run(
        [sys.executable, "-m", "parley", "bench", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]

    lines = finished.stdout.splitlines()
    assert lines[0] == "| Benchmark | Parley | Baseline | Parley vs baseline | Target |"
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| Bench")]
    assert len(rows) == len(ROW_LABELS), finished.stdout
    for row, label in zip(rows, ROW_LABELS, strict=True):
        measure, parley, baseline, compared, _target = (
            cell.strip() for cell in row.strip("|").split(" | ")
        )
        assert measure.startswith(label), row
        assert NUMBER.search(parley), row
        if label.split()[0] in COMPARED_ROWS:
            assert NUMBER.search(baseline) and NUMBER.search(compared), row
    assert "Row 2 timing:" in finished.stdout  # the method is said under the table


def test_the_fake_records_when_it_wrote_each_chunk() -> None:
    """Row 2 times each chunk from the fake's write; the write times must be per chunk."""
    with FakeLLM([Reply(chunks=("a", "b", "c"), pacing=Pacing(chunks_per_second=200))]) as fake:
        with openai.OpenAI(base_url=fake.openai_base_url, api_key="sk-test") as sdk:
            stream = sdk.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            assert "".join(c.choices[0].delta.content or "" for c in stream) == "abc"
        (recorded,) = fake.wait_for_requests(1)
    times = recorded.chunk_write_times
    assert len(times) == recorded.chunks_sent == recorded.chunks_total
    assert list(times) == sorted(times)
    assert times[-1] - times[0] >= 0.9 * (len(times) - 1) / 200  # paced: one write per chunk
    assert recorded.started_at <= times[0] and times[-1] <= recorded.ended_at


def test_percentile_is_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 0.50) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([3.0], 0.99) == 3.0
