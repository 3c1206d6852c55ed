"""A rejection's note for the model (`_meta.parley.note` of the client's answer to
`session/request_permission`, protocol/permission.py): any string, any JSON type in its
place or in place of the objects around it is never a crash; what reaches the model is at
most `NOTE_MAX_CHARS` of the note, with no control, format or surrogate character but newline
and tab; no note, or an empty one, is the plain rejection. An allow never carries one."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.tool_permission import NOTE_FROM_USER, REJECTED, ToolPermission
from parley.core.call_view import CallView
from parley.core.choices import RejectWithNote
from parley.core.conversation import ToolCall
from parley.protocol.permission import NOTE_MAX_CHARS, permission_decision
from test_mode_table import session_in, settings_in
from test_tool_permission_rules import Answers

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
# The nastiest strings: control and bidi characters, lone surrogates, only whitespace, long.
NASTY = st.text(
    st.sampled_from(["a", " ", "\n", "\t", "\x1b", "\x00", "\r", "\u202e", "\u200b", "\ud800", "é"])
    | st.characters(),
    max_size=3 * NOTE_MAX_CHARS,
)


def rejected(note: Any, *, option: Any = "reject_once") -> dict[str, Any]:
    return {
        "outcome": {"outcome": "selected", "optionId": option},
        "_meta": {"parley": {"note": note}},
    }


def clean(text: str) -> bool:
    return all(c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf", "Cs") for c in text)


@given(st.one_of(NASTY, JSON))
def test_any_note_is_bounded_and_clean_or_none(note: Any) -> None:
    decision = permission_decision(rejected(note))
    if isinstance(decision, RejectWithNote):
        assert isinstance(note, str)
        assert 0 < len(decision.note) <= NOTE_MAX_CHARS
        assert clean(decision.note) and decision.note == decision.note.strip()
    else:
        assert decision == "reject"


@given(JSON, JSON)
def test_any_json_around_the_note_is_never_a_crash(meta: Any, parley: Any) -> None:
    for answer in (
        {"outcome": {"outcome": "selected", "optionId": "reject_once"}, "_meta": meta},
        rejected(None) | {"_meta": {"parley": parley}},
        meta,
    ):
        assert permission_decision(answer) == "reject" or isinstance(
            permission_decision(answer), RejectWithNote
        )


def test_the_note_is_kept_as_written_and_only_with_a_rejection() -> None:
    assert permission_decision(rejected("  use pathlib instead\n")) == RejectWithNote(
        "use pathlib instead"
    )
    assert permission_decision(rejected("\x1b[2Jred\u202eflip")) == RejectWithNote("[2Jredflip")
    assert permission_decision(rejected("x" * (NOTE_MAX_CHARS + 50))) == RejectWithNote(
        "x" * NOTE_MAX_CHARS
    )
    assert permission_decision(rejected(" \x00 ")) == "reject"
    assert permission_decision(rejected("go ahead", option="allow_once")) == "allow_once"
    # An option the question did not offer rejects, and the note still goes with it.
    assert permission_decision(rejected("no", option="allow_forever")) == RejectWithNote("no")


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(NASTY)
async def test_what_the_model_reads_holds_at_most_the_cap(tmp_path: Path, note: str) -> None:
    session, config = session_in(tmp_path, []), settings_in(tmp_path)
    call = ToolCall("c1", "python_eval", {"code": "1"}, "call_1")

    async def shown() -> CallView:
        return CallView("A call")

    permission = ToolPermission(session, config, Answers(permission_decision(rejected(note))))
    told = await permission.ask(call, "execute", shown)
    assert told is not None and told.startswith(REJECTED)
    if told != REJECTED:
        words = told.removeprefix(f"{REJECTED} {NOTE_FROM_USER} ")
        assert 0 < len(words) <= NOTE_MAX_CHARS and clean(words)
