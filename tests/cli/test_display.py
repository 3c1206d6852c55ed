"""The display rules of docs/display.md as `parley chat`, `sessions` and `export` apply them
(server/parley/display.py): every case of tests/display-cases.json, the one file of cases
the Emacs and VS Code tests check too, and the rules that file does not cover."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import TESTS
from parley.display import (
    escape_controls,
    format_context,
    format_cost,
    format_time,
    format_tokens,
    format_tool_input,
    summarize_tool_result,
    turn_summary,
)

# The cases every client checks its rules against (pytest, ERT and the VS Code tests alike).
CASES = json.loads((TESTS / "display-cases.json").read_text(encoding="utf-8"))
# Each rule of the file, as parley.display implements it.
RULES: dict[str, Callable[..., str]] = {
    "formatTokens": format_tokens,
    "formatCost": format_cost,
    "formatContext": format_context,
    "summarizeToolResult": summarize_tool_result,
    "escapeControls": escape_controls,
}


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set the local time zone for the test (`TZ`), put back after it."""

    def set_zone(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


def test_the_file_has_cases_for_each_rule_and_only_those() -> None:
    assert set(CASES) - {"_about"} == {*RULES, "formatTime"}
    assert all(CASES[rule] for rule in RULES) and CASES["formatTime"]["cases"]


@pytest.mark.parametrize(
    ("rule", "case"),
    [(rule, case) for rule in RULES for case in CASES[rule]],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_each_shared_case(rule: str, case: list[Any]) -> None:
    *arguments, shown = case
    assert RULES[rule](*arguments) == shown


@pytest.mark.parametrize(("when", "shown"), CASES["formatTime"]["cases"])
def test_each_shared_time_case_in_utc(
    local_zone: Callable[[str], None], when: str, shown: str
) -> None:
    local_zone("UTC")
    now = datetime.fromisoformat(CASES["formatTime"]["now"].replace("Z", "+00:00"))
    assert format_time(when, now) == shown


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


def test_times_are_local_and_shorter_when_recent(local_zone: Callable[[str], None]) -> None:
    local_zone("America/New_York")  # not UTC: a UTC stamp shown as is would be caught
    now = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)  # 15:00 in New York
    assert format_time("2026-11-22T19:05:00.000Z", now) == "14:05"
    assert format_time("2026-11-21T19:05:00.000Z", now) == "Nov 21 14:05"
    assert format_time("2025-11-22T19:05:00.000Z", now) == "2025-11-22 14:05"
    # 02:00 UTC on the 23rd is still the 22nd in New York: today.
    assert format_time("2026-11-23T02:00:00.000Z", now) == "21:00"
    assert format_time("not a time", now) == "not a time"


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
