"""Row 11e: the snapshots' share of a typical test run, a turn's `run_command` of pytest
over a small package of 48 tests in a workspace of 10,000 files (docs/benchmarks.md).

In-process, as the turn does it: the real `TurnSnapshots` (`agent/snapshots.py`) takes the
snapshot of every root before the call and starts the one after it, around the real
`RunCommandTool` running the command (in the sandbox where the machine has one). What the
snapshots add to the command is the one before and whatever `after_call` waits; the one
after runs while the turn goes on (its result sent, the model asked again), and its own time
is shown beside."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from parley.bench.harness import BenchSizes, Row, ms, percentile, verdict
from parley.bench.snapshots import write_workspace

SHARE_TARGET = 0.05  # of the command's own time, the snapshot before and the one after
TEST_COUNT = 48
# pytest is run by Parley's own interpreter. A sandboxed command sees nothing of /tmp but the
# workspace and its first word (`sandbox.needed_under_tmp`), so a checkout under /tmp (CI's)
# runs it unsandboxed: the command then lacks the sandbox's start (20-35 ms), and the share
# reads a little higher than it would.
UNDER_TMP = Path("/tmp") in Path(sys.prefix).resolve().parents

PACKAGE = '''\
"""Word statistics: a small package with a test suite, as a project has."""

import re
from collections import Counter


def words(text):
    return re.findall(r"[a-z']+", text.lower())


def frequencies(text):
    return Counter(words(text))


def longest(text):
    return max(words(text), key=len, default="")


def title(text):
    small = {"a", "an", "and", "of", "the", "to"}
    parts = words(text)
    return " ".join(w if i and w in small else w.capitalize() for i, w in enumerate(parts))
'''

TESTS = """\
import pytest

from wordstats import frequencies, longest, title, words

SENTENCES = [f"the {n} quick brown fox jumps over the lazy dog " * (n % 5 + 1) for n in range(12)]


@pytest.mark.parametrize("text", SENTENCES)
def test_words_are_lower_case(text):
    assert all(word == word.lower() for word in words(text.upper()))


@pytest.mark.parametrize("text", SENTENCES)
def test_frequencies_count_every_word(text):
    assert sum(frequencies(text).values()) == len(words(text))


@pytest.mark.parametrize("text", SENTENCES)
def test_longest_is_a_word_of_the_text(text):
    assert longest(text) in words(text)


@pytest.mark.parametrize("text", SENTENCES)
def test_title_keeps_the_words(text):
    assert words(title(text)) == words(text)
"""


def write_test_package(root: Path) -> str:
    """A package and its 48 tests in `root`; the command line that runs them."""
    (root / "wordstats").mkdir()
    (root / "wordstats" / "__init__.py").write_text(PACKAGE)
    (root / "tests").mkdir()
    (root / "tests" / "test_wordstats.py").write_text(TESTS)
    return f"{sys.executable} -m pytest -q tests"


async def measure_share(home: Path, sizes: BenchSizes) -> dict[str, float]:
    from parley.agent.snapshot_store import SnapshotStore
    from parley.agent.snapshots import TurnSnapshots
    from parley.config import CheckpointsTable
    from parley.tools.base import ToolContext
    from parley.tools.confined import workspace_roots
    from parley.tools.run_command import RunCommandTool

    root = home / "share-workspace"
    await asyncio.to_thread(write_workspace, root, sizes.snapshot_files - 2)
    command = write_test_package(root)
    await asyncio.sleep(2.1)  # older than the snapshots' clock doubt, as a real tree's files
    roots = workspace_roots(root)
    store = SnapshotStore(home / "share-home")
    from parley.sandbox import SandboxSettings
    from parley.tools.run_command import CommandSettings

    tool = RunCommandTool(roots, CommandSettings(sandbox=SandboxSettings(enabled=not UNDER_TMP)))
    context = ToolContext("bench", "call", roots.cwd, roots=roots.all)
    before, after, ran, added_ms, added, own = [], [], [], [], [], []
    clock = asyncio.get_running_loop().time
    for turn in range(sizes.share_runs + 1):  # turn 0 warms up: every file read and kept
        snapshots = TurnSnapshots(store, "bench", turn, roots.all, CheckpointsTable())
        started = clock()
        await snapshots.before_call("execute", "run_command")
        snapshot_before = clock()
        result = await tool.run({"command": command}, context)
        command_ended = clock()
        await snapshots.after_call()  # starts the snapshot after, which the turn does not wait for
        result_sent = clock()
        await snapshots.settled()  # as the turn's end (or its next writing call) waits for it
        ended = clock()
        if f"{TEST_COUNT} passed" not in result.content:
            raise RuntimeError(f"the test run failed: {result.content[-2000:]}")
        if turn:
            before.append(snapshot_before - started)
            ran.append(command_ended - snapshot_before)
            after.append(ended - command_ended)
            added_ms.append(snapshot_before - started + result_sent - command_ended)
            added.append(added_ms[-1] / ran[-1])
            own.append((snapshot_before - started + ended - command_ended) / ran[-1])
    await tool.aclose()
    return {
        "before": percentile(before, 0.5),
        "after": percentile(after, 0.5),
        "command": percentile(ran, 0.5),
        "added_ms": percentile(added_ms, 0.5),
        "added": percentile(added, 0.5),
        "own": percentile(own, 0.5),
    }


async def share_row(home: Path, sizes: BenchSizes) -> Row:
    figures = await measure_share(home, sizes)
    added = figures["added"]
    return Row(
        measure=f"11e. A turn's `run_command` of pytest ({TEST_COUNT} tests) in a workspace of "
        f"{sizes.snapshot_files:,} files: what the snapshots add to the command, p50 of "
        f"{sizes.share_runs} (the one before, {ms(figures['before'])}; the one after, "
        f"{ms(figures['after'])}, runs while the turn goes on: the two, "
        f"{figures['own']:.1%} of the command)"
        f"{' (unsandboxed: Parley is under /tmp)' if UNDER_TMP else ''}",
        parley=ms(figures["added_ms"]),
        baseline=f"{ms(figures['command'])} (the command)",
        compared=f"{added:.1%} of the command",
        target=verdict(f"≤ {SHARE_TARGET:.0%}", added <= SHARE_TARGET),
    )
