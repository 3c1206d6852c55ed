"""The providers' wire kinds, each registered once: the provider class that speaks it (imported
on first use: the SDKs are slow to import), what its SDK loads at its first request (imported
beforehand, off the event loop), the settings of `[providers.NAME]` its class takes besides
the common ones, and how its models think (the style of their thinking level and which
well-known models take one). A new wire kind is one entry here and its provider module.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

from parley.core.thought_levels import ThinkingStyle

WireKindName = Literal["openai", "anthropic"]  # config.toml's `kind`; the keys of WIRE_KINDS


@attrs.frozen
class WireKind:
    provider: str  # "module:Class" of its `Provider`
    warm_up: tuple[str, ...]  # the modules its SDK imports at its first request
    options: tuple[str, ...]  # `ProviderConfig` fields its class takes besides the common ones
    thinking_style: ThinkingStyle
    # Models known to think, by the model's name (after `provider:`, and after the last `/`).
    thinkers: re.Pattern[str]


WIRE_KINDS: dict[str, WireKind] = {
    # Any OpenAI-compatible server. Its reasoning models take `reasoning_effort`: the
    # o-series and GPT-5 (not its chat variant, which does not reason; nor o1-mini and
    # o1-preview, which take no effort).
    "openai": WireKind(
        provider="parley.providers.openai_provider:OpenAIProvider",
        warm_up=("openai.resources.chat",),
        options=("prompt_cache_key", "continue_streamed"),
        thinking_style="effort",
        thinkers=re.compile(
            r"""
              o1(-pro)?(-\d{4}-\d{2}-\d{2})? | o3(-mini|-pro)?(-\d{4}-\d{2}-\d{2})? | o4-mini.*
            | gpt-5(?!.*-chat).*
            """,
            re.VERBOSE,
        ),
    ),
    # Anthropic's extended thinking takes a token budget: Claude 3.7 Sonnet and every
    # Claude 4 and later.
    "anthropic": WireKind(
        provider="parley.providers.anthropic_provider:AnthropicProvider",
        warm_up=(),
        options=(),
        thinking_style="budget",
        thinkers=re.compile(r"claude-3-7-sonnet.* | claude-[a-z]+-[4-9].*", re.VERBOSE),
    ),
}


def thinks_by_default(model_id: str, kind: str) -> bool:
    """Whether a model of a provider of this wire kind is known to take a thinking level."""
    name = model_id.partition(":")[2].rsplit("/", 1)[-1].lower()
    return WIRE_KINDS[kind].thinkers.fullmatch(name) is not None
