"""The context window a model is reported with: config.toml's, else the built-in table's."""

from __future__ import annotations

from pathlib import Path

import pytest
from parley.config import ConfigError, load_settings
from parley.core.context_windows import known_context_window


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("openai:gpt-4.1-mini", 1_047_576),
        ("openai:gpt-4o-2024-08-06", 128_000),
        ("openai:gpt-5-mini", 400_000),
        ("openai:o3-mini", 200_000),
        ("openai:o1-mini", 128_000),
        ("anthropic:claude-sonnet-4-5-20250929", 200_000),
        ("openai:gpt-4.1x", None),  # a prefix counts only up to a dash
        ("ollama:qwen3", None),
        ("openrouter:gpt-4o", None),  # another provider's model of that name: unknown
    ],
)
def test_well_known_models_have_their_window(model: str, window: int | None) -> None:
    assert known_context_window(model) == window


def settings_with(tmp_path: Path, toml: str):
    config = tmp_path / "config.toml"
    config.write_text(toml)
    return load_settings({"PARLEY_CONFIG": str(config), "PARLEY_HOME": str(tmp_path / "home")})


def test_config_gives_a_window_and_overrides_the_table(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path,
        '[models."ollama:qwen3"]\ncontext_window = 32768\n'
        '[models."openai:gpt-4o"]\ncontext_window = 64000\n',
    )
    assert settings.context_window("ollama:qwen3") == 32768
    assert settings.context_window("openai:gpt-4o") == 64000
    assert settings.context_window("openai:gpt-4o-mini") == 128_000
    assert settings.context_window("ollama:llama3") is None


def test_a_window_that_is_no_number_of_tokens_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="context_window"):
        settings_with(tmp_path, '[models."ollama:qwen3"]\ncontext_window = "big"\n')
