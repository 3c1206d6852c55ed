"""Anthropic Messages API.

Quirks handled here: thinking blocks carry a signature (or arrive redacted) and must be
sent back verbatim in a tool loop; tool results travel in a user message; consecutive
messages of one role are merged; the stream's input usage comes first (`message_start`) and
its output usage last (`message_delta`), so a stream closed early has no output count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic

from parley.agent.conversation import (
    AssistantMessage,
    Message,
    ThinkingBlock,
    ToolResultMessage,
    UserMessage,
)
from parley.agent.usage import Usage
from parley.config import DEFAULT_STALL_TIMEOUT
from parley.providers.base import (
    CompletedToolCall,
    Completion,
    FinishReason,
    ModelRequest,
    ModelStream,
    Provider,
    SDKStream,
    StreamEvent,
    StreamFinished,
    TextDelta,
    ThoughtDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    parse_tool_arguments,
    read_timed_out,
    stalled,
)
from parley.providers.errors import provider_error
from parley.tools.base import ToolSpec

DEFAULT_MAX_TOKENS = 8192

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


def to_anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, UserMessage):
            add("user", [{"type": "text", "text": message.as_text()}])
        elif isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            for thought in message.thinking:
                # Only Anthropic's own (signed) reasoning may be sent back.
                if thought.redacted:
                    blocks.append({"type": "redacted_thinking", "data": thought.redacted})
                elif thought.signature:
                    blocks.append(
                        {
                            "type": "thinking",
                            "thinking": thought.text,
                            "signature": thought.signature,
                        }
                    )
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            for call in message.tool_calls:
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            add("assistant", blocks)
        elif isinstance(message, ToolResultMessage):
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id,
                        "content": message.content or "(no output)",
                        "is_error": message.is_error,
                    }
                ],
            )
    return wire


def to_anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
        for tool in tools
    ]


def _usage(usage: Any, output_tokens: int | None = None) -> Usage:
    cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
    cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
    return Usage(
        input_tokens=(getattr(usage, "input_tokens", None) or 0) + cache_read + cache_write,
        output_tokens=output_tokens if output_tokens is not None else usage.output_tokens or 0,
        cached_read_tokens=cache_read,
        cached_write_tokens=cache_write,
    )


class AnthropicProvider(Provider):
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
        # The read timeout bounds every wait for a byte, so a stalled stream or call ends.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=anthropic.Timeout(timeout, read=stall_timeout),
        )

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.system:
            arguments["system"] = request.system
        if request.tools:
            arguments["tools"] = to_anthropic_tools(request.tools)
        if request.thinking_budget:
            arguments["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
        return arguments

    def stream(self, request: ModelRequest) -> ModelStream:
        return _AnthropicStream(self, self._arguments(request))

    async def complete(self, request: ModelRequest) -> Completion:
        try:
            message = await self._client.messages.create(**self._arguments(request))
        except anthropic.AnthropicError as error:
            if read_timed_out(error):
                raise stalled(self.name, self.stall_timeout) from error
            raise provider_error(self.name, error) from error
        text: list[str] = []
        thinking: list[ThinkingBlock] = []
        tool_calls: list[CompletedToolCall] = []
        for block in message.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "thinking":
                thinking.append(ThinkingBlock(block.thinking, signature=block.signature))
            elif block.type == "redacted_thinking":
                thinking.append(ThinkingBlock("", redacted=block.data))
            elif block.type == "tool_use":
                arguments, error = parse_tool_arguments(block.input)
                tool_calls.append(CompletedToolCall(block.id, block.name, arguments, error))
        return Completion.assemble(
            text="".join(text),
            thinking=tuple(thinking),
            tool_calls=tuple(tool_calls),
            finish_reason=_STOP_REASONS.get(message.stop_reason or "end_turn", "other"),
            usage=_usage(message.usage),
        )

    async def aclose(self) -> None:
        await self._client.close()


class _AnthropicStream(SDKStream):
    sdk_error = anthropic.AnthropicError
    connection_error = anthropic.APIConnectionError

    def __init__(self, provider: AnthropicProvider, arguments: dict[str, Any]) -> None:
        super().__init__(
            provider.name,
            arguments,
            max_retries=provider.max_retries,
            stall_timeout=provider.stall_timeout,
        )
        self._provider = provider

    async def _request_events(self) -> AsyncIterator[StreamEvent]:
        text: list[str] = []
        thinking: list[ThinkingBlock] = []
        current_thought: list[str] = []
        current_signature = ""
        calls: dict[int, dict[str, Any]] = {}  # by content block index
        start_usage: Any = None
        output_tokens: int | None = None
        finish: FinishReason = "end_turn"
        try:
            self._sdk_stream = await self._provider._client.messages.create(
                **self._arguments, stream=True
            )
            async for event in self._sdk_stream:
                kind = event.type
                if kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        text.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "thinking_delta":
                        if delta.thinking:
                            current_thought.append(delta.thinking)
                            yield ThoughtDelta(delta.thinking)
                    elif delta.type == "signature_delta":
                        current_signature += delta.signature
                    elif delta.type == "input_json_delta" and event.index in calls:
                        calls[event.index]["json"].append(delta.partial_json)
                        if delta.partial_json:
                            yield ToolCallArgumentsDelta(event.index, delta.partial_json)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = {"id": block.id, "name": block.name, "json": []}
                        yield ToolCallStarted(event.index, block.name)
                    elif block.type == "redacted_thinking":
                        thinking.append(ThinkingBlock("", redacted=block.data))
                elif kind == "content_block_stop":
                    if current_thought or current_signature:
                        thinking.append(
                            ThinkingBlock("".join(current_thought), current_signature or None)
                        )
                        current_thought, current_signature = [], ""
                elif kind == "message_start":
                    start_usage = event.message.usage
                elif kind == "message_delta":
                    if event.delta.stop_reason:
                        finish = _STOP_REASONS.get(event.delta.stop_reason, "other")
                    if event.usage is not None:
                        output_tokens = event.usage.output_tokens
        except Exception as error:
            failure = self._failure(error)
            if failure is None:
                return
            raise failure from error
        tool_calls = []
        for index in sorted(calls):
            entry = calls[index]
            arguments, error_text = parse_tool_arguments("".join(entry["json"]))
            tool_calls.append(CompletedToolCall(entry["id"], entry["name"], arguments, error_text))
        usage = _usage(start_usage, output_tokens) if start_usage is not None else None
        self.completion = Completion.assemble(
            text="".join(text),
            thinking=tuple(thinking),
            tool_calls=tuple(tool_calls),
            finish_reason=finish,
            usage=usage,
        )
        yield StreamFinished(self.completion.finish_reason, usage)
