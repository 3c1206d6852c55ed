"""The two ways a command runs, both from the `Launch` the sandbox prepared for it:

- `run_own`: Parley's own child process (stdin /dev/null, stdout and stderr one pipe, a
  session of its own), its output read as it comes and streamed to the editor;
- `run_in_client_terminal`: the editor's terminal (ACP `terminal/*`), where the user watches
  it; Parley polls its output for the model's copy.

Either way the command's whole tree ends with it: when it exits, at its timeout, and when
the call is cancelled (Stop) — the process group is killed (in the sandbox that is `bwrap`,
whose end ends every process of its PID namespace, `setsid` daemons included) and the
launch's pids group emptied (`Launch.end`, off the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from parley.core import updates
from parley.sandbox import Launch
from parley.tools.base import ClientTerminals
from parley.tools.command_output import CommandOutput

READ_BYTES = 64 * 1024
UPDATE_SECONDS = 0.1  # the editor gets the output at most this often
POLL_SECONDS = 0.5  # a client terminal's output is read this often
# After the command exits, how long its output may take to drain (what it left running was
# killed with it, so the pipe closes at once unless something outside its group holds it).
DRAIN_SECONDS = 2.0
OUTPUT_BYTE_LIMIT = 1_000_000  # what a client terminal keeps of the output
# How long the editor may take to answer a terminal request (but `terminal/wait_for_exit`).
TERMINAL_ANSWER_SECONDS = 30.0
# Most of a raw delta sent in one update; a flood's excess is left out of the live view.
APPEND_LIMIT = 256 * 1024


@attrs.frozen
class CommandEnd:
    """How a command ended."""

    exit_code: int | None  # None: killed (the timeout) or ended by a signal it did not catch
    signal: str | None
    timed_out: bool
    duration_seconds: float


class CommandStream:
    """A running command's output: kept for the model (`output`), sent to the editor as
    `tool_call_update`s at most every UPDATE_SECONDS (`send` None: nobody watches)."""

    def __init__(
        self,
        tool_call_id: str,
        send: Callable[[dict[str, Any]], None] | None,
        shown: Callable[[str], str],
    ) -> None:
        self.output = CommandOutput()
        self._tool_call_id = tool_call_id
        self._send = send
        self._shown = shown  # the content block's text for the output so far
        self._delta: list[str] = []
        self._delta_size = 0
        self._left_out = 0  # bytes of the delta left out (a flood)
        self._last_sent = 0.0

    def take(self, raw: bytes) -> None:
        self._add_delta(self.output.add(raw))
        self.flush()

    def finish(self) -> None:
        self._add_delta(self.output.finish())
        self.flush(force=True)

    def _add_delta(self, text: str) -> None:
        if not text:
            return
        if self._delta_size + len(text) > APPEND_LIMIT:
            self._left_out += len(text.encode("utf-8", "replace"))
            return
        self._delta.append(text)
        self._delta_size += len(text)

    def flush(self, force: bool = False) -> None:
        """Send what came since the last update, if anything did and (unless `force`) the
        last update is UPDATE_SECONDS old."""
        if not (self._delta or self._left_out) or self._send is None:
            return
        if not force and time.monotonic() - self._last_sent < UPDATE_SECONDS:
            return
        append = "".join(self._delta)
        if self._left_out:
            append += f"\n[… {self._left_out:,} bytes of output not shown live …]\n"
        self._delta, self._delta_size, self._left_out = [], 0, 0
        self._last_sent = time.monotonic()
        self._send(
            updates.tool_call_update(
                self._tool_call_id,
                status="in_progress",
                text=self._shown(self.output.shown()),
                meta={"parley": {"commandOutput": {"append": append}}},
            )
        )


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def kill_tree(pid: int) -> None:
    """SIGKILL the process group `pid` leads (in the sandbox: bwrap's, which ends the
    namespace)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --- Parley's own process ------------------------------------------------------------------


class OwnProcesses:
    """The commands running in Parley's own processes, so a session's end kills them."""

    def __init__(self) -> None:
        self._running: dict[int, Launch] = {}

    def add(self, pid: int, launch: Launch) -> None:
        self._running[pid] = launch

    def discard(self, pid: int) -> None:
        self._running.pop(pid, None)

    async def kill_all(self) -> None:
        running, self._running = self._running, {}
        for pid in running:
            kill_tree(pid)
        for launch in running.values():
            await asyncio.to_thread(launch.end)


async def run_own(
    launch: Launch, timeout: float, stream: CommandStream, processes: OwnProcesses
) -> CommandEnd:
    """Run the launch in a child process of the server; its tree ends before this returns
    (or raises CancelledError). Raises OSError when it cannot start."""
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=launch.cwd,
            env=launch.env,
            start_new_session=True,  # a process group of its own: its tree ends with it
        )
    except OSError:
        await asyncio.to_thread(launch.end)
        raise
    processes.add(process.pid, launch)
    assert process.stdout is not None
    reading = asyncio.ensure_future(_read_into(process.stdout, stream))
    exited = asyncio.ensure_future(process.wait())

    async def flush() -> None:
        stream.flush()

    timed_out = False
    try:
        timed_out = not await _wait_ticking(exited, timeout, UPDATE_SECONDS, flush)
    finally:
        exited.cancel()
        kill_tree(process.pid)
        await _shielded(_reap(process, launch, reading))
        processes.discard(process.pid)
    stream.finish()
    killed = timed_out or process.returncode is None
    return command_end(process.returncode, None, launch, killed, time.monotonic() - started)


async def _wait_ticking(
    waited: asyncio.Future[Any], timeout: float, period: float, tick: Callable[[], Awaitable[None]]
) -> bool:
    """Wait for `waited`, calling `tick` every `period` seconds meanwhile and once at its
    end (the output flushed or polled); False at the timeout. Both runners' one deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.wait({waited}, timeout=min(period, remaining))
        await tick()
        if waited.done():
            return True


async def _read_into(pipe: asyncio.StreamReader, stream: CommandStream) -> None:
    while chunk := await pipe.read(READ_BYTES):
        stream.take(chunk)


async def _reap(
    process: asyncio.subprocess.Process, launch: Launch, reading: asyncio.Future[None]
) -> None:
    """After the kill: the process waited for, its pids group emptied, its output drained."""
    await process.wait()
    await asyncio.to_thread(launch.end)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(reading), DRAIN_SECONDS)
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reading


async def _shielded(work: Awaitable[None]) -> None:
    """Run `work` to its end even when the caller is cancelled meanwhile (the cancellation
    then goes on)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    task.result()


def command_end(
    code: int | None, signal: str | None, launch: Launch, timed_out: bool, duration: float
) -> CommandEnd:
    """How a command ended, from either runner: its exit code (a negative one: the signal
    that ended it, unsandboxed; 128 + n from bwrap: signal n), or the signal's name the
    editor's terminal gave; killed at the timeout."""
    if timed_out:
        return CommandEnd(None, "SIGKILL", True, duration)
    number = launch.signal_of(code)
    if number is not None:
        return CommandEnd(128 + number, signal_name(number), False, duration)
    return CommandEnd(code, signal, False, duration)


# --- the editor's terminal -------------------------------------------------------------------


def terminal_params(launch: Launch) -> dict[str, Any]:
    """`terminal/create`'s params for the launch: `env -i` first, so that only the launch's
    environment reaches the command, not the editor's own."""
    assignments = [f"{name}={value}" for name, value in launch.env.items()]
    return {
        "command": "env",
        "args": ["-i", *assignments, *launch.argv],
        "env": [{"name": name, "value": value} for name, value in launch.env.items()],
        "cwd": str(launch.cwd),
        "outputByteLimit": OUTPUT_BYTE_LIMIT,
    }


@attrs.define
class TerminalRun:
    """A command in the editor's terminal: what the model gets of its output."""

    terminal_id: str = ""
    output: CommandOutput = attrs.field(factory=CommandOutput)
    seen: str = ""  # the terminal's output at the last poll
    truncated: bool = False  # the terminal dropped the output's start


async def run_in_client_terminal(
    terminals: ClientTerminals,
    session_id: str,
    launch: Launch,
    timeout: float,
    started: Callable[[str], None],
) -> tuple[CommandEnd, TerminalRun]:
    """Run the launch in a terminal of the editor (`started` is told its id); kill it at the
    timeout or when cancelled; release it always."""
    run = TerminalRun()
    began = time.monotonic()
    try:
        run.terminal_id = await asyncio.wait_for(
            terminals.create_terminal(session_id, terminal_params(launch)),
            TERMINAL_ANSWER_SECONDS,
        )
        started(run.terminal_id)
        status = await _poll_until_exit(terminals, session_id, run, timeout)
        if status is None:  # the timeout
            await _answered(terminals, "terminal/kill", session_id, run.terminal_id)
            await _poll(terminals, session_id, run)
        code, signal = _exit_status(status)
        ended = command_end(code, signal, launch, status is None, time.monotonic() - began)
    except asyncio.CancelledError:
        if run.terminal_id:
            await _shielded(_kill_quietly(terminals, session_id, run.terminal_id))
        raise
    finally:
        if run.terminal_id:
            await _shielded(_release(terminals, session_id, run.terminal_id))
        await _shielded(asyncio.to_thread(launch.end))
    return ended, run


async def _poll_until_exit(
    terminals: ClientTerminals, session_id: str, run: TerminalRun, timeout: float
) -> dict[str, Any] | None:
    """Poll the output until the command exits (its exit status) or the timeout (None)."""
    waiting = asyncio.ensure_future(
        terminals.terminal_request("terminal/wait_for_exit", session_id, run.terminal_id)
    )
    try:
        if await _wait_ticking(
            waiting, timeout, POLL_SECONDS, lambda: _poll(terminals, session_id, run)
        ):
            return waiting.result()
        return None
    finally:
        waiting.cancel()


async def _poll(terminals: ClientTerminals, session_id: str, run: TerminalRun) -> None:
    """Read the terminal's output; what is new since the last poll goes to the model's copy
    (the terminal keeps the output's last OUTPUT_BYTE_LIMIT bytes: once it drops the start,
    the new part is found by where the previous output's end appears again)."""
    answer = await _answered(terminals, "terminal/output", session_id, run.terminal_id)
    text = answer.get("output") if isinstance(answer.get("output"), str) else ""
    run.truncated = run.truncated or answer.get("truncated") is True
    run.output.add(_new_part(run.seen, text).encode("utf-8", "replace"))
    run.seen = text


def _new_part(seen: str, now: str) -> str:
    if now.startswith(seen):
        return now[len(seen) :]
    overlap = seen[-4096:]  # the start was dropped: find where the old end is now
    at = now.rfind(overlap) if overlap else -1
    return now[at + len(overlap) :] if at != -1 else now


def _exit_status(status: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """`terminal/wait_for_exit`'s `exitCode` and `signal`, each None unless of its type."""
    if status is None:
        return None, None
    code, name = status.get("exitCode"), status.get("signal")
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        name if isinstance(name, str) else None,
    )


async def _answered(
    terminals: ClientTerminals, method: str, session_id: str, terminal_id: str
) -> dict[str, Any]:
    """The editor's answer to a terminal request; TimeoutError when it gives none in time."""
    request = terminals.terminal_request(method, session_id, terminal_id)
    return await asyncio.wait_for(request, TERMINAL_ANSWER_SECONDS)


async def _kill_quietly(terminals: ClientTerminals, session_id: str, terminal_id: str) -> None:
    with contextlib.suppress(Exception):
        await _answered(terminals, "terminal/kill", session_id, terminal_id)


async def _release(terminals: ClientTerminals, session_id: str, terminal_id: str) -> None:
    with contextlib.suppress(Exception):
        await _answered(terminals, "terminal/release", session_id, terminal_id)
