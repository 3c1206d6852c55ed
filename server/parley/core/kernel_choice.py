"""Which kernel a session's Python tools use: Parley's own (none chosen), a local Jupyter kernel
named by its connection file, or a kernel of a Jupyter Server (docs/protocol.md, "The user's
own kernel").

`KernelAddress` is what a session stores (core/session_settings.py): never a token. A
Jupyter Server's token is either read, when the session attaches, from the environment
variable the user names (`tokenEnv`, which the store may keep: it is a name) or given inline
(`token`), held in memory only (`KernelChoice.token`) and never stored, logged or shown.

`kernel_choice` reads `_meta.parley.kernel` of `session/new`, `session/load` and
`session/resume`: any JSON value comes in, a `KernelChoice` or a `ValueError` whose message
names what is wrong (and never quotes the token) comes out.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import attrs

# Limits on what a client may send: a path or URL longer than this is no path or URL.
MAX_TEXT = 4096
# A Jupyter kernel id is a UUID; Enterprise Gateway and others use other ids of this alphabet.
_KERNEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_KEYS = {"connectionFile", "server", "token", "tokenEnv", "kernelId"}


@attrs.frozen
class KernelAddress:
    """Where the user's kernel is: `connection_file` (local), or `server` and `kernel_id`
    (a Jupyter Server), with `token_env` the variable its token is read from."""

    connection_file: str | None = None
    server: str | None = None
    kernel_id: str | None = None
    token_env: str | None = None

    @property
    def is_remote(self) -> bool:
        return self.server is not None

    def wire(self) -> dict[str, str]:
        """As `_meta.parley.kernel` gives it (without a token): to check a stored one again."""
        if self.connection_file is not None:
            return {"connectionFile": self.connection_file}
        wire = {"server": self.server or "", "kernelId": self.kernel_id or ""}
        return wire | ({"tokenEnv": self.token_env} if self.token_env else {})

    def shown(self) -> str:
        """The address as the user reads it (no token: there is none here)."""
        if self.server is not None:
            return f"kernel {self.kernel_id} on {self.server}"
        return f"the kernel of {self.connection_file}"


@attrs.frozen
class KernelChoice:
    """A client's choice for a session: the address, and the token given inline, if any
    (kept out of every repr, so no log line or error can show it)."""

    address: KernelAddress
    token: str | None = attrs.field(default=None, repr=False)


# The value that means Parley's own kernel, on the wire and in the `kernel` config option.
OWN_KERNEL = "parley"


def kernel_choice(value: Any) -> KernelChoice | None:
    """`_meta.parley.kernel` read: None or "parley" (Parley's own kernel), else a
    `KernelChoice`; `ValueError` naming what is wrong otherwise."""
    if value is None or value == OWN_KERNEL:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            'expected an object ({"connectionFile": …} or {"server": …, "kernelId": …}) '
            f'or "{OWN_KERNEL}"'
        )
    unknown = sorted(str(key)[:40] for key in value if key not in _KEYS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    if "connectionFile" in value:
        if set(value) != {"connectionFile"}:
            raise ValueError("'connectionFile' is given alone (a local kernel has no server)")
        return KernelChoice(KernelAddress(connection_file=_connection_file(value)))
    if "server" not in value:
        raise ValueError("'connectionFile' or 'server' is required")
    return _remote(value)


def _connection_file(value: dict[str, Any]) -> str:
    path = _text(value, "connectionFile")
    if not path.startswith("/"):
        raise ValueError("'connectionFile' must be an absolute path")
    return path


def _remote(value: dict[str, Any]) -> KernelChoice:
    server = _text(value, "server").rstrip("/")
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("'server' must be an http:// or https:// URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("'server' must be a plain URL: no user, password, query or fragment")
    kernel_id = _text(value, "kernelId")
    if not _KERNEL_ID.fullmatch(kernel_id):
        raise ValueError("'kernelId' must be a kernel id (letters, digits, '.', '_', '-')")
    token_env = value.get("tokenEnv")
    named = isinstance(token_env, str) and _ENV_NAME.fullmatch(token_env)
    if token_env is not None and not named:
        raise ValueError("'tokenEnv' must be the name of an environment variable")
    token = value.get("token")
    if token is not None and not isinstance(token, str):
        raise ValueError("'token' must be a string")  # never its value: it is a secret
    if token is not None and token_env is not None:
        raise ValueError("give 'token' or 'tokenEnv', not both")
    address = KernelAddress(server=server, kernel_id=kernel_id, token_env=token_env)
    return KernelChoice(address, token or None)


def _text(value: dict[str, Any], key: str) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"'{key}' must be a non-empty string")
    if len(text) > MAX_TEXT or "\0" in text or any(ord(c) < 32 for c in text):
        raise ValueError(f"'{key}' is not a usable path or URL (too long, or control characters)")
    return text
