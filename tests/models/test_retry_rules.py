"""The store's side of a retry (`Store.drop_turn`, `Session.drop_last_turn`), for any
conversation, notices and compaction: what stays is exactly the turns before the cut-off one,
numbered 1…n as before; the cut-off turn's notices go, a command said after it stays (before
the retry's place); a compaction made in it goes; its usage stays; the turn count drops by
one; another window's session sees that it must read the conversation again."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.notices import COMMAND, COMMAND_REPLY
from parley.agent.session import Session, now_iso
from parley.core.conversation import Message, TextBlock, UserMessage
from parley.core.session_settings import SessionSettings
from parley.core.usage import Usage
from parley.store import Store, StoredSession
from parley.tools.registry import ToolRegistry
from test_history import same, turn

LEVELS = ("info", "warning", "error", COMMAND, COMMAND_REPLY)


def stored_session(store: Store, tmp: Path, turns: int) -> None:
    now = now_iso()
    store.save_session(
        StoredSession(
            "sess_r", str(tmp), "t", SessionSettings("openai:m", "sync"), {}, 0, 0, now, now
        )
    )
    for _ in range(turns):
        store.count_turn("sess_r", now)


def opened(store: Store, tmp: Path) -> Session:
    return Session(
        id="sess_r",
        cwd=tmp,
        settings=SessionSettings("openai:m", "sync"),
        tools=ToolRegistry([]),
        store=store,
        history=None,
        length=store.message_count("sess_r"),
        totals=store.usage_totals("sess_r"),
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    turns_before=st.integers(0, 4),
    cut_off_len=st.integers(1, 5),  # the cut-off turn: its prompt, then some of a turn
    notices=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(LEVELS)), max_size=8),
    covers=st.none() | st.integers(1, 30),
)
def test_dropping_the_last_turn_keeps_exactly_what_came_before(
    tmp_path_factory, turns_before: int, cut_off_len: int, notices, covers: int | None
) -> None:
    tmp = tmp_path_factory.mktemp("store")
    store = Store.open_in(tmp)
    stored_session(store, tmp, turns_before + 1)
    now = now_iso()
    before: list[Message] = [m for n in range(turns_before) for m in turn(n)]
    cut_off: list[Message] = [UserMessage((TextBlock("Cut", for_model=False),))]
    cut_off += turn(99)[1:cut_off_len]
    for message in [*before, *cut_off]:
        store.append_message("sess_r", message, now)
    total = len(before) + len(cut_off)
    for place, level in notices:
        store.add_notice("sess_r", min(place, total), level, f"{level} at {place}", now)
    if covers is not None:
        store.add_compaction("sess_r", min(covers, total), "summary", now)
    store.record_usage("sess_r", "openai:m", "stream", Usage(10, 5), 0.01, now)
    spent = store.usage_totals("sess_r")
    session, other_window = opened(store, tmp), opened(store, tmp)
    assert other_window.catch_up() == total  # nothing changed yet

    assert store.take_cut_off("sess_r") is None  # no turn was cut off yet
    store.mark_cut_off("sess_r", len(before))
    assert store.take_cut_off("sess_r") == len(before)
    assert store.take_cut_off("sess_r") is None  # once: whatever comes next ends it
    assert store.take_cut_off("sess_unknown") is None and store.rewrites("sess_unknown") == 0
    prompt = session.drop_last_turn(len(before))

    assert same([prompt]) == same(cut_off[:1])
    assert same(store.messages("sess_r")) == same(before)
    assert same(session.messages()) == same(before) and session.length == len(before)
    kept = store.notices("sess_r")
    assert all(notice.after <= len(before) for notice in kept)
    expected = sorted(
        (min(place, total), level)
        for place, level in notices
        if min(place, total) <= len(before) or level in (COMMAND, COMMAND_REPLY)
    )
    assert sorted((n.after, n.level) for n in kept) == sorted(
        (min(p, len(before)), level) for p, level in expected
    )
    compaction = store.compaction("sess_r")
    assert compaction is None or compaction[0] <= len(before)
    totals = store.usage_totals("sess_r")
    assert totals.turns == turns_before and totals.cost == spent.cost  # billed stays billed
    assert session.totals.turns == turns_before
    assert session.catch_up() == len(before)  # its own replacement: nothing to read again
    assert other_window.catch_up() is None  # read again: no place where the change starts
    assert other_window.length == len(before) and same(other_window.history) == same(before)
    assert other_window.title == "t" and other_window.totals.turns == turns_before
    retried = UserMessage((TextBlock("Retried"),))
    session.add_message(retried)
    assert store.message_count("sess_r") == len(before) + 1  # numbered on from the cut
    assert other_window.catch_up() == len(before)  # an ordinary catch-up from here on
    assert same(other_window.history) == same([*before, retried])
    store.close()
