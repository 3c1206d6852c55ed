"""`session/fork` (the session-fork RFD, in ACP's unstable schema): advertised in
`sessionCapabilities`; a new session with the parent's history, model, mode and roots,
independent from then on — its own turns, its own checkpoints (`/undo` in either undoes only
its own edits), listed as a fork of its parent, loaded with its own history. Over the wire
with the official ACP SDK client; every message checked, the fork's answer against the
unstable schema's `ForkSessionResponse`."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import text_block
from acp_client import AcpRun, acp_server
from conftest import server_env
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall

UNUSED = Reply(text="(not reached)")


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


def write(path: str) -> Reply:
    return Reply(tool_calls=(ScriptedToolCall("write_file", {"path": path, "content": "x\n"}),))


def sent(fake: FakeLLM) -> str:
    """What the model was sent last."""
    return json.dumps(fake.requests[-1].body)


async def say(run: AcpRun, session_id: str, text: str) -> None:
    await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])


def user_words(run: AcpRun, session_id: str) -> list[str]:
    return [
        u["content"].get("text", "")
        for u in run.recording.raw_updates(session_id, "user_message_chunk")
    ]


async def test_a_fork_has_the_history_and_settings_and_goes_its_own_way(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    async with acp_server(acp_env) as run:
        initialized = await run.initialize()
        assert initialized.agent_capabilities.session_capabilities.fork is not None
        parent = (await run.conn.new_session(cwd=str(workspace))).session_id
        await run.conn.set_session_mode(session_id=parent, mode_id="accept_edits")
        fake.set_script([write("a.txt"), Reply(text="Wrote a.")])
        await say(run, parent, "Write a.")

        forked = await run.conn.fork_session(session_id=parent, cwd=str(workspace))
        fork = forked.session_id
        assert fork != parent
        assert forked.modes is not None and forked.modes.current_mode_id == "accept_edits"
        assert run.recording.raw_updates(fork, "user_message_chunk") == []  # nothing replayed

        # The fork's model sees the parent's conversation; its edit is its own turn.
        fake.set_script([UNUSED, UNUSED, write("b.txt"), Reply(text="Wrote b.")])
        await say(run, fork, "Write b.")
        assert "Write a." in sent(fake) and "Wrote a." in sent(fake)
        assert run.editor.permission_requests == []  # the mode came along: edits unasked
        # The parent goes on without the fork's turn.
        fake.set_script([UNUSED, UNUSED, Reply(text="Parent goes on.")])
        await say(run, parent, "Go on.")
        assert "Write b." not in sent(fake) and "Write a." in sent(fake)

        # Each /undo undoes its own session's edits only.
        await say(run, fork, "/undo")
        assert not (workspace / "b.txt").exists() and (workspace / "a.txt").exists()
        await say(run, parent, "/undo")
        assert not (workspace / "a.txt").exists()

        listed = {s.session_id: s.title for s in (await run.conn.list_sessions()).sessions}
        assert listed[fork] == f"{listed[parent]} (fork)"
        with pytest.raises(RequestError) as unknown:
            await run.conn.fork_session(session_id="sess_nobody", cwd=str(workspace))
        assert unknown.value.code == -32002  # ACP's resource not found
        run.recording.assert_conformant()

    async with acp_server(acp_env) as again:
        await again.initialize()
        await again.conn.load_session(session_id=fork, cwd=str(workspace))
        await again.conn.load_session(session_id=parent, cwd=str(workspace))
        assert user_words(again, fork) == ["Write a.", "Write b.", "/undo"]
        assert user_words(again, parent) == ["Write a.", "Go on.", "/undo"]
        again.recording.assert_conformant()


async def test_a_fork_of_a_session_never_prompted_takes_its_settings(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "n.txt").write_text("IN THE OTHER ROOT\n")
    async with acp_server(acp_env) as run:
        await run.initialize()
        parent = (await run.conn.new_session(cwd=str(workspace))).session_id
        await run.conn.set_session_mode(session_id=parent, mode_id="plan")
        forked = await run.conn.fork_session(
            session_id=parent, cwd=str(workspace), additional_directories=[str(other)]
        )
        assert forked.modes is not None and forked.modes.current_mode_id == "plan"
        fake.set_script(
            [
                Reply(tool_calls=(ScriptedToolCall("read_file", {"path": str(other / "n.txt")}),)),
                Reply(text="Listed."),
            ]
        )
        await say(run, forked.session_id, "Read the other root's file.")
        # The roots are the ones the fork was asked for: the other root is readable.
        results: list[Any] = [m for m in fake.requests[-1].body["messages"] if m["role"] == "tool"]
        assert "IN THE OTHER ROOT" in str(results[-1]["content"])
        run.recording.assert_conformant()


async def test_a_session_whose_turn_runs_is_not_forked_meanwhile(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    slow = Pacing(chunks_per_second=5)  # the turn is still streaming when the fork asks
    fake.set_script([Reply(text="First."), Reply(text="A long answer " * 10, pacing=slow)])
    async with acp_server(acp_env) as run:
        await run.initialize()
        parent = (await run.conn.new_session(cwd=str(workspace))).session_id
        await say(run, parent, "Hello.")
        running = asyncio.ensure_future(say(run, parent, "Go on at length."))
        streamed = len(run.editor.updates_of(parent, "agent_message_chunk"))
        async with asyncio.timeout(10):
            while len(run.editor.updates_of(parent, "agent_message_chunk")) == streamed:
                await asyncio.sleep(0.01)
        # A copy made now could hold half a turn: refused, as a second prompt would be.
        with pytest.raises(RequestError) as busy:
            await run.conn.fork_session(session_id=parent, cwd=str(workspace))
        assert busy.value.code == -32003
        await run.conn.cancel(session_id=parent)
        await running
        forked = await run.conn.fork_session(session_id=parent, cwd=str(workspace))
        assert forked.session_id != parent  # once it ended, the fork is made
        run.recording.assert_conformant()
