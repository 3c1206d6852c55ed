"""A live Python process per session, where the agent runs and inspects the user's program.

`PythonKernel` starts `kernel_main.py` under the workspace's own interpreter (its `.venv` when
there is one), lazily, on first use. It sends one JSON request per line on the child's stdin
and reads one JSON reply per line from its stdout; the child's stderr pipe carries whatever is
written below `sys.stdout` (subprocesses, C code, a segfault's traceback). See `kernel_main.py`
for the child's side.

The kernel starts through `parley.sandbox` (bubblewrap where it runs: a PID namespace of its
own, the workspace its only writable place; else a process group of its own), so everything the
user's code forks or spawns can be ended with it: the server kills the whole sandbox (or group)
when it discards the kernel, and `kernel_main.py` makes the kernel's death, or the server's,
take the rest along. Its environment is the server's without secrets (`parley.child_env`).

What can go wrong, and what the caller is told (`KernelReply.kernel_note`):
- a call runs past its timeout: SIGINT (KeyboardInterrupt in the user's code); if the code has
  not stopped within a grace period, the process is killed and the namespace is lost;
- a call uses more CPU time than its cap: the kernel raises CPUTimeLimitExceeded in the code
  (SIGXCPU from RLIMIT_CPU); code that cannot be interrupted there (a C loop) is killed once
  past the cap by 1 s plus the grace period;
- the process dies (os._exit, a segfault, the memory limit): reported, restarted on next use;
- the awaiting task is cancelled: the code is interrupted as for a timeout, then the
  cancellation goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Literal

import attrs

from parley.child_env import child_environment
from parley.core.setting_types import KernelTable
from parley.sandbox import ChildSpec, Launch, SandboxSettings, prepare
from parley.tools.kernel_output import CapturedBytes, OutputPipe

KERNEL_MAIN = Path(__file__).with_name("kernel_main.py")
# Replies are bounded by the child's output caps; this only has to exceed them comfortably.
REPLY_LINE_LIMIT = 64 * 1024 * 1024
MARKER_WAIT_SECONDS = 1.0
CLOSE_WAIT_SECONDS = 0.5
NOT_RUNNING_NOTE = "The Python kernel is not running."
CPU_POLL_SECONDS = 0.5  # how often the server reads a running call's CPU time


_CONFIGURED = KernelTable()  # config.toml's `[kernel]` defaults, the kernel's too


@attrs.frozen
class KernelSettings:
    """How the kernel is started and bounded."""

    python: str | None = None  # an explicit interpreter; None picks the workspace's venv
    timeout_seconds: float = _CONFIGURED.timeout_seconds
    output_limit: int = _CONFIGURED.output_limit  # characters kept per stream (stdout, ...)
    # RLIMIT_AS in the child; None: no limit
    memory_limit_bytes: int | None = _CONFIGURED.memory_limit_bytes or None
    interrupt_grace_seconds: float = 2.0
    start_timeout_seconds: float = 30.0
    # CPU time per call (RLIMIT_CPU in the child); None: no cap.
    cpu_seconds: float | None = attrs.field(
        default=_CONFIGURED.cpu_seconds or None,
        validator=attrs.validators.optional(attrs.validators.gt(0)),
    )
    # Variables the kernel must not see besides those child_env recognises as secrets: the
    # configured providers' key variables, whatever their names.
    secret_env_names: tuple[str, ...] = ()
    # The sandbox it runs in (config.toml's [sandbox]; its network: kernel_network).
    sandbox: SandboxSettings = attrs.field(factory=SandboxSettings)


@attrs.frozen
class KernelReply:
    """The outcome of one kernel call.

    `ok` means the operation completed; then `result` holds its fields. Otherwise `error` is
    the exception the code raised (type, message, traceback, interrupted, during) when there
    was one, and `kernel_note` says what happened to the kernel itself (timeout, death).
    """

    ok: bool
    result: dict[str, Any] = attrs.field(factory=dict)
    stdout: str = ""
    stderr: str = ""
    process_output: str = ""  # written to fds 1/2 directly: subprocesses, C extensions
    error: dict[str, Any] | None = None
    kernel_note: str | None = None


def choose_interpreter(workspace: Path, configured: str | None = None) -> str:
    """The Python that runs the workspace's code: the workspace's own `.venv` or `venv`
    (the project's dependencies live there), else the configured interpreter, else the one
    running Parley."""
    for venv in (".venv", "venv"):
        for relative in ("bin/python", "Scripts/python.exe"):
            candidate = workspace / venv / relative
            if candidate.is_file():
                return str(candidate)
    return configured or sys.executable


class KernelStartError(Exception):
    pass


class _Overrun(Exception):
    """A call passed a limit: the wall-clock timeout or the CPU-time cap."""

    def __init__(self, limit: Literal["time", "cpu"]) -> None:
        super().__init__(limit)
        self.limit = limit


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system, all threads) the process has used, or None where /proc
    cannot tell (not Linux, or the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        # Fields after the command name, which is in parentheses and may hold anything.
        fields = stat[stat.rindex(b")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads: the kernel and all it started (in the sandbox:
    bwrap, whose death ends every process of the sandbox)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class PythonKernel:
    """One persistent Python process for one workspace; calls are serialized."""

    def __init__(
        self,
        workspace: Path,
        settings: KernelSettings | None = None,
        writable: tuple[Path, ...] = (),
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.writable = writable  # the session's other roots: writable too, in the sandbox
        # The places below the roots that run later, as the turn's last snapshot found them:
        # read-only to a kernel started now (set by the call that may start it). A running
        # kernel keeps the layout it started with.
        self.runs_later: tuple[Path, ...] = ()
        self.settings = settings or KernelSettings()
        self._lock = asyncio.Lock()
        self._process: asyncio.subprocess.Process | None = None
        self._launch: Launch | None = None  # how the running kernel was started
        self._kernel_pid: int | None = None  # the kernel's own pid (inside bwrap: its child's)
        self._output: OutputPipe | None = None
        self._next_id = 1
        self._capture: CapturedBytes | None = None  # fd-level output of the call in flight
        self._pending_notice: str | None = None  # for the next reply, e.g. after a cancel
        self._closed = False
        self.last_failure: str | None = None  # the last timeout/death note, for last_error
        self.started_info: dict[str, Any] = {}  # the child's hello: pid, python, executable

    @property
    def interpreter(self) -> str:
        return choose_interpreter(self.workspace, self.settings.python)

    @property
    def pid(self) -> int | None:
        """The running kernel's process id on this machine (in the sandbox its own pid, in
        its PID namespace, is another)."""
        return self._kernel_pid if self.is_running else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def call(self, op: str, *, start: bool = True, **args: Any) -> KernelReply:
        """Run one operation (`eval`, `describe`, `source`, ...) in the kernel.

        With `start=False` a kernel that is not running is not started (the answer's note is
        NOT_RUNNING_NOTE): starting it runs the workspace's interpreter, a file of the
        repository, which only an approved eval may do.

        Never raises for the kernel's own failures (they come back as `kernel_note`); raises
        CancelledError when cancelled, after interrupting the code.
        """
        async with self._lock:
            if self._closed:
                return KernelReply(ok=False, kernel_note="The Python kernel has been shut down.")
            notice, self._pending_notice = self._pending_notice, None
            if self._process is None:
                if not start:
                    self._pending_notice = notice  # for the call that starts it
                    return KernelReply(ok=False, kernel_note=NOT_RUNNING_NOTE)
                try:
                    await self._start()
                except KernelStartError as exc:
                    return KernelReply(ok=False, kernel_note=_join(notice, str(exc)))
            reply = await self._exchange(op, args)
            if reply.kernel_note:
                self.last_failure = reply.kernel_note
            if notice:
                reply = attrs.evolve(reply, kernel_note=_join(notice, reply.kernel_note))
            return reply

    async def aclose(self) -> None:
        """Stop the process (idempotent). Later calls report that the kernel is shut down."""
        self._closed = True
        await self._discard_process(graceful=True)

    # --- starting and stopping ---------------------------------------------------------

    async def _start(self) -> None:
        python = self.interpreter
        memory_limit = self.settings.memory_limit_bytes or 0
        command = [
            python,
            str(KERNEL_MAIN),
            "--root",
            str(self.workspace),
            "--output-limit",
            str(self.settings.output_limit),
            "--memory-limit",
            str(memory_limit),
            "--cpu-limit",
            str(self.settings.cpu_seconds or 0),
        ]
        spec = ChildSpec(
            tuple(command),
            self.workspace,
            child_environment(self.settings.secret_env_names, extra=self.settings.sandbox.env),
            network=self.settings.sandbox.kernel_network,
            label="kernel",
            writable=self.writable,
            runs_later=self.runs_later,
        )
        try:
            launch = await asyncio.to_thread(prepare, spec, self.settings.sandbox)
        except OSError as exc:
            message = f"Could not start the Python kernel with {python}: {exc}"
            raise KernelStartError(message) from None
        # In the sandbox the server is not visible: bwrap's end ends the kernel. Outside, the
        # kernel watches the server's pid. (The command is last in `launch.argv`.)
        extra = ["--sandboxed"] if launch.sandboxed else ["--parent-pid", str(os.getpid())]
        # fd-level output gets a pipe of its own, read by a thread (`kernel_output`); the
        # replies on stdout need a large buffer.
        output_read, output_write = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *launch.argv,
                *extra,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=output_write,
                cwd=launch.cwd,
                env=launch.env,
                limit=REPLY_LINE_LIMIT,
                # A process group of its own: the kernel's whole tree is ended with it.
                start_new_session=True,
                # (PR_SET_PDEATHSIG, the kernel's or bwrap's, fires when the thread that spawned
                # it ends: this is the event loop's thread, which lives as long as the server.)
            )
        except OSError as exc:
            os.close(output_read)
            await asyncio.to_thread(launch.end)
            message = f"Could not start the Python kernel with {python}: {exc}"
            raise KernelStartError(message) from None
        finally:
            os.close(output_write)
        self._process, self._launch = process, launch
        self._output = OutputPipe(output_read, asyncio.get_running_loop())
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(
                process.stdout.readline(), self.settings.start_timeout_seconds
            )
            hello = json.loads(line) if line else {}
        except (TimeoutError, ValueError):
            hello = {}
        if isinstance(hello, dict) and hello.get("ready"):
            self._output.stop_capturing()  # until the first call
            self._kernel_pid = await asyncio.to_thread(launch.command_pid, process.pid)
        if not hello.get("ready") or self._kernel_pid is None:
            tail = await self._final_output(process)
            await self._discard_process()
            detail = f" Its output:\n{tail}" if tail else ""
            raise KernelStartError(f"The Python kernel ({python}) failed to start.{detail}")
        self.started_info = hello

    async def _discard_process(self, graceful: bool = False) -> None:
        process, self._process = self._process, None
        launch, self._launch = self._launch, None
        output, self._output = self._output, None
        self._kernel_pid = None
        if process is not None:
            if graceful and process.returncode is None and process.stdin is not None:
                process.stdin.close()  # the child exits at EOF when it is idle
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), CLOSE_WAIT_SECONDS)
            # Whether or not the kernel is still there, what it started may be.
            _kill_group(process.pid)
            await process.wait()
        if launch is not None:  # its pids group: whatever escaped the group (setsid), and the group
            await asyncio.to_thread(launch.end)
        if output is not None:
            output.close()
        self._capture = None

    # --- one request --------------------------------------------------------------------

    async def _exchange(self, op: str, args: dict[str, Any]) -> KernelReply:
        process = self._process
        assert process is not None and process.stdin is not None
        request_id = self._next_id
        self._next_id += 1
        assert self._output is not None
        capture = self._capture = CapturedBytes(self.settings.output_limit)
        marker_seen = self._output.capture(request_id, capture)
        request = {"id": request_id, "op": op, "args": args}
        try:
            process.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return await self._report_death()
        try:
            message = await self._await_reply(request_id)
        except _Overrun as overrun:
            if overrun.limit == "cpu":
                return await self._stop_cpu_hog(capture)
            return await self._stop_overrunning_call(request_id, capture)
        except asyncio.CancelledError:
            await self._stop_after_cancel(request_id)
            raise
        if message is None:
            return await self._report_death()
        # The end marker follows all of this call's fd-level output on the output pipe.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(marker_seen.wait(), MARKER_WAIT_SECONDS)
        self._stop_capturing()
        reply = _reply_from(message, capture.text())
        if (reply.error or {}).get("type") == "CPUTimeLimitExceeded":
            note = (
                f"Stopped at the {self.settings.cpu_seconds:g} s CPU-time limit per call "
                "(CPUTimeLimitExceeded in the code); the kernel and its namespace are intact."
            )
            reply = attrs.evolve(reply, kernel_note=note)
        return reply

    async def _await_reply(self, request_id: int) -> dict[str, Any] | None:
        """The reply to `request_id` (None when the kernel died), watching the call's limits.

        Raises _Overrun at the timeout, or when the call's CPU time passes the cap by more than
        the grace period: the kernel's own SIGXCPU could not stop it (C code holding the
        interpreter).
        """
        assert self._kernel_pid is not None
        pid = self._kernel_pid
        cap = self.settings.cpu_seconds
        # RLIMIT_CPU counts whole seconds, so the kernel's own stop may come a second late.
        cpu_budget = cap + 1 + self.settings.interrupt_grace_seconds if cap else None
        cpu_at_start = _cpu_seconds(pid) if cpu_budget else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.timeout_seconds
        reading = asyncio.ensure_future(self._read_reply(request_id))
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise _Overrun("time")
                done, _ = await asyncio.wait({reading}, timeout=min(remaining, CPU_POLL_SECONDS))
                if done:
                    return reading.result()
                if cpu_budget is not None and cpu_at_start is not None:
                    used = _cpu_seconds(pid)
                    if used is not None and used - cpu_at_start > cpu_budget:
                        raise _Overrun("cpu")
        finally:
            if not reading.done():
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading

    async def _read_reply(self, request_id: int) -> dict[str, Any] | None:
        """The reply to `request_id`, or None when the kernel's stdout closed (it died)."""
        assert self._process is not None and self._process.stdout is not None
        while True:
            try:
                line = await self._process.stdout.readline()
            except ValueError:  # a line over the limit: the protocol is broken, treat as dead
                return None
            if not line:
                return None
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict) and message.get("id") == request_id:
                    return message
            # a reply to an earlier, abandoned request, or noise (the code ran there): skip it

    async def _interrupt(self, request_id: int) -> dict[str, Any] | bool | None:
        """SIGINT the kernel and wait out the grace period.

        Returns the reply when the code stopped, None when the kernel died, False when it is
        still running.
        """
        assert self._kernel_pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._kernel_pid, signal.SIGINT)
        try:
            return await asyncio.wait_for(
                self._read_reply(request_id), self.settings.interrupt_grace_seconds
            )
        except TimeoutError:
            return False

    async def _stop_overrunning_call(self, request_id: int, capture: CapturedBytes) -> KernelReply:
        timeout = self.settings.timeout_seconds
        outcome = await self._interrupt(request_id)
        if outcome is None:
            return await self._report_death()
        if outcome is False:
            await self._discard_process()
            return KernelReply(
                ok=False,
                process_output=capture.text(),
                kernel_note=(
                    f"The code was still running {self.settings.interrupt_grace_seconds:g} s "
                    f"after being interrupted at the {timeout:g} s time limit, so the Python "
                    "kernel was killed; its namespace was lost. A fresh kernel starts on the "
                    "next call."
                ),
            )
        reply = _reply_from(outcome, capture.text())
        return attrs.evolve(
            reply,
            kernel_note=(
                f"Interrupted at the {timeout:g} s time limit (KeyboardInterrupt in the code); "
                "the kernel and its namespace are intact."
            ),
        )

    async def _stop_cpu_hog(self, capture: CapturedBytes) -> KernelReply:
        await self._discard_process()
        return KernelReply(
            ok=False,
            process_output=capture.text(),
            kernel_note=(
                f"The code used more than the {self.settings.cpu_seconds:g} s of CPU time "
                "allowed per call and could not be interrupted, so the Python kernel was "
                "killed; its namespace was lost. A fresh kernel starts on the next call."
            ),
        )

    async def _stop_after_cancel(self, request_id: int) -> None:
        try:
            outcome = await self._interrupt(request_id)
        except asyncio.CancelledError:  # cancelled again while waiting: stop waiting
            outcome = False
        if outcome is False:
            await self._discard_process()
            self._pending_notice = (
                "The previous call was cancelled and its code did not stop when interrupted, "
                "so the Python kernel was killed; its namespace was lost."
            )
        elif outcome is None:
            await self._discard_process()
            self._pending_notice = (
                "The Python kernel died while the previous call was being cancelled; "
                "its namespace was lost."
            )
        self._stop_capturing()

    async def _report_death(self) -> KernelReply:
        process = self._process
        assert process is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 5.0)
        await self._final_output(process)
        # This call's fd-level output holds a crash's traceback (faulthandler), if any.
        last_output = self._capture.text().strip() if self._capture else ""
        code = process.returncode
        killed_by = self._launch.signal_of(code) if self._launch else None
        await self._discard_process()
        if code is None:
            how = "it stopped answering"
        elif killed_by is None:
            how = f"exit code {code}"
        else:
            how = f"killed by signal {_signal_name(killed_by)}"
            if killed_by == signal.SIGKILL:
                how += ", perhaps by the system for using too much memory"
        note = f"The Python kernel died ({how}); its namespace was lost. It restarts on next use."
        if last_output:
            note += f"\nIts last output:\n{last_output}"
        return KernelReply(ok=False, kernel_note=note)

    # --- the output pipe: fd-level output and end markers --------------------------------

    def _stop_capturing(self) -> None:
        self._capture = None
        if self._output is not None:
            self._output.stop_capturing()

    async def _final_output(self, process: asyncio.subprocess.Process) -> str:
        """The last fd-level output of an exited process (a crash's traceback, say)."""
        output = self._output
        if output is None:
            return ""
        output.read_to_the_end()
        # A grandchild may still hold the pipe open, so do not wait for EOF for long.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(output.finished.wait(), 0.5)
        return output.tail()


def _reply_from(message: dict[str, Any], process_output: str) -> KernelReply:
    return KernelReply(
        ok=bool(message.get("ok")),
        result=message.get("result") or {},
        stdout=message.get("stdout", ""),
        stderr=message.get("stderr", ""),
        process_output=process_output,
        error=message.get("error"),
    )


def _join(*notes: str | None) -> str | None:
    present = [note for note in notes if note]
    return "\n".join(present) if present else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
