"""Slash commands and config options on their own (the wire: test_acp_conformance.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from parley.agent.commands import (
    CommandCall,
    available_commands,
    describe_totals,
    parse_command,
)
from parley.agent.config_options import InvalidChoice, requested_change, session_config_options
from parley.config import ConfigError, Settings, load_settings
from parley.core.conversation import ResourceBlock, TextBlock
from parley.core.thought_levels import Thinking, nearest_level
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
        ("/compact", CommandCall("compact", "")),
        ("/mode plan", CommandCall("mode", "plan")),
        ("/modes", None),
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
    names = [command["name"] for command in advertised]
    assert names == ["model", "mode", "cost", "undo", "redo", "compact"]
    assert advertised[0]["input"] == {"hint": "provider:model"}
    assert advertised[1]["input"] == {"hint": "ask|accept_edits|plan"}
    assert all("input" not in command for command in advertised[2:])


def test_the_model_option_offers_the_available_models_and_the_sessions_own() -> None:
    options = session_config_options("ollama:qwen3", "sync", MODELS)
    mode, model, policy, budget = options
    assert mode["category"] == "mode" and mode["currentValue"] == "ask"
    assert [o["value"] for o in mode["options"]] == ["ask", "accept_edits", "plan"]
    assert model["category"] == "model" and model["currentValue"] == "ollama:qwen3"
    assert [o["value"] for o in model["options"]] == ["ollama:qwen3", "openai:gpt-4.1"]
    assert policy["currentValue"] == "sync"
    assert [o["value"] for o in policy["options"]] == ["hybrid", "stream", "sync"]
    assert budget["currentValue"] == "none"


def test_a_change_must_be_one_the_options_offer() -> None:
    options = session_config_options("openai:gpt-4.1", "hybrid", MODELS)
    assert requested_change("tool_policy", "stream", options) == {"tool_policy": "stream"}
    assert requested_change("model", "openai:gpt-4.1", options) == {"model": "openai:gpt-4.1"}
    assert requested_change("mode", "plan", options) == {"mode": "plan"}
    for config_id, value in (
        ("mode", "yolo"),
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


def settings_with(tmp_path: Path, config: str = "") -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(config, encoding="utf-8")
    return load_settings({"PARLEY_CONFIG": str(path), "PARLEY_HOME": str(tmp_path / "home")})


@pytest.mark.parametrize(
    ("model", "levels"),
    [
        ("anthropic:claude-sonnet-4-5", ("off", "low", "medium", "high")),
        ("anthropic:claude-opus-4-1-20250805", ("off", "low", "medium", "high")),
        ("anthropic:claude-haiku-4-5", ("off", "low", "medium", "high")),
        ("anthropic:claude-3-7-sonnet-latest", ("off", "low", "medium", "high")),
        ("anthropic:claude-3-5-haiku-latest", ()),
        ("openai:o3", ("low", "medium", "high")),
        ("openai:o4-mini-2025-04-16", ("low", "medium", "high")),
        ("openai:gpt-5-mini", ("low", "medium", "high")),
        ("openai:gpt-5-chat-latest", ()),  # GPT-5's chat variant does not reason
        ("openai:o1-mini", ()),  # takes no reasoning_effort
        ("openai:gpt-4.1-mini", ()),
        ("ollama:qwen3", ()),
        ("nowhere:o3", ()),  # an unknown provider
    ],
)
def test_which_models_take_a_thinking_level(tmp_path: Path, model: str, levels: tuple) -> None:
    assert settings_with(tmp_path).thought_levels(model) == levels


def test_config_toml_says_which_models_think_and_how_much(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path,
        """
        [models."anthropic:claude-sonnet-4-5"]
        thinking_budget = 10000
        [models."anthropic:claude-3-5-haiku-latest"]
        thinking_budget = 3000          # a configured budget: it thinks
        [models."anthropic:claude-haiku-4-5"]
        thinking = false
        [models."ollama:gpt-oss"]
        thinking = true                 # an OpenAI-compatible server: reasoning_effort
        """,
    )
    assert settings.default_thought_level("anthropic:claude-sonnet-4-5") == "medium"
    assert settings.thinking("anthropic:claude-sonnet-4-5", None) == Thinking(budget_tokens=10000)
    assert settings.thinking("anthropic:claude-sonnet-4-5", "high") == Thinking(budget_tokens=24576)
    assert settings.thinking("anthropic:claude-sonnet-4-5", "off") == Thinking()
    assert settings.default_thought_level("anthropic:claude-3-5-haiku-latest") == "low"
    assert settings.thought_levels("anthropic:claude-haiku-4-5") == ()
    assert settings.thinking("anthropic:claude-haiku-4-5", "high") == Thinking()
    assert settings.default_thought_level("ollama:gpt-oss") == "medium"
    assert settings.thinking("ollama:gpt-oss", None) == Thinking()  # the API's default
    assert settings.thinking("ollama:gpt-oss", "high") == Thinking(reasoning_effort="high")
    assert settings.thinking("ollama:gpt-oss", "off") == Thinking()  # not one of its levels
    # Without a budget an Anthropic model starts with thinking off.
    assert settings_with(tmp_path).default_thought_level("anthropic:claude-opus-4-1") == "off"


@pytest.mark.parametrize("entry", ["thinking = 1", 'thinking_budget = "lots"'])
def test_a_bad_thinking_setting_is_a_config_error(tmp_path: Path, entry: str) -> None:
    with pytest.raises(ConfigError, match="thinking"):
        settings_with(tmp_path, f'[models."anthropic:claude-sonnet-4-5"]\n{entry}\n')


def test_a_configured_budget_is_shown_as_the_nearest_level() -> None:
    assert [nearest_level(b) for b in (None, 0, 1024, 4000, 12000, 16000, 64000)] == [
        "off",
        "off",
        "low",
        "low",
        "medium",
        "medium",
        "high",
    ]


def test_the_thought_level_option_is_there_only_for_a_model_that_has_one() -> None:
    levels = ("off", "low", "medium", "high")
    options = session_config_options(
        "anthropic:claude-sonnet-4-5", "hybrid", MODELS, levels, "high"
    )
    assert [option["id"] for option in options] == [
        "mode",
        "model",
        "thought_level",
        "tool_policy",
        "budget",
    ]
    thought = options[2]
    assert thought["category"] == "thought_level" and thought["type"] == "select"
    assert thought["currentValue"] == "high"
    assert [o["value"] for o in thought["options"]] == list(levels)
    assert requested_change("thought_level", "off", options) == {"thought_level": "off"}
    with pytest.raises(InvalidChoice):
        requested_change("thought_level", "extreme", options)
    effort = session_config_options("openai:o3", "hybrid", MODELS, levels[1:], None)
    assert [o["value"] for o in effort[2]["options"]] == ["low", "medium", "high"]
    plain = session_config_options("openai:gpt-4.1", "hybrid", MODELS)
    assert "thought_level" not in [option["id"] for option in plain]
