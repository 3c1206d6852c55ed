"""The synchronous call of a hybrid round that continues the text its stream showed
(`continue_streamed`, docs/local-models.md): asked only in the form the server was found to
take, and its answer reconciled with what the user saw (`parley.providers.continuation`)."""

from __future__ import annotations

import logging

import attrs

from parley.core.errors import ProviderError
from parley.core.usage import Usage, estimate_tokens
from parley.providers.base import Completion, ModelRequest, Provider
from parley.providers.continuation import new_part

logger = logging.getLogger(__name__)


async def continued_completion(
    provider: Provider, request: ModelRequest, streamed: str
) -> tuple[Completion, bool]:
    """The synchronous call of a hybrid round whose stream showed `streamed`: it continues
    that text where the server can (it then generates only the rest), reconciled so that the
    reply's text is `streamed` + the new part, or the answer alone when it isn't a
    continuation. A server that refuses the continued request (HTTP 400 or 422: llama.cpp
    with thinking on, a template that can't) or finds it too long gets the full call at once;
    a refused request bills nothing. Also says whether the server continued the text (did
    not generate it again)."""
    known = await provider.continuation_for(request.model)
    if known is None or known.form is None:
        return await provider.complete(request), False
    continued = attrs.evolve(request, continue_from=streamed, continue_form=known.form)
    try:
        answer = await provider.complete(continued)
    except ProviderError as error:
        if error.status not in (400, 422) and not error.context_exceeded:
            raise
        if not error.context_exceeded:
            known.form = None  # this server and model refuse it: not asked again
        logger.info("continuing the streamed text was refused, a full call: %s", error)
        return await provider.complete(request), False
    rest = new_part(streamed, answer.text, known.echoes)
    if rest is None:
        logger.info("the server wrote its reply again instead of continuing it")
        return answer, False
    if streamed.strip():  # whitespace shared at the join shows nothing about echoing
        known.learn(len(rest) < len(answer.text))
    return attrs.evolve(answer, text=streamed + rest), True


def resent_tokens(prompt_tokens: int, usage: Usage | None, generated_again: str) -> int:
    """What a discarded stream made the round pay again, estimated (never counted in usage,
    the rule): its prompt (`prompt_tokens`, estimated), less what the synchronous call read
    from the provider's prompt cache, and the streamed text when it was generated again."""
    cached = usage.cached_read_tokens if usage is not None else 0
    return max(prompt_tokens - cached, 0) + estimate_tokens(len(generated_again))
