"""What a model stream yields: text and reasoning as they come, tool calls as they start and
grow, and how the reply finished. Every provider speaks in these; the turn reads them."""

from __future__ import annotations

from typing import Literal

import attrs

from parley.core.usage import Usage

FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


@attrs.frozen
class TextDelta:
    text: str


@attrs.frozen
class ThoughtDelta:
    text: str


@attrs.frozen
class ToolCallStarted:
    """The stream shows a tool call: its name is known, its arguments are not complete."""

    index: int
    name: str


@attrs.frozen
class ToolCallArgumentsDelta:
    index: int
    text: str


@attrs.frozen
class StreamFinished:
    reason: FinishReason
    usage: Usage | None


StreamEvent = TextDelta | ThoughtDelta | ToolCallStarted | ToolCallArgumentsDelta | StreamFinished
