"""How a tool call is shown to the user: a title a person reads, the files it touches, and
what it would do (the code, the pattern), in `tool_call_update` and the permission request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient, allow_all
from parley.core import updates
from parley.core.call_view import CallView, Location
from parley.core.conversation import ToolCall
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.protocol import permission
from parley.server import server_tools
from parley.tools.base import ToolSpec
from parley.tools.editor import EditorTool
from parley.tools.registry import ToolRegistry


@pytest.fixture
def tools(tmp_path: Path) -> ToolRegistry:
    return ToolRegistry(server_tools(tmp_path))


def view(tools: ToolRegistry, tool: str, **arguments: Any) -> CallView:
    return tools.view_of(tool, arguments)


def test_read_file_is_titled_with_its_lines_and_located(
    tools: ToolRegistry, tmp_path: Path
) -> None:
    root = str(tmp_path.resolve())
    shown = view(tools, "read_file", path="server/app.py", startLine=10, endLine=40)
    assert shown.title == "Read server/app.py:10-40"
    assert shown.locations == (Location(f"{root}/server/app.py", 10),)
    assert view(tools, "read_file", path="./a/../app.py").title == "Read app.py"
    assert view(tools, "read_file", path="app.py").locations == (Location(f"{root}/app.py"),)
    assert view(tools, "read_file", path="app.py", endLine=5).title == "Read app.py:1-5"
    assert view(tools, "read_file", path="app.py", startLine=7).title == "Read app.py from line 7"


def test_search_and_list_say_what_they_look_for(tools: ToolRegistry, tmp_path: Path) -> None:
    search = view(tools, "search_files", pattern="area(", glob="*.py")
    assert search.title == "Search for `area(` in *.py"
    assert search.content and "area(" in search.content[0]
    assert view(tools, "search_files", pattern="x" * 200).title.endswith("…`")
    assert view(tools, "list_directory", path="server").title == "List server/"
    assert view(tools, "list_directory").title == "List the workspace"
    (where,) = view(tools, "list_directory", path="server").locations
    assert where.path == f"{tmp_path.resolve()}/server"


def test_python_tools_say_what_they_run_or_read(tools: ToolRegistry) -> None:
    run = view(tools, "python_eval", code="import math\nmath.pi")
    assert run.title == "Run Python" and run.content == ("import math\nmath.pi",)
    assert view(tools, "python_describe", target="geometry.area").title == (
        "Describe `geometry.area`"
    )
    assert view(tools, "python_who_calls", name="area").title == "Find the calls of `area`"


def test_unreadable_arguments_and_editor_tools_show_the_name(tools: ToolRegistry) -> None:
    assert view(tools, "read_file", path=3) == CallView("read_file")
    assert tools.view_of("read_file", "not an object") == CallView("read_file")
    assert view(tools, "no_such_tool", x=1) == CallView("no_such_tool")

    async def never(params: dict[str, Any], timeout: float) -> Any:
        raise AssertionError

    editor = ToolRegistry([EditorTool(ToolSpec("eval_elisp", "", {}), never, 1.0)])
    assert editor.view_of("eval_elisp", {"code": "(+ 1 2)"}) == CallView("eval_elisp")


def test_the_view_on_the_wire(tools: ToolRegistry, tmp_path: Path) -> None:
    shown = view(tools, "python_eval", code="6 * 7")
    call = ToolCall("c1", "python_eval", {"code": "6 * 7"}, "call_1")
    asked = permission.permission_request("s", call, "execute", shown)["toolCall"]
    assert asked["title"] == "Run Python" and asked["rawInput"] == {"code": "6 * 7"}
    assert asked["content"] == [{"type": "content", "content": {"type": "text", "text": "6 * 7"}}]
    assert "locations" not in asked
    read = updates.call_view(view(tools, "read_file", path="a.py"))
    assert read == {"title": "Read a.py", "locations": [{"path": f"{tmp_path.resolve()}/a.py"}]}


async def test_a_file_tool_call_is_titled_and_located_for_the_editor(
    client: ParleyClient, fake: FakeLLM, workspace: Path
) -> None:
    read = ScriptedToolCall("read_file", {"path": "geometry.py", "startLine": 1, "endLine": 3})
    fake.set_script([Reply(tool_calls=(read,)), Reply(text="Done.")])
    client.permission_handler = allow_all
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Read geometry.py.")
    (announced,) = client.updates_of(session, "tool_call")
    assert announced["title"] == "read_file"  # before its arguments are complete
    (shown,) = [u for u in client.updates_of(session, "tool_call_update") if "rawInput" in u]
    assert shown["title"] == "Read geometry.py:1-3"
    assert shown["locations"] == [{"path": str(workspace.resolve() / "geometry.py"), "line": 1}]

    await client.load_session(session, str(workspace))  # the replay shows it the same way
    replayed = client.updates_of(session, "tool_call")[-1]
    assert replayed["title"] == "Read geometry.py:1-3" and replayed["locations"]
    assert "Shapes." in json.dumps(replayed["content"])
