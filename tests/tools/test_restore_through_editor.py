"""`/undo` writes through the editor when the editor offers `fs/write_text_file`, as the edit
itself did: the open buffer is restored (one undoable change per file there), not the disk
behind it; the editor's answer decides whether the file was restored (issue 27, point 1)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

from parley.agent import snapshot_restore
from parley.agent.snapshot_restore import PathChange
from parley.agent.snapshot_store import SnapshotStore
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.confined import workspace_roots
from pygls.exceptions import JsonRpcInternalError

BEFORE = "first words\n"
AFTER = "second words\n"


async def editor_client(start_server: Any, buffers: dict[str, str], fail: set[str]) -> ParleyClient:
    """A client whose editor writes a file into its buffer (`buffers`: path → text, every
    write in order) and saves it, as Emacs and agent-shell do, and refuses to write the
    paths in `fail`."""
    client: ParleyClient = await start_server()

    def read(params: dict[str, Any]) -> dict[str, Any]:
        path = params["path"]
        return {"content": buffers[path] if path in buffers else Path(path).read_text()}

    def write(params: dict[str, Any]) -> dict[str, Any]:
        if params["path"] in fail:
            raise JsonRpcInternalError("the buffer is read-only")
        buffers[params["path"]] = params["content"]
        Path(params["path"]).write_text(params["content"])  # saved
        return {}

    client.feature("fs/read_text_file")(read)
    client.feature("fs/write_text_file")(write)
    capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}}
    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "e"}},
    )
    client.permission_handler = allow_all
    return client


async def test_undo_restores_the_buffer_the_edit_went_to(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    notes, kept = workspace / "notes.txt", workspace / "kept.txt"
    notes.write_text(BEFORE)
    kept.write_text(BEFORE)
    buffers: dict[str, str] = {}
    client = await editor_client(start_server, buffers, fail={str(kept)})
    session = await client.new_session(str(workspace))
    reads = [ScriptedToolCall("read_file", {"path": name}) for name in ("notes.txt", "kept.txt")]
    writes = [
        ScriptedToolCall("write_file", {"path": name, "content": AFTER})
        for name in ("notes.txt", "kept.txt", "new.txt")
    ]
    calls = [*reads, *writes]
    fake.set_script([Reply(tool_calls=(call,)) for call in calls] + [Reply(text="Done.")])
    # kept.txt: the editor refuses its write, so the edit itself fails (nothing to undo).
    await client.prompt(session, "Write them.")
    assert buffers == {str(notes): AFTER, str(workspace / "new.txt"): AFTER}
    assert kept.read_text() == BEFORE

    await client.prompt(session, "/undo")
    said = client.text_of(session)
    # notes.txt went back through the editor (its buffer, then saved), not behind its back.
    assert buffers[str(notes)] == BEFORE and notes.read_text() == BEFORE
    assert not (workspace / "new.txt").exists()
    # new.txt did not exist: removing it is the disk's (no ACP method removes a file).
    assert "notes.txt" in said and "new.txt" in said
    assert "could not" not in said.lower()


async def test_an_editor_that_refuses_the_restore_leaves_it_failed(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    notes = workspace / "notes.txt"
    notes.write_text(BEFORE)
    buffers: dict[str, str] = {}
    fail: set[str] = set()
    client = await editor_client(start_server, buffers, fail)
    session = await client.new_session(str(workspace))
    read = ScriptedToolCall("read_file", {"path": "notes.txt"})
    call = ScriptedToolCall("write_file", {"path": "notes.txt", "content": AFTER})
    fake.set_script([Reply(tool_calls=(read,)), Reply(tool_calls=(call,)), Reply(text="Done.")])
    await client.prompt(session, "Write it.")
    fail.add(str(notes))  # the buffer became read-only since
    result = await client.request("_parley/session/restore", {"sessionId": session, "turn": 1})
    assert result["files"] == []
    assert result["failed"][0]["path"].endswith("notes.txt")
    assert "the buffer is read-only" in result["failed"][0]["reason"]
    assert buffers[str(notes)] == AFTER  # the editor's answer decided: not restored


async def test_the_editor_is_never_asked_to_write_through_a_folder_swapped_for_a_link(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """The model wrote `conf/config` through the editor (`conf/` is ignored, so only the edit
    tools' checkpoint holds it, with what a command had put there: git configuration that
    runs a program). Then something in the workspace (a process the turn left running)
    puts `conf -> .git` in the folder's place. The undo must not ask the editor to write
    `conf/config` — the editor follows the link, and would write `.git/config`, which the
    host's next `git status` obeys: the restore follows no link and says why."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    git_config = (workspace / ".git" / "config").read_bytes()
    (workspace / ".gitignore").write_text("conf/\n")
    (workspace / "conf").mkdir()
    hostile = "[core]\n\tfsmonitor = touch FSMONITOR-RAN\n"
    (workspace / "conf" / "config").write_text(hostile)
    buffers: dict[str, str] = {}
    client = await editor_client(start_server, buffers, fail=set())
    session = await client.new_session(str(workspace))
    read = ScriptedToolCall("read_file", {"path": "conf/config"})
    call = ScriptedToolCall("write_file", {"path": "conf/config", "content": AFTER})
    fake.set_script([Reply(tool_calls=(read,)), Reply(tool_calls=(call,)), Reply(text="Done.")])
    await client.prompt(session, "Fix the configuration.")
    assert buffers == {str(workspace / "conf" / "config"): AFTER}
    (workspace / "conf").rename(workspace / "conf.away")
    (workspace / "conf").symlink_to(".git")

    result = await client.request("_parley/session/restore", {"sessionId": session, "turn": 1})
    assert list(buffers) == [str(workspace / "conf" / "config")]  # asked nothing more
    assert (workspace / ".git" / "config").read_bytes() == git_config
    assert [failed["path"] for failed in result["failed"]] == [str(workspace / "conf/config")]
    assert "conf is a symbolic link now" in result["failed"][0]["reason"]


def test_a_snapshot_restore_asks_the_editor_only_while_no_link_is_on_the_way(
    tmp_path: Path,
) -> None:
    """The restore looked at the roots, then something put links in: `conf` swapped for a
    link to `.git`, and `notes.txt` for a link to `.git/description`. The editor (which
    follows links) is asked for neither: `conf/config` is refused, saying why, and
    `notes.txt`'s link is replaced on disk by the file, its target untouched."""
    root = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    kept = {name: (root / ".git" / name).read_bytes() for name in ("config", "description")}
    store = SnapshotStore(tmp_path / "home")
    content = b"[core]\n\tfsmonitor = touch FSMONITOR-RAN\n"
    digest = hashlib.sha256(content).hexdigest()
    store.put_object(digest, content)
    asked: list[str] = []

    async def editor(path: str, text: str) -> None:
        asked.append(path)
        Path(path).write_text(text)

    def change(path: Path, now: list[Any] | None = None) -> PathChange:
        entry = ["f", 0o644, 0, 0, 0, 0, digest]
        return PathChange(str(path), str(root), entry, entry, now=now or entry)

    (root / "conf").symlink_to(".git")
    (root / "notes.txt").symlink_to(".git/description")
    roots = workspace_roots(root)
    # What the restore found at notes.txt: the link, as a snapshot records it (one changed
    # after the restore looked is not overwritten at all).
    found = os.lstat(root / "notes.txt")
    seen = [found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino]
    notes = change(root / "notes.txt", ["l", 0o777, *seen, ".git/description"])
    text = content.decode()
    why = asyncio.run(
        snapshot_restore._through_editor(editor, change(root / "conf/config"), text, roots, store)
    )
    assert why is not None and "conf is a symbolic link now" in why
    why = asyncio.run(snapshot_restore._through_editor(editor, notes, text, roots, store))
    assert why is None and asked == []
    assert not (root / "notes.txt").is_symlink() and (root / "notes.txt").read_bytes() == content
    assert {name: (root / ".git" / name).read_bytes() for name in kept} == kept


async def test_an_editor_that_stops_answering_holds_an_edits_undo_30_s_not_30_s_a_file(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """Files the snapshots leave out (ignored: `*.log`) are taken back from the edit tools'
    checkpoints, through the editor. An editor that stops answering let the first write time
    out after 30 s, and was then given each other file to wait 30 s more: the rest go
    unwritten, said so, as the snapshots' route does."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".gitignore").write_text("*.log\n")
    names = ("a.log", "b.log", "c.log")
    for name in names:
        (workspace / name).write_text(BEFORE)
    hanging = asyncio.Event()
    asked: list[str] = []
    client: ParleyClient = await start_server()

    async def write(params: dict[str, Any]) -> dict[str, Any]:
        if hanging.is_set():  # the editor hangs from the undo on
            asked.append(params["path"])
            await asyncio.Event().wait()
        Path(params["path"]).write_text(params["content"])
        return {}

    client.feature("fs/write_text_file")(write)
    capabilities = {"fs": {"writeTextFile": True}}
    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "e"}},
    )
    client.permission_handler = allow_all
    session = await client.new_session(str(workspace))
    calls = [ScriptedToolCall("read_file", {"path": name}) for name in names]
    calls += [ScriptedToolCall("write_file", {"path": name, "content": AFTER}) for name in names]
    fake.set_script([Reply(tool_calls=(call,)) for call in calls] + [Reply(text="Done.")])
    await client.prompt(session, "Write them.")
    assert all((workspace / name).read_text() == AFTER for name in names)

    hanging.set()
    result = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=120
    )
    assert len(asked) == 1, asked  # before: 3, 30 s each
    reasons = sorted(failed["reason"] for failed in result["failed"])
    assert reasons == sorted(
        [snapshot_restore.EDITOR_LATE] + [snapshot_restore.EDITOR_SILENT] * 2
    ), result
