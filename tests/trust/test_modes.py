"""Session modes (ask, accept_edits, plan) and the plan (`update_plan`), over the wire.

`parley serve --framing ndjson` runs as a subprocess driven by the official ACP Python SDK's
client (tests/acp_client.py), every message it sends checked against ACP's JSON Schema; the
fake LLM scripts the model's calls and keeps the requests it was sent (the tools offered).
`update_plan`'s input is also checked in-process, as a Hypothesis property.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import text_block
from acp.schema import McpServerStdio
from acp_client import AcpRun, acp_server
from acp_schema import acp_schema
from conftest import server_env
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.agent.modes import PLAN_NOTE
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.base import ToolContext
from parley.tools.plan import MAX_ENTRIES, PRIORITIES, STATUSES, UpdatePlanTool
from parley.tools.server_tools import server_tools

INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
# The tools that need no permission: all Plan mode offers (whatever else the server has).
READ_ONLY_TOOLS = {
    "python_describe",
    "python_source",
    "python_members",
    "python_apropos",
    "python_who_calls",
    "python_last_error",
    "read_file",
    "list_directory",
    "search_files",
    "update_plan",
}
PLAN = [
    {"content": "Read geometry.py", "status": "completed", "priority": "high"},
    {"content": "Add perimeter()", "status": "in_progress"},
    {"content": "Test it", "status": "pending", "priority": "low"},
]
PLAN_SHOWN = [
    {"content": "Read geometry.py", "priority": "high", "status": "completed"},
    {"content": "Add perimeter()", "priority": "medium", "status": "in_progress"},
    {"content": "Test it", "priority": "low", "status": "pending"},
]


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name, arguments)


def offered_tools(fake: FakeLLM) -> set[str]:
    """The names of the tools the model's last request offered."""
    return {tool["function"]["name"] for tool in fake.requests[-1].body.get("tools", [])}


def tool_results(fake: FakeLLM) -> list[str]:
    """The tool results the model was last sent, in order."""
    body = max((r.body for r in fake.requests), key=lambda body: len(body["messages"]))
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def current_values(options: list[dict[str, Any]]) -> dict[str, Any]:
    return {option["id"]: option["currentValue"] for option in options}


def mode_updates(run: AcpRun, session_id: str) -> list[str]:
    return [
        u["currentModeId"] for u in run.recording.raw_updates(session_id, "current_mode_update")
    ]


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


async def started(run: AcpRun, workspace: Path) -> str:
    await run.initialize()
    return (await run.conn.new_session(cwd=str(workspace))).session_id


async def prompt(run: AcpRun, session_id: str, text: str) -> str:
    result = await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])
    return result.stop_reason


# --- modes ----------------------------------------------------------------------------------


async def test_each_mode_offers_exactly_its_tools(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    every_tool = {tool.spec.name for tool in server_tools(workspace)}
    offered, system = {}, {}
    async with acp_server(acp_env) as run:
        session_id = await started(run, workspace)
        started_with = run.recording.result_of("session/new")
        for mode in ("ask", "accept_edits", "plan"):
            await run.conn.set_session_mode(session_id=session_id, mode_id=mode)
            fake.set_script([Reply(text="ok")])
            await prompt(run, session_id, "Which tools?")
            offered[mode] = offered_tools(fake)
            system[mode] = fake.requests[-1].body["messages"][0]["content"]
    assert started_with["modes"]["currentModeId"] == "ask"
    assert [m["id"] for m in started_with["modes"]["availableModes"]] == [
        "ask",
        "accept_edits",
        "plan",
    ]
    assert started_with["configOptions"][0]["id"] == "mode"
    assert offered["ask"] == offered["accept_edits"] == every_tool
    assert offered["plan"] == READ_ONLY_TOOLS
    # The model is told it can only read (the system prompt says how to edit).
    assert system["ask"] == system["accept_edits"] and "Plan mode" not in system["ask"]
    assert system["plan"] == f"{system['ask']}\n\n{PLAN_NOTE}"
    run.recording.assert_conformant()


async def test_plan_mode_refuses_a_call_it_does_not_offer_unrun(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    before = source.read_bytes()
    fake.set_script(
        [
            Reply(tool_calls=(call("read_file", path="geometry.py"),)),
            Reply(tool_calls=(call("edit_file", path="geometry.py", old_text="*", new_text="+"),)),
            Reply(tool_calls=(call("python_eval", code="open('x', 'w')"),)),
            Reply(text="I propose to change * to +."),
        ]
    )
    async with acp_server(acp_env) as run:
        session_id = await started(run, workspace)
        answer = await run.conn.set_config_option(
            config_id="mode", session_id=session_id, value="plan"
        )
        await prompt(run, session_id, "Make it add.")
    assert current_values([o.model_dump(by_alias=True) for o in answer.config_options])["mode"] == (
        "plan"
    )
    assert mode_updates(run, session_id) == ["plan"]
    assert source.read_bytes() == before and not (workspace / "x").exists()
    assert run.editor.permission_requests == []  # refused, never put to the user
    read, edit, evaluate = tool_results(fake)
    assert "width * height" in read
    assert edit.startswith("edit_file is not available in Plan mode")
    assert evaluate.startswith("python_eval is not available in Plan mode")
    finished = [u.status for u in run.editor.updates_of(session_id, "tool_call_update") if u.status]
    assert finished.count("failed") == 2
    run.recording.assert_conformant()


async def test_accept_edits_applies_an_edit_unasked_undo_restores_it_and_eval_still_asks(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    before = source.read_bytes()
    fake.set_script(
        [
            Reply(tool_calls=(call("read_file", path="geometry.py"),)),
            Reply(
                tool_calls=(
                    call(
                        "edit_file",
                        path="geometry.py",
                        old_text="width * height",
                        new_text="height * width",
                    ),
                )
            ),
            Reply(tool_calls=(call("python_eval", code="6 * 7"),)),
            Reply(text="Done."),
        ]
    )
    async with acp_server(acp_env) as run:
        session_id = await started(run, workspace)
        await run.conn.set_session_mode(session_id=session_id, mode_id="accept_edits")
        run.editor.permission_answer = "allow_once"
        await prompt(run, session_id, "Swap the factors, then compute 6 * 7.")
        edited = source.read_text()
        restored = await run.raw_request(
            "_parley/session/restore", {"sessionId": session_id, "turn": 1}
        )
    assert "height * width" in edited
    assert [asked.kind for asked in run.editor.permission_requests] == ["execute"]
    assert "42" in tool_results(fake)[-1]
    assert [f["action"] for f in restored["files"]] == ["restored"]
    assert source.read_bytes() == before
    run.recording.assert_conformant()


async def test_set_mode_and_the_mode_option_say_the_change_and_refuse_what_is_no_mode(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    async with acp_server(acp_env) as run:
        session_id = await started(run, workspace)
        await run.conn.set_session_mode(session_id=session_id, mode_id="accept_edits")
        answered = run.recording.result_of("session/set_mode")
        await run.editor.wait_for_update(session_id, "config_option_update", timeout=5)
        await run.conn.set_session_mode(session_id=session_id, mode_id="accept_edits")  # same
        await run.conn.set_config_option(config_id="mode", session_id=session_id, value="plan")
        refused = []
        for session, mode in ((session_id, "yolo"), (session_id, ""), ("sess_nobody", "plan")):
            with pytest.raises(RequestError) as error:
                await run.conn.set_session_mode(session_id=session, mode_id=mode)
            refused.append(error.value)
        # /mode: without a name it says which; a name that is no mode is refused.
        fake.set_script([Reply(text="unused")])
        for command in ("/mode", "/mode yolo", "/mode ask", "/mode plan"):
            assert await prompt(run, session_id, command) == "end_turn"
        said = run.editor.text_of(session_id)
    assert answered == {}
    assert mode_updates(run, session_id) == ["accept_edits", "plan", "ask", "plan"]
    options = run.recording.raw_updates(session_id, "config_option_update")
    assert [current_values(u["configOptions"])["mode"] for u in options] == [
        "accept_edits",
        "ask",
        "plan",
    ]
    assert [error.code for error in refused] == [
        INVALID_PARAMS,
        INVALID_PARAMS,
        RESOURCE_NOT_FOUND,
    ]
    assert "modeId: must be one of ask, accept_edits, plan, not 'yolo'" in str(refused[0])
    assert "The mode is `plan`" in said
    assert "No mode 'yolo'. The mode is still `plan`" in said
    assert "Switched to `ask`: ask before every evaluation, edit and command." in said
    switched = "Switched to `plan`: only tools that read: the model investigates and proposes"
    assert said.endswith(f"{switched}, nothing is changed or run.")
    assert fake.requests == []  # no command called the model
    run.recording.assert_conformant()


async def test_the_mode_survives_a_reload_and_nothing_of_the_session_follows_the_load_answer(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="Noted."), Reply(text="Still read only.")])
    async with acp_server(acp_env) as first:
        session_id = await started(first, workspace)
        await first.conn.set_session_mode(session_id=session_id, mode_id="plan")
        await prompt(first, session_id, "Look around.")
    missing = McpServerStdio(name="ghost", command="/no/such/mcp-server", args=[], env=[])
    async with acp_server(acp_env) as run:
        await run.initialize()
        await run.conn.load_session(
            cwd=str(workspace), session_id=session_id, mcp_servers=[missing]
        )
        await asyncio.sleep(0.3)  # anything of the session after the answer would be in
        messages = run.recording.agent_messages()
        await prompt(run, session_id, "And now?")
        await run.conn.resume_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
    loaded = run.recording.result_of("session/load")
    assert loaded["modes"]["currentModeId"] == "plan"
    assert current_values(loaded["configOptions"])["mode"] == "plan"
    assert run.recording.result_of("session/resume")["modes"]["currentModeId"] == "plan"
    assert offered_tools(fake) == READ_ONLY_TOOLS
    load_id = next(m["id"] for m in run.recording.from_client if m.get("method") == "session/load")
    answer_at = next(i for i, m in enumerate(messages) if m.get("id") == load_id)
    announced_at = [
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    ]
    assert announced_at and max(announced_at) < answer_at
    (told,) = [
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and "`ghost` could not start" in m["params"]["update"].get("content", {}).get("text", "")
    ]
    assert told < answer_at
    assert messages[answer_at + 1 :] == []  # nothing of the loaded session after its answer
    first.recording.assert_conformant()
    run.recording.assert_conformant()


# --- the plan -------------------------------------------------------------------------------


async def test_the_plan_is_shown_stored_and_replayed_in_its_place(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script(
        [
            Reply(tool_calls=(call("update_plan", entries=PLAN),)),
            Reply(tool_calls=(call("update_plan", entries=[{"content": "x", "status": "done"}]),)),
            Reply(text="On it."),
        ]
    )
    async with acp_server(acp_env) as first:
        session_id = await started(first, workspace)
        await prompt(first, session_id, "Add perimeter.")
    async with acp_server(acp_env) as run:
        await run.initialize()
        await run.conn.load_session(cwd=str(workspace), session_id=session_id)
    shown = first.recording.raw_updates(session_id, "plan")
    assert shown == [{"sessionUpdate": "plan", "entries": PLAN_SHOWN}]
    assert first.editor.permission_requests == []  # a plan runs nothing: never asked
    accepted, refused = tool_results(fake)
    # What Parley knows: the editor got it (CodeCompanion shows no plan at all).
    assert accepted == (
        "The plan was sent to the editor: 3 entries (1 pending, 1 in progress, 1 completed)."
    )
    assert (
        refused == "'entries[0].status' must be one of pending, in_progress, completed, not 'done'"
    )
    (seen,) = first.editor.updates_of(session_id, "plan")
    assert [entry.status for entry in seen.entries] == ["completed", "in_progress", "pending"]
    # The replay: each call in its place, the plan right after the call that showed it; the
    # refused call showed no plan.
    replayed = [
        (u["sessionUpdate"], u.get("title") or u.get("entries") or u["content"].get("text"))
        for u in run.recording.raw_updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "plan", "agent_message_chunk")
    ]
    assert replayed == [
        ("tool_call", "Update the plan (1/3 done)"),
        ("plan", PLAN_SHOWN),
        ("tool_call", "update_plan"),
        ("agent_message_chunk", "On it."),
    ]
    first.recording.assert_conformant()
    run.recording.assert_conformant()


# --- update_plan's input, in-process ----------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
good_entries = st.fixed_dictionaries(
    {
        "content": st.text(min_size=1, max_size=30).filter(str.strip),
        "status": st.sampled_from(STATUSES),
    },
    optional={"priority": st.sampled_from(PRIORITIES) | st.none()},
)
# An entry with one field made wrong: a bad value, a wrong type, or missing.
bad_fields = st.sampled_from(["content", "status", "priority"])
bad_values = json_values.filter(lambda v: v not in (*STATUSES, *PRIORITIES) and v is not None)


def ran(arguments: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Run update_plan with `arguments`: its result, and the updates it sent."""
    sent: list[dict[str, Any]] = []
    context = ToolContext("sess_p", "call_p", Path("/nowhere"), send_update=sent.append)
    return asyncio.run(UpdatePlanTool().run(arguments, context)), sent


def as_notification(update: dict[str, Any]) -> dict[str, Any]:
    params = {"sessionId": "sess_p", "update": update}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


@settings(max_examples=100, deadline=None)
@given(arguments=json_values | st.fixed_dictionaries({"entries": json_values}))
def test_any_input_is_a_plan_or_a_clear_error(arguments: Any) -> None:
    result, sent = ran(arguments)
    if result.is_error:
        assert sent == [] and result.content.startswith("'entries")
    else:
        (update,) = sent
        assert acp_schema().check_agent_messages([], [as_notification(update)]) == []


@settings(max_examples=100, deadline=None)
@given(
    entries=st.lists(good_entries, min_size=1, max_size=MAX_ENTRIES),
    data=st.data(),
)
def test_a_plan_is_shown_as_given_and_one_bad_field_is_named(
    entries: list[dict[str, Any]], data: st.DataObject
) -> None:
    result, sent = ran({"entries": entries})
    assert not result.is_error
    (update,) = sent
    assert [e["status"] for e in update["entries"]] == [e["status"] for e in entries]
    assert [e["priority"] for e in update["entries"]] == [
        e.get("priority") or "medium" for e in entries
    ]
    assert acp_schema().check_agent_messages([], [as_notification(update)]) == []

    position = data.draw(st.integers(0, len(entries) - 1))
    field = data.draw(bad_fields)
    broken = [dict(entry) for entry in entries]
    if field == "content" and data.draw(st.booleans()):
        broken[position].pop("content")
    elif field == "content":
        broken[position]["content"] = data.draw(
            st.sampled_from(["", "   ", "x" * 501])
            | json_values.filter(lambda v: not isinstance(v, str))
        )
    else:
        broken[position][field] = data.draw(bad_values)
    result, sent = ran({"entries": broken})
    assert result.is_error and sent == []
    assert result.content.startswith(f"'entries[{position}].{field}' ")


def test_a_plan_too_long_is_refused_with_its_limit() -> None:
    entry = {"content": "step", "status": "pending"}
    result, sent = ran({"entries": [entry] * (MAX_ENTRIES + 1)})
    assert result.is_error and sent == []
    assert result.content == f"'entries' has {MAX_ENTRIES + 1} entries: a plan has at most 50"
    result, sent = ran({"entries": []})  # an empty plan clears the one shown
    assert json.dumps(sent) == '[{"sessionUpdate": "plan", "entries": []}]'
