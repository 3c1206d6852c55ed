"""A prompt cache that honours the requests' cache fields roughly as the real APIs do.

With `FakeLLM(prompt_cache=PromptCache())`, every reply's usage is computed from the request
instead of the script: the prompt's tokens are its JSON's characters / 4, and the cached
share is what an earlier request already put in the cache.

- Anthropic: the prefix (tools, then system, then the messages' blocks) up to each
  `cache_control` breakpoint is written; a later request reads the longest written prefix it
  starts with, ending at or before its last breakpoint (the API looks back from each
  breakpoint). No breakpoint, no caching.
- OpenAI: caching is automatic; the prefix up to each message is cached, per
  `prompt_cache_key` (requests without one share a cache, as luck of routing would).

Prefixes shorter than `min_tokens` (the APIs' 1,024) are never cached.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import attrs

from parley.fakellm.script import Reply


def _tokens(characters: int) -> int:
    return (characters + 3) // 4


def _segments(api: str, body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt in order, as (JSON text, is a cache breakpoint) pieces."""
    pieces: list[tuple[str, bool]] = [(str(body.get("model")), False)]
    for tool in body.get("tools") or []:
        pieces.append((json.dumps(tool, sort_keys=True), "cache_control" in tool))
    if api == "anthropic":
        system = body.get("system")
        if isinstance(system, str):
            pieces.append((system, False))
        elif isinstance(system, list):
            for block in system:
                pieces.append((json.dumps(block, sort_keys=True), "cache_control" in block))
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                pieces.append((message["role"] + content, False))
                continue
            for block in content or []:
                piece = message["role"] + json.dumps(block, sort_keys=True)
                pieces.append((piece, "cache_control" in block))
    else:  # OpenAI: every message boundary can be a cached prefix
        for message in body.get("messages") or []:
            pieces.append((json.dumps(message, sort_keys=True), True))
    return pieces


@attrs.define
class PromptCache:
    min_tokens: int = 1024
    _written: set[str] = attrs.field(factory=set)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def usage(self, api: str, body: dict[str, Any]) -> tuple[int, int, int]:
        """(prompt tokens, read from the cache, written to it) for this request."""
        namespace = api + str(body.get("prompt_cache_key", ""))
        digest = hashlib.sha256(namespace.encode())
        characters = 0
        positions: list[tuple[str, int, bool]] = []  # (key, tokens, breakpoint) per piece
        for text, breakpoint_here in _segments(api, body):
            digest.update(text.encode())
            characters += len(text)
            positions.append((digest.copy().hexdigest(), _tokens(characters), breakpoint_here))
        total = _tokens(characters)
        breakpoints = [i for i, (_, tokens, marked) in enumerate(positions) if marked]
        if not breakpoints or positions[breakpoints[-1]][1] < self.min_tokens:
            return total, 0, 0
        candidates = positions[: breakpoints[-1] + 1]
        with self._lock:
            read = max((tokens for key, tokens, _ in candidates if key in self._written), default=0)
            last_key, last_tokens, _ = candidates[-1]
            written = 0 if last_key in self._written else last_tokens - read
            self._written.update(
                key for key, tokens, marked in candidates if marked and tokens >= self.min_tokens
            )
        if api != "anthropic":
            written = 0  # OpenAI bills no writes
        return total, read, written

    def apply(self, api: str, body: dict[str, Any], reply: Reply) -> Reply:
        """The reply with its usage as this cache computes it (a reply without usage keeps
        none; its output tokens stay as scripted)."""
        if reply.usage is None:
            return reply
        total, read, written = self.usage(api, body)
        return attrs.evolve(reply, usage=(total, reply.usage[1]), cache=(read, written))
