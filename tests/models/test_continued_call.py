"""The hybrid round's synchronous call after a discarded stream (`agent/continued_call.py`):
continued in the form the server was found to take, reconciled with the streamed text, and
the full call when the server can't — in-process, with a provider that answers as told.

What real servers answer is exercised in tests/models/test_llamacpp_real.py."""

from __future__ import annotations

from typing import Any

import pytest
from parley.agent.continued_call import continued_completion, resent_tokens
from parley.core.errors import ProviderError
from parley.core.usage import Usage
from parley.providers.base import Completion, ModelRequest, ModelStream, Provider
from parley.providers.continuation import ServerContinuation

STREAMED = "Let me look."
REQUEST = ModelRequest(model="tiny", system="", messages=())


class AnsweringProvider(Provider):
    """Answers each `complete` with the next of `answers` (a text, or an error to raise),
    and records the requests."""

    name = "local"

    def __init__(self, known: ServerContinuation | None, *answers: str | ProviderError) -> None:
        self.known = known
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> ModelStream:
        raise AssertionError("no stream here")

    async def complete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, ProviderError):
            raise answer
        return Completion.assemble(answer, (), (), "end_turn", Usage(10, 2))

    async def continuation_for(self, model: str) -> ServerContinuation | None:
        return self.known


def refusal(status: int, *, too_long: bool = False) -> ProviderError:
    return ProviderError(
        "refused",
        provider="local",
        type="invalid_request",
        status=status,
        context_exceeded=too_long,
    )


async def test_an_echoing_server_answer_is_stored_once_and_its_echo_learned() -> None:
    known = ServerContinuation("prefill")
    provider = AnsweringProvider(known, STREAMED + " Done.")
    completion, continued = await continued_completion(provider, REQUEST, STREAMED)
    assert (completion.text, continued) == (STREAMED + " Done.", True)
    (sent,) = provider.requests
    assert (sent.continue_from, sent.continue_form) == (STREAMED, "prefill")
    assert known.echoes is True


async def test_a_server_sending_the_new_part_gets_it_appended_and_that_learned() -> None:
    known = ServerContinuation("vllm")
    provider = AnsweringProvider(known, " Done.")
    completion, continued = await continued_completion(provider, REQUEST, STREAMED)
    assert (completion.text, continued) == (STREAMED + " Done.", True)
    assert known.echoes is False


async def test_a_regenerated_reply_is_taken_alone_as_a_revision() -> None:
    provider = AnsweringProvider(ServerContinuation("prefill", echoes=True), "I will read it.")
    completion, continued = await continued_completion(provider, REQUEST, STREAMED)
    assert (completion.text, continued) == ("I will read it.", False)


@pytest.mark.parametrize("status", [400, 422])
async def test_a_refused_continuation_gets_the_full_call_and_is_not_asked_again(
    status: int,
) -> None:
    known = ServerContinuation("prefill")
    provider = AnsweringProvider(known, refusal(status), "Let me look. (again)")
    completion, continued = await continued_completion(provider, REQUEST, STREAMED)
    assert (completion.text, continued) == ("Let me look. (again)", False)
    assert [r.continue_from for r in provider.requests] == [STREAMED, None]
    assert known.form is None  # the next round makes the full call at once
    provider.answers.append("full")
    await continued_completion(provider, REQUEST, STREAMED)
    assert provider.requests[-1].continue_from is None


async def test_a_continuation_too_long_gets_the_full_call_and_keeps_the_form() -> None:
    known = ServerContinuation("prefill")
    provider = AnsweringProvider(known, refusal(400, too_long=True), "full")
    completion, _ = await continued_completion(provider, REQUEST, STREAMED)
    assert completion.text == "full"
    assert known.form == "prefill"


async def test_other_failures_are_the_turns_to_handle() -> None:
    provider = AnsweringProvider(ServerContinuation("prefill"), refusal(500))
    with pytest.raises(ProviderError):
        await continued_completion(provider, REQUEST, STREAMED)


@pytest.mark.parametrize("known", [None, ServerContinuation(None)])
async def test_a_server_that_cant_continue_gets_the_full_call(known: Any) -> None:
    provider = AnsweringProvider(known, "full")
    completion, continued = await continued_completion(provider, REQUEST, STREAMED)
    assert (completion.text, continued) == ("full", False)
    assert provider.requests[0].continue_from is None


def test_what_a_discarded_stream_made_the_round_pay_again() -> None:
    assert resent_tokens(1000, Usage(1000, 5, cached_read_tokens=990), "") == 10
    assert resent_tokens(1000, Usage(1000, 5, cached_read_tokens=2000), "abcd" * 3) == 3
    assert resent_tokens(1000, None, "") == 1000
    assert resent_tokens(1000, Usage(1000, 5), "abcde") == 1002
