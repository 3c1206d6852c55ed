"""A session's conversation without holding all of it: the replay is streamed from the store,
and after a compaction only the messages the model still sees are kept in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.agent.compaction import Compaction, compacted_view
from parley.agent.history import History
from parley.agent.replay import replay_updates
from parley.agent.session import Session, now_iso
from parley.core.conversation import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.core.session_settings import SessionSettings
from parley.store import Store, StoredNotice, StoredSession
from parley.tools.registry import ToolRegistry
from parley.tools.server_tools import server_tools


def turn(n: int, *, answered: bool = True) -> list[Message]:
    call = ToolCall(f"call_{n}", "read_file", {"path": f"f{n}.py"}, f"wire_{n}")
    messages: list[Message] = [
        UserMessage((TextBlock(f"Question {n}"),)),
        AssistantMessage(f"Reading {n}.", (), (call,), f"msg_{n}_a"),
    ]
    if answered:
        messages.append(ToolResultMessage(call.id, call.name, f"output {n}", wire_id=call.wire_id))
    messages.append(AssistantMessage(f"Answer {n}.", message_id=f"msg_{n}_b"))
    return messages


def same(messages: Any) -> list[str]:
    """Messages as comparable values (a tool result compares by identity)."""
    return [repr(message) for message in messages]


def seen(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What a client shows, in order: each update's kind and its text or call state."""
    shown = []
    for update in updates:
        kind = update["sessionUpdate"]
        if kind == "tool_call":
            output = update.get("content", [{}])[0].get("content", {}).get("text", "")
            shown.append((kind, f"{update['toolCallId']} {update['status']} {output}".strip()))
        else:
            shown.append((kind, update["content"]["text"]))
    return shown


def test_a_replay_shows_each_call_with_the_result_that_followed_it(tmp_path: Path) -> None:
    tools = ToolRegistry(server_tools(tmp_path))
    # Turn 1's call was never answered (a server killed mid-call, with another window busy).
    messages = [*turn(0), *turn(1, answered=False), *turn(2)]
    updates = list(replay_updates(iter(messages), tools))
    assert seen(updates) == [
        ("user_message_chunk", "Question 0"),
        ("agent_message_chunk", "Reading 0."),
        ("tool_call", "wire_0 completed output 0"),
        ("agent_message_chunk", "Answer 0."),
        ("user_message_chunk", "Question 1"),
        ("agent_message_chunk", "Reading 1."),
        ("tool_call", "wire_1 failed"),
        ("agent_message_chunk", "Answer 1."),
        ("user_message_chunk", "Question 2"),
        ("agent_message_chunk", "Reading 2."),
        ("tool_call", "wire_2 completed output 2"),
        ("agent_message_chunk", "Answer 2."),
    ]
    # A window that was behind is shown the turns it missed, numbered as in the whole.
    missed = list(replay_updates(iter(messages[7:]), tools, start=7))
    assert missed == updates[8:]
    assert missed[0]["messageId"] == "user_7"


def test_a_replay_is_sent_as_it_is_read(tmp_path: Path) -> None:
    """Each message's updates come out before the next message is read (a call's after its
    result): the conversation is never held whole."""
    tools = ToolRegistry(server_tools(tmp_path))
    read = 0

    def stream() -> Any:
        nonlocal read
        for message in [*turn(0), *turn(1)]:
            read += 1
            yield message

    progress = [(read, update["sessionUpdate"]) for update in replay_updates(stream(), tools)]
    assert progress == [
        (1, "user_message_chunk"),
        (3, "agent_message_chunk"),  # held until its call's result (message 3) was read
        (3, "tool_call"),
        (4, "agent_message_chunk"),
        (5, "user_message_chunk"),
        (7, "agent_message_chunk"),
        (7, "tool_call"),
        (8, "agent_message_chunk"),
    ]


@st.composite
def conversations_with_notices(draw: st.DrawFn) -> tuple[list[Message], list[StoredNotice]]:
    """Turns (some with a call never answered) and notices said at any point of them."""
    answered = draw(st.lists(st.booleans(), max_size=4))
    messages = [message for n, done in enumerate(answered) for message in turn(n, answered=done)]
    places = sorted(draw(st.lists(st.integers(0, len(messages)), max_size=5)))
    levels = st.sampled_from(["info", "warning", "error"])
    notices = [StoredNotice(place, draw(levels), f"Notice {i}.") for i, place in enumerate(places)]
    return messages, notices


@settings(max_examples=60, deadline=None)
@given(conversations_with_notices())
def test_a_replay_shows_each_notice_after_the_messages_said_before_it(
    conversation: tuple[list[Message], list[StoredNotice]],
) -> None:
    messages, notices = conversation
    tools = ToolRegistry()
    updates = list(replay_updates(iter(messages), tools, 0, iter(notices)))
    said = [u for u in updates if "notice" in u.get("_meta", {}).get("parley", {})]
    others = [u for u in updates if u not in said]
    # The messages are shown as without notices; the notices in order, each once, as sent.
    assert others == list(replay_updates(iter(messages), tools))
    assert [(u["_meta"]["parley"]["notice"]["level"], u["content"]["text"]) for u in said] == [
        (notice.level, notice.text) for notice in notices
    ]
    assert len({u["messageId"] for u in said}) == len(said)
    # Each after everything the messages before its place show, and before the rest.
    for notice, update in zip(notices, said, strict=True):
        before = [u for u in updates[: updates.index(update)] if u not in said]
        assert len(before) == len(list(replay_updates(iter(messages[: notice.after]), tools)))


def test_a_history_holds_its_messages_from_the_offset_and_reads_older_ones() -> None:
    everything = [message for n in range(5) for message in turn(n)]
    reads: list[tuple[int, int]] = []

    def read(start: int, stop: int) -> list[Message]:
        reads.append((start, stop))
        return everything[start:stop]

    history = History(everything[8:], offset=8, read=read)
    assert len(history) == 20 and list(history.held) == everything[8:]
    assert history[8:] == everything[8:] and history[-1] == everything[-1] and not reads
    assert history[3] == everything[3] and history[6:10] == everything[6:10]
    assert list(history) == everything
    assert reads == [(3, 4), (6, 8), (0, 8)]
    with pytest.raises(IndexError):
        history[20]

    history.append(everything[0])
    history.hold_from(12, read)
    assert len(history) == 21 and list(history.held) == [*everything[12:], everything[0]]
    assert compacted_view(history, Compaction(12, "so far"))[1:] == [
        *everything[13:],
        everything[0],
    ]


def test_a_compacted_session_holds_only_what_the_model_sees(tmp_path: Path) -> None:
    store = Store.open_in(tmp_path / "data")
    now = now_iso()
    store.save_session(
        StoredSession(
            "sess_h", str(tmp_path), "t", SessionSettings("openai:m", "sync"), {}, 0, 0, now, now
        )
    )
    everything = [message for n in range(25) for message in turn(n)]
    for message in everything:
        store.append_message("sess_h", message, now)
    store.add_compaction("sess_h", 80, "The first twenty turns.", now)
    session = Session(
        id="sess_h",
        cwd=tmp_path,
        settings=SessionSettings("openai:m", "sync"),
        tools=ToolRegistry([]),
        store=store,
        history=None,
        length=store.message_count("sess_h"),
        compaction=Compaction(80, "The first twenty turns."),
    )
    assert same(session.messages()) == same(everything)  # a replay reads the store
    assert session.history.offset == 80
    assert same(session.history.held) == same(everything[80:])
    view = compacted_view(session.history, session.compaction)
    assert "The first twenty turns." in view[0].as_text()  # type: ignore[union-attr]
    assert same(view[1:]) == same(everything[81:])

    # A later compaction lets go of what it covers; the store keeps everything.
    session.add_message(UserMessage((TextBlock("Question 25"),)))
    session.set_compaction(Compaction(96, "The first twenty-four turns."))
    assert session.history.offset == 96 and len(session.history.held) == 5
    assert len(store.messages("sess_h")) == 101
    store.close()
