"""OpenAI Chat Completions, and every server that speaks it (Ollama, llama.cpp, vLLM ...).

Quirks handled here: reasoning arrives as `reasoning_content` or `reasoning` deltas (not
fields the SDK declares); some servers repeat `role` on every chunk, send a tool call whole in
one delta, omit the tool call's `index`, or report finish reason `stop` for a tool call;
usage arrives only when asked for, in a last chunk with no choices.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai

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
    ProviderError,
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

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def to_openai_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, UserMessage):
            wire.append({"role": "user", "content": message.as_text()})
        elif isinstance(message, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            elif not message.text:
                continue  # an empty assistant turn (cancelled before any text) says nothing
            wire.append(entry)
        elif isinstance(message, ToolResultMessage):
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
    return wire


def to_openai_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def usage_from_openai(usage: Any) -> Usage | None:
    if usage is None:
        return None
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        thought_tokens=getattr(completion_details, "reasoning_tokens", None) or 0,
        cached_read_tokens=getattr(prompt_details, "cached_tokens", None) or 0,
    )


def _reasoning_of(delta_or_message: Any) -> str | None:
    """Reasoning text: `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning`
    (Ollama, OpenRouter). Newer SDKs declare the first; older ones keep both as extras."""
    extra = getattr(delta_or_message, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta_or_message, name, None) or extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


class OpenAIProvider(Provider):
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
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=openai.Timeout(timeout, read=stall_timeout),
        )

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request.system, request.messages),
        }
        if request.tools:
            arguments["tools"] = to_openai_tools(request.tools)
        if request.max_tokens:
            arguments["max_completion_tokens"] = request.max_tokens
        return arguments

    def stream(self, request: ModelRequest) -> ModelStream:
        return _OpenAIStream(self, self._arguments(request))

    async def complete(self, request: ModelRequest) -> Completion:
        try:
            response = await self._client.chat.completions.create(**self._arguments(request))
        except openai.OpenAIError as error:
            if read_timed_out(error):
                raise stalled(self.name, self.stall_timeout) from error
            raise provider_error(self.name, error) from error
        if not response.choices:
            raise ProviderError(
                f"{self.name} returned a response with no choices.",
                provider=self.name,
                type="invalid_response",
                retryable=True,
            )
        choice = response.choices[0]
        message = choice.message
        tool_calls = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is None:
                continue
            arguments, error = parse_tool_arguments(function.arguments)
            tool_calls.append(CompletedToolCall(call.id, function.name, arguments, error))
        reasoning = _reasoning_of(message)
        finish = _FINISH_REASONS.get(choice.finish_reason or "stop", "other")
        return Completion.assemble(
            text=message.content or "",
            thinking=(ThinkingBlock(reasoning),) if reasoning else (),
            tool_calls=tuple(tool_calls),
            finish_reason=finish,
            usage=usage_from_openai(response.usage),
        )

    async def aclose(self) -> None:
        await self._client.close()


class _OpenAIStream(SDKStream):
    sdk_error = openai.OpenAIError
    connection_error = openai.APIConnectionError

    def __init__(self, provider: OpenAIProvider, arguments: dict[str, Any]) -> None:
        super().__init__(
            provider.name,
            arguments,
            max_retries=provider.max_retries,
            stall_timeout=provider.stall_timeout,
        )
        self._provider = provider

    async def _request_events(self) -> AsyncIterator[StreamEvent]:
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}  # by the stream's tool call index
        finish: FinishReason = "end_turn"
        usage: Usage | None = None
        try:
            self._sdk_stream = await self._provider._client.chat.completions.create(
                **self._arguments, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in self._sdk_stream:
                if chunk.usage is not None:
                    usage = usage_from_openai(chunk.usage)
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta is not None:
                    if thought := _reasoning_of(delta):
                        reasoning.append(thought)
                        yield ThoughtDelta(thought)
                    if delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for position, call in enumerate(delta.tool_calls or []):
                        index = call.index if call.index is not None else position
                        function = call.function
                        entry = calls.get(index)
                        if entry is None:
                            entry = calls[index] = {"id": call.id or "", "name": "", "args": []}
                        if call.id and not entry["id"]:
                            entry["id"] = call.id
                        if function is not None and function.name and not entry["name"]:
                            entry["name"] = function.name
                            yield ToolCallStarted(index, function.name)
                        if function is not None and function.arguments:
                            entry["args"].append(function.arguments)
                            yield ToolCallArgumentsDelta(index, function.arguments)
                if choice.finish_reason:
                    finish = _FINISH_REASONS.get(choice.finish_reason, "other")
        except Exception as error:
            failure = self._failure(error)
            if failure is None:
                return
            raise failure from error
        completed = []
        for index in sorted(calls):
            entry = calls[index]
            arguments, error_text = parse_tool_arguments("".join(entry["args"]))
            completed.append(CompletedToolCall(entry["id"], entry["name"], arguments, error_text))
        self.completion = Completion.assemble(
            text="".join(text),
            thinking=(ThinkingBlock("".join(reasoning)),) if reasoning else (),
            tool_calls=tuple(completed),
            finish_reason=finish,
            usage=usage,
        )
        yield StreamFinished(self.completion.finish_reason, usage)
