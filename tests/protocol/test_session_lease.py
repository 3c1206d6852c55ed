"""One session in two windows: two `parley serve` processes on one PARLEY_HOME.

A turn holds its session through a lease in the store, so the other window is refused
(`-32003`, with a sentence) instead of interleaving a turn; a window that is behind takes in
and shows the turns it missed before its next prompt; a deleted session is `-32002`; a dead
or expired holder is taken over.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from parley.fakellm import FakeLLM, Fault, Reply
from pygls.exceptions import JsonRpcException
from test_sessions import kill_mid, load, shown, started

# A turn that runs for as long as the test needs: its role chunk and first word, then nothing
# until `fake.release()` (or the server hangs up), then the rest at once.
SLOW = Reply(text="slow " * 400, fault=Fault("hold", after_chunks=2))


def stored_roles_and_texts(home: Path, session: str) -> list[tuple[str, str]]:
    database = sqlite3.connect(home / "parley.db")
    rows = database.execute(
        "SELECT role, body FROM messages WHERE session_id = ? ORDER BY seq", (session,)
    ).fetchall()
    database.close()
    out = []
    for role, body in rows:
        data = json.loads(body)
        out.append((role, data["content"][0]["text"] if role == "user" else data.get("text", "")))
    return out


async def two_windows(start_server, fake: FakeLLM, workspace: Path, home: Path):
    """Window A creates a session with one turn; window B loads it."""
    window_a = await started(start_server, home)
    window_b = await started(start_server, home)
    fake.set_script([Reply(text="First answer.")])
    session = await window_a.new_session(str(workspace))
    await window_a.prompt(session, "First question")
    await load(window_b, session, workspace)
    return window_a, window_b, session


async def test_a_prompt_while_another_window_runs_a_turn_is_refused_not_interleaved(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    window_a, window_b, session = await two_windows(start_server, fake, workspace, home)
    fake.set_script([SLOW])
    running = asyncio.ensure_future(window_a.prompt(session, "Long one"))
    await window_a.wait_for_update(session, lambda u: "slow" in json.dumps(u), timeout=30)

    with pytest.raises(JsonRpcException) as refused:
        await window_b.prompt(session, "Meanwhile")
    assert refused.value.code == -32003
    assert "busy in another window" in refused.value.message
    with pytest.raises(JsonRpcException) as refused_here:
        await window_a.prompt(session, "Me again")
    assert refused_here.value.code == -32003  # the same window: busy too, never -32000
    with pytest.raises(JsonRpcException) as refused_delete:
        await window_b.request("session/delete", {"sessionId": session})
    assert refused_delete.value.code == -32003

    fake.release()  # A's turn ends
    assert (await asyncio.wait_for(running, 60))["stopReason"] == "end_turn"
    assert [role for role, _ in stored_roles_and_texts(home, session)] == ["user", "assistant"] * 2
    assert "Meanwhile" not in json.dumps(stored_roles_and_texts(home, session))
    assert "Me again" not in json.dumps(stored_roles_and_texts(home, session))
    assert "Meanwhile" not in json.dumps([r.body for r in fake.requests])  # nor the model

    # Once A's turn is over, B may prompt.
    fake.set_script([Reply(text="Now it is your turn.")])
    assert (await window_b.prompt(session, "Meanwhile"))["stopReason"] == "end_turn"


async def test_a_window_that_is_behind_takes_in_and_shows_the_turns_it_missed(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    window_a, window_b, session = await two_windows(start_server, fake, workspace, home)
    fake.set_script([Reply(text="Answer given in A.")])
    await window_a.prompt(session, "Question asked in A")
    before = len(window_b.updates_of(session))

    fake.set_script([Reply(text="Answer in B.")])
    await window_b.prompt(session, "Question asked in B")
    sent = fake.requests[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "First question"),
        ("assistant", "First answer."),
        ("user", "Question asked in A"),
        ("assistant", "Answer given in A."),
        ("user", "Question asked in B"),
    ]
    # B's user saw A's turn, before B's own prompt's updates.
    new_in_b = window_b.updates_of(session)[before:]
    users = [u["content"]["text"] for u in new_in_b if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["Question asked in A"]
    assert shown(new_in_b)["text"] == "Answer given in A.Answer in B."

    # And A, behind in turn, catches up with B's turn the same way.
    fake.set_script([Reply(text="Back in A.")])
    await window_a.prompt(session, "Again in A")
    assert [m["content"] for m in fake.requests[-1].body["messages"][-3:]] == [
        "Question asked in B",
        "Answer in B.",
        "Again in A",
    ]


async def test_prompting_a_session_deleted_in_another_window_is_not_found(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    window_a, window_b, session = await two_windows(start_server, fake, workspace, home)
    assert await window_a.request("session/delete", {"sessionId": session}) == {}
    for method, params in (
        ("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        ("_parley/session/configure", {"sessionId": session, "model": "openai:gpt-4.1"}),
        ("session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}),
        ("_parley/usage", {"sessionId": session}),
    ):
        with pytest.raises(JsonRpcException) as missing:
            await window_b.request(method, params)
        assert missing.value.code == -32002, method
        assert "Unknown session" in missing.value.message
    # Deleting it again succeeds silently (ACP advises an idempotent delete).
    assert await window_b.request("session/delete", {"sessionId": session}) == {}
    listed = await window_b.request("session/list", {})
    assert listed["sessions"] == []  # configure did not bring it back


async def test_a_window_killed_mid_turn_is_taken_over(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    window_a, window_b, session = await two_windows(start_server, fake, workspace, home)
    fake.set_script([SLOW])
    running = asyncio.ensure_future(window_a.prompt(session, "Interrupted question"))
    await window_a.wait_for_update(session, lambda u: "slow" in json.dumps(u), timeout=30)
    await kill_mid(window_a)  # its lease stays in the store, its pid is dead
    running.cancel()

    fake.set_script([Reply(text="Taken over.")])
    assert (await window_b.prompt(session, "Still there?"))["stopReason"] == "end_turn"
    sent = [m["content"] for m in fake.requests[-1].body["messages"][1:]]
    assert sent == ["First question", "First answer.", "Interrupted question", "Still there?"]


def set_lease(home: Path, session: str, pid: int, expires_in: float) -> None:
    database = sqlite3.connect(home / "parley.db")
    database.execute(
        "INSERT OR REPLACE INTO leases (session_id, holder, pid, expires_at) VALUES (?, ?, ?, ?)",
        (session, "srv_elsewhere", pid, time.time() + expires_in),
    )
    database.commit()
    database.close()


async def test_a_live_lease_is_respected_and_an_expired_one_taken_over(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    window = await started(start_server, home)
    fake.set_script([Reply(text="ok")])
    session = await window.new_session(str(workspace))
    # A holder that is alive (this test's process stands in for another server) ...
    set_lease(home, session, os.getpid(), expires_in=600)
    with pytest.raises(JsonRpcException) as refused:
        await window.prompt(session, "Blocked")
    assert refused.value.code == -32003
    # ... until its lease runs out without being renewed (a hung server).
    set_lease(home, session, os.getpid(), expires_in=-1)
    assert (await window.prompt(session, "Free again"))["stopReason"] == "end_turn"
    database = sqlite3.connect(home / "parley.db")
    assert database.execute("SELECT COUNT(*) FROM leases").fetchone() == (0,)  # released


async def test_a_restore_is_refused_as_a_prompt_is_and_forgets_a_session_deleted_elsewhere(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """Every lease-holding request decides busy and gone the same way (one lease)."""
    home = tmp_path / "home"
    window_a, window_b, session = await two_windows(start_server, fake, workspace, home)
    fake.set_script([SLOW])
    running = asyncio.ensure_future(window_a.prompt(session, "Long one"))
    await window_a.wait_for_update(session, lambda u: "slow" in json.dumps(u), timeout=30)
    for method in ("_parley/session/restore", "_parley/session/compact"):
        params = {"sessionId": session, "turn": 1} if method.endswith("restore") else {}
        with pytest.raises(JsonRpcException) as refused:
            await window_b.request(method, {"sessionId": session, **params})
        assert refused.value.code == -32003, method
        assert "busy in another window" in refused.value.message
    await load(window_b, session, workspace)  # a load is not refused: it only reads
    window_a.cancel(session)  # (the slow answer is not waited for)
    assert (await asyncio.wait_for(running, 60))["stopReason"] == "cancelled"

    assert await window_a.request("session/delete", {"sessionId": session}) == {}
    with pytest.raises(JsonRpcException) as missing:
        await window_b.request("_parley/session/restore", {"sessionId": session, "turn": 1})
    assert missing.value.code == -32002
    # Window B forgot it, as after a prompt: it is unknown there now, not open.
    with pytest.raises(JsonRpcException) as closed:
        await window_b.request("session/close", {"sessionId": session})
    assert closed.value.code == -32002


async def test_two_prompts_sent_at_once_run_one_turn_and_refuse_the_other(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The lease marks the session busy in this window from the moment it is taken, not
    only once the turn's task runs (before it, the missed turns are shown)."""
    home = tmp_path / "home"
    window = await started(start_server, home)
    fake.set_script([Reply(text="First answer.")])
    session = await window.new_session(str(workspace))
    await window.prompt(session, "First question")
    fake.set_script([Reply(text="One answer."), Reply(text="Another answer.")])
    results = await asyncio.gather(
        window.prompt(session, "Sent at once, one"),
        window.prompt(session, "Sent at once, two"),
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, JsonRpcException)]
    assert [r.code for r in refused] == [-32003]
    assert [role for role, _ in stored_roles_and_texts(home, session)] == ["user", "assistant"] * 2
