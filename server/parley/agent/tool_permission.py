"""Whether a tool call may run: **the one place a call's permission is decided**.

A call of a tool that needs permission runs unasked only when the session's mode lets it
(Accept edits: the edit tools, but never of a file that runs code later outside the sandbox:
sandbox_policy.runs_later; agent/modes.py), when the session always allows the tool, or,
for a shell command, when it would run sandboxed and a prefix rule of the root it runs in
(its `cwd`, through the gate) covers it (tools/command_rules.py: only a command whose every
word is proven safe, never by the tool's name). Otherwise the user is asked
(`TurnPorts.request_permission`), and the answer decides.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import attrs

from parley import sandbox_policy
from parley.agent import modes
from parley.agent.session import Session
from parley.config import Settings
from parley.core.call_view import CallView
from parley.core.choices import AllowPrefix, CommandOffer, PermissionDecision, RejectWithNote
from parley.core.conversation import ToolCall
from parley.core.off_loop import off_loop
from parley.sandbox import sandbox_status
from parley.tools.base import Tool, ToolContext, ToolResult
from parley.tools.command_rules import COMMAND_TOOL, covered, offered_prefixes
from parley.tools.confined import Roots
from parley.tools.run_command import ArgumentRefused, command_directory

logger = logging.getLogger(__name__)

REJECTED = "The user rejected this call, so it was not run."
# Before the user's note, when their rejection came with one (`RejectWithNote`).
NOTE_FROM_USER = "The user's note:"


class StoppedAtQuestion(Exception):
    """The user answered a call's question with ACP's `cancelled` outcome (a Cancel button):
    the turn ends as `session/cancel` would end it, the call unrun, no further model call."""


NOT_ASKED = "The editor could not ask the user for permission, so this call was not run."


class PermissionPorts(Protocol):
    async def request_permission(
        self,
        session_id: str,
        call: ToolCall,
        kind: str,
        view: CallView,
        command: CommandOffer | None = None,
    ) -> PermissionDecision:
        """Ask the user whether `call` (shown as `view`) may run; raises when the editor
        cannot ask. A shell command's question offers `command`'s prefixes to allow always."""


class ToolPermission:
    """A session's permission decisions for one turn's calls."""

    def __init__(self, session: Session, settings: Settings, ports: PermissionPorts) -> None:
        self.session = session
        self.settings = settings
        self.ports = ports

    async def runs_unasked(
        self, tool: Tool, call: ToolCall, view: Callable[[], Awaitable[CallView]]
    ) -> bool:
        """Whether `call` (shown as `view()` gives it) runs without a question."""
        if not tool.spec.needs_permission:
            return True
        if tool.spec.always_asks:
            return False
        if modes.runs_unasked(tool.spec, self.session.settings.mode):
            shown = await view()
            return await off_loop(self.runs_later, shown) is None  # reads .git/config
        if call.name != COMMAND_TOOL:
            return call.name in self.session.auto_approve
        root = await off_loop(command_root, self.session.roots, call)
        if root is None or not covered(command_line(call), self.session.command_rules(root)):
            return False
        return (await off_loop(sandbox_status, self.settings.sandbox)).sandboxed

    async def ask(
        self, call: ToolCall, kind: str, view: Callable[[], Awaitable[CallView]]
    ) -> str | None:
        """Ask the user about `call` (shown as `view()` gives it); None when allowed,
        otherwise what the model is told. "Always" answers are remembered here. Raises
        `StoppedAtQuestion` when the user stopped the turn at the question."""
        is_command = call.name == COMMAND_TOOL
        root = await off_loop(command_root, self.session.roots, call) if is_command else None
        # A tool asked every time offers no "always" (an offer of no prefixes: once, reject).
        tool = self.session.tools.get(call.name)
        asks_always = tool is not None and tool.spec.always_asks
        try:
            shown = await view()
            if kind == "edit" and (why := await off_loop(self.runs_later, shown)) is not None:
                shown = attrs.evolve(shown, content=(*shown.content, runs_later_note(why)))
            command = await self._command_offer(call, root) if is_command else None
            command = CommandOffer() if asks_always else command
            decision = await self.ports.request_permission(
                self.session.id, call, kind, shown, command
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.warning("Permission request failed: %s", error)
            return NOT_ASKED
        if decision == "cancelled":
            raise StoppedAtQuestion
        if isinstance(decision, AllowPrefix) and root is not None:  # an offered one
            self.session.add_command_rule(decision.prefix, root)
        elif decision == "allow_always" and not is_command and not asks_always:
            self.session.auto_approve.add(call.name)
            self.session.save()  # it holds for the rest of the session, reloads included
        if isinstance(decision, RejectWithNote):
            return f"{REJECTED} {NOTE_FROM_USER} {decision.note}"
        return REJECTED if decision == "reject" else None

    def runs_later(self, view: CallView) -> str | None:
        """Why a file the call writes runs code later outside the sandbox, or None."""
        places = [location.path for location in view.locations]
        places += [diff.path for diff in view.diffs]
        for place in places:
            why = sandbox_policy.runs_later(Path(place), self.session.roots.all)
            if why is not None:
                return why
        return None

    async def _command_offer(self, call: ToolCall, root: Path | None) -> CommandOffer:
        """What the question about a shell command offers to allow always: its prefixes,
        when it is coverable, would run sandboxed, and in a root (its `cwd` is valid)."""
        status = await off_loop(sandbox_status, self.settings.sandbox)  # probed once: a thread
        if not status.sandboxed:
            return CommandOffer(unsandboxed=status.reason)
        if root is None:
            return CommandOffer()
        return CommandOffer(offered_prefixes(command_line(call)))


def runs_later_note(why: str) -> str:
    """What the question about an edit of a file that runs later says (Accept edits mode
    asks about it too)."""
    return f"This file runs code outside the sandbox: {why}. Edits of it are always asked about."


def command_root(roots: Roots, call: ToolCall) -> Path | None:
    """The root a shell command would run in, whose rules apply to it: the deepest of the
    session's `roots` holding its `cwd` as the tool resolves it; None when the tool would
    refuse the `cwd` (the call fails; nothing is allowed always). Reads the file system."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    cwd = arguments.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        return None
    try:
        directory = command_directory(roots, cwd)
    except ArgumentRefused:
        return None
    return roots.holding(str(directory))


def command_line(call: ToolCall) -> str:
    """A shell command call's command line ("" when the model sent none)."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    command = arguments.get("command")
    return command if isinstance(command, str) else ""


async def precheck(tool: Any, call: ToolCall, context: ToolContext) -> ToolResult | None:
    """The error a call would end in, when the tool can tell before it runs (`precheck`):
    a call bound to fail (an edit of a file never read) is not put to the user."""
    check = getattr(tool, "precheck", None)
    if check is None:
        return None
    try:
        return await check(call.arguments, context)
    except asyncio.CancelledError:
        raise
    except Exception:  # the call itself will say what is wrong
        logger.exception("Checking a call of %s failed", call.name)
        return None
