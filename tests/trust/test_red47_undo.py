"""Red team of `/undo` and `/redo` (red47): the snapshots around each writing call, the one
after a call taken in the background, and the restore from them. Each test is one attack:
over the wire where it comes over the wire (`parley serve` a subprocess, the model scripted
by the fake LLM, the turn's command sandboxed by bwrap), in-process where it is a race or
the gate. What each attack must not achieve is what the test asserts."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parley.client import allow_all
from parley.fakellm import FakeLLM, Reply
from test_restore_through_editor import editor_client
from test_sandbox import needs_bwrap
from test_undo_everything import command_turn, last_reply, started

SECRET = "API_TOKEN=the-users-own-secret\n"


@needs_bwrap
async def test_the_editor_never_writes_a_restore_through_a_hard_link(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """A turn's sandboxed command makes `notes.txt` another name of the user's `.env`
    (`ln -f`: same mount, so the sandbox lets it). The undo puts `notes.txt`'s old text
    back through the editor, which writes the file in place, as Emacs's `write-region` and
    VS Code do: through the hard link, into `.env`, whose secret is lost without a word (it
    is in no plan: its own snapshot entry did not change). The gate refuses to read a file
    with another name for this reason; the restore must not write one in place either: the
    disk replaces the name, and the other name keeps its bytes."""
    notes, secrets = workspace / "notes.txt", workspace / ".env"
    notes.write_text("my notes\n")
    secrets.write_text(SECRET)
    buffers: dict[str, str] = {}
    client = await editor_client(start_server, buffers, fail=set())
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("ln -f .env notes.txt"))
    await client.prompt(session, "Tidy up.", timeout=60)
    assert os.stat(notes).st_ino == os.stat(secrets).st_ino  # the command did link them

    await client.prompt(session, "/undo", timeout=60)
    assert notes.read_text() == "my notes\n"
    assert secrets.read_text() == SECRET  # on main: "my notes\n", the secret gone
    assert os.stat(notes).st_ino != os.stat(secrets).st_ino


@pytest.mark.skipif(os.geteuid() != 0, reason="the server must run as root")
@needs_bwrap
async def test_an_undo_as_root_makes_no_setuid_root_file(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A repository unpacked as root (tar keeps owners and modes) holds `helper`, setuid to
    `nobody`. A turn's command deletes it. The undo re-creates it — as root, since the
    snapshot keeps a mode, not an owner: with the setuid bit restored, any local user who
    runs it becomes root. A restore never sets setuid or setgid on a file it writes."""
    helper = workspace / "helper"
    helper.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe not text")
    os.chown(helper, 65534, 65534)
    helper.chmod(0o6755)
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("rm -f helper"))
    await client.prompt(session, "Remove the helper.", timeout=60)
    assert not helper.exists()

    await client.prompt(session, "/undo", timeout=60)
    status = os.lstat(helper)
    assert helper.read_bytes().startswith(b"\x7fELF")
    assert status.st_uid == 0  # Parley wrote it: root's now
    assert stat.S_IMODE(status.st_mode) & (stat.S_ISUID | stat.S_ISGID) == 0  # main: 0o6755
    assert stat.S_IMODE(status.st_mode) == 0o755


# A call that leaves many new files: the snapshot after it (in the background) reads and
# stores each, which takes seconds here: the window the races below need.
MANY_FILES = (
    "mkdir bulk && cd bulk && seq 1 20000 | xargs -n 500 touch && for f in *; do echo $f > $f; done"
)


@needs_bwrap
async def test_a_stop_while_the_last_snapshot_walks_leaves_no_stale_record(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """Turn 1 writes `a.txt`; turn 2 rewrites it and leaves many files. The user presses
    Stop after turn 2's answer, while the snapshot after its call still walks (the turn's
    end waits for it). Then `/undo`. The undo must see turn 2 whole: undo turn 2 (the last
    that changed files), not turn 1 with turn 2's record stale (the question would blame
    the user for turn 2's writes, and turn 2's record, written after the undo, would come
    back to be undone again)."""
    import asyncio

    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("echo one > a.txt"))
    await client.prompt(session, "One.", timeout=60)
    # The fake model's reply is chosen by the number of assistant messages: turn 1's first.
    fake.set_script([*command_turn("true"), *command_turn(f"echo two > a.txt && {MANY_FILES}")])
    said = len(client.updates_of(session, "agent_message_chunk"))
    prompt = asyncio.ensure_future(client.prompt(session, "Two.", timeout=120))
    async with asyncio.timeout(60):
        while "Done." not in "".join(
            update["content"].get("text", "")
            for update in client.updates_of(session, "agent_message_chunk")[said:]
        ):
            await asyncio.sleep(0.005)
    client.cancel(session)  # Stop: the turn's end is waiting for its last snapshot
    with contextlib.suppress(Exception):
        await prompt
    assert (workspace / "a.txt").read_text() == "two\n"
    assert len(os.listdir(workspace / "bulk")) == 20000  # the command ran whole
    questions = len(client.permission_requests)
    await client.prompt(session, "/undo", timeout=120)
    report = last_reply(client, session)
    assert report.startswith("Restored the files of turn 2 as they were before it:"), report
    assert len(client.permission_requests) == questions  # nothing of the user's to ask about
    assert (workspace / "a.txt").read_text() == "one\n"
    assert not (workspace / "bulk").exists()


@needs_bwrap
async def test_an_undo_of_a_huge_sparse_file_reads_no_more_than_the_cap(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A turn's command makes a 200 GB sparse file (instant, no disk used). The turn's own
    snapshots leave its bytes out (past `max_turn_megabytes`). The undo's snapshot of the
    roots as it finds them (kept for a redo) had no cap: it read the whole file into
    memory — a MemoryError here, the server killed by the kernel where the size fits in
    memory — and the turn could never be undone. It is bounded as the turn's were."""
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("truncate -s 200G huge.bin && echo made > made.txt"))
    await client.prompt(session, "Make room.", timeout=60)
    assert (workspace / "huge.bin").stat().st_size == 200 << 30

    result = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60
    )
    assert not (workspace / "made.txt").exists() and not (workspace / "huge.bin").exists()
    assert {Path(file["path"]).name for file in result["files"]} == {"made.txt", "huge.bin"}
    assert "failed" not in result


async def test_an_undo_of_many_files_names_a_few_to_the_model_and_the_user(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A turn's command makes 3,000 files. The undo removes them all; its report and the
    note the model gets with the next prompt name 50 and count the rest (every name went
    into the next prompt, and a 20,000-file undo blocked the server's loop for 650 ms)."""
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("mkdir many && cd many && seq -w 1 3000 | xargs touch"))
    await client.prompt(session, "Make files.", timeout=60)
    assert len(os.listdir(workspace / "many")) == 3000

    await client.prompt(session, "/undo", timeout=60)
    assert not (workspace / "many").exists()
    report = last_reply(client, session)
    assert len(report.splitlines()) < 60, report[:400]
    assert "- and 2,951 more paths" in report.splitlines()  # 3,001 paths: the folder too
    fake.set_script([*command_turn("true"), Reply(text="Noted.")])
    await client.prompt(session, "What now?", timeout=60)
    told = str(fake.requests[-1].body["messages"])
    assert "and 2,951 more paths" in told and told.count("many/") <= 50


@needs_bwrap
async def test_a_name_that_is_not_utf8_is_restored_on_disk_not_through_the_editor(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """A file whose name is not UTF-8 (`\\xff.txt`) holds text; a turn's command rewrites it.
    The undo would have the editor write it: but ACP's JSON carries text, and the name only
    as a lone surrogate, which an editor takes as another name (VS Code writes `\\ufffd.txt`,
    a stray file, and reports success) or refuses. The edit tools' checkpoints give such a
    file to the disk; so must the snapshots' restore."""
    name = os.fsdecode(b"\xff.txt")
    (workspace / name).write_text("before\n")
    buffers: dict[str, str] = {}
    client = await editor_client(start_server, buffers, fail=set())
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("printf 'after\\n' > $(printf '\\377.txt')"))
    await client.prompt(session, "Rewrite it.", timeout=60)
    assert (workspace / name).read_text() == "after\n"

    await client.prompt(session, "/undo", timeout=60)
    assert (workspace / name).read_text() == "before\n"
    assert sorted(os.listdir(os.fsencode(workspace))) == [b"geometry.py", b"\xff.txt"]
    assert list(buffers) == []  # the editor was asked for nothing


@needs_bwrap
async def test_a_damaged_manifest_fails_its_turns_undo_clearly_and_strands_nothing(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The store damaged on disk (a bad sector, a hand): turn 2's manifest after it is
    garbage. Every `/undo` of the session failed with an internal error, for ever (each
    reads the last turn's record). The damaged turn is skipped and said not covered; the
    turns before it are undone; the session takes prompts after."""
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("echo one > a.txt"))
    await client.prompt(session, "One.", timeout=60)
    fake.set_script([*command_turn("true"), *command_turn("echo two > b.txt")])
    await client.prompt(session, "Two.", timeout=60)
    (record,) = (tmp_path / "home" / "snapshots" / "sessions").glob("*/turns/2.json")
    after = json.loads(record.read_text())["after"]
    (tmp_path / "home" / "snapshots" / "manifests" / after[:2] / after[2:]).write_bytes(b"junk")

    await client.prompt(session, "/undo", timeout=60)  # main: an internal error, every time
    report = last_reply(client, session)
    assert report.startswith("Restored the files of turn 1 as they were before it:"), report
    assert "What turn(s) 2 changed: their snapshots are damaged" in report
    assert not (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
    fake.set_script([*command_turn("true"), *command_turn("true"), Reply(text="Still here.")])
    await client.prompt(session, "Hello?", timeout=60)
    assert "Still here." in client.text_of(session)


def test_a_folder_above_the_one_walked_swapped_for_a_link_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot walk opened each folder by its whole path, only the last component
    `O_NOFOLLOW`. A process the turn left running (the kernel: a thread that swaps `x` for
    `x -> ~` and back, in a loop) swaps `x` after the walk listed it and before it opens
    `x/.ssh`: the unsandboxed server walks the user's `~/.ssh` as `x/.ssh`, keeps the key in
    the store, and an undo of the next turn (which removed `x`) writes it into the
    workspace, where the sandboxed child reads it. Here the swap is made at that very
    moment; the walk must leave the folder out, and no undo may write the key."""
    from parley.agent import snapshots
    from parley.agent.snapshot_store import SnapshotStore
    from parley.agent.snapshots import take_snapshot
    from test_snapshots import undo_to

    home, root = tmp_path / "home", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (root / "x" / ".ssh").mkdir(parents=True)
    (root / "x" / ".ssh" / "decoy").write_text("decoy\n")
    walk_folder = snapshots._Walk._directory

    def swapped_meanwhile(walk: Any, relative: str, *rest: Any) -> Any:
        if relative == "x/.ssh" and not (root / "x").is_symlink():
            (root / "x").rename(root / "x.real")
            (root / "x").symlink_to(home)
        return walk_folder(walk, relative, *rest)

    store = SnapshotStore(tmp_path / "parley-home")
    monkeypatch.setattr(snapshots._Walk, "_directory", swapped_meanwhile)
    raced = take_snapshot(store, (root,), None)
    monkeypatch.undo()
    assert str(root / "x" / ".ssh" / "id_ed25519") not in raced.entries
    # The next turn removes all of it; its undo puts back what the raced snapshot holds.
    (root / "x").unlink()
    import shutil

    shutil.rmtree(root / "x.real")
    after = take_snapshot(store, (root,), raced)
    undo_to(store, root, raced.manifest_id, after.manifest_id)
    written = [path.read_text() for path in root.rglob("*") if path.is_file()]
    assert "PRIVATE KEY\n" not in written  # main: x/.ssh/id_ed25519, the key, in the root


def test_a_root_that_became_a_link_is_not_followed_by_a_restore(tmp_path: Path) -> None:
    """The session's root, resolved when it started, is a folder; since, it was replaced by
    a link to another folder (an unsandboxed process, or `ln -sfn v2 proj` between
    releases). A restore follows no link: not the root's either — nothing is written where
    the link leads."""
    import asyncio

    from parley.agent.snapshot_restore import apply_changes, turn_changes, with_now
    from parley.agent.snapshot_store import SnapshotStore
    from parley.agent.snapshots import take_snapshot
    from parley.tools.confined import Roots

    root, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "app.py").write_text("old\n")
    store = SnapshotStore(tmp_path / "parley-home")
    before = take_snapshot(store, (root,), None)
    (root / "app.py").write_text("new\n")
    (root / "made.txt").write_text("made\n")
    after = take_snapshot(store, (root,), before)
    root.rename(tmp_path / "proj.old")
    root.symlink_to(elsewhere)

    # As the session took it: resolved when it started (a folder then).
    roots = Roots(root)
    record = {"before": before.manifest_id, "after": after.manifest_id, "roots": [str(root)]}
    changes = turn_changes(store, [record], str(root))
    now = {path: change.expected for path, change in changes.items()}  # as the turn left them
    failures = asyncio.run(apply_changes(store, with_now(changes, now), roots, None))
    assert list(elsewhere.iterdir()) == []  # main: app.py written there, made.txt removed
    assert failures and all("no longer" in why for _, why in failures), failures


@needs_bwrap
async def test_an_editor_that_never_answers_holds_an_undo_30_s_not_30_s_a_file(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """A broken editor offers `fs/read_text_file` and `fs/write_text_file` and answers
    neither. A turn's command changed three text files. The undo asked it for each buffer,
    then for each write, waiting 30 s for every one, in turn, holding the session (a Stop
    does not end that wait): a `sed -i` over 200 files held it 3 hours 20 minutes. One
    unanswered read, and one unanswered write, is enough: the rest are not asked for."""
    import asyncio

    for name in ("a.txt", "b.txt", "c.txt"):
        (workspace / name).write_text("before\n")
    asked: list[str] = []
    client = await start_server()

    async def never(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["path"])
        await asyncio.Event().wait()
        return {}

    client.feature("fs/read_text_file")(never)
    client.feature("fs/write_text_file")(never)
    capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}}
    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "e"}},
    )
    client.permission_handler = allow_all
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("sed -i 's/before/after/' a.txt b.txt c.txt"))
    await client.prompt(session, "Change them.", timeout=60)

    result = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=200
    )
    assert len(asked) == 2, asked  # main: 6, three reads and three writes, 30 s each
    assert len(result["failed"]) == 3
    assert sum("time" in failed["reason"] for failed in result["failed"]) == 3


@pytest.mark.xfail(
    strict=True,
    reason="residual race: the server checks the path (restore_place) and then asks the "
    "editor, which opens it by name, following links; a process the turn left running (the "
    "kernel swapping `conf` and `conf -> .git` in a loop) wins the window between the two. "
    "The server cannot close it; the editors now refuse a path that is not its own true name "
    "(elisp/parley-files.el `parley-files-write`, vscode-extension/src/core/fileAccess.ts), "
    "which narrows the window to their own check and open; this test's stand-in editor "
    "(the test client) does not check",
)
async def test_a_link_swapped_in_after_the_servers_last_look_is_not_written_through(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """As tests/tools/test_restore_through_editor.py's `conf -> .git` attack, but the swap
    lands after the server's last look (`restore_place`), before the editor opens the file:
    here the editor's own handler makes it, as a swapping process would at that moment."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    git_config = (workspace / ".git" / "config").read_bytes()
    (workspace / "conf").mkdir()
    hostile = "[core]\n\tfsmonitor = touch FSMONITOR-RAN\n"
    (workspace / "conf" / "config").write_text(hostile)
    client = await start_server()

    def read(params: dict[str, Any]) -> dict[str, Any]:
        return {"content": Path(params["path"]).read_text()}

    def write(params: dict[str, Any]) -> dict[str, Any]:
        if params["path"] == str(workspace / "conf" / "config"):  # the swap wins the race
            (workspace / "conf").rename(workspace / "conf.away")
            (workspace / "conf").symlink_to(".git")
        Path(params["path"]).write_text(params["content"])  # as an editor: by name
        return {}

    client.feature("fs/read_text_file")(read)
    client.feature("fs/write_text_file")(write)
    capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}}
    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "e"}},
    )
    client.permission_handler = allow_all
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("echo '# tidied' >> conf/config"))
    await client.prompt(session, "Tidy the configuration.", timeout=60)

    await client.request("_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60)
    assert (workspace / ".git" / "config").read_bytes() == git_config


@needs_bwrap
async def test_a_file_saved_while_the_undo_asks_is_not_overwritten_unasked(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A turn's command changed `a.txt` and `b.txt`; the user then changed `a.txt`, so the
    undo asks before overwriting it. While the question is open (for as long as the user
    takes), the user goes on working and saves `b.txt`. They allow the overwrite of `a.txt`
    — the only file they were asked about. The undo looked at `b.txt` before it asked: it
    must look again before it writes, and keep what the user saved since."""
    (workspace / "a.txt").write_text("a before\n")
    (workspace / "b.txt").write_text("b before\n")
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("echo 'a turn' > a.txt && echo 'b turn' > b.txt"))
    await client.prompt(session, "Change both.", timeout=60)
    (workspace / "a.txt").write_text("a the user's\n")

    def asked_then_saved(params: dict[str, Any]) -> dict[str, Any]:
        (workspace / "b.txt").write_text("b saved while asked\n")
        return allow_all(params)

    client.permission_handler = asked_then_saved
    result = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60
    )
    assert (workspace / "a.txt").read_text() == "a before\n"  # the one allowed
    assert (workspace / "b.txt").read_text() == "b saved while asked\n"  # main: "b before"
    assert [Path(failed["path"]).name for failed in result["failed"]] == ["b.txt"]
    assert "changed after the restore looked" in result["failed"][0]["reason"]


@needs_bwrap
async def test_the_undos_question_names_a_few_of_many_changed_files(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A turn's command made 3,000 files; the user (or a process left running) changed them
    all since. The undo asks before overwriting: its question named every one, a 3,000-line
    permission request (and as many locations) to the editor. It names 50 and counts the
    rest, as the report does."""
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("mkdir many && cd many && seq -w 1 3000 | xargs touch"))
    await client.prompt(session, "Make files.", timeout=60)
    for path in (workspace / "many").iterdir():
        path.write_text("the user's\n")
    client.permission_handler = lambda params: {"outcome": {"outcome": "cancelled"}}

    await client.prompt(session, "/undo", timeout=60)
    (question,) = client.permission_requests[1:]
    (content,) = question["toolCall"]["content"]
    lines = content["content"]["text"].splitlines()
    assert len(lines) <= 52, len(lines)  # main: 3,001
    assert lines[-1] == "- and 2,950 more paths"
    assert len(question["toolCall"]["locations"]) <= 50
    assert len(question["toolCall"].get("rawInput", {}).get("changed", ())) <= 50


@given(
    content=st.binary(max_size=3000) | st.integers(0, 3 << 20).map(lambda n: b"z" * n),
    size=st.integers(0, 4 << 20),
    cap=st.integers(0, 4 << 20),
)
def test_a_snapshot_reads_a_file_up_to_its_cap_and_a_byte_whatever_its_lstat_said(
    content: bytes, size: int, cap: int
) -> None:
    """`_read_at_most`: whatever size the `lstat` said (the file grew or shrank since), what
    is read is the file's bytes up to the cap and one more: never more in memory."""
    import io

    from parley.agent.snapshots import _read_at_most

    read = _read_at_most(io.BufferedReader(io.BytesIO(content)), cap, size)
    assert read == content[: cap + 1]


async def test_a_restore_of_a_turn_past_any_turn_is_invalid_params(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A broken client asks to restore turn 10**20: the store cannot hold such a number, and
    the answer was an internal error (`OverflowError`). It is the client's bad input: -32602,
    saying why; the session goes on."""
    from pygls.exceptions import JsonRpcInvalidParams

    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    for turn in (10**20, 2**63):
        with pytest.raises(JsonRpcInvalidParams, match="is past any turn"):
            await client.request("_parley/session/restore", {"sessionId": session, "turn": turn})
    answer = await client.request("_parley/session/restore", {"sessionId": session, "turn": 1})
    assert answer["files"] == []
