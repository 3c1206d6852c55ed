"""Continuing a streamed reply: what a server does with a continued request, and how its
answer is reconciled with the text the user already saw.

A hybrid round that turned to tool use after streaming text asks the server to continue
that text (docs/local-models.md, `continue_streamed`). Servers differ in what they answer:

- the new part only (vLLM, Ollama, llama.cpp builds that parse the prefill apart);
- the prefix again, then the new part (llama.cpp b11549 re-parses the prefilled text as part
  of the message), sometimes after an empty `<think>\\n\\n</think>` block its Qwen3 template
  inserts before the prefix, or with the prefix's leading or trailing spaces stripped;
- a whole new reply, when the prefill is switched off (`llama-server --no-prefill-assistant`)
  or the chat template closes the message.

So the form is probed once per server and model (`probe_continuation`: llama.cpp's
`POST /apply-template` shows the prompt it would build, without generating; Ollama's
`POST /api/show`; vLLM's `GET /v1/models`), and every continued answer is reconciled
(`new_part`): the stored reply is exactly the streamed text plus the new part, or, when the
answer can't be read as a continuation, the answer alone (a revision), never both.
"""

from __future__ import annotations

import logging
import re

import attrs

from parley.config import ContinuationForm
from parley.providers.context_limits import PROBE_TIMEOUT_SECONDS, json_answer, server_root

logger = logging.getLogger(__name__)

# The prefill a probe asks a server to continue: text no template writes by itself.
PROBE_PREFIX = "Parley-continuation-probe-7f3a"
# An empty think block a template may put before a continued message (Qwen3's, with
# thinking off for a prefill), as the answer repeats it.
_EMPTY_THINK = re.compile(r"\A\s*<(think|thinking)>\s*</\1>\s*")
# A regenerated reply starts like the streamed text but differs: at least this many equal
# leading characters (or the whole streamed text, when shorter) is taken for a regeneration.
_REGENERATED_PREFIX_CHARS = 16


@attrs.define
class ServerContinuation:
    """What one server does with a continued request for one model.

    `form` is how to ask (None: don't; the full call is made instead); `echoes` whether its
    answer repeats the prefix (None until an answer showed it)."""

    form: ContinuationForm | None
    echoes: bool | None = None

    def learn(self, echoed: bool | None) -> None:
        if echoed is not None:
            self.echoes = echoed


def new_part(streamed: str, answer: str, echoes: bool | None) -> str | None:
    """The part of a continued `answer` that follows `streamed`, or None when the answer is
    no continuation of it (a regenerated reply: to be shown as a revision, stored alone).

    An answer that repeats the streamed text (after an empty think block, with its outer
    whitespace stripped) has the repetition cut off; one that doesn't is the new part itself,
    unless the server is known to repeat it or the answer starts like the streamed text
    without being it (both: a reply generated again)."""
    echoed = echoed_length(streamed, answer)
    if echoed is not None:
        return answer[echoed:]
    if echoes or looks_regenerated(streamed, answer):
        return None
    return answer


def echoed_length(streamed: str, answer: str) -> int | None:
    """How many leading characters of `answer` repeat `streamed` (None: it doesn't).

    Tolerated: an empty think block before the repetition, and the repetition missing the
    streamed text's leading or trailing whitespace (a server that strips the prefill) — the
    whitespace the answer then has at the join is the streamed text's own, not new text."""
    if not streamed.strip():
        # Whitespace alone: what the answer starts with of it is the same whitespace.
        return _common_prefix_length(answer, streamed)
    start = 0
    if not _EMPTY_THINK.match(streamed) and (think := _EMPTY_THINK.match(answer)):
        start = think.end()
    if answer.startswith(streamed, start):
        return start + len(streamed)
    core = streamed.strip()
    at = start + len(answer[start:]) - len(answer[start:].lstrip())
    if not answer.startswith(core, at):
        return None
    end = at + len(core)
    trailing = streamed[len(streamed.rstrip()) :]
    joined = answer[end:]
    # The answer's own copy of the trailing whitespace is part of the echo.
    same = _common_prefix_length(joined, trailing)
    return end + same


def looks_regenerated(streamed: str, answer: str) -> bool:
    """An answer that starts as the streamed text did but is not it: the server wrote the
    reply again instead of continuing (its sampling took another path)."""
    head = streamed.strip()
    body = _EMPTY_THINK.sub("", answer, count=1).lstrip()
    if not head or not body:
        return False
    needed = min(len(head), _REGENERATED_PREFIX_CHARS)
    return _common_prefix_length(head, body) >= needed


def _common_prefix_length(first: str, second: str) -> int:
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return index
    return min(len(first), len(second))


def continued_prompt_form(prompt: object) -> bool:
    """Whether llama.cpp's `/apply-template` answer continues the probe's prefill: the
    prompt it would send the model ends with the prefix (not a closed message and a new
    generation prompt)."""
    if not isinstance(prompt, dict):
        return False
    text = prompt.get("prompt")
    return isinstance(text, str) and text.rstrip().endswith(PROBE_PREFIX)


def served_by_vllm(models: object) -> bool:
    """Whether a `GET /v1/models` answer is vLLM's: its models are `owned_by: "vllm"`."""
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        return False
    return any(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models["data"])


def _probe_messages(model: str) -> dict[str, object]:
    return {
        "model": model,
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": PROBE_PREFIX},
        ],
    }


async def probe_continuation(
    base_url: str, model: str, api_key: str | None, configured: ContinuationForm
) -> ServerContinuation:
    """What the server at `base_url` does with a continued request, asked without making
    the model generate anything. The configured form when the server doesn't say."""
    if configured == "deepseek":
        return ServerContinuation(configured)  # a hosted API: its documented form
    root = server_root(base_url)
    if root is None:
        return ServerContinuation(configured)
    import httpx2  # the SDK's client library, imported with it (not at the server's start)

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(PROBE_TIMEOUT_SECONDS)
    ) as client:
        body = _probe_messages(model)
        prefilled = await json_answer(client, "POST", f"{root}/apply-template", body)
        if prefilled is not None:  # llama.cpp: the prompt it would build
            if continued_prompt_form(prefilled):
                return ServerContinuation("prefill")
            explicit = {**body, "continue_final_message": True, "add_generation_prompt": False}
            asked = await json_answer(client, "POST", f"{root}/apply-template", explicit)
            return ServerContinuation("vllm" if continued_prompt_form(asked) else None)
        show = await json_answer(client, "POST", f"{root}/api/show", {"model": model})
        if isinstance(show, dict) and isinstance(show.get("template"), str):
            return ServerContinuation("prefill", echoes=False)  # Ollama: the new part only
        models = await json_answer(client, "GET", f"{base_url.rstrip('/')}/models", None)
        if served_by_vllm(models):
            return ServerContinuation("vllm", echoes=False)
    return ServerContinuation(configured)
