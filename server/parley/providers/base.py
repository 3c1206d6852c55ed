"""The small interface every model provider implements.

A provider streams a request as typed events, makes a complete (synchronous) call, and keeps
its wire quirks to itself. The agent loop never sees an SDK object.

Hiccups are handled here, below the agent loop: the SDKs retry a request that fails before
its answer starts; a stream that breaks off after it started, but before its first event,
is asked again the same way (`SDKStream`); and a provider that sends nothing for
`stall_timeout` seconds (the read timeout of the SDKs' httpx2 client, set when it is built)
is abandoned with a `stalled` error.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import attrs

from parley.config import DEFAULT_STALL_TIMEOUT, ContinuationForm
from parley.core.conversation import Message, ThinkingBlock
from parley.core.errors import ProviderError
from parley.core.usage import Usage
from parley.providers.continuation import ServerContinuation
from parley.providers.errors import (
    SDKErrors,
    provider_error,
    read_timed_out,
    stalled,
    stream_interrupted,
)
from parley.providers.events import FinishReason, StreamEvent, StreamFinished
from parley.tools.base import ToolSpec

logger = logging.getLogger(__name__)

# --- requests and complete answers ------------------------------------------------------


@attrs.frozen
class ModelRequest:
    model: str  # the provider's model name (the part after "provider:")
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    thinking_budget: int | None = None  # Anthropic extended thinking: its budget in tokens
    reasoning_effort: str | None = None  # OpenAI reasoning models: low | medium | high
    # Names the conversation for the provider's prompt cache (the session's id); a provider
    # sends it where its server takes one (OpenAI's `prompt_cache_key`).
    cache_key: str | None = None
    # Hybrid rounds on servers that continue a partial reply: the text already streamed,
    # sent as a final assistant message for the model to continue (the reply is the rest).
    continue_from: str | None = None
    continue_form: ContinuationForm | None = None  # how this server is asked to continue


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
        had_thoughts = any(block.text for block in thinking)
        return cls(
            text=text,
            thinking=thinking,
            tool_calls=mark_cut_off(tool_calls, finish_reason),
            finish_reason="tool_use" if tool_calls else finish_reason,
            usage=None if usage is None else usage.with_known_thoughts(had_thoughts),
        )


# Without the C encoder's one-shot path, which holds the GIL through the whole body.
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_ASCII_BODY_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
# The header of a request whose body is sent as bytes (`json_request_body`).
JSON_HEADERS = {"Content-Type": "application/json"}


def json_request_body(body: dict[str, Any]) -> bytes:
    """A streamed request's JSON body (call it off the event loop: it grows with the
    history). Encoded one value at a time (`iterencode`), so that the loop, waiting for it,
    gets the GIL back between strings rather than after the whole body."""
    try:
        return "".join(_BODY_ENCODER.iterencode(body)).encode()
    except UnicodeEncodeError:  # a lone surrogate from a model: escaped, it is valid JSON
        return "".join(_ASCII_BODY_ENCODER.iterencode(body)).encode()


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


# --- retrying a stream that broke off before its first event ------------------------------

RETRY_FIRST_DELAY = 0.5  # the SDKs' backoff: 0.5 s, doubled at each retry, at most 8 s
RETRY_MAX_DELAY = 8.0
RETRY_AFTER_LIMIT = 60.0  # a longer retry-after is not waited for (as the SDKs do)


def retry_delay(retry: int, failure: ProviderError) -> float:
    """How long to wait before retry number `retry` (0-based): the provider's retry-after
    when it gives a short one, else the SDKs' exponential backoff with jitter."""
    response = getattr(failure.__cause__, "response", None)
    headers = getattr(response, "headers", None)
    if headers is not None:
        retry_after = _retry_after_seconds(headers)
        if retry_after is not None and 0 <= retry_after <= RETRY_AFTER_LIMIT:
            return retry_after
    backoff = min(RETRY_FIRST_DELAY * 2**retry, RETRY_MAX_DELAY)
    return backoff * (1 - 0.25 * random.random())


def _retry_after_seconds(headers: Any) -> float | None:
    """`retry-after-ms` (OpenAI's), or `retry-after` in seconds or as an HTTP date."""
    with contextlib.suppress(TypeError, ValueError):
        if (milliseconds := headers.get("retry-after-ms")) is not None:
            return float(milliseconds) / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    return None


# --- the interface ----------------------------------------------------------------------


class ModelStream(ABC):
    """One streamed model call. Iterate it for events; `aclose()` hangs up at once.

    After the events end with `StreamFinished`, `completion` is the whole reply as the
    stream told it (used when a round ends in text, and by the `stream` tool policy).
    """

    completion: Completion | None = None
    _events_generator: Any = None

    def usage_so_far(self) -> Usage | None:
        """The usage the provider reported before the stream was cut off, if any."""
        return None

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


class StreamReply(ABC):
    """What one streamed request has said so far: it reads the SDK's chunks one at a time,
    yields the events they hold, and at the end assembles the whole reply."""

    @abstractmethod
    def read(self, chunk: Any) -> Iterator[StreamEvent]:
        """The events in one chunk (an SDK stream item) of the reply."""

    @abstractmethod
    def completion(self) -> Completion:
        """The whole reply, once the stream has ended."""

    def usage_so_far(self) -> Usage | None:
        """What the provider has reported of this request's usage before the stream ended
        (Anthropic's `message_start` gives the input's); None when nothing yet."""
        return None


class SDKStream(ModelStream):
    """A stream read through a provider SDK's async stream object, which `_open` returns
    and `_sdk_stream` holds; closing it closes the HTTP response."""

    def __init__(self, provider: SDKProvider, arguments: dict[str, Any]) -> None:
        self._provider = provider
        self._arguments = arguments
        self._sdk_stream: Any = None
        self._closed = False  # closed by us: a transport error after it is no failure
        self._reply: StreamReply | None = None  # the current request's, read so far

    @abstractmethod
    async def _open(self) -> Any:
        """Send the request; the SDK's async stream of the reply."""

    @abstractmethod
    def _new_reply(self) -> StreamReply:
        """An empty reply, read from the chunks of one request."""

    async def _request_events(self) -> AsyncIterator[StreamEvent]:
        """One request's events; raises what `_failure` says."""
        reply = self._reply = self._new_reply()
        try:
            self._sdk_stream = await self._open()
            async for chunk in self._sdk_stream:
                for event in reply.read(chunk):
                    yield event
        except Exception as error:
            failure = self._failure(error)
            if failure is None:
                return
            raise failure from error
        self.completion = reply.completion()
        yield StreamFinished(self.completion.finish_reason, self.completion.usage)

    def usage_so_far(self) -> Usage | None:
        return self._reply.usage_so_far() if self._reply is not None else None

    async def _events(self) -> AsyncIterator[StreamEvent]:
        """The events of the first request that does not break off before its first event.

        The SDKs retry a request that fails before its answer starts, but not a stream that
        started and then dropped or sent an error event: when that happens before any event,
        nobody has seen anything, so it is asked again the same way. After an event, the
        failure is the caller's to report: what was shown cannot be taken back.
        """
        provider = self._provider
        for retry in range(provider.max_retries + 1):
            started = False
            try:
                async with contextlib.aclosing(self._request_events()) as events:
                    async for event in events:
                        started = True
                        yield event
                return
            except ProviderError as failure:
                error = failure
                if read_timed_out(failure):
                    error = stalled(provider.name, provider.stall_timeout)
                broke_off = self._sdk_stream is not None  # it was open: no SDK retry
                if started or not broke_off or not error.retryable or retry == provider.max_retries:
                    raise error from failure.__cause__
                delay = retry_delay(retry, failure)
            logger.warning(
                "%s: the stream broke off before its first event (%s); retry %d of %d in %.1f s",
                provider.name,
                error.type,
                retry + 1,
                provider.max_retries,
                delay,
            )
            await self._close_sdk_stream()
            await asyncio.sleep(delay)

    def _failure(self, error: Exception) -> ProviderError | None:
        """What an error while reading means for the user; None when we hung up ourselves.

        A connection error once the stream is open means it broke off mid-reply; a dropped
        connection may also surface as a raw transport error the SDK does not wrap.
        """
        name = self._provider.name
        sdk = self._provider.errors
        if isinstance(error, sdk.base):
            if self._sdk_stream is not None and isinstance(error, sdk.connection):
                return stream_interrupted(name, error)
            return provider_error(name, error, sdk)
        return None if self._closed else stream_interrupted(name, error)

    async def _close_transport(self) -> None:
        self._closed = True
        await self._close_sdk_stream()

    async def _close_sdk_stream(self) -> None:
        if self._sdk_stream is not None:
            await self._sdk_stream.close()
            self._sdk_stream = None


class Provider(ABC):
    name: str
    # The server continues a final assistant message (`ModelRequest.continue_from`).
    continues_streamed_text: bool = False
    # Where the provider's server is: a window learned for a model is remembered by it.
    base_url: str = ""

    @abstractmethod
    def stream(self, request: ModelRequest) -> ModelStream: ...

    @abstractmethod
    async def complete(self, request: ModelRequest) -> Completion: ...

    async def window_from_server(self, model: str) -> int | None:
        """The model's context window as its server reports it; None when it can't say."""
        return None

    async def continuation_for(self, model: str) -> ServerContinuation | None:
        """What the server does with a continued request for `model` (None: not asked)."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - optional for providers without resources
        pass


class SDKProvider(Provider):
    """A provider reached through its SDK (openai's, anthropic's: they share one design).
    The SDK retries a failed request `max_retries` times; its read timeout, `stall_timeout`,
    bounds every wait for a byte, so a stalled stream or call ends."""

    errors: SDKErrors  # the SDK's exception classes
    sdk_client: Callable[..., Any]  # the SDK's async client class
    sdk_timeout: Callable[..., Any]  # the SDK's `Timeout` (httpx's)

    def __init__(
        self,
        *,
        name: str,
        api_key: str,
        base_url: str | None,
        max_retries: int = 2,
        timeout: float = 600.0,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    ) -> None:
        self.name = name
        self.max_retries = max_retries
        self.stall_timeout = stall_timeout
        self._client = self.sdk_client(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=self.sdk_timeout(timeout, read=stall_timeout),
        )
        self.base_url = str(self._client.base_url)

    def _call_failed(self, error: Exception) -> ProviderError:
        """What a failed synchronous call means for the user."""
        if read_timed_out(error):
            return stalled(self.name, self.stall_timeout)
        return provider_error(self.name, error, self.errors)

    async def aclose(self) -> None:
        await self._client.close()
