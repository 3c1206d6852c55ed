"""Slash commands and config options on their own (the wire: test_acp_conformance.py)."""

from __future__ import annotations

import pytest
from parley.agent.commands import (
    CommandCall,
    available_commands,
    describe_totals,
    parse_command,
)
from parley.agent.config_options import InvalidChoice, requested_change, session_config_options
from parley.core.conversation import ResourceBlock, TextBlock
from parley.core.usage import Usage, UsageTotals

MODELS = [
    {"id": "openai:gpt-4.1", "available": True},
    {"id": "anthropic:claude-haiku-4-5", "available": False, "reason": "no key"},
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/model openai:gpt-4.1", CommandCall("model", "openai:gpt-4.1")),
        ("  /model\n  openai:gpt-4.1  ", CommandCall("model", "openai:gpt-4.1")),
        ("/model", CommandCall("model", "")),
        ("/cost", CommandCall("cost", "")),
        ("/undo", CommandCall("undo", "")),
        ("/costs", None),  # not an advertised command: a prompt for the model
        ("/compact", None),  # not advertised until compaction exists
        ("What does /cost mean?", None),
        ("/", None),
        ("", None),
    ],
)
def test_a_prompt_is_a_command_only_when_it_starts_with_an_advertised_one(
    text: str, expected: CommandCall | None
) -> None:
    assert parse_command((TextBlock(text),)) == expected


def test_a_prompt_that_starts_with_context_is_not_a_command() -> None:
    assert parse_command((ResourceBlock("file:///a.py", "/cost"), TextBlock("/cost"))) is None
    assert parse_command(()) is None


def test_the_advertised_commands_are_those_that_run() -> None:
    advertised = available_commands()
    assert [command["name"] for command in advertised] == ["model", "cost", "undo"]
    assert advertised[0]["input"] == {"hint": "provider:model"}
    assert "input" not in advertised[1] and "input" not in advertised[2]


def test_the_model_option_offers_the_available_models_and_the_sessions_own() -> None:
    options = session_config_options("ollama:qwen3", "sync", MODELS)
    model, policy = options
    assert model["category"] == "model" and model["currentValue"] == "ollama:qwen3"
    assert [o["value"] for o in model["options"]] == ["ollama:qwen3", "openai:gpt-4.1"]
    assert policy["currentValue"] == "sync"
    assert [o["value"] for o in policy["options"]] == ["hybrid", "stream", "sync"]


def test_a_change_must_be_one_the_options_offer() -> None:
    options = session_config_options("openai:gpt-4.1", "hybrid", MODELS)
    assert requested_change("tool_policy", "stream", options) == {"tool_policy": "stream"}
    assert requested_change("model", "openai:gpt-4.1", options) == {"model": "openai:gpt-4.1"}
    for config_id, value in (
        ("model", "anthropic:claude-haiku-4-5"),  # configured, not available
        ("tool_policy", True),
        ("thought_level", "high"),
    ):
        with pytest.raises(InvalidChoice):
            requested_change(config_id, value, options)


def test_cost_is_told_in_words() -> None:
    assert describe_totals(UsageTotals()) == "no model calls yet."
    totals = UsageTotals(turns=1, rounds=2)
    totals.add_call(Usage(input_tokens=1500, output_tokens=20, cached_read_tokens=500), 0.0123)
    assert describe_totals(totals) == (
        "1 turn, 2 model rounds; 1,500 tokens in (500 read from the cache), 20 out; cost $0.0123."
    )
    totals.add_call(Usage(), None)
    assert "at least $0.0123" in describe_totals(totals)
