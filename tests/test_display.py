"""The display rules of docs/display.md as `parley chat`, `sessions` and `export` apply them
(server/parley/display.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from parley.display import (
    format_context,
    format_cost,
    format_time,
    format_tokens,
    format_tool_input,
    stop_text,
    summarize_tool_result,
    turn_summary,
)


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (0, "0"),
        (950, "950"),
        (999, "999"),
        (1_000, "1.0k"),
        (1_234, "1.2k"),
        (9_999, "10.0k"),
        (12_345, "12k"),
        (999_999, "999k"),
        (1_000_000, "1.0M"),
        (1_234_567, "1.2M"),
        (None, "0"),
    ],
)
def test_token_counts(count: int | None, shown: str) -> None:
    assert format_tokens(count) == shown


@pytest.mark.parametrize(
    ("amount", "shown"),
    [(1.25, "$1.25"), (1.0, "$1.00"), (0.0123, "$0.0123"), (0.0, "$0"), (None, "cost unknown")],
)
def test_cost(amount: float | None, shown: str) -> None:
    assert format_cost(amount) == shown


def test_context_with_and_without_a_known_window() -> None:
    assert format_context(12_000, 200_000) == "context 12k/200k (6%)"
    assert format_context(1_264, 0) == "context 1.3k"
    assert format_context(1_264, None) == "context 1.3k"


def test_code_arguments_are_shown_as_code_in_their_language() -> None:
    code = "import math\nprint(math.pi)\n"
    assert format_tool_input("python_eval", {"code": code}) == (
        "```python\nimport math\nprint(math.pi)\n```"
    )
    assert format_tool_input("elisp_eval", {"form": "(+ 1 2)"}) == "```elisp\n(+ 1 2)\n```"
    shown = format_tool_input("run_tests", {"command": "pytest -q", "timeout": 30})
    assert shown == '```sh\npytest -q\n```\n{\n  "timeout": 30\n}'


def test_other_input_is_indented_json_with_multiline_strings_on_their_own_lines() -> None:
    shown = format_tool_input(
        "write_file", {"path": "notes.md", "text": "# Notes\nfirst\n", "tags": ["a", 1]}
    )
    assert shown == (
        "{\n"
        '  "path": "notes.md",\n'
        '  "text":\n'
        "    # Notes\n"
        "    first,\n"
        '  "tags": [\n'
        '    "a",\n'
        "    1\n"
        "  ]\n"
        "}"
    )
    assert "\\n" not in shown
    assert format_tool_input("list_files", {}) == "{}"
    assert (
        format_tool_input("notes", {"items": ["a\nb"]}) == '{\n  "items": [\n    a\n    b\n  ]\n}'
    )
    assert format_tool_input("echo", "one\ntwo") == "one\ntwo"


def test_a_result_summary_drops_section_labels_and_keeps_three_lines() -> None:
    text = "stdout:\nhello\n\nworld\nresult:\nvalue: 12\nmore\n"
    assert summarize_tool_result(text) == "hello\nworld\nvalue: 12"


def test_a_result_summary_cuts_long_lines_and_says_no_output() -> None:
    assert summarize_tool_result("x" * 130) == "x" * 120 + "…"
    assert summarize_tool_result("stdout:\n\n") == "(no output)"
    assert summarize_tool_result(None) == "(no output)"


def test_a_failed_calls_summary_starts_with_its_error_line() -> None:
    summary = summarize_tool_result(
        "stderr:\nTraceback (most recent call last):\n  File x\nNameError: y",
        error="NameError: name 'y' is not defined\nmore",
    )
    assert summary.splitlines() == [
        "NameError: name 'y' is not defined",
        "Traceback (most recent call last):",
        "  File x",
    ]


@pytest.fixture
def in_new_york() -> Iterator[None]:
    """A local time zone that is not UTC, so a UTC stamp shown as is would be caught."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_times_are_local_and_shorter_when_recent(in_new_york: None) -> None:
    now = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)  # 15:00 in New York
    assert format_time("2026-11-22T19:05:00.000Z", now) == "14:05"
    assert format_time("2026-11-21T19:05:00.000Z", now) == "Nov 21 14:05"
    assert format_time("2025-11-22T19:05:00.000Z", now) == "2025-11-22 14:05"
    # 02:00 UTC on the 23rd is still the 22nd in New York: today.
    assert format_time("2026-11-23T02:00:00.000Z", now) == "21:00"
    assert format_time("not a time", now) == "not a time"


def test_stop_text_prefers_the_servers_sentence_and_falls_back_to_the_table() -> None:
    sent = {"stopReason": "refusal", "_meta": {"parley": {"stopText": "Not started: spent."}}}
    assert stop_text(sent) == "Not started: spent."
    assert stop_text({"stopReason": "cancelled"}) == "Stopped."
    assert stop_text({"stopReason": "max_turn_requests", "_meta": {"parley": {}}}) == (
        "Stopped: the turn reached its limit of model requests."
    )
    assert stop_text({"stopReason": "weird"}) == "Turn ended: weird."
    assert stop_text({"stopReason": "end_turn"}) is None


def test_the_turn_summary_has_no_internal_words() -> None:
    turn = {
        "model": "openai:gpt-4.1-mini",
        "rounds": 2,
        "toolCalls": 1,
        "discardedStreams": 1,
        "syncFallbacks": 1,
        "cost": {"amount": 0.0123, "currency": "USD"},
        "wastedTokensEstimate": 12_400,
    }
    summary = turn_summary(turn, {"inputTokens": 15_300, "outputTokens": 950})
    assert summary == (
        "openai:gpt-4.1-mini · 2 rounds · 1 tool call · 15k tokens in, 950 out · $0.0123 · "
        "about 12k tokens re-sent for tool calls"
    )
    assert "stream" not in summary and "fallback" not in summary
    one = turn_summary({**turn, "rounds": 1, "cost": None, "wastedTokensEstimate": 0}, {})
    assert one == "openai:gpt-4.1-mini · 1 round · 1 tool call · 0 tokens in, 0 out · cost unknown"
