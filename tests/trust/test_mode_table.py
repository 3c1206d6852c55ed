"""The modes as data, over every tool: for each server tool and each mode, whether a call runs
unasked, is asked about, or is refused unrun is exactly what the table below says. The table
is written out by hand from the modes' descriptions (agent/modes.py), not computed from the
code it checks:

- ask: only the tools that need no permission run unasked; every other call asks;
- accept_edits: those, and the tools of kind `edit`; every other call (an evaluation, a
  shell command, an MCP tool) still asks;
- plan: only the tools that need no permission are offered; a call of any other is refused.

In-process over the permission point the turn uses (`modes.refusal`, then
`ToolPermission.runs_unasked`: agent/turn.py's order), first: fast enough for every mutant
of agent/modes.py. Then over the wire, an edit and a command in each mode, for the case issue
44 found no test of: Accept-edits mode must ask before `run_command` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from parley.agent import modes
from parley.agent.session import Session
from parley.agent.tool_permission import ToolPermission
from parley.client import ParleyClient
from parley.config import Settings
from parley.core.call_view import CallView
from parley.core.choices import Mode, PermissionDecision
from parley.core.conversation import ToolCall
from parley.core.session_settings import SessionSettings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.sandbox import SandboxSettings, sandbox_status
from parley.store import Store
from parley.tools.base import TOOL_KINDS, Tool, ToolSpec, describe_call
from parley.tools.registry import ToolRegistry
from parley.tools.server_tools import server_tools

RUNS, ASKS, REFUSED = "runs unasked", "asks", "refused"
# Each server tool: what a call of it does in ask, accept_edits and plan mode.
TABLE: dict[str, tuple[str, str, str]] = {
    "python_eval": (ASKS, ASKS, REFUSED),
    "python_describe": (RUNS, RUNS, RUNS),
    "python_source": (RUNS, RUNS, RUNS),
    "python_members": (RUNS, RUNS, RUNS),
    "python_apropos": (RUNS, RUNS, RUNS),
    "python_who_calls": (RUNS, RUNS, RUNS),
    "python_last_error": (RUNS, RUNS, RUNS),
    "read_file": (RUNS, RUNS, RUNS),
    "list_directory": (RUNS, RUNS, RUNS),
    "search_files": (RUNS, RUNS, RUNS),
    "edit_file": (ASKS, RUNS, REFUSED),
    "write_file": (ASKS, RUNS, REFUSED),
    "run_command": (ASKS, ASKS, REFUSED),
    "update_plan": (RUNS, RUNS, RUNS),
}
ORDER: tuple[Mode, ...] = ("ask", "accept_edits", "plan")
# The kinds Accept-edits mode lets run unasked, of any tool (an editor's, an MCP server's).
ACCEPTED_KINDS = {"edit"}


class NeverAsked:
    """Ports for the in-process checks: no question may be put."""

    async def request_permission(self, *args: Any, **kwargs: Any) -> PermissionDecision:
        raise AssertionError("runs_unasked must decide without asking")


def session_in(tmp_path: Path, tools: list[Tool], auto_approve: set[str] | None = None) -> Session:
    store = Store.open_in(tmp_path / "home")
    return Session(
        id="sess_modes",
        cwd=tmp_path,
        settings=SessionSettings("openai:m", "sync"),
        tools=ToolRegistry(tools),
        store=store,
        auto_approve=auto_approve or set(),
    )


def settings_in(tmp_path: Path, sandbox: SandboxSettings | None = None) -> Settings:
    return Settings(
        home=tmp_path / "home",
        default_model="openai:m",
        providers={},
        models={},
        prices={},
        sandbox=sandbox or SandboxSettings(),
    )


async def outcome(session: Session, settings: Settings, tool: Tool, call: ToolCall) -> str:
    """What the turn does with `call` (agent/turn.py's `_run_tool`): refuse it, run it, ask."""
    if modes.refusal(tool.spec, session.settings.mode) is not None:
        return REFUSED
    permission = ToolPermission(session, settings, NeverAsked())

    async def view() -> CallView:  # as the turn shows the call (where it would write)
        return describe_call(tool, call.name, call.arguments)

    return RUNS if await permission.runs_unasked(tool, call, view) else ASKS


def a_call(name: str) -> ToolCall:
    arguments = {"command": "pytest -q"} if name == "run_command" else {}
    return ToolCall("c1", name, arguments, "call_1")


def test_the_table_names_every_server_tool_and_every_mode(tmp_path: Path) -> None:
    # A new tool or mode fails here until the table says what it may do.
    assert {tool.spec.name for tool in server_tools(tmp_path)} == set(TABLE)
    assert tuple(modes.MODES) == ORDER


async def test_each_tool_in_each_mode_runs_asks_or_is_refused_as_the_table_says(
    tmp_path: Path,
) -> None:
    tools = server_tools(tmp_path)
    session, settings = session_in(tmp_path, tools), settings_in(tmp_path)
    found: dict[str, tuple[str, ...]] = {}
    for tool in tools:
        row = []
        for mode in ORDER:
            session.settings = attrs.evolve(session.settings, mode=mode)
            row.append(await outcome(session, settings, tool, a_call(tool.spec.name)))
        found[tool.spec.name] = tuple(row)
    assert found == TABLE
    for index, mode in enumerate(ORDER):  # what a request offers the model, the same table
        offered = {spec.name for spec in modes.offered_specs(session.tools.specs(), mode)}
        assert offered == {name for name, row in TABLE.items() if row[index] != REFUSED}


class Stub:
    """A tool of any kind, as an editor or an MCP server declares one."""

    def __init__(self, kind: str, needs_permission: bool) -> None:
        self.spec = ToolSpec(f"{kind}_tool", "A tool.", {"type": "object"}, kind, needs_permission)


@pytest.mark.parametrize("kind", sorted(TOOL_KINDS))
async def test_accept_edits_lets_through_only_the_edit_kind_of_any_tool(
    tmp_path: Path, kind: str
) -> None:
    asking, free = Stub(kind, True), Stub(kind, False)
    session, settings = session_in(tmp_path, []), settings_in(tmp_path)
    found = {}
    for mode in ORDER:
        session.settings = attrs.evolve(session.settings, mode=mode)
        call = ToolCall("c1", asking.spec.name, {}, "call_1")
        found[mode] = (
            await outcome(session, settings, asking, call),  # type: ignore[arg-type]
            await outcome(session, settings, free, call),  # type: ignore[arg-type]
        )
    accepted = RUNS if kind in ACCEPTED_KINDS else ASKS
    assert found == {"ask": (ASKS, RUNS), "accept_edits": (accepted, RUNS), "plan": (REFUSED, RUNS)}


async def test_a_tool_always_allowed_runs_unasked_but_plan_mode_still_refuses_it(
    tmp_path: Path,
) -> None:
    tools = {tool.spec.name: tool for tool in server_tools(tmp_path)}
    # A client's autoApprove never names run_command (Session drops it): prefix rules only.
    session = session_in(tmp_path, list(tools.values()), {"python_eval", "run_command"})
    settings = settings_in(tmp_path)
    found = {}
    for mode in ORDER:
        session.settings = attrs.evolve(session.settings, mode=mode)
        found[mode] = [
            await outcome(session, settings, tools[name], a_call(name))
            for name in ("python_eval", "edit_file", "run_command")
        ]
    assert found == {
        "ask": [RUNS, ASKS, ASKS],
        "accept_edits": [RUNS, RUNS, ASKS],
        "plan": [REFUSED, REFUSED, REFUSED],
    }


_here = sandbox_status(SandboxSettings())


@pytest.mark.skipif(not _here.sandboxed, reason=f"no sandbox here: {_here.reason}")
async def test_a_commands_prefix_rule_lets_it_run_unasked_only_sandboxed_and_never_in_plan(
    tmp_path: Path,
) -> None:
    tools = {tool.spec.name: tool for tool in server_tools(tmp_path)}
    session = session_in(tmp_path, list(tools.values()))
    session.add_command_rule("pytest", session.root)
    sandboxed, unsandboxed = (
        settings_in(tmp_path),
        settings_in(tmp_path, SandboxSettings(enabled=False)),
    )
    command = tools["run_command"]
    found = {}
    for mode in ORDER:
        session.settings = attrs.evolve(session.settings, mode=mode)
        found[mode] = [
            await outcome(session, sandboxed, command, a_call("run_command")),
            await outcome(session, unsandboxed, command, a_call("run_command")),
            await outcome(
                session, sandboxed, command, ToolCall("c", "run_command", {"command": "ls"}, "w")
            ),
        ]
    assert found == {
        "ask": [RUNS, ASKS, ASKS],
        "accept_edits": [RUNS, ASKS, ASKS],
        "plan": [REFUSED, REFUSED, REFUSED],
    }


# --- over the wire: the same table, and Accept-edits mode asking before a shell command ---

# A call of each kind the modes tell apart: an edit, and a command (issue 44's finding).
WIRE_CALLS = (
    ("write_file", {"path": "notes.txt", "content": "x"}),
    ("run_command", {"command": "touch ran.txt"}),
)


async def in_mode(
    start_server: Callable[..., Any], workspace: Path, mode: str, answer: str
) -> tuple[ParleyClient, str]:
    """A client whose user answers every question with `answer`, its session in `mode`."""
    client: ParleyClient = await start_server()
    await client.initialize()
    client.permission_handler = lambda params: {
        "outcome": {"outcome": "selected", "optionId": answer}
    }
    session = await client.new_session(str(workspace))
    await client.request("session/set_mode", {"sessionId": session, "modeId": mode})
    return client, session


async def run_the_calls(client: ParleyClient, fake: FakeLLM, session: str) -> list[str]:
    """One turn in which the model makes WIRE_CALLS, one a round; the results it was sent."""
    calls = [Reply(tool_calls=(ScriptedToolCall(name, args),)) for name, args in WIRE_CALLS]
    fake.set_script([*calls, Reply(text="Done.")])
    result = await client.prompt(session, "Write notes, then touch a file.", timeout=60)
    assert result["stopReason"] == "end_turn"
    sent = fake.requests[-1].body["messages"]
    return [message["content"] for message in sent if message["role"] == "tool"]


@pytest.mark.parametrize("mode", ORDER)
async def test_over_the_wire_each_mode_runs_asks_or_refuses_as_the_table_says(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, mode: Mode
) -> None:
    client, session = await in_mode(start_server, workspace, mode, "reject_once")
    results = await run_the_calls(client, fake, session)
    expected = {name: TABLE[name][ORDER.index(mode)] for name, _ in WIRE_CALLS}
    asked = [q["toolCall"]["rawInput"] for q in client.permission_requests]
    assert asked == [args for name, args in WIRE_CALLS if expected[name] == ASKS]
    assert (workspace / "notes.txt").exists() == (expected["write_file"] == RUNS)
    assert not (workspace / "ran.txt").exists()  # rejected or refused: never run
    for (name, _), result in zip(WIRE_CALLS, results, strict=True):
        if expected[name] == REFUSED:
            assert result.startswith(f"{name} is not available in Plan mode")
        elif expected[name] == ASKS:
            assert "rejected" in result


async def test_accept_edits_asks_for_run_command_and_runs_it_only_when_allowed(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path
) -> None:
    client, session = await in_mode(start_server, workspace, "accept_edits", "allow_once")
    await run_the_calls(client, fake, session)
    asked = [(q["toolCall"]["kind"], q["toolCall"]["rawInput"]) for q in client.permission_requests]
    assert asked == [("execute", {"command": "touch ran.txt"})]  # the command, not the edit
    assert (workspace / "notes.txt").read_text() == "x"
    assert (workspace / "ran.txt").exists()  # allowed once: it ran
