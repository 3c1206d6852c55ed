"""A model call counted and a request compacted, as the user and the bill see them
(agent/call_usage.py, agent/compactor.py), in-process over a real store: the cost priced and
added to the session, the usage update sent, when a request is pruned or summarised and the
note the user is shown. The same through the running server are in test_caching.py and
test_compaction.py; these run against every mutant of the two modules (scripts/mutation)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from parley.agent.call_usage import CountedCall, count_call
from parley.agent.compaction import SUMMARY_HEADER, Compaction, compacted_view, request_tokens
from parley.agent.compactor import Compactor
from parley.agent.session import Session, now_iso
from parley.config import ModelConfig, Settings
from parley.core.conversation import (
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.core.session_settings import SessionSettings
from parley.core.usage import CostBreakdown, Price, Usage
from parley.providers.base import Completion, ModelRequest
from parley.store import Store, StoredSession
from parley.tools.registry import ToolRegistry

PRICED = "openai:priced"  # $2 in, $8 out, $0.5 a cached read, per million tokens
UNPRICED = "openai:unknown-model"


def settings(threshold: float = 0.8) -> Settings:
    return Settings(
        home=Path("/nonexistent"),
        default_model=PRICED,
        providers={},
        models={PRICED: ModelConfig(id=PRICED, context_window=50_000)},
        prices={PRICED: Price(2.0, 8.0, cached_read=0.5)},
        compaction_threshold=threshold,
    )


@pytest.fixture
def store(tmp_path: Path):
    store = Store.open_in(tmp_path / "data")
    yield store
    store.close()


@pytest.fixture
def session(store: Store, tmp_path: Path) -> Session:
    session_id = f"sess_{uuid.uuid4().hex[:12]}"
    now = now_iso()
    store.save_session(
        StoredSession(
            session_id, str(tmp_path), None, SessionSettings(PRICED, "sync"), {}, 0, 0, now, now
        )
    )
    return Session(
        id=session_id,
        cwd=tmp_path,
        settings=SessionSettings(PRICED, "sync"),
        tools=ToolRegistry([]),
        store=store,
    )


# --- a call counted ---------------------------------------------------------------------


def test_a_priced_call_is_added_to_the_session_and_the_store_and_told_the_client(
    session: Session, store: Store
) -> None:
    sent: list[dict[str, Any]] = []
    usage = Usage(1_000_000, 100_000, cached_read_tokens=400_000)
    counted = count_call(session, settings(), sent.append, PRICED, usage, "sync", 64_000)
    # 600,000 uncached at $2 + 400,000 cached at $0.5 + 100,000 out at $8, per million
    breakdown = CostBreakdown(uncached_input=1.2, cache_reads=0.2, output=0.8)
    assert counted == CountedCall(usage, pytest.approx(2.2), breakdown)
    assert session.totals.cost == pytest.approx(2.2)
    assert store.usage_totals(session.id).cost == pytest.approx(2.2)
    assert store.usage_totals(session.id).usage.input_tokens == 1_000_000
    assert sent == [
        {
            "sessionUpdate": "usage_update",
            "used": 1_100_000,
            "size": 64_000,
            "cost": {"amount": 2.2, "currency": "USD"},
            "_meta": {"parley": {"call": usage.to_wire(), "session": session.totals.to_wire()}},
        }
    ]
    count_call(session, settings(), sent.append, PRICED, Usage(0, 1_000_000), "stream", 64_000)
    assert sent[-1]["cost"] == {"amount": 10.2, "currency": "USD"}  # the session's, summed
    assert store.usage_totals(session.id).cost == pytest.approx(10.2)


def test_a_call_without_usage_counts_nothing_and_an_unknown_price_no_cost(
    session: Session, store: Store
) -> None:
    sent: list[dict[str, Any]] = []
    counted = count_call(session, settings(), sent.append, PRICED, None, "sync", 64_000)
    assert counted == CountedCall(Usage(), 0.0, CostBreakdown())
    assert sent[0]["used"] == 0 and sent[0]["cost"] == {"amount": 0.0, "currency": "USD"}
    unknown = count_call(session, settings(), sent.append, UNPRICED, Usage(10, 5), "sync", 1_000)
    assert unknown == CountedCall(Usage(10, 5), None, None)
    assert session.totals.usage.total_tokens == 15
    assert store.usage_totals(session.id).usage.total_tokens == 15


def test_the_usage_update_needs_a_known_window(session: Session) -> None:
    sent: list[dict[str, Any]] = []
    count_call(session, settings(), sent.append, UNPRICED, Usage(10, 5), "sync", None)
    assert sent == []  # ACP's usage_update needs a size: none is sent rather than 0
    count_call(session, settings(), sent.append, PRICED, Usage(10, 5), "sync", None)
    assert sent[0]["size"] == 50_000  # the configured window of the model
    assert "cost" not in sent[0]  # an unknown price counted before: the cost is not known
    count_call(session, settings(), sent.append, PRICED, Usage(10, 5), "sync", 8_000)
    assert sent[1]["size"] == 8_000  # the window learned from the server wins


# --- a request compacted ----------------------------------------------------------------


def user(text: str) -> UserMessage:
    return UserMessage((TextBlock(text),))


def tool_round(n: int, output: str) -> list:
    call = ToolCall(f"c{n}", "read_file", {"path": f"f{n}"}, f"w{n}")
    return [
        AssistantMessage("", tool_calls=(call,)),
        ToolResultMessage(f"c{n}", "read_file", output),
    ]


class Summariser:
    def __init__(self, text: str = "They read files.") -> None:
        self.text = text
        self.asked: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest) -> Completion:
        self.asked.append(request)
        return Completion(self.text, (), (), "end_turn", Usage(10, 5))


def compact(
    session: Session,
    window: int | None,
    summariser: Summariser,
    threshold: float = 0.8,
    **options: bool,
) -> tuple[ModelRequest, Compactor, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    compactor = Compactor(session, threshold, sent.append)

    def request_of() -> ModelRequest:
        view = compacted_view(session.history, session.compaction)
        return ModelRequest(model="priced", system="", messages=tuple(view))

    request = asyncio.run(compactor.compacted(request_of, window, summariser, "priced", **options))
    return request, compactor, sent


def outputs(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolResultMessage)]


def fill(session: Session, rounds: int, size: int) -> None:
    session.add_message(user("Read them."))
    for n in range(rounds):
        for message in tool_round(n, f"o{n}" + "x" * (size - 2)):
            session.add_message(message)


def test_a_request_under_the_threshold_or_of_an_unknown_window_is_sent_as_it_is(
    session: Session,
) -> None:
    fill(session, 5, 1_000)
    session.add_message(AssistantMessage("Read."))
    session.add_message(user("Again."))  # a summary could cut here: none is made
    whole = ModelRequest(model="priced", system="", messages=tuple(session.history))
    tokens = request_tokens(whole)
    summariser = Summariser()
    # At the threshold exactly (80% of the window): not compacted.
    window = next(size for size in range(tokens, 2 * tokens) if int(size * 0.8) == tokens)
    request, compactor, sent = compact(session, window, summariser)
    assert request == whole and sent == [] and summariser.asked == []
    assert compactor.tokens_before == compactor.tokens_after == tokens
    request, compactor, sent = compact(session, None, summariser)
    assert request == whole and sent == [] and summariser.asked == []
    assert compactor.tokens_before == compactor.tokens_after == tokens


def test_a_request_over_the_threshold_is_pruned_first_and_the_user_told(session: Session) -> None:
    fill(session, 6, 4_000)
    summariser = Summariser()
    before = request_tokens(
        ModelRequest(model="priced", system="", messages=tuple(session.history))
    )
    # Just over the threshold: pruning the three oldest outputs is enough, no summary.
    window = before * 5 // 4 - 2
    request, compactor, sent = compact(session, window, summariser)
    assert summariser.asked == [] and session.compaction is None
    pruned = outputs(request)
    assert [len(output) for output in pruned[3:]] == [4_000] * 3  # the last three are kept
    assert all(
        output.startswith("[tool output of 4,000 characters removed") for output in pruned[:3]
    )
    assert compactor.tokens_before == before and compactor.tokens_after == request_tokens(request)
    assert compactor.tokens_after < before
    assert [update["content"]["text"] for update in sent] == [
        f"Compacted the conversation: {before:,} → {compactor.tokens_after:,} tokens (estimated)."
    ]
    assert sent[0]["sessionUpdate"] == "agent_thought_chunk"


def test_a_request_still_over_after_pruning_is_summarised_and_the_summary_kept(
    session: Session, store: Store
) -> None:
    fill(session, 3, 400)
    session.add_message(AssistantMessage("Read."))
    session.add_message(user("Now the next." + "y" * 20_000))
    summariser = Summariser()
    request, compactor, sent = compact(session, 6_000, summariser)
    assert len(summariser.asked) == 1
    assert session.compaction == Compaction(8, "They read files.")
    assert store.compaction(session.id) == (8, "They read files.")
    first = request.messages[0]
    assert isinstance(first, UserMessage) and len(request.messages) == 1
    assert first.content[0] == TextBlock(SUMMARY_HEADER + "They read files.")
    assert compactor.tokens_after == request_tokens(request) < compactor.tokens_before
    assert len(sent) == 1


def five_older_and_five_recent_outputs(session: Session) -> None:
    fill(session, 5, 1_000)
    session.add_message(AssistantMessage("Read."))
    session.add_message(user("Go on."))  # the summary cuts here: message 12
    for n in range(10, 15):
        for message in tool_round(n, f"k{n}" + "k" * 997):
            session.add_message(message)


def test_forced_compaction_summarises_and_prunes_old_outputs_under_the_threshold(
    session: Session,
) -> None:
    five_older_and_five_recent_outputs(session)
    summariser = Summariser()
    # After the summary the request is under the threshold (1,600 tokens of 2,000): a
    # refusal for length (forced) prunes anyway, all but the last three outputs.
    request, _, sent = compact(session, 2_000, summariser, force=True)
    assert len(summariser.asked) == 1 and session.compaction is not None
    assert session.compaction.covers == 12
    assert request_tokens(request) < 1_600
    shown = outputs(request)
    assert [len(output) for output in shown[2:]] == [1_000] * 3
    assert all(output.startswith("[tool output of 1,000 characters") for output in shown[:2])
    assert len(sent) == 1


def test_on_demand_compaction_summarises_but_prunes_only_as_a_round_would(
    session: Session,
) -> None:
    five_older_and_five_recent_outputs(session)
    summariser = Summariser()
    request, _, _ = compact(session, 2_000, summariser, force=True, on_demand=True)
    assert len(summariser.asked) == 1 and session.compaction is not None
    assert session.compaction.covers == 12
    assert [len(output) for output in outputs(request)] == [1_000] * 5  # none pruned


def test_a_summary_that_cannot_cut_leaves_the_request_pruned_only(session: Session) -> None:
    fill(session, 6, 4_000)  # one user message: the current turn, never summarised
    summariser = Summariser()
    request, compactor, sent = compact(session, 100, summariser)
    assert summariser.asked == [] and session.compaction is None
    assert compactor.tokens_after == request_tokens(request) < compactor.tokens_before
    assert len(sent) == 1
