"""`run_command`: a shell command line run in the workspace (or a directory inside it), through
the sandbox launcher, its output streamed to the editor and bounded for the model.

Every command starts from `sandbox.prepare(ChildSpec(("/bin/sh", "-c", command), ...))`: the
workspace writable, the rest read-only, no network unless `[sandbox] command_network`, the
environment without secrets, a PID namespace of its own. It runs in the editor's terminal when
the editor offers `terminal/*`, else in Parley's own process (`command_runners.py`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import attrs

from parley.child_env import child_environment
from parley.core import updates
from parley.core.call_view import CallView, Location
from parley.core.setting_types import CommandsTable
from parley.sandbox import (
    UNSANDBOXED_MARK,
    ChildSpec,
    Launch,
    SandboxSettings,
    prepare,
    sandbox_status,
)
from parley.tools.arguments import argument
from parley.tools.base import DeclaredTool, ToolContext, ToolResult, declared_spec, quoted
from parley.tools.command_output import Bounded, fenced
from parley.tools.command_runners import (
    CommandEnd,
    CommandStream,
    OwnProcesses,
    run_in_client_terminal,
    run_own,
)
from parley.tools.confined import (
    Refused,
    Roots,
    open_confined_directory,
    printable_name,
    resolved_roots,
)

SHELL = "/bin/sh"


_CONFIGURED = CommandsTable()  # config.toml's `[commands]` defaults, the tool's too


@attrs.frozen
class CommandSettings:
    """config.toml's `[commands]`, and the sandbox the commands run in."""

    timeout_seconds: float = _CONFIGURED.timeout_seconds  # a call's default
    max_timeout_seconds: float = _CONFIGURED.max_timeout_seconds  # the most a call may ask for
    secret_env_names: tuple[str, ...] = ()  # the providers' key variables, whatever their names
    sandbox: SandboxSettings = attrs.field(factory=SandboxSettings)


@attrs.frozen
class RunCommandArguments:
    command: str = argument("The shell command line, run by /bin/sh -c.")
    cwd: str | None = argument(
        "The directory to run it in, relative to the workspace (default: the workspace).",
        default=None,
    )
    timeout: float | None = argument(
        "Seconds before the command and everything it started are killed.", default=None
    )


class ArgumentRefused(ValueError):
    """A call's argument the tool will not run with; `str()` is the model's sentence."""


def command_directory(roots: Roots, cwd: str | None) -> Path:
    """The directory a call runs in: `cwd` through the gate (inside one of `roots`, a
    directory); raises ArgumentRefused with the reason. Also what decides whose command
    rules apply (agent/tool_permission.py)."""
    if not cwd or cwd == ".":
        return roots.cwd
    try:
        fd, relative = open_confined_directory(roots, cwd)
    except Refused as refused:
        raise ArgumentRefused(f"cwd: {refused}") from None
    except OSError as error:
        shown = printable_name(cwd)
        raise ArgumentRefused(f"cwd: {shown!r} is not a directory: {error.strerror}") from None
    os.close(fd)
    # Relative to the cwd's root, or absolute in another root.
    return roots.cwd if relative == "." else roots.cwd / relative


def shown_seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


class RunCommandTool(DeclaredTool):
    Arguments = RunCommandArguments

    def __init__(self, workspace: Roots | Path, settings: CommandSettings | None = None) -> None:
        # The session's roots: a command may run in any, and may write all of them.
        self.roots = resolved_roots(workspace)
        self.workspace = self.roots.cwd
        self.settings = settings or CommandSettings()
        self.processes = OwnProcesses()
        self.spec = declared_spec(
            "run_command",
            (
                "Run a shell command line (tests, a build, git, a linter) in the workspace; "
                "stdout and stderr together. Answers the output (its head and tail when long), "
                "the exit code and the time. In the sandbox (where the machine offers one) only "
                "the workspace is writable and there is no network unless configured; stdin "
                "is empty (no prompts). Everything it starts ends with it. Timeout: "
                f"{min(self.settings.timeout_seconds, self.settings.max_timeout_seconds):g} s "
                f"by default, at most {self.settings.max_timeout_seconds:g} s."
            ),
            RunCommandArguments,
            kind="execute",
            needs_permission=True,
        )

    # --- the arguments --------------------------------------------------------------------

    def directory(self, cwd: str | None) -> Path:
        """The directory a call runs in (`command_directory`)."""
        return command_directory(self.roots, cwd)

    def timeout(self, asked: float | None) -> float:
        """The call's timeout; raises ArgumentRefused above the maximum or not above 0."""
        most = self.settings.max_timeout_seconds
        if asked is None:
            return min(self.settings.timeout_seconds, most)
        if asked <= 0:
            raise ArgumentRefused(f"timeout: {asked:g} is not a number of seconds above 0.")
        if asked > most:
            raise ArgumentRefused(
                f"timeout: {asked:g} s is over the maximum of {most:g} s "
                "([commands] max_timeout_seconds); ask for at most that."
            )
        return asked

    # --- how a call is shown --------------------------------------------------------------

    def view(self, arguments: RunCommandArguments) -> CallView:
        try:
            where = self.directory(arguments.cwd)
            locations: tuple[Location, ...] = (Location(printable_name(str(where))),)
        except ArgumentRefused:
            locations = ()
        shown = quoted(arguments.command)
        title = f"Run {shown}"
        if not sandbox_status(self.settings.sandbox).sandboxed:
            title += UNSANDBOXED_MARK  # the question says why
        # The user approves what they see: the whole command, once. The title holds a short
        # one as it is; a longer one (cut there, or changed: a backtick) follows in full.
        if shown == f"`{arguments.command}`":
            return CallView(title, locations)
        return CallView(title, locations, content=(fenced(arguments.command, "sh"),))

    # --- running --------------------------------------------------------------------------

    async def execute(self, arguments: RunCommandArguments, context: ToolContext) -> ToolResult:
        try:
            timeout = self.timeout(arguments.timeout)
            where = await asyncio.to_thread(self.directory, arguments.cwd)
        except ArgumentRefused as refused:
            return ToolResult(str(refused), is_error=True)
        journal = context.edit_journal
        found = journal.runs_later_found() if journal is not None else ()
        try:
            launch = await asyncio.to_thread(
                prepare, self._spec(arguments.command, where, found), self.settings.sandbox
            )
        except (OSError, ValueError) as error:  # ValueError: a NUL in the command
            return ToolResult(f"The command could not start: {error}", is_error=True)
        if context.terminals is not None:
            return await self._in_terminal(launch, timeout, context)
        return await self._in_own_process(launch, timeout, context)

    def _spec(self, command: str, where: Path, runs_later: tuple[Path, ...] = ()) -> ChildSpec:
        return ChildSpec(
            (SHELL, "-c", command),
            self.workspace,
            child_environment(self.settings.secret_env_names, extra=self.settings.sandbox.env),
            network=self.settings.sandbox.command_network,
            label="command",
            cwd=where,
            writable=self.roots.others,
            runs_later=runs_later,
        )

    async def _in_own_process(
        self, launch: Launch, timeout: float, context: ToolContext
    ) -> ToolResult:
        stream = CommandStream(
            context.tool_call_id, context.send_update, lambda text: fenced(text, "console")
        )
        try:
            ended = await run_own(launch, timeout, stream, self.processes)
        except OSError as error:
            return ToolResult(f"The command could not start: {error}", is_error=True)
        return command_result(stream.output.bounded(), ended, stream.output.raw_bytes, timeout)

    async def _in_terminal(
        self, launch: Launch, timeout: float, context: ToolContext
    ) -> ToolResult:
        assert context.terminals is not None

        def started(terminal_id: str) -> None:
            if context.send_update is not None:
                context.send_update(
                    updates.tool_call_update(
                        context.tool_call_id,
                        status="in_progress",
                        content=[updates.terminal_content(terminal_id)],
                    )
                )

        try:
            ended, run = await run_in_client_terminal(
                context.terminals, context.session_id, launch, timeout, started
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the editor failed a terminal request
            return ToolResult(f"The editor's terminal failed: {error}", is_error=True)
        run.output.finish()
        result = command_result(run.output.bounded(), ended, run.output.raw_bytes, timeout)
        note = "\n[the terminal kept only the output's end]" if run.truncated else ""
        return attrs.evolve(
            result,
            content=result.content + note,
            shown_first=({"type": "terminal", "terminalId": run.terminal_id},),
        )

    async def aclose(self) -> None:
        """The session ends: every command it still runs is killed, its tree included."""
        await self.processes.kill_all()


def ending_line(ended: CommandEnd, timeout: float) -> str:
    took = shown_seconds(ended.duration_seconds)
    if ended.timed_out:
        return f"Killed: timed out after {timeout:g} s"
    if ended.exit_code is None:
        return f"Killed by {ended.signal or 'a signal'} · {took}"
    return f"Exit code: {ended.exit_code} · {took}"


def command_result(
    output: Bounded, ended: CommandEnd, raw_bytes: int, timeout: float
) -> ToolResult:
    """What the model gets: the output (stripped, bounded), then how the command ended."""
    text = output.text or "(no output)"
    ending = "" if text.endswith("\n") else "\n"
    return ToolResult(
        text + ending + ending_line(ended, timeout),
        raw_output={
            "exitCode": ended.exit_code,
            "signal": ended.signal,
            "timedOut": ended.timed_out,
            "durationSeconds": round(ended.duration_seconds, 3),
            "outputBytes": raw_bytes,
            "cut": output.cut,
        },
    )
