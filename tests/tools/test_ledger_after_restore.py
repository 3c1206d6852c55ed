"""After `/undo` the file ledger follows the restore (issue 37): the next edit's diff is shown
against the file as the undo left it, not the text Parley wrote before it, and the model is
asked to read a restored file again before editing it (its picture of it is older than the
file now). Over the wire with the official ACP SDK client, schema-checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from acp.helpers import text_block
from acp_client import acp_server
from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=(ScriptedToolCall(name, arguments),))


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


async def test_the_edit_after_an_undo_is_shown_against_the_file_as_it_is_now(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    notes = workspace / "notes.txt"
    notes.write_text("alpha\n")
    fake.set_script(
        [
            call("read_file", path="notes.txt"),
            call("edit_file", path="notes.txt", old_text="alpha", new_text="alpha\nadded"),
            Reply(text="Added."),
            # After the undo the model edits without reading the file again.
            call("edit_file", path="notes.txt", old_text="alpha", new_text="beta"),
            Reply(text="Refused: I read it first."),
            call("read_file", path="notes.txt"),
            call("edit_file", path="notes.txt", old_text="alpha", new_text="beta"),
            Reply(text="Done."),
        ]
    )
    async with acp_server(acp_env) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(workspace))).session_id
        run.editor.permission_answer = "allow_once"
        for text in ("Add a line.", "/undo"):
            await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        assert notes.read_text() == "alpha\n"
        shown = len(run.recording.raw_updates(session_id, "tool_call_update"))
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Rename it.")])
        updates = run.recording.raw_updates(session_id, "tool_call_update")[shown:]
        diffs = [c for u in updates for c in u.get("content") or [] if c["type"] == "diff"]
        # The preview is the file as the undo left it: no "added" line in it.
        assert diffs and diffs[0]["oldText"] == "alpha\n" and diffs[0]["newText"] == "beta\n"
        refused = [u for u in updates if u.get("status") == "failed"]
        assert "has not been read in this session" in str(refused)
        assert notes.read_text() == "alpha\n"
        asked = len(run.editor.permission_requests)
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Read it, then do it.")])
    assert notes.read_text() == "beta\n"
    (question,) = run.editor.permission_requests[asked:]
    ((diff,),) = [[c for c in question.content or [] if c.type == "diff"]]
    assert diff.old_text == "alpha\n" and diff.new_text == "beta\n"
    run.recording.assert_conformant()
