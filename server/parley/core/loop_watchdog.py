"""The event loop's watchdog: every time the loop is blocked longer than a threshold, a
report that says how long and what blocked it (the loop thread's stack, sampled while it
was blocked, and the other threads').

Off unless `PARLEY_LOOP_WATCHDOG_MS` is set (the threshold in milliseconds): then nothing
of it runs. Reports are JSON lines appended to `PARLEY_LOOP_WATCHDOG_FILE`, or logged
when it is not set. The test suite switches it on for every server it starts
(`tests/conftest.py`) and fails a test whose server's loop was blocked.

How: a heartbeat on the loop (a callback every quarter of the threshold) and a watcher
thread. While a heartbeat is overdue, the watcher samples the stacks
(`sys._current_frames`). When the late heartbeat runs, it decides whether the loop was
blocked, and if so writes the report with those samples.

Blocked, not merely unscheduled. On a loaded machine a heartbeat is late because the
process did not get a CPU, which is not the loop's fault. Linux counts, per thread, the
time spent runnable but waiting for a CPU (`/proc/self/task/<tid>/schedstat`, the second
field). The loop counts as blocked for

    blocked = lateness - the loop thread's wait for a CPU
                       - the other threads' waits for a CPU, all together

over the window since the previous heartbeat: the other threads' waits count because a
thread holding the GIL and preempted keeps the loop waiting for the GIL (and the GIL may
pass through several of them). What remains is
the loop thread running (a long callback), sleeping in a blocking call (a synchronous
write, a lock), or waiting for a GIL that another thread holds while running (a long C
call, an import in a thread): all of them the server's doing. A window in which the
process received SIGCONT (it was stopped: a debugger, a test) is not a block. And in any
case the loop thread's own CPU time in the window (less the heartbeat's period, before it
was due) is a block: it ran without returning to the loop. Without `schedstat` (not Linux)
only that counts.
Every estimate errs towards "not blocked"; a report is never a scheduling accident.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

logger = logging.getLogger(__name__)

THRESHOLD_VARIABLE = "PARLEY_LOOP_WATCHDOG_MS"
REPORT_FILE_VARIABLE = "PARLEY_LOOP_WATCHDOG_FILE"
# Distinct stacks of the loop thread kept per block (the first and those that differ).
MAX_SAMPLES = 5
# Frames kept of each stack (the outermost and the innermost).
STACK_FRAMES = 40


@attrs.frozen
class ThreadTimes:
    """Nanoseconds a thread has run on a CPU, and waited, runnable, for one."""

    running: int
    waiting: int


def thread_times() -> dict[int, ThreadTimes] | None:
    """Every thread of this process, by native id (`threading.get_native_id`); None
    where the kernel does not say (not Linux)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    times = {}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as file:
                running, waiting, *_ = file.read().split()
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        times[int(tid)] = ThreadTimes(int(running), int(waiting))
    return times or None


@attrs.frozen
class Sample:
    """The stacks at one moment of a block: the loop thread's, and the other threads'."""

    after_ms: float  # since the heartbeat was due
    loop_stack: list[str]
    idle: bool  # the loop thread was in the selector's wait (waiting for the GIL, or a CPU)
    other_stacks: dict[str, list[str]]


def take_sample(loop_thread: int, after_ms: float) -> Sample:
    frames = sys._current_frames()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    loop_frame = frames.get(loop_thread)
    loop_stack = _stack(loop_frame) if loop_frame is not None else []
    idle = loop_frame is not None and loop_frame.f_code.co_name == "select"
    others = {
        f"{names.get(ident, 'thread')} ({ident})": _stack(frame)
        for ident, frame in frames.items()
        if ident not in (loop_thread, threading.get_ident())
    }
    return Sample(round(after_ms, 1), loop_stack, idle, others)


def _stack(frame: Any) -> list[str]:
    """The stack, outermost first: where the work came from and what it was doing (a deep
    one cut in the middle)."""
    # Frames only, no source lines: reading them (linecache, tokenize) would hold the GIL
    # in this thread, and so delay the loop being watched.
    summary = traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)
    lines = [f"{at.filename}:{at.lineno} {at.name}" for at in reversed(summary)]
    if len(lines) <= STACK_FRAMES:
        return lines
    outer = STACK_FRAMES // 2
    cut = len(lines) - STACK_FRAMES
    return [*lines[:outer], f"[… {cut} frames …]", *lines[outer + cut :]]


@attrs.frozen
class Block:
    """A late heartbeat, accounted for."""

    late_ms: float
    blocked_ms: float
    loop_cpu_ms: float
    loop_waiting_for_cpu_ms: float | None  # None: the kernel does not say
    others_waiting_for_cpu_ms: float | None
    stopped: bool  # the process was stopped (SIGCONT came) meanwhile


def account(
    late_ns: int,
    loop_cpu_ns: int,
    loop_thread: int,
    before: Mapping[int, ThreadTimes] | None,
    after: Mapping[int, ThreadTimes] | None,
    stopped: bool,
    period_ns: int = 0,
) -> Block:
    """How long of a heartbeat's lateness the loop was blocked (the rule in the module's
    docstring). The loop thread's CPU time in the window, less the `period_ns` before the
    heartbeat was due, is a block in any case: it ran without coming back to the loop."""
    to_ms = 1e-6
    ran = min(late_ns, max(0, loop_cpu_ns - period_ns))
    if before is None or after is None or loop_thread not in after:
        return Block(late_ns * to_ms, ran * to_ms, loop_cpu_ns * to_ms, None, None, stopped)
    waited = {
        tid: times.waiting - before[tid].waiting if tid in before else times.waiting
        for tid, times in after.items()
    }
    loop_waited = waited.pop(loop_thread)
    others_waited = sum(waited.values())
    unexplained = 0 if stopped else max(0, late_ns - loop_waited - others_waited)
    blocked = max(ran, unexplained)
    return Block(
        late_ns * to_ms,
        blocked * to_ms,
        loop_cpu_ns * to_ms,
        loop_waited * to_ms,
        others_waited * to_ms,
        stopped,
    )


class LoopWatchdog:
    """Watches the running loop; `start` on the loop's thread, `stop` at the end."""

    def __init__(self, threshold_ms: float, report_file: Path | None) -> None:
        self.threshold_ns = int(threshold_ms * 1e6)
        self.period_ns = self.threshold_ns // 4
        self.report_file = report_file
        self.blocks: list[Block] = []
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        self._due_ns = 0
        self._stopping = threading.Event()
        self._continued_ns = 0  # when SIGCONT last came
        self._loop: asyncio.AbstractEventLoop | None = None
        self._beat_handle: asyncio.TimerHandle | None = None
        self._watcher: threading.Thread | None = None
        self._loop_thread = 0
        self._loop_tid = 0
        self._last_ns = self._last_cpu_ns = 0
        self._last_times: dict[int, ThreadTimes] | None = None
        self._previous_sigcont: Any = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> LoopWatchdog | None:
        """The watchdog the environment asks for; None when it is off (or asked badly)."""
        raw = environ.get(THRESHOLD_VARIABLE, "").strip()
        if not raw:
            return None
        try:
            threshold = float(raw)
        except ValueError:
            threshold = 0
        if not 0 < threshold < math.inf:
            logger.warning("%s=%r is not a positive number: no watchdog", THRESHOLD_VARIABLE, raw)
            return None
        report_file = environ.get(REPORT_FILE_VARIABLE) or None
        return cls(threshold, Path(report_file) if report_file else None)

    # --- the loop's side ----------------------------------------------------------------

    def start(self) -> None:
        """Start watching the running loop (call it from the loop's thread)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._loop_tid = threading.get_native_id()
        if threading.current_thread() is threading.main_thread():
            # A plain handler, not the loop's: Python runs it on this thread before the next
            # bytecode, so it is seen before the late heartbeat is accounted for.
            self._previous_sigcont = signal.signal(signal.SIGCONT, self._continued)
        self._remember_now()
        self._beat_handle = self._loop.call_at(self._due_ns / 1e9, self._beat)
        self._watcher = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        """A last account of the loop since the last heartbeat, then stop."""
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        self._account_for_window()
        self._stopping.set()
        if self._previous_sigcont is not None:
            signal.signal(signal.SIGCONT, self._previous_sigcont)

    def _continued(self, signum: int, frame: Any) -> None:
        self._continued_ns = time.monotonic_ns()

    def _beat(self) -> None:
        self._account_for_window()
        assert self._loop is not None
        self._beat_handle = self._loop.call_at(self._due_ns / 1e9, self._beat)

    def _remember_now(self) -> None:
        """Start a window: the threads' times now, and when the next heartbeat is due."""
        self._last_times = thread_times()
        self._last_cpu_ns = time.thread_time_ns()
        self._last_ns = time.monotonic_ns()
        with self._lock:
            self._due_ns = self._last_ns + self.period_ns
            self._samples = []

    def _account_for_window(self) -> None:
        """Whether the loop was blocked since the window started; its report if it was."""
        now = time.monotonic_ns()
        with self._lock:
            late_ns = now - self._due_ns
            samples = self._samples
        if late_ns > self.threshold_ns:
            block = account(
                late_ns,
                time.thread_time_ns() - self._last_cpu_ns,
                self._loop_tid,
                self._last_times,
                thread_times(),
                stopped=self._continued_ns > self._last_ns,
                period_ns=self.period_ns,
            )
            if block.blocked_ms * 1e6 > self.threshold_ns:
                self._report(block, samples)
        self._remember_now()

    # --- the watcher's side -------------------------------------------------------------

    def _watch(self) -> None:
        """While the heartbeat is overdue by half the threshold or more, sample stacks."""
        tick = self.period_ns / 1e9
        while not self._stopping.wait(tick):
            due_ns = self._due_ns
            overdue_ns = time.monotonic_ns() - due_ns
            if overdue_ns < self.threshold_ns // 2:
                continue
            sample = take_sample(self._loop_thread, overdue_ns / 1e6)
            with self._lock:
                if self._due_ns != due_ns:
                    continue  # the heartbeat ran meanwhile: the block is over
                samples = self._samples
                if not samples or (
                    len(samples) < MAX_SAMPLES and sample.loop_stack != samples[-1].loop_stack
                ):
                    samples.append(sample)
                else:
                    samples[-1] = sample  # the same stack, later (or the last one kept)

    # --- the report ---------------------------------------------------------------------

    def _report(self, block: Block, samples: list[Sample]) -> None:
        self.blocks.append(block)
        if not samples:  # the watcher could not run meanwhile: the threads as they are now
            samples = [take_sample(self._loop_thread, block.late_ms)]
        record = {
            "pid": os.getpid(),
            "threshold_ms": self.threshold_ns / 1e6,
            **attrs.asdict(block),
            "samples": [attrs.asdict(sample) for sample in samples],
        }
        if self.report_file is None:
            logger.warning("%s", describe(record))
            return
        # One write with O_APPEND: the servers of a test share the file, lines never mix.
        line = (json.dumps(record) + "\n").encode()
        descriptor = os.open(self.report_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)


def describe(record: Mapping[str, Any]) -> str:
    """A report as a person reads it: the figures, then each sample's stacks."""
    waited = record.get("loop_waiting_for_cpu_ms")
    lines = [
        f"The event loop of process {record['pid']} was blocked for "
        f"{record['blocked_ms']:.0f} ms (threshold {record['threshold_ms']:.0f} ms): its "
        f"heartbeat was {record['late_ms']:.0f} ms late; the loop thread ran "
        f"{record['loop_cpu_ms']:.0f} ms"
        + (
            f", waited {waited:.0f} ms for a CPU (the other threads together "
            f"{record['others_waiting_for_cpu_ms']:.0f} ms)."
            if waited is not None
            else "."
        )
    ]
    for sample in record["samples"]:
        state = " (idle in select: waiting for the GIL)" if sample["idle"] else ""
        when = f"{sample['after_ms']:.0f} ms after the heartbeat was due"
        lines.append(f"-- {when}, the loop{state}:")
        lines.extend(f"   {frame}" for frame in sample["loop_stack"])
        for name, stack in sample["other_stacks"].items():
            lines.append(f"   thread {name}:")
            lines.extend(f"      {frame}" for frame in stack[-8:])
    return "\n".join(lines)


def read_reports(path: Path) -> list[dict[str, Any]]:
    """The reports in a `PARLEY_LOOP_WATCHDOG_FILE` (none when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]
