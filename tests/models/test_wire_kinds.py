"""The providers' wire kinds, registered once (core/wire_kinds.py): config.toml's `kind`
takes exactly the registered ones, and each entry names a provider class, SDK modules and
config fields that exist (a typo there would only show at a user's first prompt)."""

from __future__ import annotations

import importlib
from typing import get_args

import attrs
import pytest
from parley.config import ConfigError, ProviderConfig, load_settings
from parley.core.wire_kinds import WIRE_KINDS, WireKindName, thinks_by_default
from parley.providers.base import Provider


def test_the_config_files_kinds_are_the_registered_ones() -> None:
    assert set(get_args(WireKindName)) == set(WIRE_KINDS)


@pytest.mark.parametrize("name", sorted(WIRE_KINDS))
def test_each_kind_names_what_exists(name: str) -> None:
    kind = WIRE_KINDS[name]
    module, _, class_name = kind.provider.partition(":")
    assert issubclass(getattr(importlib.import_module(module), class_name), Provider)
    for warm_up in kind.warm_up:
        importlib.import_module(warm_up)
    fields = {field.name for field in attrs.fields(ProviderConfig)}
    assert set(kind.options) <= fields


def test_a_kind_not_registered_is_refused_in_config_toml(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.x]\nkind = "gemini"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"providers\.x\.kind"):
        load_settings(environ={"PARLEY_CONFIG": str(config), "PARLEY_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("model", "kind", "thinks"),
    [
        ("anthropic:claude-sonnet-4-5", "anthropic", True),
        ("anthropic:claude-3-5-haiku", "anthropic", False),
        ("openai:o3-mini", "openai", True),
        ("openai:gpt-5-chat-latest", "openai", False),
        ("router:openai/gpt-5", "openai", True),
        ("openai:claude-sonnet-4-5", "openai", False),  # by its kind's rule, not its name's
    ],
)
def test_which_models_think_is_the_kinds_rule(model: str, kind: str, thinks: bool) -> None:
    assert thinks_by_default(model, kind) is thinks
