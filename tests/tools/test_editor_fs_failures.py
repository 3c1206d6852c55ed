"""An editor that offers `fs/read_text_file` and `fs/write_text_file` but fails them (issue 22,
item 4): an edit over a buffer the editor cannot give is refused with the reason, never made
over the disk's text (which would replace the buffer's unsaved changes), and a write answered
with anything but `null` or an object is no write (tests/protocol/test_client_answer_shapes.py:
the shapes real clients send).

`parley serve` runs as a subprocess; the test client plays the editor, answering the fs
requests as the test says; the fake LLM scripts the edits.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM
from parley.tools import edits
from parley.tools.base import ToolContext
from parley.tools.registry import ToolRegistry
from parley.tools.server_tools import server_tools
from pygls.exceptions import JsonRpcInternalError
from test_edit_tools import edit, read, tool_results, turns, write

UNSAVED = '"""Shapes."""\n\nUNSAVED = "typed in the editor, not saved"\n'


async def editor_session(
    start_server: Any, workspace: Path, on_read: Any, on_write: Any
) -> tuple[ParleyClient, str]:
    """A server whose client offers the fs methods, answering them with `on_read` and
    `on_write` (each given the request's params)."""
    client: ParleyClient = await start_server()
    client.feature("fs/read_text_file")(on_read)
    client.feature("fs/write_text_file")(on_write)
    await client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
            "clientInfo": {"name": "failing-editor", "version": "1"},
        },
    )
    client.permission_handler = allow_all
    return client, await client.new_session(str(workspace))


async def test_an_edit_whose_buffer_the_editor_cannot_give_is_refused_with_the_reason(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    on_disk = source.read_bytes()
    reads: list[str] = []
    writes: list[dict[str, Any]] = []

    def fail_read(params: Any) -> Any:
        reads.append(params["path"])
        raise JsonRpcInternalError("the buffer is being reverted")

    def take_write(params: Any) -> dict[str, Any]:
        writes.append({"path": params["path"], "content": params["content"]})
        return {}

    fake.set_script(
        turns(
            read("geometry.py"),
            edit("geometry.py", "Shapes.", "Geometric shapes."),
            write("geometry.py", "REPLACED = True\n"),
            write("fresh.py", "NEW = 1\n"),  # a new file: the editor has nothing to give
        )
    )
    client, session_id = await editor_session(start_server, workspace, fail_read, take_write)
    await client.prompt(session_id, "Edit it.", timeout=60)

    told = tool_results(fake)
    for refused in told[1:3]:
        assert refused.startswith("The editor could not give the text of geometry.py (")
        assert "the buffer is being reverted" in refused and "edit was not made" in refused
    assert told[3].startswith("Created fresh.py")
    assert writes == [{"path": str((workspace / "fresh.py").resolve()), "content": "NEW = 1\n"}]
    assert source.read_bytes() == on_disk
    assert len(reads) >= 3  # every edit asked the editor first


async def test_a_write_answered_with_anything_but_null_or_an_object_is_no_write(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    answers: list[Any] = [12345, "ok", [], False, True, {}]
    buffers = {str((workspace / "geometry.py").resolve()): UNSAVED}

    def give_buffer(params: Any) -> dict[str, Any]:
        return {"content": buffers[params["path"]]}

    def answer_write(params: Any) -> Any:
        return answers.pop(0)

    calls = [read("geometry.py")]
    calls += [edit("geometry.py", "UNSAVED", "EDITED") for _ in range(6)]
    fake.set_script(turns(*calls))
    client, session_id = await editor_session(start_server, workspace, give_buffer, answer_write)
    await client.prompt(session_id, "Edit it, until it works.", timeout=60)

    told = tool_results(fake)[1:]
    for bad, said in zip(["12345", "'ok'", "[]", "False", "True"], told, strict=False):
        assert said.startswith("The editor could not write geometry.py:"), said
        assert f"fs/write_text_file was {bad}" in said
    assert told[5].startswith("Edited geometry.py"), told[5]
    statuses = [
        update["status"]
        for update in client.updates_of(session_id, "tool_call_update")
        if update.get("status") in ("completed", "failed")
    ]
    assert statuses == ["completed", *["failed"] * 5, "completed"]


async def test_an_editor_that_does_not_answer_in_time_gets_the_edit_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: the read's timeout shortened, an editor that never answers."""
    monkeypatch.setattr(edits, "EDITOR_READ_SECONDS", 0.2)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")

    class SilentEditor:
        async def read_text_file(self, session_id: str, path: str) -> str:
            await asyncio.sleep(60)
            return ""

        async def write_text_file(self, session_id: str, path: str, content: str) -> None:
            raise AssertionError("an edit over no known text was written")

    editor = SilentEditor()
    tools = ToolRegistry(server_tools(root))
    context = ToolContext("s", "c", root, client_files=editor, client_writes=editor)
    edit_file = tools.get("edit_file")
    assert edit_file is not None
    arguments = {"path": "a.py", "old_text": "A = 1", "new_text": "A = 2"}
    refused = await edit_file.run(arguments, context)
    assert refused.is_error
    assert refused.content.startswith("The editor could not give the text of a.py (no answer in")
    assert (root / "a.py").read_text() == "A = 1\n"
