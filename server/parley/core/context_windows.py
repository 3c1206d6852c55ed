"""The context windows of well-known models, in tokens.

A dated or suffixed model id ("openai:gpt-4o-2024-08-06", "anthropic:claude-sonnet-4-5-20250929")
takes the window of its longest listed prefix, as prices do. A model of a provider or a name
not listed has no known window: `config.toml` may give one (`[models."ID"] context_window`).
"""

from __future__ import annotations

DEFAULT_CONTEXT_WINDOWS: dict[str, int] = {
    "openai:gpt-4.1": 1_047_576,
    "openai:gpt-4o": 128_000,
    "openai:gpt-4-turbo": 128_000,
    "openai:gpt-5": 400_000,
    "openai:gpt-5.1": 400_000,
    "openai:o1": 200_000,
    "openai:o1-mini": 128_000,
    "openai:o1-preview": 128_000,
    "openai:o3": 200_000,
    "openai:o4-mini": 200_000,
    "anthropic:claude": 200_000,  # every Claude model since Claude 2.1
}


def known_context_window(model_id: str) -> int | None:
    """The window of `provider:model` by exact id or the longest listed prefix."""
    if model_id in DEFAULT_CONTEXT_WINDOWS:
        return DEFAULT_CONTEXT_WINDOWS[model_id]
    prefixes = [key for key in DEFAULT_CONTEXT_WINDOWS if model_id.startswith(key + "-")]
    return DEFAULT_CONTEXT_WINDOWS[max(prefixes, key=len)] if prefixes else None
