"""A model's context window, learned from its provider when Parley's tables don't know it.

Two sources, both read only after a provider refused a request for its length:

- the refusal itself: OpenAI and vLLM say "This model's maximum context length is N tokens",
  llama.cpp "request (M tokens) exceeds the available context size (N tokens)" (and puts
  `n_ctx` in the error body), Anthropic "prompt is too long: M tokens > N maximum";
- the server, when the refusal names no window: llama.cpp's `GET /props`
  (`default_generation_settings.n_ctx`) and Ollama's `POST /api/show` (the `num_ctx`
  parameter when the model sets one, else `model_info["<arch>.context_length"]`), at the host
  of the provider's base URL (its `/v1` dropped).

What a provider says is untrusted text: a window is taken only as ASCII digits and only
within `MIN_WINDOW`..`MAX_WINDOW`; anything else is no window.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger(__name__)

# No model has a window outside these: a figure outside is a misreading, never a window.
MIN_WINDOW = 256
MAX_WINDOW = 100_000_000
# Asking the server: a short wait (it answered the refusal a moment ago) and a small answer.
PROBE_TIMEOUT_SECONDS = 5.0
PROBE_MAX_BYTES = 4_000_000

_NUMBER = r"([0-9][0-9,_]{0,15})"
# Each pattern's group 1 is the window (case-insensitive, ASCII digits only).
_WINDOW_PATTERNS = tuple(
    re.compile(pattern, re.IGNORECASE | re.ASCII)
    for pattern in (
        rf"maximum context length is {_NUMBER} tokens",  # OpenAI, vLLM
        rf"maximum model length of {_NUMBER}",  # vLLM V1 ("The decoder prompt (length M) …")
        rf"context size \({_NUMBER} tokens\)",  # llama.cpp (and Ollama quoting it)
        rf"prompt is too long: {_NUMBER} tokens > {_NUMBER} maximum",  # Anthropic: group 2
        rf"exceed context limit: {_NUMBER} \+ {_NUMBER} > {_NUMBER}",  # Anthropic: group 3
        rf"context length of only {_NUMBER} tokens",  # LM Studio
    )
)


def sane_window(value: object) -> int | None:
    """`value` as a window in tokens, or None when it is no plausible window."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if MIN_WINDOW <= value <= MAX_WINDOW else None


def window_in_message(message: str) -> int | None:
    """The window a refusal's text names, or None when it names none."""
    for pattern in _WINDOW_PATTERNS:
        match = pattern.search(message)
        if match is not None:
            figure = match.group(match.lastindex or 1).replace(",", "").replace("_", "")
            return sane_window(int(figure)) if figure.isdigit() else None
    return None


def window_in_refusal(body: object, message: str) -> int | None:
    """The window a refusal names: llama.cpp's `n_ctx` in the error body, else the text."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(inner, Mapping):
        window = sane_window(inner.get("n_ctx"))
        if window is not None:
            return window
    return window_in_message(message)


def window_in_props(props: object) -> int | None:
    """llama.cpp's `GET /props` answer: `default_generation_settings.n_ctx` (the slot's)."""
    if not isinstance(props, Mapping):
        return None
    settings = props.get("default_generation_settings")
    return sane_window(settings.get("n_ctx")) if isinstance(settings, Mapping) else None


def window_in_ollama_show(show: object) -> int | None:
    """Ollama's `POST /api/show` answer: the `num_ctx` parameter when set (the window the
    model runs with), else `model_info["<architecture>.context_length"]`."""
    if not isinstance(show, Mapping):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str):  # one "name value" a line, padded with spaces
        for line in parameters.splitlines():
            name, _, value = line.strip().partition(" ")
            value = value.strip()
            if name == "num_ctx" and value.isascii() and value.isdigit() and len(value) < 16:
                return sane_window(int(value))
    info = show.get("model_info")
    if not isinstance(info, Mapping):
        return None
    architecture = info.get("general.architecture")
    if isinstance(architecture, str):
        return sane_window(info.get(f"{architecture}.context_length"))
    return None


def server_root(base_url: str) -> str | None:
    """The server's root for its own endpoints: the base URL without its `/v1` (None for
    a URL that is not http or https)."""
    try:
        parts = urlsplit(base_url)
    except ValueError:  # a malformed address (the SDK would have refused it already)
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


async def window_from_server(base_url: str, model: str, api_key: str | None) -> int | None:
    """Ask a local server for the model's window: llama.cpp's `/props`, then Ollama's
    `/api/show`. None when neither answers with one (any other server)."""
    root = server_root(base_url)
    if root is None:
        return None
    import httpx2  # the SDK's client library, imported with it (not at the server's start)

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx2.Timeout(PROBE_TIMEOUT_SECONDS)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
        props = await json_answer(client, "GET", f"{root}/props", None)
        window = window_in_props(props)
        if window is None:
            show = await json_answer(client, "POST", f"{root}/api/show", {"model": model})
            window = window_in_ollama_show(show)
    return window


async def json_answer(
    client: httpx2.AsyncClient, method: str, url: str, body: dict[str, Any] | None
) -> object:
    """The JSON a 200 answer holds; None for anything else (an error status, no server,
    an answer too long or not JSON)."""
    import httpx2  # the SDK's client library, imported with it (not at the server's start)

    try:
        async with client.stream(method, url, json=body) as response:
            if response.status_code != 200:
                return None
            data = bytearray()
            async for piece in response.aiter_bytes():
                data += piece
                if len(data) > PROBE_MAX_BYTES:
                    return None
        return await asyncio.to_thread(json.loads, bytes(data))  # up to 4 MB: off the loop
    except (httpx2.HTTPError, ValueError, RecursionError) as error:
        logger.debug("Asking %s failed: %s", url, error)
        return None
