"""The compactor: the one place a session's next request is compacted, for a turn's rounds
(each round, and once more after a refusal for length) and for `/compact` alike. The steps
themselves (pruning, the summary's cut and request) are agent/compaction.py's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from parley.agent.compaction import pruned, request_tokens, summarise
from parley.agent.session import Session, new_id
from parley.core import updates
from parley.core.off_loop import off_loop
from parley.providers.base import Completion, ModelRequest

# The summary's one model call (the caller counts it).
SummaryCall = Callable[[ModelRequest], Awaitable[Completion]]


@attrs.define
class Compactor:
    session: Session
    threshold: float  # the share of the window a request may fill (config.toml)
    send: Callable[[dict[str, Any]], None]  # an update for the user
    # The last request's estimated tokens before and after compaction.
    tokens_before: int = 0
    tokens_after: int = 0

    async def compacted(
        self,
        request_of: Callable[[], ModelRequest],
        window: int | None,
        summary_call: SummaryCall,
        model: str,
        *,
        force: bool = False,
        on_demand: bool = False,
    ) -> ModelRequest:
        """The request `request_of` makes of the session now, compacted when it would pass
        the threshold of `window` (or, `force`d, in any case): old tool outputs pruned
        first, then the older turns summarised (`summary_call` to `model`; the summary is
        stored with the session).
        On demand (`/compact`) the summary is made, and outputs pruned only as a round
        would. An unknown window: nothing is compacted."""
        request = request_of()
        # Measured and pruned off the loop: both grow with the history (a round with 8 MB of
        # tool arguments held the loop 70-95 ms here).
        tokens = await off_loop(request_tokens, request)
        self.tokens_before = self.tokens_after = tokens
        if window is None:
            return request
        limit = int(window * self.threshold)
        prune_all = force and not on_demand
        request, tokens = await off_loop(_pruned, request, tokens, window, limit, prune_all)
        if force or tokens > limit:
            summarised = await summarise(
                self.session.history, self.session.compaction, model, window, summary_call
            )
            if summarised is not None:
                self.session.set_compaction(summarised[0])
                request = request_of()
                request, tokens = await off_loop(_pruned, request, None, window, limit, prune_all)
        self.tokens_after = tokens
        if self.tokens_after < self.tokens_before:
            self.send(
                updates.thought_chunk(
                    new_id("thought"),
                    f"Compacted the conversation: {self.tokens_before:,} → "
                    f"{self.tokens_after:,} tokens (estimated).",
                )
            )
        return request


def _pruned(
    request: ModelRequest, tokens: int | None, window: int, limit: int, force: bool
) -> tuple[ModelRequest, int]:
    """The request with old tool outputs pruned when it has `tokens` (measured here if
    None) over `limit` (or `force`d), and its tokens then."""
    if tokens is None:
        tokens = request_tokens(request)
    if not force and tokens <= limit:
        return request, tokens
    request = attrs.evolve(request, messages=tuple(pruned(request.messages, window)))
    return request, request_tokens(request)
