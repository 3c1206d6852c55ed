"""A context window for the fake: requests longer than it are refused as real servers do.

`FakeLLM(context_limit=ContextLimit(15_000, form="llamacpp"))` refuses every request whose
size passes 15,000 tokens with the body and status that server sends, and can answer the
servers' own questions about the window: llama.cpp's `GET /props` and Ollama's
`POST /api/show`.

A request's size is its JSON (messages, system prompt, tools) at four characters a token,
plus, where the server counts it (OpenAI, vLLM), the completion tokens it asks for.

Forms (the bodies are those the servers send; vLLM's is the 0.9 shape, flat, not under
`error`):
- "openai": 400 `context_length_exceeded`, "This model's maximum context length is N tokens.
  However, your messages resulted in M tokens. …";
- "vllm": 400 `BadRequestError`, "This model's maximum context length is N tokens. However,
  you requested M tokens (P in the messages, C in the completion). …";
- "llamacpp": 400 `exceed_context_size_error`, "request (M tokens) exceeds the available
  context size (N tokens), try increasing it", with `n_prompt_tokens` and `n_ctx`;
- "unstated": 400 `exceed_context_size_error`, "the request exceeds the available context
  size, try increasing it": llama.cpp's older wording, which names no window;
- "anthropic" (on `/v1/messages` only): 400 `invalid_request_error`, "prompt is too long: M
  tokens > N maximum".
"""

from __future__ import annotations

import json
from typing import Any

import attrs

FORMS = frozenset({"openai", "vllm", "llamacpp", "unstated", "anthropic"})


@attrs.frozen
class ContextLimit:
    tokens: int
    form: str = "openai"
    props: bool = False  # serve llama.cpp's GET /props (n_ctx = tokens)
    # Serve Ollama's POST /api/show: "num_ctx" (the window as the model's num_ctx parameter,
    # its trained length larger), "model_info" (only `<arch>.context_length`), None: no.
    ollama_show: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.form not in FORMS:
            raise ValueError(f"unknown context limit form {self.form!r}: one of {sorted(FORMS)}")


def request_tokens(body: dict[str, Any], with_completion: bool) -> tuple[int, int]:
    """(prompt tokens, completion tokens asked for, if counted) of a request, as the fake
    counts them."""
    prompt = {key: body.get(key) for key in ("system", "messages", "tools")}
    prompt_tokens = len(json.dumps(prompt, ensure_ascii=False)) // 4
    asked = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    completion = asked if with_completion and isinstance(asked, int) else 0
    return prompt_tokens, completion


def refusal(limit: ContextLimit, api: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 body refusing the request, or None when it fits (or the form is not this
    wire's)."""
    if (api == "anthropic") != (limit.form == "anthropic"):
        return None
    prompt, completion = request_tokens(body, limit.form in ("openai", "vllm"))
    total = prompt + completion
    if total <= limit.tokens:
        return None
    window = limit.tokens
    if limit.form == "openai":
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {total} tokens. Please reduce the length of the messages."
        )
        return _openai_error(message, "invalid_request_error", "context_length_exceeded")
    if limit.form == "vllm":
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{total} tokens ({prompt} in the messages, {completion} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    if limit.form == "llamacpp":
        message = (
            f"request ({prompt} tokens) exceeds the available context size ({window} tokens), "
            "try increasing it"
        )
        error = _llamacpp_error(message)
        error["error"].update(n_prompt_tokens=prompt, n_ctx=window)
        return error
    if limit.form == "unstated":
        return _llamacpp_error("the request exceeds the available context size, try increasing it")
    message = f"prompt is too long: {prompt} tokens > {window} maximum"
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _openai_error(message: str, kind: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": "messages", "code": code}}


def _llamacpp_error(message: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}}


def props_body(limit: ContextLimit) -> dict[str, Any]:
    """llama.cpp's `GET /props`: the slot's settings, `n_ctx` among them."""
    return {
        "default_generation_settings": {
            "id": 0,
            "n_ctx": limit.tokens,
            "params": {"n_predict": -1, "temperature": 0.8},
        },
        "total_slots": 1,
        "model_path": "/models/fake-model-Q4_K_M.gguf",
        "chat_template": "{{ messages }}",
        "build_info": "b0000-fakellm",
    }


def ollama_show_body(limit: ContextLimit) -> dict[str, Any]:
    """Ollama's `POST /api/show` for a qwen2 model: its window as `num_ctx` (the trained
    length larger) or as the trained length alone."""
    by_parameter = limit.ollama_show == "num_ctx"
    parameters = 'stop                           "<|im_end|>"'
    if by_parameter:
        parameters = f"num_ctx                        {limit.tokens}\n{parameters}"
    return {
        "modelfile": "FROM /models/fake\n",
        "parameters": parameters,
        "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "qwen2", "parameter_size": "7.6B"},
        "model_info": {
            "general.architecture": "qwen2",
            "general.parameter_count": 7615616512,
            "qwen2.context_length": limit.tokens * 8 if by_parameter else limit.tokens,
            "qwen2.embedding_length": 3584,
        },
        "capabilities": ["completion", "tools"],
    }
