"""Anthropic Messages API.

Quirks handled here: thinking blocks carry a signature (or arrive redacted) and must be
sent back verbatim in a tool loop; tool results travel in a user message; consecutive
messages of one role are merged; the stream's input usage comes first (`message_start`) and
its output usage last (`message_delta`), so a stream closed early has no output count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
from anthropic._models import construct_type  # the SDK's own, cached, conversion
from anthropic.types import RawMessageStreamEvent

from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    Message,
    ThinkingBlock,
    UserMessage,
)
from parley.core.usage import Usage
from parley.providers import base, events
from parley.providers.errors import SDKErrors
from parley.tools.base import ToolSpec

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


def _usage(usage: Any, output_tokens: int | None = None) -> Usage:
    cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
    cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
    return Usage(
        input_tokens=(getattr(usage, "input_tokens", None) or 0) + cache_read + cache_write,
        output_tokens=output_tokens if output_tokens is not None else usage.output_tokens or 0,
        cached_read_tokens=cache_read,
        cached_write_tokens=cache_write,
        thought_tokens=None,  # Anthropic counts thinking in output_tokens, not apart
    )


class AnthropicProvider(base.SDKProvider):
    errors = SDKErrors.of(anthropic, anthropic.AnthropicError)

    sdk_client = anthropic.AsyncAnthropic
    sdk_timeout = anthropic.Timeout

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        # The SDK builds pydantic's validator of a stream's events at the first event (a
        # tenth of a second): here instead, in the thread that builds the provider
        # (`ProviderRegistry.resolved`, the preload), not on the event loop mid-stream.
        construct_type(type_=RawMessageStreamEvent, value={"type": "message_stop"})

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
        return _AnthropicStream(self, self._arguments(request))

    async def complete(self, request: base.ModelRequest) -> base.Completion:
        try:
            message = await self._client.messages.create(**self._arguments(request))
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
            usage=_usage(message.usage),
        )


class _AnthropicStream(base.SDKStream):
    _provider: AnthropicProvider

    async def _open(self) -> Any:
        return await self._provider._client.messages.create(**self._arguments, stream=True)

    def _new_reply(self) -> base.StreamReply:
        return _AnthropicReply()


class _AnthropicReply(base.StreamReply):
    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[ThinkingBlock] = []
        self.current_thought: list[str] = []
        self.current_signature = ""
        self.calls: dict[int, dict[str, Any]] = {}  # by content block index
        self.start_usage: Any = None
        self.output_tokens: int | None = None
        self.finish: events.FinishReason = "end_turn"

    def read(self, chunk: Any) -> Iterator[events.StreamEvent]:
        kind = chunk.type
        if kind == "content_block_delta":
            yield from self._read_delta(chunk.index, chunk.delta)
        elif kind == "content_block_start":
            block = chunk.content_block
            if block.type == "tool_use":
                self.calls[chunk.index] = {"id": block.id, "name": block.name, "json": []}
                yield events.ToolCallStarted(chunk.index, block.name)
            elif block.type == "redacted_thinking":
                self.thinking.append(ThinkingBlock("", redacted=block.data))
        elif kind == "content_block_stop":
            if self.current_thought or self.current_signature:
                thought = ThinkingBlock(
                    "".join(self.current_thought), self.current_signature or None
                )
                self.thinking.append(thought)
                self.current_thought, self.current_signature = [], ""
        elif kind == "message_start":
            self.start_usage = chunk.message.usage
        elif kind == "message_delta":
            if chunk.delta.stop_reason:
                self.finish = _STOP_REASONS.get(chunk.delta.stop_reason, "other")
            if chunk.usage is not None:
                self.output_tokens = chunk.usage.output_tokens

    def _read_delta(self, index: int, delta: Any) -> Iterator[events.StreamEvent]:
        if delta.type == "text_delta":
            self.text.append(delta.text)
            yield events.TextDelta(delta.text)
        elif delta.type == "thinking_delta":
            if delta.thinking:
                self.current_thought.append(delta.thinking)
                yield events.ThoughtDelta(delta.thinking)
        elif delta.type == "signature_delta":
            self.current_signature += delta.signature
        elif delta.type == "input_json_delta" and index in self.calls:
            self.calls[index]["json"].append(delta.partial_json)
            if delta.partial_json:
                yield events.ToolCallArgumentsDelta(index, delta.partial_json)

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
        usage = None
        if self.start_usage is not None:
            usage = _usage(self.start_usage, self.output_tokens)
        return base.Completion.assemble(
            text="".join(self.text),
            thinking=tuple(self.thinking),
            tool_calls=tuple(tool_calls),
            finish_reason=self.finish,
            usage=usage,
        )
