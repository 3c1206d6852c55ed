"""The server-side tools driven as the model drives them: fakellm scripts the calls, the
server runs them over JSON-RPC, and each test reads what the model was sent back."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

GEOMETRY = '''"""Plane shapes."""


def area(width, height):
    """The area of a width x height rectangle."""
    return width * height


class Shape:
    """A shape with sides."""

    def __init__(self, sides):
        self.sides = sides

    def describe(self):
        return f"{self.sides} sides"
'''

REPORT = """from geometry import area


def total_area(rooms):
    return sum(area(w, h) for w, h in rooms)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "geometry.py").write_text(GEOMETRY)
    (root / "report.py").write_text(REPORT)
    (tmp_path / "secret.txt").write_text("TOP-SECRET-CONTENT")
    (root / "escape").symlink_to(tmp_path / "secret.txt")
    return root


def call(tool: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool, arguments)


async def run_calls(
    client: ParleyClient, fake: FakeLLM, project: Path, calls: list[ScriptedToolCall], **settings
) -> list[str]:
    """Run `calls` one per round in one turn; return what the model got back for each."""
    fake.set_script([Reply(tool_calls=(c,)) for c in calls] + [Reply(text="Done.")])
    session = await client.new_session(str(project), toolPolicy="sync", **settings)
    result = await client.prompt(session, "Investigate.", timeout=120)
    assert result["stopReason"] == "end_turn"
    requests = fake.requests
    assert len(requests) == len(calls) + 1
    # Request i (i >= 1) ends with the result of call i - 1.
    return [request.body["messages"][-1]["content"] for request in requests[1:]]


@pytest.fixture
async def client(start_server) -> ParleyClient:
    started = await start_server()
    await started.initialize()
    started.permission_handler = allow_all
    return started


async def test_eval_keeps_state_prints_raises_and_last_error(client, fake, project) -> None:
    results = await run_calls(
        client,
        fake,
        project,
        [
            call("python_eval", code="6 * 7"),
            call("python_eval", code="x = 20\nprint('x is', x)"),
            call("python_eval", code="x + 1"),
            call("python_eval", code="1 / 0"),
            call("python_last_error"),
            call("python_eval", code="import geometry\ngeometry.area(3, 4)"),
        ],
    )
    assert "42" in results[0]
    assert "x is 20" in results[1]
    assert "21" in results[2]  # the namespace persisted between calls
    assert "ZeroDivisionError" in results[3] and "Traceback" in results[3]
    assert "ZeroDivisionError" in results[4]
    assert "12" in results[5]  # the workspace's own modules import by name
    assert len(client.permission_requests) == 5  # each eval asked (allowed once each time)


async def test_timeouts_deaths_and_runaway_output_leave_a_usable_kernel(
    client, fake, project
) -> None:
    results = await run_calls(
        client,
        fake,
        project,
        [
            call("python_eval", code="y = 5"),
            call("python_eval", code="while True:\n    pass"),
            call("python_eval", code="y"),
            call("python_eval", code="import os\nos._exit(1)"),
            call("python_eval", code="y"),
            call("python_eval", code="blob = bytearray(10**11)"),
            call("python_eval", code="print('z' * 1_000_000)"),
            call("python_eval", code="'still here'"),
        ],
        evalTimeoutSeconds=1.5,
    )
    assert "time limit" in results[1]
    assert "5" in results[2]  # interrupted, not killed: the namespace survived
    assert "died" in results[3] and "namespace was lost" in results[3]
    assert "NameError" in results[4]  # a fresh kernel
    assert "MemoryError" in results[5]
    assert "more characters cut" in results[6] and len(results[6]) < 30_000
    assert "still here" in results[7]


async def test_introspection_on_the_workspace_code(client, fake, project) -> None:
    results = await run_calls(
        client,
        fake,
        project,
        [
            call("python_describe", target="geometry.area"),
            call("python_source", target="geometry.Shape"),
            call("python_members", target="geometry.Shape"),
            call("python_apropos", pattern="^are", package="geometry"),
            call("python_who_calls", name="area"),
        ],
    )
    describe, source, members, apropos, callers = results
    assert "(width, height)" in describe and "The area of a width x height rectangle." in describe
    assert "geometry.py" in describe
    assert "class Shape" in source and "def describe(self)" in source
    assert "describe" in members and "__init__" in members
    assert "geometry.area" in apropos
    assert "report.py" in callers and "total_area" in callers


async def test_file_tools_stay_inside_the_workspace(client, fake, project) -> None:
    results = await run_calls(
        client,
        fake,
        project,
        [
            call("read_file", path="geometry.py", startLine=4, endLine=5),
            call("list_directory"),
            call("search_files", pattern="def area"),
            call("read_file", path="../secret.txt"),
            call("read_file", path="/etc/passwd"),
            call("read_file", path="escape"),
        ],
    )
    assert "def area(width, height):" in results[0] and "class Shape" not in results[0]
    assert "geometry.py" in results[1] and "report.py" in results[1]
    assert "geometry.py:4" in results[2]
    for refused in results[3:]:
        assert "outside the workspace" in refused
        assert "TOP-SECRET-CONTENT" not in refused


async def test_a_rejected_eval_never_runs(start_server, fake, project) -> None:
    client = await start_server()
    await client.initialize()  # the default handler rejects every permission request
    marker = project / "written.txt"
    results = await run_calls(
        client,
        fake,
        project,
        [call("python_eval", code=f"open({str(marker)!r}, 'w').write('x')")],
    )
    assert "rejected" in results[0]
    assert not marker.exists()
    (asked,) = client.permission_requests
    assert asked["toolCall"]["kind"] == "execute"


async def test_the_kernel_ends_with_its_session(client, fake, project) -> None:
    (result,) = await run_calls(
        client, fake, project, [call("python_eval", code="import os\nf'pid={os.getpid()}'")]
    )
    assert re.search(r"pid=(\d+)", result)
    # The kernel's processes, found by its command line (in the sandbox, its own pid is its
    # namespace's, not this machine's).
    assert kernel_processes(project)
    session = (await client.request("session/list", {}))["sessions"][0]["sessionId"]
    await client.request("session/delete", {"sessionId": session})
    for _ in range(50):
        if not kernel_processes(project):
            break
        await asyncio.sleep(0.1)
    assert not kernel_processes(project)


def kernel_processes(project: Path) -> list[int]:
    """The live processes whose command line names `--root project` (the kernel, bwrap)."""
    marker = f"--root\0{project}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and marker in (entry / "cmdline").read_bytes()
                and "State:\tZ" not in (entry / "status").read_text()  # a zombie has exited
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
