"""config.toml structured by cattrs (config_file.py): each kind of mistake is one line that
names the key's path and what was expected; any TOML document loads or is a ConfigError.

In-process: `load_settings` reads a real file, as `parley serve` does at its start (and
`cli.py` prints the error as it is and exits 2).
"""

from __future__ import annotations

import datetime
import json
import math
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley import config as config_module
from parley.config import ConfigError, Settings, load_settings
from parley.server import kernel_settings


def loaded(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings({"PARLEY_CONFIG": str(path), "PARLEY_HOME": str(tmp_path / "home")})


def mistakes(tmp_path: Path, text: str) -> list[str]:
    """The error's lines, each without the file's path in front."""
    with pytest.raises(ConfigError) as error:
        loaded(tmp_path, text)
    prefix = f"{tmp_path / 'config.toml'}: "
    lines = str(error.value).splitlines()
    assert all(line.startswith(prefix) for line in lines)
    return [line.removeprefix(prefix) for line in lines]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # A wrong type.
        (
            '[providers.local]\nstall_timeout = "slow"\n',
            'providers.local.stall_timeout: expected a number, got "slow"',
        ),
        ("max_turn_requests = 2.5\n", "max_turn_requests: expected a whole number, got 2.5"),
        ('[sandbox]\nenabled = "no"\n', 'sandbox.enabled: expected true or false, got "no"'),
        ('[sandbox]\nmcp_network = "fetch"\n', 'sandbox.mcp_network: expected a list, got "fetch"'),
        ("providers = 5\n", "providers: expected a table, got 5"),
        ('kernel = "fast"\n', 'kernel: expected a table, got "fast"'),
        ("[kernel]\npython = 3\n", "kernel.python: expected a string, got 3"),
        # A value out of its range.
        ("stall_timeout = 0\n", "stall_timeout: expected a number > 0, got 0"),
        ("stall_timeout = nan\n", "stall_timeout: expected a number, got nan"),
        (
            "[compaction]\nthreshold = 1.5\n",
            "compaction.threshold: expected a share: a number > 0 and <= 1, got 1.5",
        ),
        ("[sandbox]\npids_max = -1\n", "sandbox.pids_max: expected a whole number >= 0, got -1"),
        ("[kernel]\ncpu_seconds = -1\n", "kernel.cpu_seconds: expected a number >= 0, got -1"),
        (
            '[models."ollama:qwen3"]\ncontext_window = 0\n',
            'models."ollama:qwen3".context_window: expected a whole number > 0, got 0',
        ),
        (
            '[sandbox]\nwritable = [""]\n',
            'sandbox.writable[0]: expected a path (a string, not empty), got ""',
        ),
        # A value not among its choices.
        (
            '[models."ollama:qwen3"]\ntool_format = "xml"\n',
            'models."ollama:qwen3".tool_format: expected one of "native", "text", got "xml"',
        ),
        (
            '[providers.mine]\nkind = "gemini"\n',
            'providers.mine.kind: expected one of "openai", "anthropic", got "gemini"',
        ),
        (
            '[providers.vllm]\ncontinue_streamed = "yes"\n',
            'providers.vllm.continue_streamed: expected one of "vllm", "prefill", "deepseek", '
            'true or false, got "yes"',
        ),
        (
            "[models.qwen3]\nvision = true\n",
            'models.qwen3: expected a model named "provider:model", got "qwen3"',
        ),
        # An unknown key, where a table refuses one (today's rule: [sandbox] and [budget]).
        (
            "[budget]\nweekly_usd = 5\n",
            "budget.weekly_usd: unknown setting (expected one of session_usd, day_usd)",
        ),
        (
            "[sandbox]\nnetwork = true\n",
            "sandbox.network: unknown setting (expected one of enabled, pids_max, "
            "kernel_network, mcp_network, command_network, writable, hidden, unix_sockets, env)",
        ),
        (
            "[commands]\ntimeout = 5\n",
            "commands.timeout: unknown setting (expected one of timeout_seconds, "
            "max_timeout_seconds)",
        ),
        (
            "[commands]\nmax_timeout_seconds = 0\n",
            "commands.max_timeout_seconds: expected a number > 0, got 0",
        ),
        # A key a table needs.
        ('[prices."a:b"]\ninput = 1\n', 'prices."a:b".output: missing (it is required)'),
    ],
)
def test_each_kind_of_mistake_names_its_key_and_what_was_expected(
    tmp_path: Path, text: str, said: str
) -> None:
    assert mistakes(tmp_path, text) == [said]


def test_every_mistake_is_named_one_per_line(tmp_path: Path) -> None:
    text = '[budget]\nsession_usd = "2"\n[models."a:b"]\nthinking = 1\n'
    assert sorted(mistakes(tmp_path, text)) == [
        'budget.session_usd: expected a number, got "2"',
        'models."a:b".thinking: expected true or false, got 1',
    ]


def test_an_unknown_key_elsewhere_is_ignored_as_before(tmp_path: Path) -> None:
    settings = loaded(tmp_path, 'colour = "blue"\n[providers.local]\ncolour = "red"\n')
    assert settings.providers["local"].kind == "openai"


def test_the_documented_example_loads_with_its_values(tmp_path: Path) -> None:
    """config.py's docstring shows a config.toml: it is one, and means what it says."""
    example = textwrap.dedent(config_module.__doc__.split("\n\n", 2)[2])
    settings = loaded(tmp_path, example)
    lmstudio = settings.providers["lmstudio"]
    assert (lmstudio.base_url, lmstudio.api_key_env, lmstudio.stall_timeout) == (
        "http://localhost:1234/v1",
        "",
        300.0,
    )
    assert lmstudio.continue_streamed is None and not lmstudio.prompt_cache_key
    assert settings.providers["openai"].stall_timeout == 60.0
    assert settings.models["ollama:qwen3"].context_window == 32768
    assert settings.models["ollama:qwen3"].tool_format == "text"
    assert settings.models["anthropic:claude-sonnet-4-5"].thinking_budget == 8192
    assert (settings.budget.session_usd, settings.budget.day_usd) == (2.0, 10.0)
    assert settings.prices["openai:gpt-4.1"].cached_write == 2.0
    assert settings.sandbox.mcp_network == ("fetch",)
    assert settings.sandbox.hidden == ("~/.config/secrets",)
    kernel = kernel_settings(settings)
    assert (kernel.timeout_seconds, kernel.cpu_seconds) == (30.0, 60.0)
    assert kernel.sandbox == settings.sandbox


# --- the property: any TOML document -------------------------------------------------------

KEYS = [
    *("default_model", "max_turn_requests", "stall_timeout", "tool_timeout_seconds"),
    *("mcp_start_timeout_seconds", "kernel", "sandbox", "budget", "compaction", "providers"),
    *("models", "prices", "python", "timeout_seconds", "output_limit", "memory_limit_bytes"),
    *("cpu_seconds", "enabled", "pids_max", "kernel_network", "mcp_network", "writable"),
    *("hidden", "session_usd", "day_usd", "threshold", "local", "openai", "vllm", "kind"),
    *("base_url", "api_key_env", "default_api_key", "max_retries", "prompt_cache_key"),
    *("continue_streamed", "context_window", "tool_format", "max_tokens", "thinking_budget"),
    *("think_tags", "vision", "thinking", "input", "output", "cached_read", "cached_write"),
    *("ollama:qwen3", "a:b", "qwen3", "checkpoints", "ignore", "max_turn_megabytes"),
]
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6))
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 0.5, 1.5, 2.0]),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["native", "text", "openai", "anthropic", "vllm", "a:b", "", "~/x"]),
    st.datetimes(),
    st.dates(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
documents = st.one_of(
    st.dictionaries(keys, values, max_size=6).map(lambda table: toml_document(table)),
    st.text(max_size=60),  # mostly not TOML at all
)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML's (a lone surrogate: not TOML)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(table: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(key)} = {toml_value(value)}\n" for key, value in table.items())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_toml_document_loads_or_is_a_config_error_naming_where(document: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_text(document, encoding="utf-8", errors="surrogatepass")
        try:
            settings = load_settings({"PARLEY_CONFIG": str(path), "PARLEY_HOME": folder})
        except ConfigError as error:
            lines = str(error).splitlines() or [""]
            assert all(line.startswith(f"{path}: ") for line in lines) or str(error).startswith(
                f"Cannot read {path}: "
            ), str(error)
            return
    assert 0 < settings.compaction_threshold <= 1 and settings.max_turn_requests > 0
    assert all(provider.stall_timeout > 0 for provider in settings.providers.values())
    assert all(":" in model_id for model_id in settings.models)
    assert kernel_settings(settings).timeout_seconds > 0
    assert settings.checkpoints.max_turn_megabytes >= 0
    assert all(isinstance(pattern, str) for pattern in settings.checkpoints.ignore)
