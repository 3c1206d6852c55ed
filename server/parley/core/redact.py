"""Secrets out of text, before it reaches the client, the store or a log.

What a provider, a gateway or an exception says may quote the request it got: a gateway that
echoes headers sends `Authorization: Bearer sk-…` back in its error. `redact` removes
authorization and API-key headers' values, bearer tokens, anything shaped like a provider key,
long random-looking values after `key=`/`token=`/`secret=`/`password=`, and the exact values
of the secrets this process knows (its environment's `*_KEY`, `*_TOKEN`, `*_SECRET`,
`*_PASSWORD` variables and the API keys it was configured with).

This module imports nothing of Parley's, so every layer may use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"

# An environment variable named like a secret: a secret word at the end of the name or
# followed by "_" ("AWS_SECRET_ACCESS_KEY", "MYAPIKEY"), not a longer word that merely starts
# with one ("TOKENIZERS_PARALLELISM", "KEYBOARD"). The one rule for redaction and for what
# child processes are not given (`child_env.py`).
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE)

# A value shorter than this is not replaced wherever it occurs: it would mangle plain words,
# and no real key is that short.
_MIN_EXACT_SECRET = 8

# A header (or field) whose value is a credential, with its value: `Authorization: Bearer x`,
# `"x-api-key": "x"`, `'authorization': 'Basic x'`, `api_key=x`.
_CREDENTIAL_FIELD = re.compile(
    r"""\b((?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key)
    (["']?\s*[:=]\s*["']?)
    (?>(?:(bearer|basic|token)\s+)?)  # atomic: a scheme is never taken for the value
    (?!\[redacted\])[^\s"',;&}\]]+""",
    re.IGNORECASE | re.VERBOSE,
)
_BEARER_TOKEN = re.compile(r"\b(bearer)\s+(?=\S*\d)[A-Za-z0-9\-._~+/]{12,}=*", re.IGNORECASE)
# The shapes of well-known keys: OpenAI and Anthropic (`sk-…`, `sk-ant-…`), xAI, Groq, Google,
# AWS access key ids, GitHub, Hugging Face, Slack, GitLab.
_KEY_SHAPED = re.compile(
    r"""\b(?:
        sk-[A-Za-z0-9_\-]{16,}
      | xai-[A-Za-z0-9]{20,}
      | gsk_[A-Za-z0-9]{20,}
      | AIza[0-9A-Za-z_\-]{30,}
      | AKIA[0-9A-Z]{16}
      | gh[pousr]_[A-Za-z0-9]{30,}
      | github_pat_[A-Za-z0-9_]{30,}
      | hf_[A-Za-z0-9]{30,}
      | xox[abprs]-[A-Za-z0-9\-]{10,}
      | glpat-[A-Za-z0-9_\-]{20,}
    )""",
    re.VERBOSE,
)
# A field of structured data (JSON) whose whole value is a credential.
_CREDENTIAL_NAME = re.compile(
    r"(?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key|[\w-]*(?:token|secret|password)",
    re.IGNORECASE,
)
# `key=…`, `"token": "…"`, `client_secret=…`: redacted when the value looks random (long,
# letters and digits), so `"max_tokens": 1000` and `token=none` stay readable.
_ASSIGNED_SECRET = re.compile(
    r"""\b([\w-]*(?:key|token|secret|password|passwd))
    (["']?\s*[:=]\s*["']?)
    ([A-Za-z0-9_\-./+~=]{16,})""",
    re.IGNORECASE | re.VERBOSE,
)


def _looks_random(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _redact_credential_field(match: re.Match[str]) -> str:
    name, separator, scheme = match.group(1, 2, 3)
    return f"{name}{separator}{scheme + ' ' if scheme else ''}{REDACTED}"


def _redact_assigned_secret(match: re.Match[str]) -> str:
    name, separator, value = match.group(1, 2, 3)
    return f"{name}{separator}{REDACTED}" if _looks_random(value) else match.group(0)


class Redactor:
    """Removes secrets from text: the known values, then everything shaped like a secret."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._exact: re.Pattern[str] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str | None]) -> None:
        """Also remove these exact values wherever they occur (short ones are ignored)."""
        new = {s for s in secrets if s and len(s) >= _MIN_EXACT_SECRET} - self._secrets
        if not new:
            return
        self._secrets |= new
        # Longest first, so a key that contains another is removed whole.
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._exact = re.compile("|".join(re.escape(secret) for secret in ordered))

    def __call__(self, text: str) -> str:
        if self._exact is not None:
            text = self._exact.sub(REDACTED, text)
        text = _CREDENTIAL_FIELD.sub(_redact_credential_field, text)
        text = _BEARER_TOKEN.sub(lambda match: f"{match.group(1)} {REDACTED}", text)
        text = _KEY_SHAPED.sub(REDACTED, text)
        return _ASSIGNED_SECRET.sub(_redact_assigned_secret, text)


def secrets_in(environ: Mapping[str, str]) -> list[str]:
    """The values of the variables named like secrets (`*_KEY`, `*_TOKEN`, …)."""
    return [value for name, value in environ.items() if SECRET_NAME.search(name)]


# The process's redactor: its environment's secrets now, the configured keys once read.
_redactor = Redactor(secrets_in(os.environ))


def remember_secrets(secrets: Iterable[str | None]) -> None:
    """Add secrets this process uses that its environment does not name as such (an API key
    in a variable named by config.toml)."""
    _redactor.add(secrets)


def redact(text: str) -> str:
    return _redactor(text)


def redact_json(value: Any) -> Any:
    """`value` with every string in it redacted, and the whole value of a field named like a
    credential (`authorization`, `api_key`, `*token`, …); dict keys stay: they are names."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_json(item) for item in value]
    if isinstance(value, dict):
        return {
            key: REDACTED
            if isinstance(item, str) and isinstance(key, str) and _CREDENTIAL_NAME.fullmatch(key)
            else redact_json(item)
            for key, item in value.items()
        }
    return value
