"""ACP's `cancelled` outcome to a permission question (CodeCompanion's Cancel button answers
it without `session/cancel`) ends the turn as a cancel would: the call not run, no further
model call, `stopReason: "cancelled"`, and a history the next prompt can go on from.
Driven by the official ACP Python SDK client (tests/acp_client.py), schema-checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from acp.helpers import text_block
from acp_client import EditorClient, acp_server
from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


async def test_a_cancelled_answer_ends_the_turn_unrun_and_unbilled(
    fake: FakeLLM, acp_env: dict[str, str], workspace: Path
) -> None:
    marker = workspace / "ran.txt"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    fake.set_script(
        [
            Reply(
                text="Let me run it.", tool_calls=(ScriptedToolCall("python_eval", {"code": code}),)
            ),
            Reply(text="The user rejected it, so here is another way."),  # must never be asked
            Reply(text="Fresh answer."),
        ]
    )
    editor = EditorClient()
    editor.permission_answer = None  # the Cancel button: {"outcome": "cancelled"}
    async with acp_server(acp_env, editor) as run:
        await run.initialize()
        session = (await run.conn.new_session(cwd=str(workspace))).session_id
        result = await run.conn.prompt(session_id=session, prompt=[text_block("Run it.")])
        assert result.stop_reason == "cancelled"
        assert len(editor.permission_requests) == 1
        assert not marker.exists()  # the call was not run
        model_calls = len(fake.requests)
        assert "another way" not in editor.text_of(session)
        failed = [
            u
            for u in run.recording.raw_updates(session, "tool_call_update")
            if u.get("status") == "failed"
        ]
        assert failed and "cancelled" in failed[-1]["content"][0]["content"]["text"]

        # The session goes on: the next prompt's request is one the provider accepts.
        editor.permission_answer = "allow_once"
        again = await run.conn.prompt(session_id=session, prompt=[text_block("Just answer.")])
        assert again.stop_reason == "end_turn"
        run.recording.assert_conformant()
    # Only the round that asked, and the next prompt's: no paid round after the Cancel.
    assert model_calls <= 2 and len(fake.requests) == model_calls + 1
