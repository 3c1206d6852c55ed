"""Issue 10's acceptance: `parley serve` in a hostile repository, with a client that rejects
every permission request. Whatever the model asks for, nothing from the workspace runs, no
tool reads outside it, and the server keeps answering other sessions.

The workspace holds a trap for each way code could run or a read could escape: modules that
write a marker when imported (one shadowing the standard library's `decimal`), a
`.git/config` whose `core.fsmonitor` runs a command, a `.venv/bin/python` that writes a marker
when started, symlinks and a hard link to a file outside, a FIFO, and a file on which a
catastrophic regular expression backtracks for ever.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient, reject_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

SECRET = "OUTSIDE-SECRET-0xC0FFEE"


def _marker_writer(marker: Path, name: str) -> str:
    """Python source that records, in `marker`, that `name` ran."""
    return f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n"


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "repo"
    root.mkdir()
    marker = tmp_path / "ran.txt"
    outside = tmp_path / "outside-secret.txt"
    outside.write_text(SECRET + "\n")

    (root / "evil.py").write_text(
        _marker_writer(marker, "evil imported") + "def helper(x):\n    return x\n"
    )
    (root / "decimal.py").write_text(
        _marker_writer(marker, "decimal shadow imported") + "class Decimal:\n    pass\n"
    )
    pkg = root / "trap"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(_marker_writer(marker, "trap package imported"))
    (pkg / "core.py").write_text(
        _marker_writer(marker, "trap.core imported") + "def area(w, h):\n    return w * h\n"
    )

    # The workspace's own interpreter: starting it at all is running the repository's code.
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fake_python = venv_bin / "python"
    fake_python.write_text(f"#!/bin/sh\necho 'workspace python started' >> {marker}\nexit 1\n")
    fake_python.chmod(0o755)

    # A repository whose configuration runs a command whenever git looks at the work tree.
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        hook = tmp_path / "fsmonitor.sh"
        hook.write_text(f"#!/bin/sh\necho 'fsmonitor ran' >> {marker}\n")
        hook.chmod(0o755)
        subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", str(hook)], check=True)
    (root / ".gitignore").write_text("ignored_dir/\n")
    (root / "ignored_dir").mkdir()
    (root / "ignored_dir" / "hidden.py").write_text("area = 'ignored'\n")

    (root / "link_out.txt").symlink_to(outside)
    os.link(outside, root / "hardlink.txt")
    os.mkfifo(root / "pipe.txt")
    (root / "backtrack.txt").write_text("a" * 5000 + "b\n")
    return {"root": root, "marker": marker, "outside": outside}


def call(tool: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool, arguments)


HOSTILE_CALLS = [
    call("python_describe", target="evil.helper"),
    call("python_describe", target="decimal.Decimal"),
    call("python_describe", target="antigravity"),
    call("python_source", target="trap.core.area"),
    call("python_members", target="trap"),
    call("python_apropos", pattern="area", package="trap"),
    call("python_who_calls", name="area"),
    call("python_last_error"),
    call("list_directory", path="."),
    call("search_files", pattern="area"),
    call("read_file", path="link_out.txt"),
    call("read_file", path="hardlink.txt"),
    call("read_file", path="pipe.txt"),
    call("read_file", path="../outside-secret.txt"),
    call("python_eval", code="import evil"),  # asks; the client rejects
]


async def test_nothing_runs_and_nothing_leaks_with_every_permission_rejected(
    start_server, fake: FakeLLM, hostile: dict[str, Path]
) -> None:
    client: ParleyClient = await start_server()
    await client.initialize()
    client.permission_handler = reject_all
    fake.set_script([Reply(tool_calls=(c,)) for c in HOSTILE_CALLS] + [Reply(text="Done.")])
    session = await client.new_session(str(hostile["root"]), toolPolicy="sync")

    result = await client.prompt(session, "Look around.", timeout=120)

    assert result["stopReason"] == "end_turn"
    assert not hostile["marker"].exists(), hostile["marker"].read_text()
    sent_back = [str(r.body["messages"][-1]["content"]) for r in fake.requests[1:]]
    assert len(sent_back) == len(HOSTILE_CALLS)
    for tool_call, answer in zip(HOSTILE_CALLS, sent_back, strict=True):
        assert SECRET not in answer, (tool_call.name, tool_call.arguments)
    # The static answers are real answers, not refusals.
    assert "helper" in sent_back[0]
    assert "return w * h" in sent_back[3]
    # .gitignore is honoured without git.
    search = sent_back[9]
    assert "trap/core.py" in search and "ignored_dir" not in search
    # Only the evaluation asked, and it was rejected.
    assert [p["toolCall"]["rawInput"].get("code") for p in client.permission_requests] == [
        "import evil"
    ]
    assert "reject" in sent_back[-1].lower()


async def test_a_catastrophic_search_does_not_stop_other_sessions(
    start_server, fake: FakeLLM, hostile: dict[str, Path]
) -> None:
    client: ParleyClient = await start_server()
    await client.initialize()
    fake.set_script(
        [Reply(tool_calls=(call("search_files", pattern="(a+)+$"),)), Reply(text="Done.")]
    )
    searching = await client.new_session(str(hostile["root"]), toolPolicy="sync")
    turn = asyncio.ensure_future(client.prompt(searching, "Search.", timeout=120))
    await client.wait_for_update(
        searching,
        lambda u: u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "in_progress",
        timeout=30,
    )

    # While the search backtracks, the server answers the other session at once.
    started = time.monotonic()
    await client.request("_parley/models", {}, timeout=10)
    await client.new_session(str(hostile["root"]))
    answered_in = time.monotonic() - started

    result = await turn
    assert result["stopReason"] == "end_turn"
    assert answered_in < 5
    search_result = str(fake.requests[1].body["messages"][-1]["content"])
    assert "too long" in search_result.lower() or "time" in search_result.lower()
    assert not hostile["marker"].exists()
