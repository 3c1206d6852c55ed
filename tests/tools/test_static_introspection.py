"""The read-only Python tools on a hostile workspace: nothing is imported, the kernel (the
workspace's own interpreter) is never started, and the answers are still right.

Every module here writes a marker file when imported; a fake `.venv/bin/python` writes one
when run. Only an approved `python_eval` may make a marker appear.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient, reject_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.base import Tool, ToolContext, ToolResult
from parley.tools.kernel import KernelSettings
from parley.tools.server_tools import server_tools

STATIC = "(read from the source: nothing was imported or run)"


def marker_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'a').write(__name__ + ' ran\\n')\n"


def make_hostile_workspace(root: Path, marker: Path) -> Path:
    root.mkdir()
    (root / "hostile.py").write_text(
        marker_code(marker)
        + textwrap.dedent(
            '''
            """A module whose import has side effects."""

            COUNTER = 0


            def launch(target: str, *, force: bool = False) -> int:
                """Launch the target."""
                return 1


            class Rocket:
                """A rocket."""

                def __init__(self, fuel):
                    self.fuel = fuel

                def ignite(self, seconds=3):
                    """Start the engine."""
                    return seconds
            '''
        )
    )
    # Shadows the standard library's decimal, as the kernel would import it.
    (root / "decimal.py").write_text(
        marker_code(marker)
        + 'def shadowed():\n    """The workspace\'s own decimal."""\n    return 1\n'
    )
    (root / "rockets").mkdir()
    (root / "rockets" / "__init__.py").write_text(marker_code(marker) + "FLEET = []\n")
    for n in range(3):
        (root / "rockets" / f"stage{n}.py").write_text(
            marker_code(marker) + f"def burn_stage{n}(thrust):\n    return thrust\n"
        )
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(f"#!/bin/sh\necho venv-python-ran >> {marker}\n")
    (venv_bin / "python").chmod(0o755)
    vendored = root / ".venv" / "lib" / "python3.11" / "site-packages" / "vendored"
    vendored.mkdir(parents=True)
    (vendored / "__init__.py").write_text(
        marker_code(marker) + 'def helper(x):\n    """From the venv."""\n'
    )
    return root


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    # In the workspace: the one place an approved eval may write, in the sandbox too.
    return tmp_path / "hostile-workspace" / "MARKER"


@pytest.fixture
def hostile(tmp_path: Path, marker: Path) -> Path:
    return make_hostile_workspace(tmp_path / "hostile-workspace", marker)


@pytest.fixture
async def tools(hostile: Path) -> AsyncIterator[dict[str, Any]]:
    settings = KernelSettings(python=sys.executable, timeout_seconds=10.0)
    by_name = {tool.spec.name: tool for tool in server_tools(hostile, settings)}
    yield by_name
    await by_name["python_eval"].aclose()


async def call(tool: Tool, **arguments: Any) -> ToolResult:
    return await tool.run(arguments, ToolContext(session_id="s1", tool_call_id="t1", cwd=Path()))


def assert_nothing_ran(tools: dict[str, Any], marker: Path) -> None:
    kernel = tools["python_eval"].kernel
    assert not marker.exists(), marker.read_text()
    assert not kernel.is_running and kernel.started_info == {}  # never started


async def test_describe_source_members_answer_from_the_source(
    tools: dict[str, Any], marker: Path
) -> None:
    describe = await call(tools["python_describe"], target="hostile.launch")
    assert describe.content.splitlines() == [
        "hostile.launch: function (builtins.function)",
        "signature: launch(target: str, *, force: bool = False) -> int",
        "defined in: hostile.py:8",
        "doc:",
        "Launch the target.",
        STATIC,
    ]
    counter = await call(tools["python_describe"], target="hostile.COUNTER")
    assert "value (in source): 0" in counter.content

    source = await call(tools["python_source"], target="hostile.Rocket.ignite")
    assert source.content == (
        "hostile.py, lines 19-21:\n"
        "    def ignite(self, seconds=3):\n"
        '        """Start the engine."""\n'
        "        return seconds\n"
        f"\n{STATIC}"
    )
    members = await call(tools["python_members"], target="hostile.Rocket")
    assert members.content.splitlines()[1:] == [
        "  __init__  [method] (self, fuel)",
        "  fuel  [data (instance)] = fuel",
        "  ignite  [method] (self, seconds=3)  # Start the engine.",
        STATIC,
    ]
    package = await call(tools["python_members"], target="rockets")
    assert "  stage1  [module]" in package.content
    assert_nothing_ran(tools, marker)


async def test_a_workspace_module_shadows_the_standard_library_as_in_the_kernel(
    tools: dict[str, Any], marker: Path
) -> None:
    result = await call(tools["python_describe"], target="decimal.shadowed")
    assert "defined in: decimal.py:2" in result.content
    assert "The workspace's own decimal." in result.content
    result = await call(tools["python_source"], target="decimal")
    assert result.content.startswith("decimal.py, lines 1-4:\nopen(")
    assert_nothing_ran(tools, marker)


async def test_the_standard_library_and_the_venv_are_read_not_imported(
    tools: dict[str, Any], marker: Path
) -> None:
    was_loaded = "antigravity" in sys.modules
    result = await call(tools["python_describe"], target="antigravity")
    assert result.content.startswith("antigravity: module (builtins.module)")
    assert "antigravity.py" in result.content
    assert ("antigravity" in sys.modules) == was_loaded  # not in the server either
    result = await call(tools["python_describe"], target="json.dumps")
    assert "signature: dumps(obj, *, skipkeys=False" in result.content
    result = await call(tools["python_describe"], target="vendored.helper")
    assert "From the venv." in result.content
    assert ".venv/lib/python3.11/site-packages/vendored/__init__.py:2" in result.content
    result = await call(tools["python_describe"], target="len")
    assert "signature: len(obj, /)" in result.content
    assert_nothing_ran(tools, marker)


async def test_apropos_walks_packages_and_the_workspace_statically(
    tools: dict[str, Any], marker: Path
) -> None:
    result = await call(tools["python_apropos"], pattern="burn", package="rockets")
    assert result.content.splitlines() == [
        "3 names match 'burn' in package rockets (4 modules):",
        "  rockets.stage0.burn_stage0  [function] (thrust)",
        "  rockets.stage1.burn_stage1  [function] (thrust)",
        "  rockets.stage2.burn_stage2  [function] (thrust)",
        STATIC,
    ]
    result = await call(tools["python_apropos"], pattern="ignite|shadowed")
    assert "in the workspace's modules" in result.content
    assert "  hostile.Rocket.ignite  [method] (self, seconds=3)" in result.content
    assert "  decimal.shadowed  [function] ()" in result.content
    assert "vendored" not in result.content  # the venv is not the workspace's own code
    assert_nothing_ran(tools, marker)


async def test_not_found_errors_say_what_to_do(tools: dict[str, Any], marker: Path) -> None:
    result = await call(tools["python_describe"], target="math.sqrt")
    assert result.is_error
    assert "'math' was not found as Python source" in result.content
    assert "after an approved python_eval imports it" in result.content
    result = await call(tools["python_members"], target="hostile.launch")
    assert result.content.startswith("hostile.launch is a function; members are listed for")
    result = await call(tools["python_describe"], target="hostile.Rocket.land")
    assert result.content == "hostile.Rocket (class) has no attribute 'land' in its source"
    result = await call(tools["python_last_error"])
    assert result.content == "No exception is recorded: the kernel is not running."
    assert_nothing_ran(tools, marker)


async def test_an_edited_file_is_read_again(tools: dict[str, Any], hostile: Path) -> None:
    first = await call(tools["python_describe"], target="rockets.stage0.burn_stage0")
    assert "signature: burn_stage0(thrust)" in first.content
    stage = hostile / "rockets" / "stage0.py"
    stage.write_text("def burn_stage0(thrust, seconds):\n    return thrust\n")
    os.utime(stage, ns=(1, 1))  # a different time even on a coarse clock
    second = await call(tools["python_describe"], target="rockets.stage0.burn_stage0")
    assert "signature: burn_stage0(thrust, seconds)" in second.content


async def test_symlinks_out_and_fifos_are_not_read(
    tools: dict[str, Any], hostile: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.py").write_text("SECRET = 'TOP-SECRET'\n")
    (hostile / "leak.py").symlink_to(tmp_path / "outside.py")
    os.mkfifo(hostile / "rockets" / "stage9.py")
    result = await call(tools["python_source"], target="leak")
    assert result.is_error and "TOP-SECRET" not in result.content
    assert "is not a regular file inside the workspace" in result.content
    result = await call(tools["python_members"], target="rockets")  # would block on the FIFO
    assert result.is_error and "rockets/stage9.py is not a regular file" in result.content


async def test_a_fifo_named_like_a_path_file_does_not_block(
    tools: dict[str, Any], hostile: Path
) -> None:
    fifo = hostile / "planted.pth"
    os.mkfifo(fifo)
    try:
        result = await asyncio.wait_for(
            call(tools["python_describe"], target="hostile.launch"), timeout=30
        )
        assert "signature: launch(" in result.content
    finally:
        # Should a reader be stuck on the FIFO, release it so the test run can end.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def test_after_an_approved_eval_loaded_modules_are_answered_live(
    tools: dict[str, Any], hostile: Path, marker: Path
) -> None:
    (hostile / ".venv" / "bin" / "python").unlink()  # else the kernel would run that fake
    evaluate = tools["python_eval"]
    code = "import hostile\nhostile.COUNTER = 41\nrocket = hostile.Rocket(7)"
    result = await call(evaluate, code=code)
    assert not result.is_error, result.content
    assert marker.read_text() == "hostile ran\n"  # the approved eval imported it
    live = await call(tools["python_describe"], target="hostile.COUNTER")
    assert live.content.splitlines()[:2] == ["hostile.COUNTER: data (builtins.int)", "value: 41"]
    assert STATIC not in live.content
    instance = await call(tools["python_members"], target="rocket")
    assert "  fuel  [data (instance)] = 7" in instance.content

    # Modules the kernel has not loaded are still read, not imported, in the kernel too.
    for target in ("decimal.shadowed", "rockets.stage1.burn_stage1", "antigravity"):
        result = await call(tools["python_describe"], target=target)
        assert STATIC in result.content, result.content
    loaded = await call(
        evaluate,
        code="import sys\nsorted({'decimal', 'rockets', 'antigravity'} & set(sys.modules))",
    )
    assert loaded.content == "value: []"
    assert marker.read_text() == "hostile ran\n"


# --- over JSON-RPC, with a client that rejects every permission request -------------------


@pytest.fixture
async def rejecting_client(start_server) -> ParleyClient:
    client = await start_server()
    await client.initialize()
    client.permission_handler = reject_all
    return client


async def test_over_rpc_no_workspace_code_runs_without_permission(
    rejecting_client: ParleyClient, fake: FakeLLM, tmp_path: Path, marker: Path
) -> None:
    workspace = make_hostile_workspace(tmp_path / "rpc-workspace", marker)
    calls = [
        ScriptedToolCall("python_describe", {"target": "hostile.launch"}),
        ScriptedToolCall("python_source", {"target": "decimal.shadowed"}),
        ScriptedToolCall("python_members", {"target": "rockets"}),
        ScriptedToolCall("python_apropos", {"pattern": "burn", "package": "rockets"}),
        ScriptedToolCall("python_apropos", {"pattern": "ignite"}),
        ScriptedToolCall("python_describe", {"target": "antigravity"}),
        ScriptedToolCall("python_last_error", {}),
        ScriptedToolCall("python_eval", {"code": "import hostile"}),
        ScriptedToolCall("python_describe", {"target": "hostile.COUNTER"}),
    ]
    fake.set_script([Reply(tool_calls=(c,)) for c in calls] + [Reply(text="Done.")])
    session = await rejecting_client.new_session(str(workspace), toolPolicy="sync")
    result = await rejecting_client.prompt(session, "Look around.", timeout=120)
    assert result["stopReason"] == "end_turn"
    assert not marker.exists(), marker.read_text()
    answers = [request.body["messages"][-1]["content"] for request in fake.requests[1:]]
    assert "signature: launch(target: str, *, force: bool = False) -> int" in answers[0]
    assert "The workspace's own decimal." in answers[1]
    assert "  stage2  [module]" in answers[2]
    assert "rockets.stage2.burn_stage2  [function] (thrust)" in answers[3]
    assert "hostile.Rocket.ignite  [method]" in answers[4]
    assert "antigravity.py" in answers[5]
    assert "the kernel is not running" in answers[6]
    assert "rejected" in answers[7].lower()
    assert "value (in source): 0" in answers[8]
    assert len(rejecting_client.permission_requests) == 1  # only the eval asked
