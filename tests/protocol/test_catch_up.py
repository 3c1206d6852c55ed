"""A window that is behind catches up in a way every ACP client renders correctly: an ACP
client that knows nothing of Parley (the official Python SDK's) is told in one notice to
reload, never sent the other window's turn as chunks of the reply to its own prompt; Parley's
own clients are shown the missed turn in place. The model sees it either way."""

from __future__ import annotations

import os
from pathlib import Path

from acp.helpers import text_block
from acp_client import acp_server
from conftest import server_env
from parley.agent import notices
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply


async def test_a_generic_client_is_told_to_reload_and_its_reply_is_only_its_own(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {**os.environ, **server_env(fake, home)}
    fake.set_script([Reply(text="First answer."), Reply(text="A's answer."), Reply(text="B's.")])
    async with acp_server(env) as generic:
        await generic.initialize()
        session = (await generic.conn.new_session(cwd=str(workspace))).session_id
        await generic.conn.prompt(session_id=session, prompt=[text_block("First.")])

        other: ParleyClient = await start_server(home=home)  # another window, Parley's
        await other.initialize()
        await other.load_session(session, str(workspace))
        await other.prompt(session, "From the other window.")

        before = len(generic.recording.raw_updates(session))
        await generic.conn.prompt(session_id=session, prompt=[text_block("From this one.")])
        reply = generic.recording.raw_updates(session)[before:]
        generic.recording.assert_conformant()

    kinds = [update["sessionUpdate"] for update in reply]
    assert "user_message_chunk" not in kinds  # no other window's prompt inside this reply
    texts = [u["content"]["text"] for u in reply if u["sessionUpdate"] == "agent_message_chunk"]
    assert texts[0] == (  # one turn: "see it here" (issue 37: it said "see them")
        "This session changed in another window: a turn was added there, which the model "
        "sees. Reload the session to see it here.\n\n"
    )
    assert "".join(texts[1:]) == "B's."  # the reply is this prompt's answer only
    assert "A's answer." not in "".join(texts)
    sent = str(fake.requests[-1].body)
    assert "From the other window." in sent and "A's answer." in sent  # the model sees it


async def test_parleys_own_client_sees_the_missed_turn_in_place(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    fake.set_script([Reply(text="First answer."), Reply(text="A's answer."), Reply(text="B's.")])
    this: ParleyClient = await start_server(home=home)
    await this.initialize()
    session = await this.new_session(str(workspace))
    await this.prompt(session, "First.")
    other: ParleyClient = await start_server(home=home)
    await other.initialize()
    await other.load_session(session, str(workspace))
    await other.prompt(session, "From the other window.")
    await this.prompt(session, "From this one.")
    users = [u["content"]["text"] for u in this.updates_of(session, "user_message_chunk")]
    assert users == ["From the other window."]  # replayed in place, before this reply
    assert this.text_of(session).endswith("A's answer.B's.")


def test_the_notice_counts_the_turns_it_names() -> None:
    assert notices.changed_elsewhere(3).text == (
        "This session changed in another window: 3 turns were added there, which the model "
        "sees. Reload the session to see them here.\n\n"
    )
