"""Undo that can't strand a session or lose the user's work (issue 22, item 4).

Over the wire (`parley serve` as a subprocess, the fake LLM scripting the edit tools, the
test client answering the permission questions): Stop pressed while `/undo` asks ends it
`cancelled` and the session goes on; the restore holds the session's lease for as long as it
asks, so another window's turn cannot run meanwhile; restoring an earlier turn asks before
it puts back a file the user changed between the turns undone. In-process, a Hypothesis
property drives the checkpoints through random turns and user edits: a restore that did not
ask never loses a change the user made.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.checkpoints import TurnCheckpoints, restore_turn
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.store import Store
from pygls.exceptions import JsonRpcException
from test_checkpoints import CRLF_FILE, first_turn, journal_edits, stored_session

SESSION_BUSY = -32003


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "crlf.txt").write_bytes(CRLF_FILE)
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def held_question(client: ParleyClient) -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
    """The client holds its answer to the next permission question back: (asked, answer)."""
    loop = asyncio.get_running_loop()
    asked: asyncio.Future[Any] = loop.create_future()
    answer: asyncio.Future[Any] = loop.create_future()

    def hold(params: dict[str, Any]) -> asyncio.Future[Any]:
        if not asked.done():
            asked.set_result(params)
        return answer

    client.permission_handler = hold
    return asked, answer


async def undo_waiting_on_its_question(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> tuple[ParleyClient, str, asyncio.Future[Any], asyncio.Future[Any]]:
    """A session whose turn 1 edited crlf.txt, which the user then changed; `/undo` runs
    and waits on its question about overwriting that change."""
    client, session_id = await first_turn(start_server, fake, root)
    journal_edits(home, session_id, 1, root, {"crlf.txt": b"A"})
    (root / "crlf.txt").write_bytes(b"A, and the user's line")
    asked, answer = held_question(client)
    undoing = asyncio.ensure_future(client.prompt(session_id, "/undo", timeout=60))
    await asyncio.wait_for(asked, 30)
    return client, session_id, undoing, answer


async def test_stop_while_undo_asks_ends_it_cancelled_and_the_session_goes_on(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> None:
    client, session_id, undoing, _ = await undo_waiting_on_its_question(
        start_server, fake, root, home
    )
    client.cancel(session_id)  # the answer never comes: the user pressed Stop instead
    result = await asyncio.wait_for(undoing, 15)
    assert result["stopReason"] == "cancelled"
    assert client.notices_of(session_id)[-1] == (
        "info",
        "Undo of turn 1 cancelled: nothing was restored.",
    )
    assert (root / "crlf.txt").read_bytes() == b"A, and the user's line"

    fake.set_script([Reply(text="Still here.")])
    assert (await client.prompt(session_id, "Go on.", timeout=60))["stopReason"] == "end_turn"
    client.permission_handler = allow_all  # the checkpoints stayed: the undo can be done
    assert (await client.prompt(session_id, "/undo", timeout=30))["stopReason"] == "end_turn"
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE


def lease_expiry(home: Path, session_id: str) -> float | None:
    database = sqlite3.connect(home / "parley.db")
    try:
        row = database.execute(
            "SELECT expires_at FROM leases WHERE session_id = ?", (session_id,)
        ).fetchone()
    finally:
        database.close()
    return None if row is None else row[0]


def expire_lease(home: Path, session_id: str) -> None:
    """As if the lease ran out: its time passed without a renewal."""
    database = sqlite3.connect(home / "parley.db")
    database.execute(
        "UPDATE leases SET expires_at = ? WHERE session_id = ?", (time.time() - 1, session_id)
    )
    database.commit()
    database.close()


async def test_a_restore_holds_the_session_against_other_windows_for_as_long_as_it_asks(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> None:
    _, session_id, undoing, answer = await undo_waiting_on_its_question(
        start_server, fake, root, home
    )
    window_b: ParleyClient = await start_server()  # another window on the same home
    await window_b.initialize()
    await window_b.load_session(session_id, str(root))
    expire_lease(home, session_id)
    # The restore renews its lease (every 10 s) while the user thinks about the question.
    async with asyncio.timeout(25):
        while (lease_expiry(home, session_id) or 0.0) < time.time():
            await asyncio.sleep(0.2)
    with pytest.raises(JsonRpcException) as busy:
        await window_b.prompt(session_id, "Meanwhile, in window B.", timeout=30)
    assert busy.value.code == SESSION_BUSY

    answer.set_result({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert (await asyncio.wait_for(undoing, 30))["stopReason"] == "end_turn"
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    assert lease_expiry(home, session_id) is None  # released
    fake.set_script([Reply(text="Your turn now.")])
    assert (await window_b.prompt(session_id, "Now?", timeout=60))["stopReason"] == "end_turn"


async def test_a_load_while_a_restore_asks_is_refused_and_the_restore_keeps_its_lease(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> None:
    """A load (or resume) in the window whose restore runs is busy, as while its turn runs:
    it neither reopens the session under the restore nor releases the restore's lease."""
    client, session_id, undoing, answer = await undo_waiting_on_its_question(
        start_server, fake, root, home
    )
    for method in ("session/load", "session/resume"):
        with pytest.raises(JsonRpcException) as busy:
            await client.request(
                method, {"sessionId": session_id, "cwd": str(root), "mcpServers": []}
            )
        assert busy.value.code == SESSION_BUSY, method
    assert lease_expiry(home, session_id) is not None  # still the restore's

    answer.set_result({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert (await asyncio.wait_for(undoing, 30))["stopReason"] == "end_turn"
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    await client.load_session(session_id, str(root))  # once it is over, a load works


@pytest.mark.parametrize("note", [None, "keep my line"])
async def test_restoring_an_earlier_turn_asks_about_a_change_made_between_the_turns(
    start_server: Any, fake: FakeLLM, root: Path, note: str | None
) -> None:
    """Turn 1 creates notes.txt; the user adds a line; turn 2 edits the file (keeping the
    line). Restoring turn 1 would remove the user's line: it asks, and rejected, keeps it
    (a rejection with a note for the model, `_meta.parley.note`, too)."""
    notes = root / "notes.txt"
    fake.set_script(
        [
            Reply(
                tool_calls=(
                    ScriptedToolCall("write_file", {"path": "notes.txt", "content": "plan\n"}),
                )
            ),
            Reply(text="Written."),
        ]
    )
    client: ParleyClient = await start_server()
    await client.initialize()
    client.permission_handler = allow_all
    session_id = await client.new_session(str(root))
    await client.prompt(session_id, "Write the plan.", timeout=60)
    notes.write_text("plan\nthe user's own line\n")
    edit = {"path": "notes.txt", "old_text": "plan", "new_text": "better plan"}
    fake.set_script(  # a reply is chosen by the assistant messages before it: turn 1 had two
        [
            *[Reply(text="Written.")] * 2,
            Reply(tool_calls=(ScriptedToolCall("read_file", {"path": "notes.txt"}),)),
            Reply(tool_calls=(ScriptedToolCall("edit_file", edit),)),
            Reply(text="Edited."),
        ]
    )
    await client.prompt(session_id, "Improve it.", timeout=60)
    assert notes.read_text() == "better plan\nthe user's own line\n"

    client.permission_requests.clear()
    client.permission_handler = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "reject_once"},
        **({"_meta": {"parley": {"note": note}}} if note else {}),
    }
    result = await client.request(
        "_parley/session/restore", {"sessionId": session_id, "turn": 1}, timeout=30
    )
    assert result == {
        "files": [],
        "rejected": True,
        "text": "Nothing was restored: you kept your changes to `notes.txt`.",
    }
    (asked,) = client.permission_requests
    assert asked["toolCall"]["locations"] == [{"path": str(notes)}]
    assert notes.read_text() == "better plan\nthe user's own line\n"

    # Undoing turn 2 alone loses nothing of the user's: no question, their line stays.
    await client.prompt(session_id, "/undo", timeout=30)
    assert len(client.permission_requests) == 1
    assert notes.read_text() == "plan\nthe user's own line\n"


# --- the property: a restore that did not ask lost nothing of the user's ---------------------

FILES = ("a.txt", "sub/b.txt")
contents = st.one_of(st.none(), st.sampled_from([b"", b"one", b"two", b"three\r\n"]))
turn_step = st.dictionaries(st.sampled_from(FILES), contents, min_size=1).map(
    lambda edits: ("turn", edits)
)
user_step = st.tuples(st.just("user"), st.sampled_from(FILES), contents)
histories = st.lists(st.one_of(turn_step, user_step), min_size=1, max_size=8).filter(
    lambda steps: any(step[0] == "turn" for step in steps)
)


def put(path: Path, content: bytes | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def users_since(steps: list[Any], start: int, name: str) -> bool:
    """Whether the user changed `name` after step `start`, with the change still there or
    seen by a later turn: replaying, the file is not as Parley last left it when the next
    turn writes it, or at the end."""
    state: bytes | None = None
    parley_left: bytes | None = None
    touched = False  # a turn from `start` on has written it: `parley_left` is known
    changed = False
    for index, step in enumerate(steps):
        if step[0] == "user" and step[1] == name:
            state = step[2]
        elif step[0] == "turn" and name in step[1]:
            if index >= start:
                changed |= touched and state != parley_left
                touched = True
            state = parley_left = step[1][name]
    return changed or (touched and state != parley_left)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=histories, which=st.integers(min_value=0, max_value=7))
def test_a_restore_that_did_not_ask_lost_no_change_of_the_users(
    steps: list[Any], which: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder) / "ws"
        workspace.mkdir()
        store = Store.open_in(Path(folder) / "home")
        try:
            stored_session(store, "sess_p", workspace)
            starts: list[int] = []  # the step index of each turn
            for index, step in enumerate(steps):
                if step[0] == "user":
                    put(workspace / step[1], step[2])
                    continue
                starts.append(index)
                journal = TurnCheckpoints(store, "sess_p", len(starts), workspace)
                for name, content in step[1].items():
                    journal.before_write(workspace / name)
                    put(workspace / name, content)
                    journal.record_written()
            turn = which % len(starts) + 1
            before = {name: read(workspace / name) for name in FILES}
            asked: list[list[str]] = []

            async def reject(turn: int, changed: list[Any]) -> bool:
                asked.append([file.shown for file in changed])
                return False

            result = asyncio.run(restore_turn(store, "sess_p", turn, reject))
            after = {name: read(workspace / name) for name in FILES}
        finally:
            store.close()
        if asked:  # rejected: nothing at all was restored
            assert after == before and result.rejected
            return
        for name in FILES:
            if after[name] != before[name]:
                assert not users_since(steps, starts[turn - 1], name), (name, steps)
