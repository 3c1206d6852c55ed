"""OpenAI Chat Completions, and every server that speaks it (Ollama, llama.cpp, vLLM ...).

Quirks handled here: reasoning arrives as `reasoning_content` or `reasoning` deltas (not
fields the SDK declares); some servers repeat `role` on every chunk, send a tool call whole in
one delta, omit the tool call's `index`, or report finish reason `stop` for a tool call;
usage arrives only when asked for, in a last chunk with no choices.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from parley.config import ContinuationForm
from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    Message,
    ThinkingBlock,
    ToolResultMessage,
    UserMessage,
)
from parley.core.errors import ProviderError
from parley.core.off_loop import off_loop
from parley.core.usage import Usage
from parley.providers import base, events
from parley.providers.context_limits import window_from_server
from parley.providers.continuation import ServerContinuation, probe_continuation
from parley.providers.errors import SDKErrors
from parley.tools.base import ToolSpec

_FINISH_REASONS: dict[str, events.FinishReason] = {
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
            wire.append({"role": "user", "content": _user_content(message)})
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


def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    """A prompt's text as a string; a prompt with images as parts, in order, each image a
    `data:` URL."""
    if not message.images:
        return message.as_text()
    return [
        {"type": "image_url", "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}}
        if isinstance(part, ImageBlock)
        else {"type": "text", "text": part}
        for part in message.parts()
        if isinstance(part, ImageBlock) or part.strip()
    ]


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
        # None when not reported (llama.cpp, Ollama): unknown, not zero, if there were thoughts
        thought_tokens=getattr(completion_details, "reasoning_tokens", None),
        cached_read_tokens=getattr(prompt_details, "cached_tokens", None) or 0,
    )


def usage_from_openai_json(usage: Any) -> Usage | None:
    """`usage_from_openai` of a streamed chunk's `usage`, the JSON as sent."""
    if not isinstance(usage, dict):
        return None
    prompt_details = _mapping(usage.get("prompt_tokens_details"))
    completion_details = _mapping(usage.get("completion_tokens_details"))
    thought_tokens = completion_details.get("reasoning_tokens")
    return Usage(
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        thought_tokens=thought_tokens if isinstance(thought_tokens, int) else None,
        cached_read_tokens=_count(prompt_details.get("cached_tokens")),
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def prompt_cache_key_of(session_id: str) -> str:
    """The cache key sent for a session: a digest, so the provider never sees the id."""
    return "parley-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def continuation_of(
    form: ContinuationForm, text: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """What asks a server to continue `text`, a partial reply, in its form: the trailing
    assistant message, and the request's extra fields. Sources in docs/local-models.md."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if form == "deepseek":
        message["prefix"] = True  # DeepSeek's chat prefix completion (its beta base URL)
    if form == "vllm":
        # Without these, vLLM's chat template closes the message and starts a new one.
        return message, {"continue_final_message": True, "add_generation_prompt": False}
    return message, None  # "prefill": llama.cpp's server and Ollama continue it as it is


def _reasoning_of(delta_or_message: Any) -> str | None:
    """Reasoning text: `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning`
    (Ollama, OpenRouter). Newer SDKs declare the first; older ones keep both as extras."""
    # Read from the model's fields and extras as dictionaries: `getattr` of a field the model
    # does not declare raises inside pydantic, 20 µs a streamed chunk (a fifth of the SDK's own).
    fields = getattr(delta_or_message, "__dict__", None) or {}
    extra = getattr(delta_or_message, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = fields.get(name) or extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _reasoning_in(delta: dict[str, Any]) -> str | None:
    """`_reasoning_of` a streamed delta, the JSON as sent."""
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return None


class OpenAIProvider(base.SDKProvider):
    errors = SDKErrors.of(openai, openai.OpenAIError)

    sdk_client = openai.AsyncOpenAI
    sdk_timeout = openai.Timeout

    def __init__(
        self,
        *,
        prompt_cache_key: bool = False,
        continue_streamed: ContinuationForm | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.continuation = continue_streamed
        self.continues_streamed_text = continue_streamed is not None
        # What each model's server does with a continued request: probed at first use.
        self._continuations: dict[str, ServerContinuation] = {}
        # OpenAI routes requests with one `prompt_cache_key` to the same cache; other
        # OpenAI-compatible servers may refuse the unknown field, so it is a provider setting.
        self.prompt_cache_key = prompt_cache_key

    def _arguments(self, request: base.ModelRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request.system, request.messages),
        }
        if request.tools:
            arguments["tools"] = to_openai_tools(request.tools)
        if request.max_tokens:
            arguments["max_completion_tokens"] = request.max_tokens
        if request.reasoning_effort:
            arguments["reasoning_effort"] = request.reasoning_effort
        if self.prompt_cache_key and request.cache_key:
            arguments["prompt_cache_key"] = prompt_cache_key_of(request.cache_key)
        form = request.continue_form or self.continuation
        if request.continue_from and form is not None:
            message, extra_body = continuation_of(form, request.continue_from)
            arguments["messages"].append(message)
            if extra_body:
                arguments["extra_body"] = extra_body
        return arguments

    def stream(self, request: base.ModelRequest) -> base.ModelStream:
        return _OpenAIStream(self, {}, request)

    def streamed_request_body(self, request: base.ModelRequest) -> bytes:
        """The streamed request's JSON body (`base.json_request_body`: off the event loop)."""
        return self.request_body(request, stream=True, stream_options={"include_usage": True})

    def request_body(self, request: base.ModelRequest, **more: Any) -> bytes:
        """The JSON body `chat.completions.create` would send, built and encoded off the event
        loop: the SDK's own transform of its parameters walks every message of the history
        on the loop (1.1 s for 10,000 messages)."""
        body = self._arguments(request)
        body.update(more)
        body.update(body.pop("extra_body", None) or {})
        return base.json_request_body(body)

    def _server_key(self) -> str | None:
        api_key = self._client.api_key
        return None if api_key == "none" else api_key  # "none": the registry's stand-in

    async def window_from_server(self, model: str) -> int | None:
        """A local server's own answer (llama.cpp's `/props`, Ollama's `/api/show`)."""
        return await window_from_server(self.base_url, model, self._server_key())

    async def continuation_for(self, model: str) -> ServerContinuation | None:
        """What the server does with a continued request for `model`, asked once."""
        if self.continuation is None:
            return None
        known = self._continuations.get(model)
        if known is None:
            known = await probe_continuation(
                self.base_url, model, self._server_key(), self.continuation
            )
            self._continuations[model] = known
        return known

    async def complete(self, request: base.ModelRequest) -> base.Completion:
        content = await off_loop(self.request_body, request)
        try:
            response = await self._client.post(
                "/chat/completions",
                content=content,
                cast_to=ChatCompletion,
                options={"headers": base.JSON_HEADERS},
            )
        except openai.OpenAIError as error:
            raise self._call_failed(error) from error
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
            arguments, error = base.parse_tool_arguments(function.arguments)
            tool_calls.append(base.CompletedToolCall(call.id, function.name, arguments, error))
        reasoning = _reasoning_of(message)
        finish = _FINISH_REASONS.get(choice.finish_reason or "stop", "other")
        return base.Completion.assemble(
            text=message.content or "",
            thinking=(ThinkingBlock(reasoning),) if reasoning else (),
            tool_calls=tuple(tool_calls),
            finish_reason=finish,
            usage=usage_from_openai(response.usage),
        )


class _OpenAIStream(base.SDKStream):
    _provider: OpenAIProvider

    def __init__(
        self, provider: OpenAIProvider, arguments: dict[str, Any], request: base.ModelRequest
    ) -> None:
        super().__init__(provider, arguments)
        self._request = request

    async def _open(self) -> Any:
        """The stream's chunks as the JSON the server sent (dictionaries), through the SDK's
        request for undocumented responses (`cast_to=object`): its retries, auth, SSE decoding
        and error events, without building a pydantic model per chunk, which cost 65 µs of a
        chunk's 88 (docs/architecture.md, "Streaming at the SDK's speed"). The body is built
        and encoded off the loop (8 MB of tool arguments held it 70-95 ms)."""
        content = await off_loop(self._provider.streamed_request_body, self._request)
        return await self._provider._client.post(
            "/chat/completions",
            content=content,
            cast_to=object,
            options={"headers": base.JSON_HEADERS, "security": {"bearer_auth": True}},
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )

    def _new_reply(self) -> base.StreamReply:
        return _OpenAIReply()


class _OpenAIReply(base.StreamReply):
    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}  # by the stream's tool call index
        self.finish: events.FinishReason = "end_turn"
        self.usage: Usage | None = None

    def usage_so_far(self) -> Usage | None:
        return self.usage  # only in the last chunk: a stream cut off has none

    def read(self, chunk: Any) -> Iterator[events.StreamEvent]:
        """One chunk, as the JSON the server sent (`_OpenAIStream._open`)."""
        if not isinstance(chunk, dict):
            return
        if (usage := chunk.get("usage")) is not None:
            self.usage = usage_from_openai_json(usage)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            if thought := _reasoning_in(delta):
                self.reasoning.append(thought)
                yield events.ThoughtDelta(thought)
            if (content := delta.get("content")) and isinstance(content, str):
                self.text.append(content)
                yield events.TextDelta(content)
            calls = delta.get("tool_calls")
            for position, call in enumerate(calls if isinstance(calls, list) else ()):
                if isinstance(call, dict):
                    yield from self._read_call(position, call)
        if (finish := choice.get("finish_reason")) and isinstance(finish, str):
            self.finish = _FINISH_REASONS.get(finish, "other")

    def _read_call(self, position: int, call: dict[str, Any]) -> Iterator[events.StreamEvent]:
        """A piece of a tool call: some servers send one whole, or leave out its index."""
        index = call.get("index")
        index = index if isinstance(index, int) else position
        call_id = _text(call.get("id"))
        entry = self.calls.setdefault(index, {"id": call_id, "name": "", "args": []})
        if call_id and not entry["id"]:
            entry["id"] = call_id
        function = call.get("function")
        if not isinstance(function, dict):
            return
        name = _text(function.get("name"))
        if name and not entry["name"]:
            entry["name"] = name
            yield events.ToolCallStarted(index, name)
        if arguments := _text(function.get("arguments")):
            entry["args"].append(arguments)
            yield events.ToolCallArgumentsDelta(index, arguments)

    def completion(self) -> base.Completion:
        completed = []
        for index in sorted(self.calls):
            entry = self.calls[index]
            arguments, error_text = base.parse_tool_arguments("".join(entry["args"]))
            completed.append(
                base.CompletedToolCall(entry["id"], entry["name"], arguments, error_text)
            )
        return base.Completion.assemble(
            text="".join(self.text),
            thinking=(ThinkingBlock("".join(self.reasoning)),) if self.reasoning else (),
            tool_calls=tuple(completed),
            finish_reason=self.finish,
            usage=self.usage,
        )
