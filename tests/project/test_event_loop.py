"""The event loop never blocks: work that grows with a file or a history runs off it.

The loop watchdog (`parley.core.loop_watchdog`) is on for every server the suite starts
(`tests/conftest.py`): any test whose server's loop is blocked longer than 100 ms fails with
the stack that blocked it. Here: the watchdog itself (it reports a block and what caused
it; a process that was merely not scheduled, or was stopped, is not a block), and the case
that froze the server: a round of forty `replace_all` edits of a 2 MB file, and the
`session/load` that replays it, while the same server keeps being asked.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from parley.agent.replay import replay_updates
from parley.client import ParleyClient
from parley.core.conversation import AssistantMessage, ToolCall, ToolResultMessage
from parley.core.loop_watchdog import (
    THRESHOLD_VARIABLE,
    LoopWatchdog,
    ThreadTimes,
    account,
    read_reports,
)
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.edits import DIFF_MAX_LINES, lines_added_and_removed
from parley.tools.registry import ToolRegistry

# --- the watchdog, in this process ------------------------------------------------------------


def _block_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # a synchronous call on the loop: what the watchdog is for


async def test_the_watchdog_reports_a_blocked_loop_with_the_stack_that_blocked_it(
    tmp_path: Path,
) -> None:
    reports = tmp_path / "reports.jsonl"
    watchdog = LoopWatchdog(100, reports)
    watchdog.start()
    try:
        await asyncio.sleep(0.1)
        _block_the_loop_for(0.4)
        await asyncio.sleep(0.1)
        await asyncio.to_thread(time.sleep, 0.4)  # off the loop: not a block
        await asyncio.sleep(0.1)
    finally:
        watchdog.stop()
    (report,) = read_reports(reports)
    assert report["blocked_ms"] > 300
    assert report["pid"] == os.getpid()
    assert any("_block_the_loop_for" in frame for frame in report["samples"][0]["loop_stack"])


async def test_the_watchdog_stays_silent_on_a_loop_that_only_awaits(tmp_path: Path) -> None:
    reports = tmp_path / "reports.jsonl"
    watchdog = LoopWatchdog(100, reports)
    watchdog.start()
    try:
        for _ in range(20):
            await asyncio.sleep(0.01)
            sum(range(10_000))  # short pieces of work: far below the threshold
    finally:
        watchdog.stop()
    assert read_reports(reports) == []


WATCHED_LOOP = """
import asyncio, sys
from pathlib import Path
from parley.core.loop_watchdog import LoopWatchdog

async def main():
    watchdog = LoopWatchdog(100, Path(sys.argv[1]))
    watchdog.start()
    print("watching", flush=True)
    await asyncio.sleep(float(sys.argv[2]))
    watchdog.stop()

asyncio.run(main())
"""


def test_a_stopped_process_is_not_a_blocked_loop(tmp_path: Path) -> None:
    """SIGSTOP (a debugger, job control, a test) stops every thread: when it continues,
    the heartbeat is late, but the loop was never blocked."""
    reports = tmp_path / "reports.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-c", WATCHED_LOOP, str(reports), "1.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "watching\n"
    time.sleep(0.2)
    os.kill(process.pid, signal.SIGSTOP)
    time.sleep(0.5)
    os.kill(process.pid, signal.SIGCONT)
    assert process.wait(timeout=30) == 0
    assert read_reports(reports) == []


NS = 1_000_000  # a millisecond


@given(
    late=st.integers(0, 10_000 * NS),
    loop_cpu=st.integers(0, 10_000 * NS),
    loop_waited=st.integers(0, 10_000 * NS),
    others_waited=st.lists(st.integers(0, 10_000 * NS), max_size=4),
    stopped=st.booleans(),
    period=st.integers(0, 100 * NS),
)
def test_a_block_is_what_the_loop_ran_or_what_the_scheduler_leaves_unexplained(
    late: int,
    loop_cpu: int,
    loop_waited: int,
    others_waited: list[int],
    stopped: bool,
    period: int,
) -> None:
    before = {tid: ThreadTimes(0, 0) for tid in range(1, 6)}
    after = {1: ThreadTimes(loop_cpu, loop_waited)}
    after.update({tid: ThreadTimes(0, waited) for tid, waited in enumerate(others_waited, 2)})
    block = account(late, loop_cpu, 1, before, after, stopped, period)
    assert 0 <= block.blocked_ms <= late / NS  # never more than the lateness
    ran = min(late, max(0, loop_cpu - period))  # the loop thread's own CPU: always a block
    unexplained = 0 if stopped else max(0, late - loop_waited - sum(others_waited))
    assert math.isclose(block.blocked_ms, max(ran, unexplained) / NS)
    # Without the kernel's counts, only the loop thread's own CPU time is evidence.
    blind = account(late, loop_cpu, 1, None, None, stopped, period)
    assert math.isclose(blind.blocked_ms, ran / NS)


@given(st.text(max_size=20))
def test_the_threshold_variable_never_raises_and_is_on_only_for_a_positive_number(
    raw: str,
) -> None:
    watchdog = LoopWatchdog.from_environment({THRESHOLD_VARIABLE: raw})
    try:
        number = float(raw.strip())
    except ValueError:
        number = 0.0
    if 0 < number < math.inf:
        assert watchdog is not None and watchdog.threshold_ns == int(number * 1e6)
    else:
        assert watchdog is None


@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "", "a b"]), max_size=30),
    new=st.lists(st.sampled_from(["a", "b", "c", "", "d"]), max_size=30),
    repeat=st.sampled_from([1, DIFF_MAX_LINES // 20]),
)
def test_an_edits_line_counts_add_up_however_big_the_change(
    old: list[str], new: list[str], repeat: int
) -> None:
    """Small changes are counted by difflib, big ones (quadratic for difflib) by each line's
    copies: either way the counts are consistent, and a big one's are the copies' exactly."""
    old, new = old * repeat, new * repeat
    added, removed = lines_added_and_removed(old, new)
    assert 0 <= added <= len(new) and 0 <= removed <= len(old)
    assert added - removed == len(new) - len(old)
    copies_apart = sum(abs(old.count(line) - new.count(line)) for line in {*old, *new})
    assert added + removed >= copies_apart
    if max(len(old), len(new)) > DIFF_MAX_LINES:
        assert added + removed == copies_apart
    if old == new:
        assert (added, removed) == (0, 0)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
LOCATION = st.fixed_dictionaries(
    {"path": st.text(max_size=8)}, optional={"line": st.integers(-2, 10**6)}
)
SHOWN = st.fixed_dictionaries(
    {"title": st.text(max_size=10)}, optional={"locations": st.lists(LOCATION, max_size=3)}
)


def _as_shown(value: Any) -> bool:
    """A stored `shown` as the server writes it: a title, and files with their lines."""
    if not isinstance(value, dict) or not isinstance(value.get("title"), str):
        return False
    locations = value.get("locations", [])
    return isinstance(locations, list) and all(
        isinstance(where, dict)
        and isinstance(where.get("path"), str)
        and type(where.get("line", 0)) is int
        and where.get("line", 0) >= 0
        and set(where) <= {"path", "line"}
        for where in locations
    )


@given(shown=SHOWN | JSON | st.dictionaries(st.sampled_from(["title", "locations"]), JSON))
def test_a_replay_shows_a_call_as_stored_or_as_its_tool_shows_it_whatever_the_row_holds(
    shown: Any,
) -> None:
    """A call's stored `shown` (how it was shown: title, files) is replayed as it is when it
    is one, and any other value (an old row, one mangled elsewhere) is replaced by the
    tool's view: no stored row breaks a load."""
    call = ToolCall("c1", "no_such_tool", {"path": "a.py"}, "call_1")
    messages = [
        AssistantMessage("", tool_calls=(call,)),
        ToolResultMessage("c1", "no_such_tool", "done", wire_id="call_1", shown=shown),
    ]
    (update,) = replay_updates(messages, ToolRegistry())
    assert update["toolCallId"] == "call_1" and update["status"] == "completed"
    if _as_shown(shown):
        assert update["title"] == shown["title"]
        assert update.get("locations", []) == shown.get("locations", [])
    else:
        assert update["title"] == "no_such_tool" and "locations" not in update


# --- over the wire: a round of forty whole-file edits ------------------------------------------

EDITS = 40
# About 2 MB (edits are allowed up to 2 MiB) of short lines, each changed by every edit: each
# edit's view and result compare 90,000 lines.
LINES = 90_000
BIG_FILE = "".join(f"v{i:05d} = alpha({i:05d})\n" for i in range(LINES))


def _edits() -> list[ScriptedToolCall]:
    """alpha → beta, then back, and so on: each finds its text, and the file ends as it
    began (so a replay of the round finds half of the calls' text in the file)."""
    swaps = [("alpha", "beta"), ("beta", "alpha")]
    return [
        ScriptedToolCall(
            "edit_file",
            {"path": "big.py", "old_text": old, "new_text": new, "replace_all": True},
        )
        for old, new in (swaps[n % 2] for n in range(EDITS))
    ]


async def _keep_asking(client: ParleyClient, session: str, until: asyncio.Future[Any]) -> int:
    """Ask the server about another session, again and again, until `until` is done: how
    many answers came meanwhile."""
    answered = 0
    while not until.done():
        await asyncio.wait_for(client.request("_parley/usage", {"sessionId": session}), 60)
        answered += 1
        await asyncio.sleep(0.05)
    return answered


async def test_a_round_of_forty_whole_file_edits_leaves_the_server_answering(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "big.py").write_text(BIG_FILE)
    assert 1_900_000 < len(BIG_FILE) < 2 * 1024 * 1024
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("read_file", {"path": "big.py"}),)),
            Reply(tool_calls=tuple(_edits())),
            Reply(text="Done."),
        ]
    )
    home = tmp_path / "home"
    editing: ParleyClient = await start_server(home=home)  # type: ignore[assignment]
    await editing.initialize()
    asked = 0

    def allow(params: dict[str, Any]) -> dict[str, Any]:
        nonlocal asked
        asked += 1
        editing.permission_requests.clear()  # each holds the whole file twice: not kept
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    editing.permission_handler = allow
    editing.on_update = lambda session_id, update: editing.updates[session_id].clear()
    session = await editing.new_session(str(workspace), toolPolicy="sync")
    other: ParleyClient = await start_server(home=home)  # type: ignore[assignment]
    await other.initialize()

    calm = await editing.new_session(str(workspace), toolPolicy="sync")
    round_ = asyncio.ensure_future(editing.prompt(session, "Swap alpha and beta.", timeout=600))
    answered_meanwhile = await _keep_asking(editing, calm, round_)
    assert (await round_)["stopReason"] == "end_turn"
    assert asked == EDITS
    assert (workspace / "big.py").read_text() == BIG_FILE  # forty swaps, there and back
    results = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(results) == EDITS + 1
    assert all(
        m["content"].startswith(f"Edited big.py (+{LINES} -{LINES} lines)") for m in results[1:]
    )
    # The other session was answered while the round ran (and the watchdog, on for both
    # servers, fails this test if either loop was blocked past 100 ms meanwhile).
    assert answered_meanwhile >= 1

    # A new window loads the session: the replay shows the forty calls as they were shown.
    calm_there = await other.new_session(str(workspace), toolPolicy="sync")
    replaying = asyncio.ensure_future(other.load_session(session, str(workspace)))
    await _keep_asking(other, calm_there, replaying)
    await replaying
    shown = [
        update
        for update in other.updates_of(session, "tool_call")
        if update.get("title") == "Edit big.py"
    ]
    assert len(shown) == EDITS
    path = str((workspace / "big.py").resolve())
    assert all(update["locations"] == [{"path": path, "line": 1}] for update in shown)
    assert all(update["status"] == "completed" for update in shown)
    # What each showed before it ran (its diff) is not replayed: its result follows.
    assert not [item for update in shown for item in update["content"] if item["type"] == "diff"]
