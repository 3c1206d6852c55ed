"""The small interface every model provider implements.

A provider streams a request as typed events, makes a complete (synchronous) call, and keeps
its wire quirks to itself. The agent loop never sees an SDK object.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any, Literal

import attrs

from parley.agent.conversation import Message, ThinkingBlock
from parley.agent.usage import Usage
from parley.redact import redact
from parley.tools.base import ToolSpec

FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


# --- what a stream yields ---------------------------------------------------------------


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


# --- requests and complete answers ------------------------------------------------------


@attrs.frozen
class ModelRequest:
    model: str  # the provider's model name (the part after "provider:")
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    thinking_budget: int | None = None  # Anthropic extended thinking, when configured


@attrs.frozen
class CompletedToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None  # set when the model's arguments were not a JSON object


@attrs.frozen
class Completion:
    """A whole model reply: from a synchronous call, or assembled from a finished stream."""

    text: str
    thinking: tuple[ThinkingBlock, ...]
    tool_calls: tuple[CompletedToolCall, ...]
    finish_reason: FinishReason
    usage: Usage | None

    @classmethod
    def assemble(
        cls,
        text: str,
        thinking: tuple[ThinkingBlock, ...],
        tool_calls: tuple[CompletedToolCall, ...],
        finish_reason: FinishReason,
        usage: Usage | None,
    ) -> Completion:
        """A reply with tool calls is a tool-use reply, whatever finish reason the server
        gave (some say `stop`); calls cut off by the token limit are marked as such."""
        return cls(
            text=text,
            thinking=thinking,
            tool_calls=mark_cut_off(tool_calls, finish_reason),
            finish_reason="tool_use" if tool_calls else finish_reason,
            usage=usage,
        )


def parse_tool_arguments(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, or ({}, an error the model can act on)."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        return {}, f"The tool call's arguments are not valid JSON ({error}). Send a JSON object."
    if not isinstance(value, dict):
        return {}, "The tool call's arguments must be a JSON object."
    return value, None


def mark_cut_off(
    calls: tuple[CompletedToolCall, ...], finish: FinishReason
) -> tuple[CompletedToolCall, ...]:
    """When the reply hit the token limit, an unreadable call was cut off, not malformed:
    say so, or the model retries the same long call."""
    if finish != "max_tokens":
        return calls
    return tuple(
        attrs.evolve(
            call,
            arguments_error="The reply reached the output token limit while writing this call's "
            "arguments, so they are incomplete. Make the call again with shorter arguments, or "
            "split the work into smaller calls.",
        )
        if call.arguments_error
        else call
        for call in calls
    )


# --- errors -----------------------------------------------------------------------------


class ProviderError(Exception):
    """A provider failure that survived the SDK's retries, with a message a person can act on.

    The message is redacted here, where every provider error is made: it quotes what the
    provider or a gateway said, which may echo the request's API key, and it goes on to the
    client, the store and the log.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        type: str,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.type = type
        self.status = status
        self.retryable = retryable

    def to_wire_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"provider": self.provider, "type": self.type}
        data["retryable"] = self.retryable
        if self.status is not None:
            data["status"] = self.status
        return data


# --- the interface ----------------------------------------------------------------------


class ModelStream(ABC):
    """One streamed model call. Iterate it for events; `aclose()` hangs up at once.

    After the events end with `StreamFinished`, `completion` is the whole reply as the
    stream told it (used when a round ends in text, and by the `stream` tool policy).
    """

    completion: Completion | None = None
    _events_generator: Any = None

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        self._events_generator = self._events()
        return self._events_generator

    @abstractmethod
    def _events(self) -> AsyncIterator[StreamEvent]:
        """The events, as an async generator that raises `ProviderError` on failure."""

    @abstractmethod
    async def _close_transport(self) -> None:
        """Close the HTTP response, so the provider sees the hang-up now."""

    async def aclose(self) -> None:
        if self._events_generator is not None:
            await self._events_generator.aclose()
        await self._close_transport()

    async def __aenter__(self) -> ModelStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class SDKStream(ModelStream):
    """A stream read through a provider SDK's async stream object, which `_events` opens
    and stores in `_sdk_stream`; closing it closes the HTTP response.

    Subclasses name their SDK's base error and connection error, for `_failure`.
    """

    sdk_error: type[Exception]
    connection_error: type[Exception]

    def __init__(self, provider_name: str, arguments: dict[str, Any]) -> None:
        self._provider_name = provider_name
        self._arguments = arguments
        self._sdk_stream: Any = None
        self._closed = False  # closed by us: a transport error after it is no failure

    def _failure(self, error: Exception) -> ProviderError | None:
        """What an error while reading means for the user; None when we hung up ourselves.

        A connection error once the stream is open means it broke off mid-reply; a dropped
        connection may also surface as a raw transport error the SDK does not wrap.
        """
        from parley.providers.errors import provider_error, stream_interrupted  # builds on us

        name = self._provider_name
        if isinstance(error, self.sdk_error):
            if self._sdk_stream is not None and isinstance(error, self.connection_error):
                return stream_interrupted(name, error)
            return provider_error(name, error)
        return None if self._closed else stream_interrupted(name, error)

    async def _close_transport(self) -> None:
        self._closed = True
        if self._sdk_stream is not None:
            await self._sdk_stream.close()


class Provider(ABC):
    name: str

    @abstractmethod
    def stream(self, request: ModelRequest) -> ModelStream: ...

    @abstractmethod
    async def complete(self, request: ModelRequest) -> Completion: ...

    async def aclose(self) -> None:  # noqa: B027 - optional for providers without resources
        pass
