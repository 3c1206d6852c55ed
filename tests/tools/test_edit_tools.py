"""The edit tools: `edit_file` and `write_file` change the workspace's files, only inside it,
only with the user's approval of the diff, only over the text the model last read, and
through the editor when it offers `fs/write_text_file`.

The server runs as a subprocess driven by the official ACP SDK's client (tests/acp_client.py),
every message checked against ACP's JSON Schema; the fake LLM scripts the calls. The tools'
own answers to odd arguments are also checked in-process, where each case costs no server.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from acp.helpers import text_block
from acp_client import AcpRun, EditorClient, acp_server
from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.tools.base import ToolContext, ToolResult
from parley.tools.registry import ToolRegistry
from parley.tools.server_tools import server_tools

CRLF_SOURCE = b"def area(width, height):\r\n    return width * height\r\n\r\nPI = 3.14"


def read(path: str) -> ScriptedToolCall:
    return ScriptedToolCall("read_file", {"path": path})


def edit(path: str, old: str, new: str, **more: Any) -> ScriptedToolCall:
    return ScriptedToolCall("edit_file", {"path": path, "old_text": old, "new_text": new, **more})


def write(path: str, content: str) -> ScriptedToolCall:
    return ScriptedToolCall("write_file", {"path": path, "content": content})


def turns(*calls: ScriptedToolCall) -> list[Reply]:
    """One round per call, then a closing text."""
    return [*(Reply(tool_calls=(call,)) for call in calls), Reply(text="Done.")]


def last_request(fake: FakeLLM) -> dict[str, Any]:
    """The model's last request: the one with the longest history (a stream the server
    closed early may be recorded after the requests that followed it)."""
    return max((r.body for r in fake.requests), key=lambda body: len(body["messages"]))


def sent_to_model(fake: FakeLLM) -> str:
    """What the model was sent last (tool results included), as JSON text."""
    return json.dumps(last_request(fake), ensure_ascii=False)


def tool_results(fake: FakeLLM) -> list[str]:
    """The tool results the model was sent last, in order."""
    return [m["content"] for m in last_request(fake)["messages"] if m["role"] == "tool"]


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


async def prompt(run: AcpRun, session_id: str, text: str) -> None:
    await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])


async def session(run: AcpRun, workspace: Path, **initialize: Any) -> str:
    await run.initialize(**initialize)
    return (await run.conn.new_session(cwd=str(workspace))).session_id


# --- over the wire --------------------------------------------------------------------------


async def test_an_allowed_edit_asks_with_the_diff_and_keeps_crlf_and_no_final_newline(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "shapes.py"
    source.write_bytes(CRLF_SOURCE)
    # The model writes \n, as it always does; the file keeps its \r\n.
    fake.set_script(
        turns(
            read("shapes.py"),
            edit(
                "shapes.py",
                "    return width * height\n",
                '    """Area."""\n    return width * height\n',
            ),
            edit("shapes.py", "PI = 3.14", "PI = 3.14159\n"),
        )
    )
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        run.editor.permission_answer = "allow_always"
        await prompt(run, session_id, "Document area and refine PI.")
    assert source.read_bytes() == (
        b'def area(width, height):\r\n    """Area."""\r\n    return width * height\r\n\r\n'
        b"PI = 3.14159"
    )
    # Asked once: "allow always" holds for edit_file for the rest of the session.
    (asked,) = run.editor.permission_requests
    assert asked.kind == "edit" and asked.title == "Edit shapes.py"
    path = str(source.resolve())
    ((diff,),) = [[c for c in asked.content or [] if c.type == "diff"]]
    assert diff.path == path
    assert diff.old_text == CRLF_SOURCE.decode()
    assert diff.new_text.startswith('def area(width, height):\r\n    """Area."""\r\n')
    assert [(where.path, where.line) for where in asked.locations or []] == [(path, 2)]
    # The call's updates carry the diff too: before it runs, and with its result.
    updates = run.recording.raw_updates(session_id, "tool_call_update")
    diffs = [c for u in updates for c in u.get("content", []) if c["type"] == "diff"]
    assert len(diffs) == 4 and all(d["path"] == path for d in diffs)
    assert "Edited shapes.py" in sent_to_model(fake)
    run.recording.assert_conformant()


async def test_a_rejected_edit_leaves_the_file_byte_identical(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "shapes.py"
    source.write_bytes(CRLF_SOURCE)
    before = os.stat(source)
    fake.set_script(turns(read("shapes.py"), edit("shapes.py", "PI = 3.14", "PI = 3")))
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        run.editor.permission_answer = "reject_once"
        await prompt(run, session_id, "Round PI.")
    assert source.read_bytes() == CRLF_SOURCE
    after = os.stat(source)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert "The user rejected this call" in sent_to_model(fake)
    (asked,) = run.editor.permission_requests
    assert any(c.type == "diff" for c in asked.content or [])
    run.recording.assert_conformant()


async def test_missing_and_ambiguous_old_text_come_back_as_errors_the_model_can_act_on(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "repeat.py"
    source.write_text("x = 1\ny = 2\nx = 1\n")
    fake.set_script(
        turns(
            read("repeat.py"),
            edit("repeat.py", "x = 1\n", "x = 10\n"),
            edit("repeat.py", "y =  2", "y = 20"),
        )
    )
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        await prompt(run, session_id, "Change them.")
    assert source.read_text() == "x = 1\ny = 2\nx = 1\n"
    told = tool_results(fake)
    assert "old_text matches 2 times in repeat.py (at lines 1, 3)" in told[1]
    assert "replace_all" in told[1]
    assert "old_text was not found in repeat.py" in told[2]
    assert "     2\ty = 2" in told[2]  # the nearest line, numbered
    assert run.editor.permission_requests == []  # a call bound to fail is not put to the user
    run.recording.assert_conformant()


async def test_a_file_changed_after_the_model_read_it_is_refused(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    # The fake answers by the number of assistant messages so far: one script for the three
    # prompts (read; edit, refused; read again and edit).
    fake.set_script(
        [
            *turns(read("geometry.py")),
            *turns(edit("geometry.py", "Shapes.", "Geometric shapes.")),
            *turns(read("geometry.py"), edit("geometry.py", "Shapes.", "Geometric.")),
        ]
    )
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        await prompt(run, session_id, "Read geometry.py.")
        changed = source.read_text() + "\nCHANGED_BY_THE_USER = True\n"
        source.write_text(changed)
        await prompt(run, session_id, "Change the docstring.")
        assert source.read_text() == changed
        refused = tool_results(fake)[-1]
        assert "geometry.py has changed since you last read it" in refused
        assert "Read it again with read_file" in refused
        assert run.editor.permission_requests == []
        await prompt(run, session_id, "Read it again and change it.")
    assert source.read_text() == changed.replace("Shapes.", "Geometric.")
    assert len(run.editor.permission_requests) == 1
    run.recording.assert_conformant()


async def test_paths_outside_the_workspace_are_refused(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    (workspace / "leak.py").symlink_to(outside)
    (workspace / "out").symlink_to(tmp_path)
    calls = [
        write("../outside.py", "x"),
        write(str(outside), "x"),
        write("leak.py", "x"),
        write("out/new.py", "x"),
        edit("leak.py", "SECRET = 1", "SECRET = 2"),
    ]
    fake.set_script(turns(*calls))
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        await prompt(run, session_id, "Try.")
    assert outside.read_text() == "SECRET = 1\n"
    assert not (tmp_path / "new.py").exists()
    told = tool_results(fake)
    assert len(told) == len(calls)
    assert all("is outside the workspace" in answer for answer in told), told
    run.recording.assert_conformant()


async def test_fifos_and_hard_links_are_refused_without_blocking_or_asking(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET\n")
    os.link(outside, workspace / "hardlink.txt")
    os.mkfifo(workspace / "pipe.txt")
    calls = [
        write("pipe.txt", "x"),
        edit("pipe.txt", "a", "b"),
        write("hardlink.txt", "x"),
        edit("hardlink.txt", "SECRET", "LEAKED"),
    ]
    fake.set_script(turns(*calls))
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        run.editor.permission_answer = "reject_once"
        await prompt(run, session_id, "Try.")
    assert outside.read_text() == "SECRET\n" and os.stat(outside).st_nlink == 2
    assert stat.S_ISFIFO(os.stat(workspace / "pipe.txt").st_mode)
    told = tool_results(fake)
    assert ["FIFO" in told[0], "FIFO" in told[1]] == [True, True]
    assert ["hard links" in told[2], "hard links" in told[3]] == [True, True]
    assert all("SECRET" not in answer for answer in told)
    assert run.editor.permission_requests == []
    run.recording.assert_conformant()


async def test_with_an_editor_that_writes_files_the_write_goes_through_it(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    on_disk = source.read_bytes()
    before = os.stat(source)
    fake.set_script(
        turns(
            read("geometry.py"),
            edit("geometry.py", "Shapes.", "Geometric shapes."),
            write("pkg/new.py", "NEW = 1\n"),
        )
    )
    editor = EditorClient()
    async with acp_server(acp_env, editor) as run:
        session_id = await session(run, workspace, write_files=True)
        await prompt(run, session_id, "Edit through the editor.")
    path = str(source.resolve())
    new_path = str((workspace / "pkg/new.py").resolve())
    assert editor.file_writes == [
        (path, on_disk.decode().replace("Shapes.", "Geometric shapes.")),
        (new_path, "NEW = 1\n"),
    ]
    (sent, _) = run.recording.agent_messages("fs/write_text_file")
    assert sent["params"]["sessionId"] == session_id and sent["params"]["path"] == path
    # Nothing written to disk by Parley: the file is the same file, with the same bytes.
    assert source.read_bytes() == on_disk
    after = os.stat(source)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not (workspace / "pkg/new.py").exists()
    run.recording.assert_conformant()


async def test_an_edit_over_the_editors_buffer_applies_to_what_the_model_read_there(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    path = str(source.resolve())
    editor = EditorClient()
    editor.buffers[path] = "UNSAVED = 1\n"
    fake.set_script(turns(read("geometry.py"), edit("geometry.py", "UNSAVED = 1", "UNSAVED = 2")))
    async with acp_server(acp_env, editor) as run:
        session_id = await session(run, workspace, read_files=True, write_files=True)
        await prompt(run, session_id, "Edit the buffer.")
    assert editor.file_writes == [(path, "UNSAVED = 2\n")]
    (asked,) = editor.permission_requests
    (diff,) = [c for c in asked.content or [] if c.type == "diff"]
    assert (diff.old_text, diff.new_text) == ("UNSAVED = 1\n", "UNSAVED = 2\n")
    run.recording.assert_conformant()


async def test_without_it_the_disk_file_is_replaced_atomically_keeping_its_mode(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    source = workspace / "geometry.py"
    source.chmod(0o640)
    text = source.read_text()
    inode = os.stat(source).st_ino
    fake.set_script(
        turns(
            read("geometry.py"),
            edit("geometry.py", "Shapes.", "Geometric shapes."),
            write("pkg/sub/new.py", "NEW = 1\n"),
        )
    )
    async with acp_server(acp_env) as run:
        session_id = await session(run, workspace)
        await prompt(run, session_id, "Edit on disk.")
    assert source.read_text() == text.replace("Shapes.", "Geometric shapes.")
    status = os.stat(source)
    assert stat.S_IMODE(status.st_mode) == 0o640
    assert status.st_ino != inode  # a new file renamed over the old one
    assert (workspace / "pkg/sub/new.py").read_text() == "NEW = 1\n"
    assert sorted(p.name for p in workspace.iterdir()) == ["geometry.py", "pkg"]  # no temp left
    assert run.recording.agent_messages("fs/write_text_file") == []
    run.recording.assert_conformant()


# --- the tools' answers, in-process -----------------------------------------------------------


@pytest.fixture
def tools(tmp_path: Path) -> ToolRegistry:
    (tmp_path / "ws").mkdir()
    return ToolRegistry(server_tools(tmp_path / "ws"))


async def call(tools: ToolRegistry, root: Path, name: str, **arguments: Any) -> ToolResult:
    tool = tools.get(name)
    assert tool is not None
    return await tool.run(arguments, ToolContext("s", "c", root))


async def test_the_tools_answers(tools: ToolRegistry, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "a.py").write_text("one\ntwo\n")

    never_read = await call(tools, root, "edit_file", path="a.py", old_text="one", new_text="1")
    assert never_read.is_error and "has not been read in this session" in never_read.content
    overwrite = await call(tools, root, "write_file", path="a.py", content="x")
    assert overwrite.is_error and "read it with read_file first" in overwrite.content

    await call(tools, root, "read_file", path="a.py")
    same = await call(tools, root, "edit_file", path="a.py", old_text="one", new_text="one")
    assert same.is_error and "nothing to change" in same.content
    every = await call(
        tools, root, "edit_file", path="a.py", old_text="o", new_text="0", replace_all=True
    )
    assert not every.is_error and (root / "a.py").read_text() == "0ne\ntw0\n"
    # What Parley wrote counts as read: the next edit needs no read_file.
    removed = await call(tools, root, "edit_file", path="a.py", old_text="tw0\n", new_text="")
    assert not removed.is_error and (root / "a.py").read_text() == "0ne\n"

    missing = await call(tools, root, "edit_file", path="b.py", old_text="x", new_text="y")
    assert missing.is_error and "use write_file to create it" in missing.content
    directory = await call(tools, root, "write_file", path=".", content="x")
    assert directory.is_error and "is a directory" in directory.content
    flag = await call(
        tools, root, "edit_file", path="a.py", old_text="0", new_text="o", replace_all=1
    )
    assert flag.is_error and "'replace_all' must be true or false" in flag.content

    created = await call(tools, root, "write_file", path="deep/er/c.py", content="C = 1\n")
    assert created.content == "Created deep/er/c.py (1 line)."
    assert (root / "deep/er/c.py").read_text() == "C = 1\n"

    (root / "bin.dat").write_bytes(b"\0\1\2")
    binary = await call(tools, root, "write_file", path="bin.dat", content="x")
    assert binary.is_error and (root / "bin.dat").read_bytes() == b"\0\1\2"


async def test_the_view_is_the_diff_and_never_raises(tools: ToolRegistry, tmp_path: Path) -> None:
    root = (tmp_path / "ws").resolve()
    (root / "a.py").write_text("one\ntwo\n")
    shown = tools.view_of("edit_file", {"path": "a.py", "old_text": "two", "new_text": "2"})
    assert shown.title == "Edit a.py"
    (diff,) = shown.diffs
    assert (diff.path, diff.old_text, diff.new_text) == (
        str(root / "a.py"),
        "one\ntwo\n",
        "one\n2\n",
    )
    assert shown.locations[0].line == 2
    created = tools.view_of("write_file", {"path": "n/new.py", "content": "N\n"})
    assert created.title == "Create n/new.py" and created.diffs[0].old_text is None
    assert not (root / "n").exists()  # showing a call changes nothing
    wrong = tools.view_of("edit_file", {"path": "a.py", "old_text": "zzz", "new_text": "2"})
    assert not wrong.diffs and "old_text was not found" in wrong.content[0]
    outside = tools.view_of("write_file", {"path": "../x.py", "content": "x"})
    assert "outside the workspace" in outside.content[0]


async def test_symlinks_inside_are_written_through_and_other_files_refused(
    tools: ToolRegistry, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / "real.py").write_text("A = 1\n")
    (root / "link.py").symlink_to("real.py")
    await call(tools, root, "read_file", path="link.py")
    through = await call(tools, root, "edit_file", path="link.py", old_text="1", new_text="2")
    assert not through.is_error, through.content
    assert (root / "real.py").read_text() == "A = 2\n" and (root / "link.py").is_symlink()

    (root / "sub").mkdir()
    (root / "alias").symlink_to("sub")
    made = await call(tools, root, "write_file", path="alias/new/x.py", content="X = 1\n")
    assert made.content == "Created sub/new/x.py (1 line)."
    assert (root / "sub/new/x.py").read_text() == "X = 1\n"

    (root / "one.py").write_text("ONE\n")
    os.link(root / "one.py", root / "two.py")
    linked = await call(tools, root, "write_file", path="one.py", content="x")
    assert linked.is_error and "hard links" in linked.content
    assert (root / "one.py").read_text() == "ONE\n"

    (root / "latin1.py").write_bytes(b"NAME = '\xe9'\n")
    await call(tools, root, "read_file", path="latin1.py")
    latin1 = await call(tools, root, "edit_file", path="latin1.py", old_text="NAME", new_text="N")
    assert latin1.is_error and "not UTF-8 text" in latin1.content


async def test_write_file_keeps_an_existing_files_endings(
    tools: ToolRegistry, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / "dos.txt").write_bytes(b"one\r\ntwo")
    await call(tools, root, "read_file", path="dos.txt")
    written = await call(tools, root, "write_file", path="dos.txt", content="1\n2\n3\n")
    assert written.content == "Wrote dos.txt (3 lines)."
    assert (root / "dos.txt").read_bytes() == b"1\r\n2\r\n3"
    (root / "mixed.txt").write_bytes(b"a\r\nb\nc\n")
    await call(tools, root, "read_file", path="mixed.txt")
    mixed = await call(tools, root, "edit_file", path="mixed.txt", old_text="b\nc", new_text="B\nC")
    assert not mixed.is_error and (root / "mixed.txt").read_bytes() == b"a\r\nB\nC\n"


class FakeEditor:
    """The editor's side of a tool call in-process: buffers it serves, writes it takes (or
    refuses)."""

    def __init__(self, buffers: dict[str, str], refuse_writes: bool = False) -> None:
        self.buffers = buffers
        self.refuse_writes = refuse_writes

    async def read_text_file(self, session_id: str, path: str) -> str:
        return self.buffers[path]

    async def write_text_file(self, session_id: str, path: str, content: str) -> None:
        if self.refuse_writes:
            raise RuntimeError("the buffer is read-only")
        self.buffers[path] = content


async def test_an_editor_that_cannot_write_is_an_error_and_the_disk_stays(
    tools: ToolRegistry, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / "a.py").write_text("ON_DISK = 1\n")
    path = str((root / "a.py").resolve())
    editor = FakeEditor({path: "IN_BUFFER = 1\n"}, refuse_writes=True)
    context = ToolContext("s", "c", root, client_files=editor, client_writes=editor)
    read_file, edit_file = tools.get("read_file"), tools.get("edit_file")
    assert read_file is not None and edit_file is not None
    await read_file.run({"path": "a.py"}, context)
    arguments = {"path": "a.py", "old_text": "IN_BUFFER = 1", "new_text": "IN_BUFFER = 2"}
    refused = await edit_file.run(arguments, context)
    assert refused.is_error
    assert refused.content == "The editor could not write a.py: the buffer is read-only"
    assert (root / "a.py").read_text() == "ON_DISK = 1\n"
    editor.refuse_writes = True
    editor.buffers[path] = "IN_BUFFER = 1\nTYPED = True\n"  # the user typed meanwhile
    stale = await edit_file.run(arguments, context)
    assert stale.is_error and "has changed since you last read it" in stale.content


async def test_a_name_that_is_not_utf8_is_edited_and_shown_escaped(
    tools: ToolRegistry, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / os.fsdecode(b"bad\xff.py")).write_text("B = 1\n")
    await call(tools, root, "read_file", path="bad\\xff.py")
    arguments = {"path": "bad\\xff.py", "old_text": "B = 1", "new_text": "B = 2"}
    shown = tools.view_of("edit_file", arguments)
    assert shown.title == "Edit bad\\xff.py" and shown.diffs[0].path.endswith("bad\\xff.py")
    edited = await call(tools, root, "edit_file", **arguments)
    assert not edited.is_error, edited.content
    assert (root / os.fsdecode(b"bad\xff.py")).read_text() == "B = 2\n"
    json.dumps(edited.content, ensure_ascii=False).encode("utf-8")  # no lone surrogate
