"""Anthropic Messages API.

Quirks handled here: thinking blocks carry a signature (or arrive redacted) and must be
sent back verbatim in a tool loop; tool results travel in a user message; consecutive
messages of one role are merged; the stream's input usage comes first (`message_start`) and
its output usage last (`message_delta`), so a stream closed early has no output count.
A stream's events are read as the JSON the server sent, as the OpenAI provider reads its
chunks (docs/architecture.md, "Streaming at the SDK's speed").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic

from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    Message,
    ThinkingBlock,
    UserMessage,
)
from parley.core.off_loop import off_loop
from parley.core.usage import Usage
from parley.providers import base, events
from parley.providers.errors import SDKErrors
from parley.tools.base import ToolSpec

PATH = "/v1/messages"
DEFAULT_MAX_TOKENS = 8192
# Prompt caching: a breakpoint caches the prefix up to and including its block. Two of the
# four a request may carry: the tools (or the system prompt when there are none), which stay
# the same for a session, and the latest message, so the synchronous call of a hybrid round
# and the next round read the whole prefix from the cache.
CACHE_BREAKPOINT = {"type": "ephemeral"}
# Blocks that cannot carry a breakpoint.
_UNCACHEABLE_BLOCKS = ("thinking", "redacted_thinking")
# With thinking on, max_tokens counts the thinking too and must exceed its budget: at least
# this much is left for the answer (the high level, 24576 + 4096, fits Opus 4's 32000).
ANSWER_TOKENS_WITH_THINKING = 4096

_STOP_REASONS: dict[str, events.FinishReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


def to_anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The conversation as Anthropic's messages: consecutive messages of one role (a tool's
    result is the user's) merged into one, and a message with no block left out."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _role_and_blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def _role_and_blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        return "user", _user_blocks(message)
    if isinstance(message, AssistantMessage):
        return "assistant", _assistant_blocks(message)
    return "user", [
        {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content or "(no output)",
            "is_error": message.is_error,
        }
    ]


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for thought in message.thinking:
        # Only Anthropic's own (signed) reasoning may be sent back.
        if thought.redacted:
            blocks.append({"type": "redacted_thinking", "data": thought.redacted})
        elif thought.signature:
            blocks.append(
                {"type": "thinking", "thinking": thought.text, "signature": thought.signature}
            )
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _user_blocks(message: UserMessage) -> list[dict[str, Any]]:
    """A prompt as text blocks and base64 image blocks, in order (no empty text block: the
    API refuses one)."""
    if not message.images:
        return [{"type": "text", "text": message.as_text()}]
    return [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
        }
        if isinstance(part, ImageBlock)
        else {"type": "text", "text": part}
        for part in message.parts()
        if isinstance(part, ImageBlock) or part.strip()
    ]


def to_anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
        for tool in tools
    ]


def add_cache_breakpoints(arguments: dict[str, Any]) -> None:
    """Mark the stable prefix (the last tool, else the system prompt) and the last block of
    the latest message as cache breakpoints (`arguments` is freshly built: changed in place)."""
    if arguments.get("tools"):
        arguments["tools"][-1]["cache_control"] = dict(CACHE_BREAKPOINT)
    elif arguments.get("system"):
        arguments["system"] = [
            {"type": "text", "text": arguments["system"], "cache_control": dict(CACHE_BREAKPOINT)}
        ]
    messages = arguments.get("messages")
    if messages and messages[-1]["content"]:
        last_block = messages[-1]["content"][-1]
        if last_block.get("type") not in _UNCACHEABLE_BLOCKS:
            last_block["cache_control"] = dict(CACHE_BREAKPOINT)


def _usage(usage: dict[str, Any], output_tokens: int | None = None) -> Usage:
    """Our usage of Anthropic's: its `input_tokens` leaves out the cache's reads and writes."""
    cache_read = _count(usage.get("cache_read_input_tokens"))
    cache_write = _count(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_count(usage.get("input_tokens")) + cache_read + cache_write,
        output_tokens=output_tokens
        if output_tokens is not None
        else _count(usage.get("output_tokens")),
        cached_read_tokens=cache_read,
        cached_write_tokens=cache_write,
        thought_tokens=None,  # Anthropic counts thinking in output_tokens, not apart
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class AnthropicProvider(base.SDKProvider):
    errors = SDKErrors.of(anthropic, anthropic.AnthropicError)

    sdk_client = anthropic.AsyncAnthropic
    sdk_timeout = anthropic.Timeout

    def _arguments(self, request: base.ModelRequest) -> dict[str, Any]:
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        if request.thinking_budget:
            max_tokens = max(max_tokens, request.thinking_budget + ANSWER_TOKENS_WITH_THINKING)
        arguments: dict[str, Any] = {
            "model": request.model,
            "max_tokens": max_tokens,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system:
            arguments["system"] = request.system
        if request.tools:
            arguments["tools"] = to_anthropic_tools(request.tools)
        add_cache_breakpoints(arguments)
        if request.thinking_budget:
            arguments["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
        return arguments

    def stream(self, request: base.ModelRequest) -> base.ModelStream:
        return _AnthropicStream(self, {}, request)

    def streamed_request_body(self, request: base.ModelRequest) -> bytes:
        """The streamed request's JSON body (`base.json_request_body`: off the event loop)."""
        return base.json_request_body({**self._arguments(request), "stream": True})

    def request_body(self, request: base.ModelRequest) -> bytes:
        """The JSON body `messages.create` would send, built and encoded off the event loop
        (the SDK transforms its parameters on the loop, every message of the history)."""
        return base.json_request_body(self._arguments(request))

    async def complete(self, request: base.ModelRequest) -> base.Completion:
        content = await off_loop(self.request_body, request)
        try:
            message = await self._client.post(
                PATH,
                content=content,
                cast_to=anthropic.types.Message,
                options={"headers": base.JSON_HEADERS},
            )
        except anthropic.AnthropicError as error:
            raise self._call_failed(error) from error
        text: list[str] = []
        thinking: list[ThinkingBlock] = []
        tool_calls: list[base.CompletedToolCall] = []
        for block in message.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "thinking":
                thinking.append(ThinkingBlock(block.thinking, signature=block.signature))
            elif block.type == "redacted_thinking":
                thinking.append(ThinkingBlock("", redacted=block.data))
            elif block.type == "tool_use":
                arguments, error = base.parse_tool_arguments(block.input)
                tool_calls.append(base.CompletedToolCall(block.id, block.name, arguments, error))
        return base.Completion.assemble(
            text="".join(text),
            thinking=tuple(thinking),
            tool_calls=tuple(tool_calls),
            finish_reason=_STOP_REASONS.get(message.stop_reason or "end_turn", "other"),
            usage=_usage(message.usage.model_dump()),
        )


class _AnthropicStream(base.SDKStream):
    _provider: AnthropicProvider

    def __init__(
        self, provider: AnthropicProvider, arguments: dict[str, Any], request: base.ModelRequest
    ) -> None:
        super().__init__(provider, arguments)
        self._request = request

    async def _open(self) -> Any:
        """The stream's events as the JSON the server sent (dictionaries), through the SDK's
        request for undocumented responses (`cast_to=object`): its retries, auth, SSE
        decoding, `ping`s skipped and `error` events raised, without a pydantic model built
        per event. The body is built and encoded off the loop (it grows with the history)."""
        content = await off_loop(self._provider.streamed_request_body, self._request)
        return await self._provider._client.post(
            PATH,
            content=content,
            cast_to=object,
            options={"headers": base.JSON_HEADERS},
            stream=True,
            stream_cls=anthropic.AsyncStream[object],
        )

    def _new_reply(self) -> base.StreamReply:
        return _AnthropicReply()


class _AnthropicReply(base.StreamReply):
    """A reply read from its events, each the JSON sent: a malformed one is skipped, never
    fatal (`tests/models/test_anthropic_stream_events.py`)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[ThinkingBlock] = []
        self.current_thought: list[str] = []
        self.current_signature = ""
        self.calls: dict[int, dict[str, Any]] = {}  # by content block index
        self.start_usage: dict[str, Any] | None = None
        self.output_tokens: int | None = None
        self.finish: events.FinishReason = "end_turn"

    def read(self, chunk: Any) -> Iterator[events.StreamEvent]:
        """One event's JSON (`_AnthropicStream._open`)."""
        if not isinstance(chunk, dict):
            return
        kind = chunk.get("type")
        if kind == "content_block_delta":
            yield from self._read_delta(chunk.get("index"), _mapping(chunk.get("delta")))
        elif kind == "content_block_start":
            yield from self._start_block(chunk.get("index"), _mapping(chunk.get("content_block")))
        elif kind == "content_block_stop":
            self._end_thought()
        elif kind == "message_start":
            usage = _mapping(chunk.get("message")).get("usage")
            self.start_usage = usage if isinstance(usage, dict) else None
        elif kind == "message_delta":
            stop_reason = _mapping(chunk.get("delta")).get("stop_reason")
            if stop_reason and isinstance(stop_reason, str):
                self.finish = _STOP_REASONS.get(stop_reason, "other")
            output_tokens = _mapping(chunk.get("usage")).get("output_tokens")
            if isinstance(output_tokens, int) and not isinstance(output_tokens, bool):
                self.output_tokens = output_tokens

    def _start_block(self, index: Any, block: dict[str, Any]) -> Iterator[events.StreamEvent]:
        kind = block.get("type")
        if kind == "tool_use" and _is_index(index):
            name = _text(block.get("name"))
            self.calls[index] = {"id": _text(block.get("id")), "name": name, "json": []}
            yield events.ToolCallStarted(index, name)
        elif kind == "redacted_thinking" and (data := _text(block.get("data"))):
            self.thinking.append(ThinkingBlock("", redacted=data))

    def _end_thought(self) -> None:
        if self.current_thought or self.current_signature:
            thought = ThinkingBlock("".join(self.current_thought), self.current_signature or None)
            self.thinking.append(thought)
            self.current_thought, self.current_signature = [], ""

    def _read_delta(self, index: Any, delta: dict[str, Any]) -> Iterator[events.StreamEvent]:
        kind = delta.get("type")
        if kind == "text_delta":
            if isinstance(text := delta.get("text"), str):
                self.text.append(text)
                yield events.TextDelta(text)
        elif kind == "thinking_delta":
            if thought := _text(delta.get("thinking")):
                self.current_thought.append(thought)
                yield events.ThoughtDelta(thought)
        elif kind == "signature_delta":
            self.current_signature += _text(delta.get("signature"))
        elif kind == "input_json_delta" and _is_index(index) and index in self.calls:
            yield from self._read_arguments(index, _text(delta.get("partial_json")))

    def _read_arguments(self, index: int, partial_json: str) -> Iterator[events.StreamEvent]:
        if partial_json:
            self.calls[index]["json"].append(partial_json)
            yield events.ToolCallArgumentsDelta(index, partial_json)

    def usage_so_far(self) -> Usage | None:
        """The input's usage (`message_start`), and the output's once `message_delta` said."""
        return None if self.start_usage is None else _usage(self.start_usage, self.output_tokens)

    def completion(self) -> base.Completion:
        tool_calls = []
        for index in sorted(self.calls):
            entry = self.calls[index]
            arguments, error_text = base.parse_tool_arguments("".join(entry["json"]))
            tool_calls.append(
                base.CompletedToolCall(entry["id"], entry["name"], arguments, error_text)
            )
        return base.Completion.assemble(
            text="".join(self.text),
            thinking=tuple(self.thinking),
            tool_calls=tuple(tool_calls),
            finish_reason=self.finish,
            usage=self.usage_so_far(),
        )


def _is_index(value: Any) -> bool:
    """A content block's index: an int (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)
