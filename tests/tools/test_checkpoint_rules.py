"""What an undo tells the user, the client and the model (agent/checkpoints.py), in-process
over a real store and workspace: which files come back, which the user is asked about, what
the result and the model's note say. The same through the running server is in
test_checkpoints.py; these run against every mutant of checkpoints.py (scripts/mutation)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from parley.agent.checkpoints import (
    ABSENT,
    UNREADABLE,
    FileRestore,
    RestoreCancelled,
    RestoreResult,
    TurnCheckpoints,
    fingerprint,
    model_note,
    plan_restore,
    restore_turn,
)
from parley.agent.session import now_iso
from parley.core.session_settings import SessionSettings
from parley.store import Checkpoint, Store, StoredSession


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"original a\n")
    return folder


@pytest.fixture
def store(tmp_path: Path, root: Path):
    opened = Store.open_in(tmp_path / "home")
    now = now_iso()
    opened.save_session(
        StoredSession(
            "sess_1", str(root), None, SessionSettings("openai:m", "hybrid"), {}, 0, 0, now, now
        )
    )
    yield opened
    opened.close()


def edit(store: Store, root: Path, turn: int, edits: dict[str, bytes | None]) -> None:
    """Edits as the turn's edit tools make them: journalled first, then written."""
    journal = TurnCheckpoints(store, "sess_1", turn, root)
    for relative, content in edits.items():
        journal.before_write(root / relative)
        if content is None:
            (root / relative).unlink()
        else:
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(content)
        journal.record_written()


class Asked:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[tuple[int, list[str]]] = []

    async def __call__(self, turn: int, changed: list[FileRestore]) -> bool:
        self.asked.append((turn, [file.shown for file in changed]))
        return self.answer


def restore(store: Store, turn: int, ask: Any) -> RestoreResult:
    return asyncio.run(restore_turn(store, "sess_1", turn, ask))


def test_an_undo_tells_the_client_and_the_model_what_came_back(store: Store, root: Path) -> None:
    edit(store, root, 1, {"a.txt": b"edited", "sub/new.txt": b"made"})
    never = Asked(False)
    result = restore(store, 1, never)
    assert never.asked == []
    assert (root / "a.txt").read_bytes() == b"original a\n" and not (root / "sub/new.txt").exists()
    assert result.to_wire() == {
        "files": [
            {"path": str(root / "a.txt"), "action": "restored"},
            {"path": str(root / "sub" / "new.txt"), "action": "removed"},
        ]
    }
    assert store.take_restore_note("sess_1") == (
        "[Parley: the user restored files to how they were before turn 1, undoing the edits "
        "made from that turn on (the conversation is unchanged): a.txt (restored), sub/new.txt "
        "(removed: it did not exist then). Read a file again before editing it.]"
    )
    assert restore(store, 1, never) == RestoreResult(1)  # used up: nothing left to undo


def test_a_file_the_user_changed_is_asked_about_and_kept_when_they_say_no(
    store: Store, root: Path
) -> None:
    edit(store, root, 1, {"a.txt": b"edited"})
    (root / "a.txt").write_bytes(b"the user's own change")
    no = Asked(False)
    result = restore(store, 1, no)
    assert no.asked == [(1, ["a.txt"])]
    assert result.to_wire() == {"files": [], "rejected": True}
    assert (root / "a.txt").read_bytes() == b"the user's own change"
    yes = Asked(True)
    assert [file.shown for file in restore(store, 1, yes).files] == ["a.txt"]
    assert (root / "a.txt").read_bytes() == b"original a\n"


def test_a_change_between_two_undone_turns_is_asked_about(store: Store, root: Path) -> None:
    edit(store, root, 1, {"a.txt": b"turn 1"})
    (root / "a.txt").write_bytes(b"the user's change between the turns")
    edit(store, root, 2, {"a.txt": b"turn 2"})
    asked = Asked(True)
    restore(store, 1, asked)
    assert asked.asked == [(1, ["a.txt"])]
    assert (root / "a.txt").read_bytes() == b"original a\n"  # the oldest bytes win


def test_a_file_left_as_it_was_found_is_neither_asked_about_nor_listed(
    store: Store, root: Path
) -> None:
    edit(store, root, 1, {"a.txt": b"original a\n", "b.txt": b"made"})
    never = Asked(False)
    result = restore(store, 1, never)
    assert never.asked == [] and [file.shown for file in result.files] == ["b.txt"]


def test_a_file_already_back_as_it_was_is_not_asked_about(store: Store, root: Path) -> None:
    edit(store, root, 1, {"a.txt": b"edited"})
    (root / "a.txt").write_bytes(b"original a\n")  # the user put it back themselves
    never = Asked(False)
    assert [file.action for file in restore(store, 1, never).files] == ["restored"]
    assert never.asked == []


@pytest.mark.parametrize(("mode", "restored"), [(0o640, 0o640), (0o755, 0o755), (0o4711, 0o711)])
def test_a_restored_file_gets_its_mode_back(
    store: Store, root: Path, mode: int, restored: int
) -> None:
    """Its permissions back; never setuid or setgid (`confined.file_mode`: a file Parley
    writes is its user's, and as root a setuid bit would make it root's program)."""
    (root / "a.txt").chmod(mode)
    edit(store, root, 1, {"a.txt": b"edited"})
    (root / "a.txt").chmod(0o600)
    restore(store, 1, Asked(True))
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == restored


def test_a_file_that_cannot_be_restored_is_named_with_why_and_the_checkpoints_stay(
    store: Store, root: Path
) -> None:
    edit(store, root, 1, {"sub/new.txt": b"made", "a.txt": b"edited"})
    (root / "sub" / "new.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").write_bytes(b"a file where the folder was")
    result = restore(store, 1, Asked(True))
    assert result.to_wire()["failed"] == [
        {"path": str(root / "sub" / "new.txt"), "reason": "Not a directory"}
    ]
    assert [file.shown for file in result.files] == ["a.txt"]
    assert store.checkpoints("sess_1", 1)  # kept, to try again
    assert "a.txt (restored)" in (store.take_restore_note("sess_1") or "")


def test_what_a_file_is_now_absent_unreadable_or_its_digest(root: Path) -> None:
    assert fingerprint(root, str(root / "missing.txt")) == ABSENT
    os.mkfifo(root / "fifo")
    assert fingerprint(root, str(root / "fifo")) == UNREADABLE
    assert fingerprint(root, str(root / "a.txt")) == hashlib.sha256(b"original a\n").hexdigest()


def test_the_oldest_checkpoint_wins_and_the_newest_says_what_parley_wrote() -> None:
    newest_first = [
        Checkpoint(3, "/w/a", "/w", b"before 3", 0o600, "h3"),
        Checkpoint(2, "/w/a", "/w", b"before 2", 0o644, "h2"),
        Checkpoint(2, "/w/b", "/w", None, None, "hb"),
    ]
    plan = plan_restore(newest_first)
    assert [(f.path, f.content, f.mode, f.expected) for f in plan] == [
        ("/w/a", b"before 2", 0o644, "h3"),
        ("/w/b", None, None, "hb"),
    ]
    # Turn 3 found the file as something else than turn 2 left it: changed in between.
    assert [f.changed_between for f in plan] == [True, False]


def test_the_models_note_names_each_file_as_the_user_sees_it() -> None:
    files = (FileRestore("/w/src/x.py", "/w", b"x", None, None),)
    assert model_note(4, files) == (
        "[Parley: the user restored files to how they were before turn 4, undoing the edits "
        "made from that turn on (the conversation is unchanged): src/x.py (restored). Read a "
        "file again before editing it.]"
    )


def test_a_restore_stopped_while_asking_restores_nothing(store: Store, root: Path) -> None:
    edit(store, root, 1, {"a.txt": b"edited"})
    (root / "a.txt").write_bytes(b"the user's own change")

    async def stopped(turn: int, changed: list[FileRestore]) -> bool:
        raise RestoreCancelled

    result = restore(store, 1, stopped)
    assert result.to_wire() == {"files": [], "cancelled": True}
    assert (root / "a.txt").read_bytes() == b"the user's own change"
    assert store.checkpoints("sess_1", 1) and store.take_restore_note("sess_1") is None


def test_only_a_files_bytes_before_its_first_write_in_a_turn_are_kept(
    store: Store, root: Path
) -> None:
    journal = TurnCheckpoints(store, "sess_1", 1, root)
    for content in (b"first edit", b"second edit"):
        journal.before_write(root / "a.txt")
        (root / "a.txt").write_bytes(content)
        journal.record_written()
    never = Asked(False)
    assert [file.shown for file in restore(store, 1, never).files] == ["a.txt"]
    assert never.asked == [] and (root / "a.txt").read_bytes() == b"original a\n"


def test_a_write_never_recorded_counts_as_a_change_to_ask_about(store: Store, root: Path) -> None:
    # The server died during the call: the edit was journalled, how it left the file not.
    journal = TurnCheckpoints(store, "sess_1", 1, root)
    journal.before_write(root / "a.txt")
    (root / "a.txt").write_bytes(b"edited")
    asked = Asked(True)
    restore(store, 1, asked)
    assert asked.asked == [(1, ["a.txt"])]
    assert (root / "a.txt").read_bytes() == b"original a\n"


def test_a_made_file_whose_folder_is_gone_is_simply_removed(store: Store, root: Path) -> None:
    edit(store, root, 1, {"sub/deeper/new.txt": b"made"})
    (root / "sub" / "deeper" / "new.txt").unlink()
    (root / "sub" / "deeper").rmdir()
    result = restore(store, 1, Asked(False))
    assert result.to_wire() == {
        "files": [{"path": str(root / "sub" / "deeper" / "new.txt"), "action": "removed"}]
    }
    assert store.checkpoints("sess_1", 1) == []


def test_when_every_file_fails_the_model_is_told_nothing(store: Store, root: Path) -> None:
    edit(store, root, 1, {"sub/new.txt": b"made"})
    (root / "sub" / "new.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").write_bytes(b"a file where the folder was")
    result = restore(store, 1, Asked(True))
    assert result.files == () and len(result.failures) == 1
    assert store.take_restore_note("sess_1") is None


def test_a_file_the_gate_refuses_now_is_named_with_its_sentence(
    store: Store, root: Path, tmp_path: Path
) -> None:
    edit(store, root, 1, {"sub/new.txt": b"made"})
    (tmp_path / "elsewhere").mkdir()
    (root / "sub" / "new.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(tmp_path / "elsewhere")  # the folder now leads outside
    result = restore(store, 1, Asked(True))
    [(failed, reason)] = result.failures
    assert failed.shown == "sub/new.txt"
    assert "sub is a symbolic link now" in reason  # a restore follows no link
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_checkpoint_without_a_mode_is_restored_with_the_usual_one(
    store: Store, root: Path
) -> None:
    # Kept by an older Parley, which stored no mode.
    path = str(root / "a.txt")
    store.keep_checkpoint("sess_1", 1, str(root), path, b"older bytes", None, now_iso())
    store.mark_written("sess_1", 1, path, fingerprint(root, path))
    (root / "a.txt").chmod(0o600)
    restore(store, 1, Asked(True))
    assert (root / "a.txt").read_bytes() == b"older bytes"
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o644


def test_a_file_whose_folder_was_removed_is_restored_with_its_folder(
    store: Store, root: Path
) -> None:
    (root / "docs" / "old").mkdir(parents=True)
    (root / "docs" / "old" / "notes.txt").write_bytes(b"notes\n")
    edit(store, root, 1, {"docs/old/notes.txt": b"edited notes\n"})
    (root / "docs" / "old" / "notes.txt").unlink()
    (root / "docs" / "old").rmdir()
    (root / "docs").rmdir()
    result = restore(store, 1, Asked(True))
    assert [file.action for file in result.files] == ["restored"] and not result.failures
    assert (root / "docs" / "old" / "notes.txt").read_bytes() == b"notes\n"
