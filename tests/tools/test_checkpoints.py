"""Checkpoints: what a turn's edits overwrite, kept in the store, and restored byte for byte.

Two levels. The store and `TurnCheckpoints` (the `EditJournal` edit tools call) are driven
directly, the files changed by the test as an edit tool would change them. Over the wire,
`parley serve` runs as a subprocess: a real turn stores the session, then `journal_edits`
(below: the test's stand-in for the edit tools, writing through the same journal into the
server's database) edits files as that turn, and `_parley/session/restore` and `/undo` put
them back, also from a new server process on the same home.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from parley.agent.checkpoints import TurnCheckpoints, restore_turn
from parley.agent.session import now_iso
from parley.client import ParleyClient, allow_all
from parley.core.session_settings import SessionSettings
from parley.fakellm import FakeLLM, Reply
from parley.store import Store, StoredSession
from pygls.exceptions import JsonRpcException

# Bytes an edit must give back exactly: CRLF, no final newline, not UTF-8.
CRLF_FILE = b"first line\r\nsecond line\r\nno final newline"
BINARY_FILE = bytes(range(256)) + b"\xff\xfe tail"


def stored_session(store: Store, session_id: str, cwd: Path) -> None:
    now = now_iso()
    store.save_session(
        StoredSession(
            session_id, str(cwd), None, SessionSettings("openai:m", "hybrid"), {}, 0, 0, now, now
        )
    )


def journal_edits(
    home: Path, session_id: str, turn: int, root: Path, edits: dict[str, bytes | None]
) -> None:
    """Make `edits` (relative path → new bytes; None: delete) as the session's `turn` would
    with the edit tools: each file goes through the turn's journal before it is written."""
    store = Store.open_in(home)
    try:
        journal = TurnCheckpoints(store, session_id, turn, root)
        for relative, content in edits.items():
            path = root / relative
            journal.before_write(path)
            if content is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            journal.record_written()
    finally:
        store.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "crlf.txt").write_bytes(CRLF_FILE)
    (folder / "data.bin").write_bytes(BINARY_FILE)
    (folder / "data.bin").chmod(0o640)
    return folder


@pytest.fixture
def store(tmp_path: Path, root: Path) -> Store:
    opened = Store.open_in(tmp_path / "home")
    stored_session(opened, "sess_1", root)
    yield opened
    opened.close()


async def never_asked(turn: int, changed: list[Any]) -> bool:
    raise AssertionError(f"asked about {changed}")


# --- the store and the journal --------------------------------------------------------------


def test_the_store_keeps_the_first_write_of_a_path_per_turn(store: Store) -> None:
    assert store.keep_checkpoint("sess_1", 1, "/w", "/w/a.py", b"old\x00", 0o644, now_iso())
    assert not store.keep_checkpoint("sess_1", 1, "/w", "/w/a.py", b"newer", 0o600, now_iso())
    assert store.keep_checkpoint("sess_1", 1, "/w", "/w/new.py", None, None, now_iso())
    assert store.keep_checkpoint("sess_1", 2, "/w", "/w/a.py", b"turn 2", 0o644, now_iso())
    store.mark_written("sess_1", 1, "/w/a.py", "abc")
    assert store.last_checkpointed_turn("sess_1") == 2
    newest_first = [
        (c.turn, c.path, c.content, c.mode, c.written) for c in store.checkpoints("sess_1", 1)
    ]
    assert newest_first == [
        (2, "/w/a.py", b"turn 2", 0o644, None),
        (1, "/w/a.py", b"old\x00", 0o644, "abc"),
        (1, "/w/new.py", None, None, None),
    ]
    assert [c.turn for c in store.checkpoints("sess_1", 2)] == [2]
    store.drop_checkpoints("sess_1", 2)
    assert store.last_checkpointed_turn("sess_1") == 1
    assert store.last_checkpointed_turn("sess_unknown") is None


def test_restore_notes_are_given_once(store: Store) -> None:
    assert store.take_restore_note("sess_1") is None
    store.add_restore_note("sess_1", "one")
    store.add_restore_note("sess_1", "two")
    assert store.take_restore_note("sess_1") == "one\ntwo"
    assert store.take_restore_note("sess_1") is None


def test_the_journal_keeps_the_bytes_before_the_turns_first_write(store: Store, root: Path) -> None:
    journal = TurnCheckpoints(store, "sess_1", 1, root)
    path = root / "crlf.txt"
    journal.before_write(path)
    path.write_bytes(b"edited once")
    journal.record_written()
    journal.before_write(path)  # a second edit in the same turn: the first bytes stay
    path.write_bytes(b"edited twice")
    journal.record_written()
    journal.before_write(root / "new" / "made.py")
    (root / "new").mkdir()
    (root / "new" / "made.py").write_bytes(b"x = 1\n")
    journal.record_written()
    kept = {c.path: c for c in store.checkpoints("sess_1", 1)}
    assert kept[str(path)].content == CRLF_FILE
    assert kept[str(path)].written == hashlib.sha256(b"edited twice").hexdigest()
    assert kept[str(root / "new" / "made.py")].content is None
    assert kept[str(root / "new" / "made.py")].written == hashlib.sha256(b"x = 1\n").hexdigest()


# --- restoring ---------------------------------------------------------------------------------


def edit_turn(store: Store, root: Path, turn: int, edits: dict[str, bytes]) -> None:
    journal = TurnCheckpoints(store, "sess_1", turn, root)
    for relative, content in edits.items():
        journal.before_write(root / relative)
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(content)
        journal.record_written()


async def test_a_restore_gives_back_the_exact_bytes_and_removes_created_files(
    store: Store, root: Path
) -> None:
    edit_turn(store, root, 1, {"crlf.txt": b"rewritten\n", "data.bin": b"", "src/made.py": b"new"})
    (root / "data.bin").chmod(0o600)  # as an atomic write with other bits could leave it
    result = await restore_turn(store, "sess_1", 1, never_asked)
    assert result.to_wire() == {
        "files": [
            {"path": str(root / "crlf.txt"), "action": "restored"},
            {"path": str(root / "data.bin"), "action": "restored"},
            {"path": str(root / "src" / "made.py"), "action": "removed"},
        ]
    }
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    assert (root / "data.bin").read_bytes() == BINARY_FILE
    assert (root / "data.bin").stat().st_mode & 0o777 == 0o640
    assert not (root / "src" / "made.py").exists()
    assert sorted(p.name for p in root.iterdir()) == ["crlf.txt", "data.bin", "src"]  # no temp
    assert store.checkpoints("sess_1", 1) == []  # used up: a second restore has nothing
    assert (await restore_turn(store, "sess_1", 1, never_asked)).to_wire() == {"files": []}


async def test_restoring_a_turn_undoes_the_later_turns_too_and_the_oldest_bytes_win(
    store: Store, root: Path
) -> None:
    edit_turn(store, root, 1, {"crlf.txt": b"turn 1"})
    edit_turn(store, root, 2, {"crlf.txt": b"turn 2", "data.bin": b"turn 2"})
    edit_turn(store, root, 3, {"made.txt": b"turn 3"})
    result = await restore_turn(store, "sess_1", 2, never_asked)
    assert [(Path(f.path).name, f.action) for f in result.files] == [
        ("crlf.txt", "restored"),
        ("data.bin", "restored"),
        ("made.txt", "removed"),
    ]
    assert (root / "crlf.txt").read_bytes() == b"turn 1"
    assert (root / "data.bin").read_bytes() == BINARY_FILE
    assert store.last_checkpointed_turn("sess_1") == 1
    await restore_turn(store, "sess_1", 1, never_asked)
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE


async def test_a_file_the_user_changed_is_restored_only_when_they_say_so(
    store: Store, root: Path
) -> None:
    edit_turn(store, root, 1, {"crlf.txt": b"by Parley", "data.bin": b"by Parley"})
    (root / "crlf.txt").write_bytes(b"by Parley, then by the user")
    asked: list[list[str]] = []

    async def reject(turn: int, changed: list[Any]) -> bool:
        asked.append([file.shown for file in changed])
        return False

    result = await restore_turn(store, "sess_1", 1, reject)
    assert asked == [["crlf.txt"]]  # data.bin is as Parley left it: not asked about
    assert result.to_wire() == {"files": [], "rejected": True}
    assert (root / "crlf.txt").read_bytes() == b"by Parley, then by the user"
    assert (root / "data.bin").read_bytes() == b"by Parley"  # nothing at all was restored
    assert store.take_restore_note("sess_1") is None

    async def allow(turn: int, changed: list[Any]) -> bool:
        return True

    result = await restore_turn(store, "sess_1", 1, allow)
    assert [f.action for f in result.files] == ["restored", "restored"]
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    assert "crlf.txt (restored)" in (store.take_restore_note("sess_1") or "")


async def test_a_file_already_back_as_it_was_is_not_asked_about(store: Store, root: Path) -> None:
    edit_turn(store, root, 1, {"crlf.txt": b"by Parley", "made.py": b"new"})
    (root / "crlf.txt").write_bytes(CRLF_FILE)  # the user undid it by hand
    (root / "made.py").unlink()
    result = await restore_turn(store, "sess_1", 1, never_asked)
    assert [f.action for f in result.files] == ["restored", "removed"]


async def test_a_file_the_turn_did_not_change_in_the_end_is_left_alone(
    store: Store, root: Path
) -> None:
    journal = TurnCheckpoints(store, "sess_1", 1, root)
    journal.before_write(root / "crlf.txt")  # the write then failed: the file is unchanged
    journal.before_write(root / "never.py")  # nor was this one created
    journal.record_written()
    edit_turn(store, root, 2, {"data.bin": b"turn 2"})
    edit_turn(store, root, 3, {"data.bin": BINARY_FILE})  # turn 3 put it back by itself
    (root / "crlf.txt").write_bytes(b"the user's, later")
    result = await restore_turn(store, "sess_1", 1, never_asked)
    assert result.to_wire() == {"files": []}
    assert (root / "crlf.txt").read_bytes() == b"the user's, later"
    assert store.last_checkpointed_turn("sess_1") is None  # nothing left to undo


async def test_a_restore_never_writes_through_a_symlink_out_of_the_workspace(
    store: Store, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    edit_turn(store, root, 1, {"sub/made.py": b"new", "crlf.txt": b"edited"})
    (root / "sub" / "made.py").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)  # swapped in after the turn
    (outside / "made.py").write_bytes(b"not Parley's")

    async def allow(turn: int, changed: list[Any]) -> bool:
        return True

    result = await restore_turn(store, "sess_1", 1, allow)
    assert [Path(f.path).name for f in result.files] == ["crlf.txt"]
    (failed,) = result.to_wire()["failed"]
    assert failed["path"] == str(root / "sub" / "made.py")
    assert (outside / "made.py").read_bytes() == b"not Parley's"
    assert store.last_checkpointed_turn("sess_1") == 1  # kept, to try again


# --- over the wire -------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


async def first_turn(start_server: Any, fake: FakeLLM, root: Path) -> tuple[ParleyClient, str]:
    """A server, and a session with one turn (stored, turn number 1)."""
    client: ParleyClient = await start_server()
    await client.initialize()
    fake.set_script([Reply(text="Looked.")])
    session_id = await client.new_session(str(root))
    result = await client.prompt(session_id, "Have a look.", timeout=60)
    assert result["_meta"]["parley"]["session"]["turns"] == 1
    return client, session_id


async def test_restore_over_the_wire_and_after_a_restart(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> None:
    client, session_id = await first_turn(start_server, fake, root)
    journal_edits(
        home, session_id, 1, root, {"crlf.txt": b"A", "data.bin": b"B", "pkg/made.py": b"C"}
    )
    await client.stop()

    restarted: ParleyClient = await start_server()  # a new process on the same home
    await restarted.initialize()
    result = await restarted.request(
        "_parley/session/restore", {"sessionId": session_id, "turn": 1}, timeout=30
    )
    assert result == {
        "files": [
            {"path": str(root / "crlf.txt"), "action": "restored"},
            {"path": str(root / "data.bin"), "action": "restored"},
            {"path": str(root / "pkg" / "made.py"), "action": "removed"},
        ],
        "text": "Restored the files of turn 1 as they were before it:\n"
        "- `crlf.txt` restored\n- `data.bin` restored\n"
        "- `pkg/made.py` removed (the turn created it)",
    }
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    assert (root / "data.bin").read_bytes() == BINARY_FILE
    assert not (root / "pkg" / "made.py").exists()
    assert restarted.permission_requests == []  # nothing the user changed: nothing asked
    # The conversation is untouched; the model is told with the next prompt.
    await restarted.load_session(session_id, str(root))
    fake.set_script([Reply(text="Noted.")])
    await restarted.prompt(session_id, "Go on.", timeout=60)
    sent = str(fake.requests[-1].body["messages"])
    assert "Have a look." in sent and "Looked." in sent
    assert "restored files to how they were before turn 1" in sent
    assert "pkg/made.py (removed" in sent and "Go on." in sent
    fake.set_script([Reply(text="Again.")])
    await restarted.prompt(session_id, "Third.", timeout=60)
    assert str(fake.requests[-1].body["messages"]).count("restored files to how") == 1


async def test_restore_asks_before_overwriting_what_the_user_changed(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> None:
    client, session_id = await first_turn(start_server, fake, root)
    journal_edits(home, session_id, 1, root, {"crlf.txt": b"A", "data.bin": b"B"})
    (root / "crlf.txt").write_bytes(b"A, and the user's line")
    result = await client.request(
        "_parley/session/restore", {"sessionId": session_id, "turn": 1}, timeout=30
    )  # the test client rejects every permission request
    assert result == {
        "files": [],
        "rejected": True,
        "text": "Nothing was restored: you kept your changes to `crlf.txt`.",
    }
    (asked,) = client.permission_requests
    assert asked["sessionId"] == session_id
    assert asked["toolCall"]["locations"] == [{"path": str(root / "crlf.txt")}]
    assert "crlf.txt" in str(asked["toolCall"]["content"])
    assert (root / "crlf.txt").read_bytes() == b"A, and the user's line"
    assert (root / "data.bin").read_bytes() == b"B"

    client.permission_handler = allow_all
    result = await client.request(
        "_parley/session/restore", {"sessionId": session_id, "turn": 1}, timeout=30
    )
    assert [file["action"] for file in result["files"]] == ["restored", "restored"]
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    assert result["text"].startswith("Restored the files of turn 1 as they were before it:")
    # Kept as `/undo` is, where it was: a reopened session replays both restores.
    await client.stop()
    again: ParleyClient = await start_server()
    await again.initialize()
    await again.load_session(session_id, str(root))
    commands = [
        (u["sessionUpdate"], u["content"]["text"])
        for u in again.updates[session_id]
        if u.get("_meta", {}).get("parley", {}).get("command")
    ]
    assert commands == [
        ("user_message_chunk", "/undo"),
        ("agent_message_chunk", "Nothing was restored: you kept your changes to `crlf.txt`."),
        ("user_message_chunk", "/undo"),
        ("agent_message_chunk", result["text"]),
    ]
    # Each answer at the level it was said: the rejected one a warning, as live.
    levels = [
        u["_meta"]["parley"].get("level")
        for u in again.updates[session_id]
        if u["sessionUpdate"] == "agent_message_chunk"
        and u.get("_meta", {}).get("parley", {}).get("command")
    ]
    assert levels == ["warning", None]


async def test_undo_restores_the_last_turn_that_edited_files(
    start_server: Any, fake: FakeLLM, root: Path, home: Path
) -> None:
    client, session_id = await first_turn(start_server, fake, root)
    fake.set_script([Reply(text="Looked again.")])
    await client.prompt(session_id, "And again.", timeout=60)
    journal_edits(home, session_id, 1, root, {"crlf.txt": b"turn 1"})
    journal_edits(home, session_id, 2, root, {"crlf.txt": b"turn 2", "made.py": b"new"})
    requests = len(fake.requests)

    result = await client.prompt(session_id, "/undo", timeout=30)
    assert result["stopReason"] == "end_turn"
    reply = client.text_of(session_id)
    assert "Restored the files of turn 2" in reply
    assert "`crlf.txt` restored" in reply and "`made.py` removed" in reply
    assert (root / "crlf.txt").read_bytes() == b"turn 1" and not (root / "made.py").exists()
    await client.prompt(session_id, "/undo", timeout=30)
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    await client.prompt(session_id, "/undo", timeout=30)
    ((level, said),) = client.notices_of(session_id)  # nothing done: a notice says why
    assert level == "info"
    assert said.endswith("no turn of this session has edited files (or they were undone).")
    assert len(fake.requests) == requests  # no model call


async def test_restore_of_an_unknown_session_or_a_turn_without_edits(
    start_server: Any, fake: FakeLLM, root: Path
) -> None:
    client, session_id = await first_turn(start_server, fake, root)
    restore = "_parley/session/restore"
    # Nothing restored, and the words every client shows for it (they compose none).
    assert await client.request(restore, {"sessionId": session_id, "turn": 1}) == {
        "files": [],
        "text": "Turn 1 left no files to restore.",
    }
    assert await client.request(restore, {"sessionId": session_id, "turn": 9}) == {
        "files": [],
        "text": "Turn 9 left no files to restore.",
    }
    with pytest.raises(JsonRpcException) as unknown:
        await client.request(restore, {"sessionId": "sess_nope", "turn": 1})
    assert unknown.value.code == -32002
    for bad in ({"sessionId": session_id, "turn": 0}, {"sessionId": session_id}):
        with pytest.raises(JsonRpcException) as invalid:
            await client.request(restore, bad)
        assert invalid.value.code == -32602
    unprompted = await client.new_session(str(root))
    assert await client.request(restore, {"sessionId": unprompted, "turn": 1}) == {
        "files": [],
        "text": "Nothing to undo: no turn of this session has edited files (or they were undone).",
    }


async def test_the_question_before_an_undo_is_valid_acp(
    fake: FakeLLM, root: Path, home: Path
) -> None:
    """An ACP client (the official SDK) is asked before `/undo` overwrites a file the user
    changed; every message validates against ACP's schema; rejecting keeps the file."""
    from acp.helpers import text_block
    from acp_client import acp_server
    from conftest import server_env

    fake.set_script([Reply(text="Looked.")])
    async with acp_server({**os.environ, **server_env(fake, home)}) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(root))).session_id
        await run.conn.prompt(session_id=session_id, prompt=[text_block("Have a look.")])
        journal_edits(home, session_id, 1, root, {"crlf.txt": b"A", "made.py": b"new"})
        (root / "crlf.txt").write_bytes(b"A, and the user's line")
        run.editor.permission_answer = "reject_once"
        await run.conn.prompt(session_id=session_id, prompt=[text_block("/undo")])
        (asked,) = run.editor.permission_requests
        assert asked.kind == "edit" and [where.path for where in asked.locations or []] == [
            str(root / "crlf.txt")
        ]
        assert "Nothing was restored" in run.editor.text_of(session_id)
        run.editor.permission_answer = "allow_once"
        await run.conn.prompt(session_id=session_id, prompt=[text_block("/undo")])
        assert "`made.py` removed" in run.editor.text_of(session_id)
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE
    assert not (root / "made.py").exists()
    run.recording.assert_conformant()


async def test_a_turn_of_the_edit_tools_is_undone_after_a_restart(
    start_server: Any, fake: FakeLLM, root: Path
) -> None:
    """The real edit tools, scripted by the fake LLM: a turn edits two files and creates a
    third; a new server process restores them byte for byte."""
    pytest.importorskip("parley.tools.edits")  # the edit tools (issue 13's other half)
    from parley.fakellm import ScriptedToolCall

    (root / "one.py").write_bytes(b"def one():\r\n    return 1\r\n")  # CRLF
    (root / "two.py").write_bytes(b"TWO = 2")  # no final newline
    one, two = root / "one.py", root / "two.py"
    before = {one: one.read_bytes(), two: two.read_bytes()}
    fake.set_script(
        [
            Reply(
                tool_calls=(
                    ScriptedToolCall("read_file", {"path": "one.py"}),
                    ScriptedToolCall("read_file", {"path": "two.py"}),
                )
            ),
            Reply(
                tool_calls=(
                    ScriptedToolCall(
                        "edit_file",
                        {"path": "one.py", "old_text": "return 1", "new_text": "return 11"},
                    ),
                    ScriptedToolCall("write_file", {"path": "two.py", "content": "TWO = 22\n"}),
                    ScriptedToolCall("write_file", {"path": "pkg/three.py", "content": "3\n"}),
                )
            ),
            Reply(text="Edited."),
        ]
    )
    client: ParleyClient = await start_server()
    await client.initialize()
    client.permission_handler = allow_all
    session_id = await client.new_session(str(root))
    await client.prompt(session_id, "Edit them.", timeout=120)
    assert one.read_bytes() == b"def one():\r\n    return 11\r\n"
    # write_file keeps the file's missing final newline (docs/tools.md, Edit tools).
    assert two.read_bytes() == b"TWO = 22" and (root / "pkg" / "three.py").exists()
    await client.stop()

    restarted: ParleyClient = await start_server()
    await restarted.initialize()
    result = await restarted.request(
        "_parley/session/restore", {"sessionId": session_id, "turn": 1}, timeout=30
    )
    assert result == {
        "files": [
            {"path": str(one), "action": "restored"},
            {"path": str(root / "pkg"), "action": "removed"},  # the folder the turn made too
            {"path": str(root / "pkg" / "three.py"), "action": "removed"},
            {"path": str(two), "action": "restored"},
        ],
        "text": "Restored the files of turn 1 as they were before it:\n"
        "- `one.py` restored\n- `pkg/` removed (the turn created it)\n"
        "- `pkg/three.py` removed (the turn created it)\n- `two.py` restored",
    }
    assert {path: path.read_bytes() for path in before} == before
    assert not (root / "pkg" / "three.py").exists()
    assert restarted.permission_requests == []


def test_parley_chat_undo(fake: FakeLLM, root: Path, tmp_path: Path) -> None:
    """`parley chat --session S --command /undo` restores the session's last editing turn
    (a script: stdin is no terminal, so the flag says the prompt is a command)."""
    from conftest import server_env
    from test_cli import run_parley

    env = server_env(fake, tmp_path / "home")
    fake.set_script([Reply(text="Looked.")])
    done = run_parley("chat", "Have a look.", "--cwd", str(root), env=env)
    assert done.returncode == 0, done.stderr
    session_id = done.stderr.rsplit("session ", 1)[1].split()[0]
    journal_edits(tmp_path / "home", session_id, 1, root, {"crlf.txt": b"A", "made.py": b"new"})
    done = run_parley(
        "chat", "/undo", "--command", "--session", session_id, "--cwd", str(root), env=env
    )
    assert done.returncode == 0, done.stderr
    assert "Restored the files of turn 1" in done.stdout and "`made.py` removed" in done.stdout
    assert (root / "crlf.txt").read_bytes() == CRLF_FILE and not (root / "made.py").exists()


async def test_no_restore_while_a_turn_runs(start_server: Any, fake: FakeLLM, root: Path) -> None:
    import asyncio

    from parley.fakellm import Pacing

    client, session_id = await first_turn(start_server, fake, root)
    fake.set_script([Reply(text="word " * 400, chunk_size=5, pacing=Pacing(chunks_per_second=20))])
    talking = asyncio.ensure_future(client.prompt(session_id, "Talk.", timeout=60))
    await client.wait_for_update(
        session_id, lambda update: "word" in str(update.get("content")), timeout=30
    )
    with pytest.raises(JsonRpcException) as busy:
        await client.request("_parley/session/restore", {"sessionId": session_id, "turn": 1})
    assert busy.value.code == -32003
    client.cancel(session_id)
    assert (await talking)["stopReason"] == "cancelled"
