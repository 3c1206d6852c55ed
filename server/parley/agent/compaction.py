"""Compaction: the conversation the model sees kept under a share of its context window.

The store keeps the full history (replay and export show everything); only the view sent to
the model changes, in two steps, each taken only when the request would pass the threshold:

1. Pruning: old tool outputs, beyond a protected recent span, become a short marker.
2. A summary: one model call summarises the older turns; the view is then the summary and
   the recent messages. It is cut at a user message only, so a tool call is never separated
   from its result. The summary and the number of messages it covers are stored: a reload
   keeps it.

Tokens are estimated from characters (about four a token): cheap, and good enough to decide.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

import attrs

from parley.core.conversation import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolResultMessage,
    UserMessage,
)
from parley.core.errors import ProviderError
from parley.core.off_loop import off_loop
from parley.core.usage import CHARS_PER_TOKEN, estimate_tokens
from parley.providers.base import Completion, ModelRequest
from parley.tools.base import ToolSpec

# Tool outputs this recent are never pruned: the last few, and those in the window's last part.
PROTECTED_TOOL_RESULTS = 3
PROTECTED_SHARE = 0.2
# The recent messages a summary leaves as they are: at most this share of the window.
RECENT_SHARE = 0.3
# What of one tool output the summary call is shown, and of the older turns in all.
SUMMARY_TOOL_OUTPUT = 2_000
SUMMARY_INPUT_SHARE = 0.6
PRUNED_MARKER = (
    "[tool output of {size:,} characters removed to save context; run the tool again if needed]"
)
SUMMARY_HEADER = "[Summary of the earlier conversation, compacted to save context]\n\n"
SUMMARY_SYSTEM = (
    "You summarise a conversation between a user and a coding agent so the agent can "
    "continue it without the full text. Keep what matters for continuing: the user's goals "
    "and requests, decisions, file names, code facts found, changes made, errors met and "
    "open tasks. Be concise and factual; write Markdown."
)


@attrs.frozen
class Compaction:
    """A summary that stands in for the history's first `covers` messages."""

    covers: int
    summary: str


def message_chars(message: Message) -> int:
    if isinstance(message, UserMessage):
        return sum(
            len(part) if isinstance(part, str) else 1_000 for part in message.parts()
        )  # an image counts as about 250 tokens
    if isinstance(message, AssistantMessage):
        return (
            len(message.text)
            + sum(len(block.text) for block in message.thinking)
            + sum(len(call.name) + len(json.dumps(call.arguments)) for call in message.tool_calls)
        )
    return len(message.content) + len(message.name)


def request_tokens(request: ModelRequest) -> int:
    """The request's size in tokens, estimated: system prompt, tools and messages."""
    chars = len(request.system) + sum(_spec_chars(spec) for spec in request.tools)
    chars += sum(message_chars(message) + 8 for message in request.messages)
    return estimate_tokens(chars)


def _spec_chars(spec: ToolSpec) -> int:
    return len(spec.name) + len(spec.description) + len(json.dumps(spec.input_schema))


def compacted_view(history: Sequence[Message], compaction: Compaction | None) -> list[Message]:
    """What the model is sent of the history: the summary, merged into the first recent
    user message (providers want turns to alternate), then the recent messages."""
    if compaction is None or not 0 < compaction.covers < len(history):
        return list(history)
    first, *rest = history[compaction.covers :]
    if not isinstance(first, UserMessage):  # never so (a cut is at a user message): be safe
        return list(history)
    summary = TextBlock(SUMMARY_HEADER + compaction.summary)
    return [UserMessage((summary, *first.content)), *rest]


def pruned(messages: Sequence[Message], window: int) -> list[Message]:
    """The messages with old tool outputs replaced by a marker: all but the last
    PROTECTED_TOOL_RESULTS and those in the last PROTECTED_SHARE of the window."""
    protected_chars = int(window * PROTECTED_SHARE) * CHARS_PER_TOKEN
    kept: list[Message] = []
    seen_results = 0
    recent_chars = 0
    for message in reversed(messages):
        recent_chars += message_chars(message)
        if isinstance(message, ToolResultMessage):
            seen_results += 1
            marker = PRUNED_MARKER.format(size=len(message.content))
            if (
                seen_results > PROTECTED_TOOL_RESULTS
                and recent_chars > protected_chars
                and len(message.content) > len(marker)
            ):
                message = attrs.evolve(message, content=marker)
        kept.append(message)
    kept.reverse()
    return kept


def summary_cut(history: Sequence[Message], start: int, window: int) -> int | None:
    """Where the recent messages a summary leaves begin: the earliest user message after
    `start` whose tail fits in RECENT_SHARE of the window, or else the last user message.
    None when there is no user message after `start` to cut at."""
    budget = int(window * RECENT_SHARE) * CHARS_PER_TOKEN
    tail = 0
    cut = None
    for index in range(len(history) - 1, start, -1):
        tail += message_chars(history[index])
        if isinstance(history[index], UserMessage):
            if cut is not None and tail > budget:
                break
            cut = index
    return cut


def summary_request(
    model: str, previous: str | None, older: Sequence[Message], window: int
) -> ModelRequest:
    """One call, without tools: the older turns as a transcript, to be summarised."""
    limit = int(window * SUMMARY_INPUT_SHARE) * CHARS_PER_TOKEN
    lines = [f"Summary so far:\n{previous}\n"] if previous else []
    lines += [_transcript_line(message) for message in older]
    transcript = "\n".join(lines)
    if len(transcript) > limit:  # the oldest part goes: the summary so far comes first
        transcript = transcript[: limit // 4] + "\n[…]\n" + transcript[-(limit * 3 // 4) :]
    prompt = (
        "Summarise this conversation so far (the transcript below), for continuing it.\n\n"
        f"<transcript>\n{transcript}\n</transcript>"
    )
    return ModelRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        messages=(UserMessage((TextBlock(prompt),)),),
        max_tokens=max(256, min(4_096, window // 8)),
    )


def _transcript_line(message: Message) -> str:
    if isinstance(message, UserMessage):
        return f"User: {message.as_text()}"
    if isinstance(message, AssistantMessage):
        calls = "".join(
            f"\n[called {call.name} {json.dumps(call.arguments)[:500]}]"
            for call in message.tool_calls
        )
        return f"Agent: {message.text}{calls}"
    content = message.content
    if len(content) > SUMMARY_TOOL_OUTPUT:
        content = (
            content[:SUMMARY_TOOL_OUTPUT] + f"\n[… {len(content) - SUMMARY_TOOL_OUTPUT:,} more]"
        )
    return f"[{message.name} {'failed' if message.is_error else 'returned'}]: {content}"


def is_context_exceeded(error: BaseException) -> bool:
    """Whether a provider refused the request for being longer than the model's window."""
    return isinstance(error, ProviderError) and error.context_exceeded


Complete = Callable[[ModelRequest], Awaitable[Completion]]


async def summarise(
    history: Sequence[Message],
    compaction: Compaction | None,
    model: str,
    window: int,
    complete: Complete,
) -> tuple[Compaction, Completion] | None:
    """One model call summarising the turns before the recent ones (and the summary so far);
    None when there is no earlier turn to summarise (the current turn is never cut)."""
    start = compaction.covers if compaction is not None else 0
    cut = await off_loop(summary_cut, tuple(history), start, window)  # grows with the history
    if cut is None:
        return None
    previous = compaction.summary if compaction is not None else None
    completion = await complete(summary_request(model, previous, history[start:cut], window))
    summary = completion.text.strip() or "(The earlier conversation could not be summarised.)"
    return Compaction(cut, summary), completion
