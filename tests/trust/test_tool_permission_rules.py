"""agent/tool_permission.py's rules that need no server: a tool's `precheck` (a call bound to
fail answered before the user is asked) never costs the call when it is itself broken; only
"allow always" remembers a tool (the modes' table of what runs unasked: test_mode_table.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from parley.agent.tool_permission import REJECTED, ToolPermission, command_line, precheck
from parley.core.call_view import CallView
from parley.core.choices import PermissionDecision
from parley.core.conversation import ToolCall
from parley.tools.base import ToolContext, ToolResult
from test_mode_table import session_in, settings_in

CONTEXT = ToolContext("sess", "call", Path("/tmp"))
CALL = ToolCall("c1", "edit_file", {"path": "a.py"}, "call_1")


class Checked:
    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    async def precheck(self, arguments: Any, context: ToolContext) -> ToolResult | None:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


async def test_a_precheck_answers_the_call_or_lets_it_be_asked() -> None:
    failure = ToolResult("a.py was never read", is_error=True)
    assert await precheck(Checked(failure), CALL, CONTEXT) is failure
    assert await precheck(Checked(None), CALL, CONTEXT) is None
    assert await precheck(object(), CALL, CONTEXT) is None  # a tool without one


async def test_a_broken_precheck_lets_the_call_be_asked_and_a_cancel_goes_through() -> None:
    assert await precheck(Checked(RuntimeError("bug")), CALL, CONTEXT) is None
    with pytest.raises(asyncio.CancelledError):
        await precheck(Checked(asyncio.CancelledError()), CALL, CONTEXT)


def test_a_command_line_is_read_only_from_a_text_argument() -> None:
    assert command_line(ToolCall("c", "run_command", {"command": "pytest -q"}, "w")) == "pytest -q"
    assert command_line(ToolCall("c", "run_command", {"command": ["rm"]}, "w")) == ""
    assert command_line(ToolCall("c", "run_command", "pytest", "w")) == ""


class Answers:
    """Ports whose user gives these answers, in order."""

    def __init__(self, *decisions: PermissionDecision) -> None:
        self.decisions = list(decisions)

    async def request_permission(self, *args: Any, **kwargs: Any) -> PermissionDecision:
        return self.decisions.pop(0)


async def shown() -> CallView:
    return CallView("A call")


async def test_only_allow_always_remembers_a_tool_and_never_run_command(tmp_path: Path) -> None:
    session, settings = session_in(tmp_path, []), settings_in(tmp_path)
    evaluate = ToolCall("c1", "python_eval", {"code": "1"}, "call_1")
    told, remembered = [], []
    for decision in ("allow_once", "reject", "allow_always"):
        permission = ToolPermission(session, settings, Answers(decision))
        told.append(await permission.ask(evaluate, "execute", shown))
        remembered.append(set(session.auto_approve))
    assert told == [None, REJECTED, None]
    assert remembered == [set(), set(), {"python_eval"}]
    # A command allowed with a tool's "always" (no question offers it) runs once, no more.
    command = ToolCall("c2", "run_command", {"command": "ls"}, "call_2")
    permission = ToolPermission(session, settings, Answers("allow_always"))
    assert await permission.ask(command, "execute", shown) is None
    assert session.auto_approve == {"python_eval"}
    assert session.command_rules(session.root) == frozenset()


def test_a_commands_rules_are_those_of_the_deepest_root_its_cwd_is_in(tmp_path: Path) -> None:
    """The root whose rules apply: the cwd's by default and for a relative `cwd`; another
    root for an absolute `cwd` in it; the inner one of nested roots; none for a `cwd` the
    tool would refuse, or one that is not text."""
    from parley.agent.tool_permission import command_root
    from parley.tools.confined import workspace_roots

    workspace, other = tmp_path / "workspace", tmp_path / "other"
    inner = workspace / "vendor"
    for directory in (workspace / "src", other / "sub", inner / "lib"):
        directory.mkdir(parents=True)
    (workspace / "file.txt").write_text("")
    roots = workspace_roots(workspace, [other, inner])

    def root(arguments: Any) -> Path | None:
        return command_root(roots, ToolCall("c", "run_command", arguments, "w"))

    assert root({"command": "ls"}) == workspace
    assert root({"command": "ls", "cwd": None}) == workspace
    assert root({"command": "ls", "cwd": "."}) == workspace
    assert root({"command": "ls", "cwd": "src"}) == workspace
    assert root({"command": "ls", "cwd": str(other)}) == other
    assert root({"command": "ls", "cwd": str(other / "sub")}) == other
    assert root({"command": "ls", "cwd": "vendor/lib"}) == inner
    assert root({"command": "ls", "cwd": str(inner)}) == inner
    assert root({"command": "ls", "cwd": "/etc"}) is None  # outside every root
    assert root({"command": "ls", "cwd": "../other"}) == other  # `..` into another root
    assert root({"command": "ls", "cwd": "missing"}) is None
    assert root({"command": "ls", "cwd": "file.txt"}) is None  # not a directory
    assert root({"command": "ls", "cwd": 7}) is None
    assert root({"command": "ls", "cwd": ["src"]}) is None
    assert root("ls") == workspace  # arguments that are not an object: no cwd
