"""Context windows learned from providers: a model whose window Parley doesn't know (an
Ollama or llama.cpp model under any name), or knows wrong, is never stuck past it.

When a provider refuses a request for its length, the window is learned: from the refusal's
own words (`ProviderError.window`), else from the server (`Provider.window_from_server`:
llama.cpp's `/props`, Ollama's `/api/show`), else it is taken as half the refused request's
estimate. It is remembered by the provider's base URL and the model, in memory and in the
store, so a restarted server (or another window) uses it from its first request; a later
refusal replaces it. It wins over config.toml's and the built-in table's window: it is what
the server at that address said about the model.
"""

from __future__ import annotations

import logging

import attrs

from parley.config import Settings
from parley.core.errors import ProviderError
from parley.providers.context_limits import MIN_WINDOW
from parley.providers.registry import ResolvedModel
from parley.store import Store

logger = logging.getLogger(__name__)


@attrs.frozen
class LearnedWindow:
    tokens: int
    source: str  # "message" (the refusal said), "server" (it answered), "estimate" (neither)


class LearnedWindows:
    """The windows learned in this server, backed by the store (shared by every session)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._known: dict[tuple[str, str], int] = {}

    def window(self, resolved: ResolvedModel, settings: Settings) -> int | None:
        """The model's window in tokens: the learned one, else config.toml's or the built-in
        table's; None when nothing knows it."""
        return self.learned(resolved) or settings.context_window(resolved.id)

    def learned(self, resolved: ResolvedModel) -> int | None:
        key = (resolved.provider.base_url, resolved.model)
        if key not in self._known:
            stored = self._store.learned_window(*key)
            if stored is None:
                return None  # not cached: another server may learn it meanwhile
            self._known[key] = stored
        return self._known[key]

    async def learn(
        self, resolved: ResolvedModel, refusal: ProviderError, refused_tokens: int, now: str
    ) -> LearnedWindow:
        """Learn the window after `refusal` of a request of `refused_tokens` (estimated)."""
        learned = await _window_after(resolved, refusal, refused_tokens)
        key = (resolved.provider.base_url, resolved.model)
        self._known[key] = learned.tokens
        self._store.learn_window(*key, learned.tokens, learned.source, now)
        logger.info(
            "Learned the context window of %s at %s: %d tokens (%s)",
            resolved.model,
            key[0],
            learned.tokens,
            learned.source,
        )
        return learned


async def _window_after(
    resolved: ResolvedModel, refusal: ProviderError, refused_tokens: int
) -> LearnedWindow:
    if refusal.window is not None:
        return LearnedWindow(refusal.window, "message")
    try:
        asked = await resolved.provider.window_from_server(resolved.model)
    except Exception:  # the server's answer is a help, never a new way to fail
        logger.warning("Asking %s for the context window failed", resolved.id, exc_info=True)
        asked = None
    if asked is not None:
        return LearnedWindow(asked, "server")
    return LearnedWindow(max(MIN_WINDOW, refused_tokens // 2), "estimate")
