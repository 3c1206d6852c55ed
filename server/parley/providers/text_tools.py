"""Provider wrappers for local models that write their reasoning and tool calls as text.

- `TextToolProvider` is for models without native tool calling (`tool_format = "text"`). It
  sends no native `tools`: the system prompt teaches the text protocol instead,

      <tool><tool_name>NAME</tool_name><arguments>{JSON}</arguments></tool>

  and earlier calls and results go back to the model written in that protocol. The reply's
  text is parsed as it streams: `<think>` sections become thoughts, and a call is announced
  (`ToolCallStarted`) as soon as its `</tool_name>` closes, before its arguments arrive.
- `ThinkTagProvider` is for models with native tools that still reason inline in
  `<think>…</think>` (`think_tags = true`, the default for the local presets). It only moves
  those sections of the text into thoughts; requests and native tool calls pass unchanged.

Both leave usage untouched: what the inner provider reports for a call is what the call
counts, so the accounting rule holds exactly as for native tools. The parsing itself lives in
`text_parsers`; this module connects it to the Provider interface.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

import attrs

from parley.core.conversation import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.core.usage import Usage
from parley.providers.base import (
    CompletedToolCall,
    Completion,
    ModelRequest,
    ModelStream,
    Provider,
)
from parley.providers.continuation import ServerContinuation
from parley.providers.events import (
    StreamEvent,
    StreamFinished,
    TextDelta,
    ThoughtDelta,
    ToolCallStarted,
)
from parley.providers.text_parsers import (
    ARGUMENTS_CLOSE,
    ARGUMENTS_OPEN,
    NAME_CLOSE,
    NAME_OPEN,
    TOOL_CLOSE,
    TOOL_OPEN,
    Event,
    LocalModelStreamParser,
    TextPiece,
    TextToolCallParser,
    ThinkTagParser,
    ThoughtPiece,
    ToolCallComplete,
    ToolCallMalformed,
    ToolCallNamed,
    render_tool_protocol_instructions,
    render_tool_result,
)


class TextParser(Protocol):
    """What `text_parsers`' parsers have in common."""

    def feed(self, text: str) -> Sequence[Event]: ...

    def finish(self) -> Sequence[Event]: ...


# --- The request: from native tool calls to the text protocol ----------------------------


def render_tool_call(call: ToolCall) -> str:
    """A call as the model would have written it in the text protocol."""
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return (
        f"{TOOL_OPEN}{NAME_OPEN}{call.name}{NAME_CLOSE}"
        f"{ARGUMENTS_OPEN}{arguments}{ARGUMENTS_CLOSE}{TOOL_CLOSE}"
    )


def to_text_protocol_messages(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The conversation with its tool calls and results written as text.

    An assistant message's calls are appended to its text. A malformed call is left out:
    its text, as the model wrote it, is already in the message (see `_ReplyReader`). Tool
    results become user text, and consecutive user messages are merged into one, because
    many local chat templates insist that user and assistant turns alternate.
    """
    rewritten: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls_text = "".join(
                render_tool_call(call) for call in message.tool_calls if not call.arguments_error
            )
            message = attrs.evolve(message, text=message.text + calls_text, tool_calls=())
        elif isinstance(message, ToolResultMessage):
            result = render_tool_result(message.name, message.content, message.is_error)
            message = UserMessage((TextBlock(result),))
        previous = rewritten[-1] if rewritten else None
        if isinstance(message, UserMessage) and isinstance(previous, UserMessage):
            rewritten[-1] = UserMessage(previous.content + message.content)
        else:
            rewritten.append(message)
    return tuple(rewritten)


def to_text_protocol_request(request: ModelRequest) -> ModelRequest:
    """The request for a model without native tools: the tools are described in the system
    prompt, and no `tools` are sent."""
    instructions = render_tool_protocol_instructions(list(request.tools))
    system = "\n\n".join(part for part in (request.system, instructions) if part)
    return attrs.evolve(
        request,
        system=system,
        messages=to_text_protocol_messages(request.messages),
        tools=(),
    )


# --- The reply: parsed text to stream events and a Completion ----------------------------


def _new_call_id() -> str:
    # Unique across restarts too: the ids are stored with the conversation.
    return f"call_text_{uuid.uuid4().hex[:16]}"


class _ReplyReader:
    """Runs one reply's text through a parser, turning its events into stream events, and
    builds the reply's `Completion` at the end.

    Streams and synchronous calls share it, so the same text gives the same completion.
    """

    def __init__(self, parser: TextParser) -> None:
        self._parser = parser
        self._text: list[str] = []
        self._thoughts: list[str] = []
        self._names: dict[int, str] = {}  # by the call's index in the reply
        self._calls: list[CompletedToolCall] = []

    def feed(self, text: str) -> list[StreamEvent]:
        return self._translate(self._parser.feed(text))

    def finish(self) -> list[StreamEvent]:
        return self._translate(self._parser.finish())

    def _translate(self, events: Sequence[Event]) -> list[StreamEvent]:
        stream_events: list[StreamEvent] = []
        for event in events:
            if isinstance(event, TextPiece):
                self._text.append(event.text)
                stream_events.append(TextDelta(event.text))
            elif isinstance(event, ThoughtPiece):
                self._thoughts.append(event.text)
                stream_events.append(ThoughtDelta(event.text))
            elif isinstance(event, ToolCallNamed):
                # Early detection: the name is known, the arguments are still to come.
                self._names[event.index] = event.name
                stream_events.append(ToolCallStarted(event.index, event.name))
            elif isinstance(event, ToolCallComplete):
                self._calls.append(CompletedToolCall(_new_call_id(), event.name, event.arguments))
            elif isinstance(event, ToolCallMalformed):
                # Not a call, so its text stays in the reply as written (the model sees what
                # it sent); the call carries the parser's sentence back to it as an error.
                self._text.append(event.raw)
                stream_events.append(TextDelta(event.raw))
                name = self._names.get(event.index, "")
                self._calls.append(
                    CompletedToolCall(_new_call_id(), name, {}, arguments_error=event.error)
                )
            # ToolCallOpened: nothing to tell the agent until the name is known.
        return stream_events

    def completion(self, inner: Completion) -> Completion:
        """The reply, from the inner provider's completion (whose text was fed here)."""
        thinking = inner.thinking
        if self._thoughts:
            thinking += (ThinkingBlock("".join(self._thoughts)),)
        # Native calls (if the model made any anyway) first, then those found in the text.
        tool_calls = inner.tool_calls + tuple(self._calls)
        return Completion(
            text="".join(self._text),
            thinking=thinking,
            tool_calls=tool_calls,
            finish_reason="tool_use" if tool_calls else inner.finish_reason,
            usage=inner.usage,
        )


class _ParsedTextStream(ModelStream):
    """The inner stream with its text run through a `_ReplyReader`; other events pass."""

    def __init__(self, inner: ModelStream, reader: _ReplyReader) -> None:
        self._inner = inner
        self._reader = reader

    def usage_so_far(self) -> Usage | None:
        return self._inner.usage_so_far()

    async def _events(self) -> AsyncIterator[StreamEvent]:
        async for event in self._inner:
            if isinstance(event, TextDelta):
                for parsed in self._reader.feed(event.text):
                    yield parsed
            elif isinstance(event, StreamFinished):
                for parsed in self._reader.finish():
                    yield parsed
                assert self._inner.completion is not None  # set before its StreamFinished
                self.completion = self._reader.completion(self._inner.completion)
                yield StreamFinished(self.completion.finish_reason, event.usage)
            else:  # native reasoning and native tool calls
                yield event

    async def _close_transport(self) -> None:
        await self._inner.aclose()


# --- The providers ------------------------------------------------------------------------


class _ParsingProvider(Provider):
    """A provider whose replies' text is parsed by `_new_parser()`, after the request is
    rewritten by `_rewrite()`. The inner provider is shared and closed by its owner."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.base_url = inner.base_url

    def _rewrite(self, request: ModelRequest) -> ModelRequest:
        return request

    def _new_parser(self) -> TextParser:
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> ModelStream:
        inner_stream = self.inner.stream(self._rewrite(request))
        return _ParsedTextStream(inner_stream, _ReplyReader(self._new_parser()))

    async def window_from_server(self, model: str) -> int | None:
        return await self.inner.window_from_server(model)

    async def complete(self, request: ModelRequest) -> Completion:
        inner = await self.inner.complete(self._rewrite(request))
        reader = _ReplyReader(self._new_parser())
        reader.feed(inner.text)
        reader.finish()
        return reader.completion(inner)


class TextToolProvider(_ParsingProvider):
    """Tool calls in the text protocol, for models without native tool calling."""

    def __init__(self, inner: Provider, *, think_tags: bool = True) -> None:
        super().__init__(inner)
        self.think_tags = think_tags

    def _rewrite(self, request: ModelRequest) -> ModelRequest:
        return to_text_protocol_request(request)

    def _new_parser(self) -> TextParser:
        return LocalModelStreamParser() if self.think_tags else TextToolCallParser()


class ThinkTagProvider(_ParsingProvider):
    """`<think>`/`<thinking>` sections of the text become thoughts; nothing else changes."""

    def __init__(self, inner: Provider) -> None:
        super().__init__(inner)
        # The streamed text holds no <think> section: the server continues the answer.
        self.continues_streamed_text = inner.continues_streamed_text

    async def continuation_for(self, model: str) -> ServerContinuation | None:
        return await self.inner.continuation_for(model)

    def _new_parser(self) -> TextParser:
        return ThinkTagParser()
