"""The client's answers as real clients send them (issue 37, point 1): an editor's answer to
`fs/write_text_file` is a write when it is `null` (the official ACP Python SDK's `None`,
CodeCompanion), `{}` (the TypeScript SDK, agent-shell's acp.el, Zed) or an object with
`_meta` or fields a later version adds; an error response is a failed write. The same holds
for the restore of `/undo`, which writes through the editor too. One place decides:
`parley/protocol/client_answers.py`.

`parley serve` runs as a subprocess; the first test drives it with the official SDK's client
(schema-checked), the others with Parley's raw client answering each shape.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from acp.schema import TextContentBlock
from acp_client import EditorClient, acp_server
from conftest import server_env
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.server import ParleyServer
from pygls.exceptions import JsonRpcInternalError

BEFORE = "first words\n"
AFTER = "second words\n"

# What each real client answers to a write it made (read from their code).
ANSWER_SHAPES: dict[str, Any] = {
    "python-sdk-none (CodeCompanion's null)": None,
    "typescript-sdk, acp.el, zed": {},
    "with _meta": {"_meta": {"zed.dev/saved": True}},
    "a later version's fields": {"savedAt": "2026-11-28T00:00:00Z", "bytes": 13},
}


class NoneAnsweringEditor(EditorClient):
    """An editor written with the official Python SDK whose write handler returns `None`,
    which the SDK allows (and sends as `"result": null`)."""

    async def write_text_file(  # type: ignore[override]
        self, content: str, path: str, session_id: str, **kwargs: Any
    ) -> None:
        self.file_writes.append((path, content))
        self.buffers[path] = content
        Path(path).write_text(content)  # saved, as CodeCompanion does


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


def write_then_done(name: str) -> list[Reply]:
    read = ScriptedToolCall("read_file", {"path": name})
    write = ScriptedToolCall("write_file", {"path": name, "content": AFTER})
    return [Reply(tool_calls=(read,)), Reply(tool_calls=(write,)), Reply(text="Done.")]


async def test_an_sdk_editor_answering_none_gets_its_edit_and_its_undo_counted(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    notes = workspace / "notes.txt"
    notes.write_text(BEFORE)
    path = str(notes.resolve())
    editor = NoneAnsweringEditor()
    fake.set_script(write_then_done("notes.txt"))
    async with acp_server(acp_env, editor) as run:
        await run.initialize(read_files=False, write_files=True)
        created = await run.conn.new_session(cwd=str(workspace), mcp_servers=[])
        session_id = created.session_id
        await run.conn.prompt(
            session_id=session_id, prompt=[TextContentBlock(type="text", text="Write it.")]
        )
        statuses = [
            update.status
            for update in editor.updates_of(session_id, "tool_call_update")
            if update.status in ("completed", "failed")
        ]
        assert statuses == ["completed", "completed"], statuses
        assert notes.read_text() == AFTER and editor.file_writes == [(path, AFTER)]
        asked_before = len(editor.permission_requests)

        await run.conn.prompt(
            session_id=session_id, prompt=[TextContentBlock(type="text", text="/undo")]
        )
        said = editor.text_of(session_id)
        assert notes.read_text() == BEFORE
        assert editor.file_writes[-1] == (path, BEFORE)
        assert "could not" not in said.lower(), said
        # The restore asked nothing: the file was as the edit left it.
        assert len(editor.permission_requests) == asked_before
        run.recording.assert_conformant()


async def editor_answering(start_server: Any, answer: Any) -> ParleyClient:
    """A raw client whose editor writes (and saves) the file, then answers `answer`; an
    exception instance is sent as an error response."""
    client: ParleyClient = await start_server()

    def write(params: dict[str, Any]) -> Any:
        if isinstance(answer, Exception):
            raise answer
        Path(params["path"]).write_text(params["content"])
        return answer

    client.feature("fs/write_text_file")(write)
    capabilities = {"fs": {"readTextFile": False, "writeTextFile": True}}
    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "e"}},
    )
    client.permission_handler = allow_all
    return client


@pytest.mark.parametrize("shape", list(ANSWER_SHAPES))
async def test_every_real_clients_answer_to_a_write_is_a_write(
    start_server: Any, fake: FakeLLM, workspace: Path, shape: str
) -> None:
    notes = workspace / "notes.txt"
    notes.write_text(BEFORE)
    client = await editor_answering(start_server, ANSWER_SHAPES[shape])
    session = await client.new_session(str(workspace))
    fake.set_script(write_then_done("notes.txt"))
    await client.prompt(session, "Write it.")
    finished = [
        update["status"]
        for update in client.updates_of(session, "tool_call_update")
        if update.get("status") in ("completed", "failed")
    ]
    assert finished == ["completed", "completed"]
    assert client.text_of(session).endswith("Done.")

    result = await client.request("_parley/session/restore", {"sessionId": session, "turn": 1})
    assert "failed" not in result, result
    assert [Path(f["path"]).name for f in result["files"]] == ["notes.txt"]
    assert notes.read_text() == BEFORE


async def test_an_error_answer_is_a_failed_write_and_a_failed_restore(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    notes = workspace / "notes.txt"
    notes.write_text(BEFORE)
    client = await editor_answering(start_server, JsonRpcInternalError("the buffer is read-only"))
    session = await client.new_session(str(workspace))
    fake.set_script(write_then_done("notes.txt"))
    await client.prompt(session, "Write it.")
    finished = [
        update["status"]
        for update in client.updates_of(session, "tool_call_update")
        if update.get("status") in ("completed", "failed")
    ]
    assert finished == ["completed", "failed"]
    assert notes.read_text() == BEFORE


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(answer=json_values)
def test_a_write_counts_when_the_answer_is_null_or_an_object(answer: Any) -> None:
    """ParleyServer.write_text_file over any JSON answer: `null` or an object is a write,
    anything else raises (the edit tool then reports the edit as not made)."""

    async def request(method: str, params: Any, timeout: float | None = None) -> Any:
        return json.loads(json.dumps(answer))

    server = SimpleNamespace(protocol=SimpleNamespace(request=request))
    writing = ParleyServer.write_text_file(server, "s", "/w/a.py", "text")  # type: ignore[arg-type]
    if answer is None or isinstance(answer, dict):
        asyncio.run(writing)
    else:
        with pytest.raises(ValueError, match="fs/write_text_file was"):
            asyncio.run(writing)
