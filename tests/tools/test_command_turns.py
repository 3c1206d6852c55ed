"""Slash command turns (`/cost`, `/model`, `/undo`, `/compact`) are kept and replayed on
`session/load` like any turn, in their place, marked `_meta.parley.command`: a resumed chat
shows that `/undo` put a file back (issue 30)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall


def replayed(client: ParleyClient, session: str) -> list[tuple[str, str, bool]]:
    """(kind, text, marked as a command) of each message chunk, in order."""
    shown = []
    for update in client.updates_of(session):
        kind = update["sessionUpdate"]
        if kind in ("user_message_chunk", "agent_message_chunk"):
            command = bool(update.get("_meta", {}).get("parley", {}).get("command"))
            shown.append((kind, update["content"]["text"], command))
    return shown


async def test_command_turns_are_replayed_in_place_and_marked(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first: ParleyClient = await start_server(home=home)
    await first.initialize()
    first.permission_handler = allow_all
    session = await first.new_session(str(workspace))
    edit = {"path": "notes.txt", "content": "new words\n"}
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("write_file", edit),)), Reply(text="Written.")]
    )
    await first.prompt(session, "Write the notes.")
    assert (workspace / "notes.txt").read_text() == "new words\n"
    await first.prompt(session, "/undo")
    assert not (workspace / "notes.txt").exists()
    await first.prompt(session, "/cost")
    fake.set_script([Reply(text="Read again.")])
    await first.prompt(session, "Read notes.txt again.")
    # The model is told of the restore, in the prompt's turn; the user never sees it there.
    assert "[Parley: the user restored files" in str(fake.requests[-1].body)
    live_cost = [text for kind, text, _ in replayed(first, session) if "so far" in text]

    second: ParleyClient = await start_server(home=home)
    await second.initialize()
    params: dict[str, Any] = {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    await second.request("session/load", params)
    shown = replayed(second, session)
    users = [(text, command) for kind, text, command in shown if kind == "user_message_chunk"]
    assert users == [
        ("Write the notes.", False),
        ("/undo", True),
        ("/cost", True),
        ("Read notes.txt again.", False),  # Parley's note to the model is not the user's
    ]
    assert not any("[Parley:" in text for _, text, _ in shown)
    commands = [text for kind, text, command in shown if command]
    assert commands[0] == "/undo" and "notes.txt" in commands[1]  # what /undo put back
    assert commands[2] == "/cost" and commands[3] == live_cost[0]
    # In place: the command turns after the turn they followed.
    order = [text for _, text, _ in shown]
    assert order.index("Written.") < order.index("/undo") < order.index("/cost")

    exported = await second.request("_parley/session/export", {"sessionId": session})
    assert "## You\n\n`/undo`" in exported["text"] and "## You\n\n`/cost`" in exported["text"]
    assert "[Parley:" not in exported["text"]


async def test_a_refused_command_is_said_once_and_not_kept(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """`/mode pl` (no such mode) and `/model` of no provider are typos to fix: their notice is
    said, the result says `kept: false`, and neither the command nor its notice is replayed
    or exported; a command that worked is kept (issue 42)."""
    home = tmp_path / "home"
    first: ParleyClient = await start_server(home=home)
    await first.initialize()
    session = await first.new_session(str(workspace))
    fake.set_script([Reply(text="Hello.")])
    await first.prompt(session, "Hi.")  # a session is stored from its first prompt
    refused = [await first.prompt(session, typed) for typed in ("/mode pl", "/model nope")]
    kept = await first.prompt(session, "/mode plan")
    assert [result["_meta"]["parley"].get("kept") for result in refused] == [False, False]
    assert "kept" not in kept["_meta"]["parley"]
    said = [text for _, text, _ in replayed(first, session)]
    assert any("No mode 'pl'" in text for text in said)

    second: ParleyClient = await start_server(home=home)
    await second.initialize()
    params: dict[str, Any] = {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    await second.request("session/load", params)
    shown = " ".join(text for _, text, _ in replayed(second, session))
    assert "/mode plan" in shown
    assert "/mode pl\n" not in shown and "No mode" not in shown and "nope" not in shown
    exported = (await second.request("_parley/session/export", {"sessionId": session}))["text"]
    assert "`/mode plan`" in exported
    assert "`/mode pl`" not in exported and "No mode" not in exported and "nope" not in exported
