"""A rejection with the user's words for the model, over the wire: an editor written with the
official ACP Python SDK answers `session/request_permission` with "Reject" and
`_meta.parley.note` (ACP's response has no field for it; docs/protocol.md), and the model's
next request (the fake LLM's record) carries the note in the rejected call's result, its
control characters dropped. `parley serve` runs as a subprocess."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
)
from acp_client import EditorClient, acp_server
from conftest import server_env
from parley.agent.tool_permission import NOTE_FROM_USER, REJECTED
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

NOTE = "use pathlib instead\x1b[2J"


class RejectingWithNote(EditorClient):
    """The user rejects each call, saying why."""

    async def request_permission(
        self,
        options: list[PermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="reject_once"),
            field_meta={"parley": {"note": NOTE}},
        )


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


async def test_the_model_reads_the_users_note_in_the_rejected_calls_result(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    evaluate = ScriptedToolCall("python_eval", {"code": "import os; print(os.getcwd())"})
    fake.set_script([Reply(tool_calls=(evaluate,)), Reply(text="With pathlib, then.")])
    editor = RejectingWithNote()
    async with acp_server(acp_env, editor) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(workspace))).session_id
        await run.conn.prompt(
            session_id=session_id, prompt=[TextContentBlock(type="text", text="Where am I?")]
        )
        assert len(editor.permission_requests) == 1
        results = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
        told = results[-1]["content"]
        assert told == f"{REJECTED} {NOTE_FROM_USER} use pathlib instead[2J", told
        assert "With pathlib, then." in editor.text_of(session_id)
        run.recording.assert_conformant()
