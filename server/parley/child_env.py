"""The environment a child process of Parley gets: the server's own, without its secrets.

The server holds the user's API keys in its environment; the processes it starts (the Python
kernel, which runs the workspace's interpreter and the model's code) must not see them. What is
left out:

- the providers' variables: every `OPENAI_*` and `ANTHROPIC_*`, and the variables the
  configuration names for a provider's key (`api_key_env`), whatever they are called;
- any name with KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL(S) at its end or right
  before a `_`, in any case (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `HF_TOKEN`,
  `PGPASSWORD`, `MYAPIKEY`, `GOOGLE_APPLICATION_CREDENTIALS`);
- any value that is a URL with a password in it (`postgres://user:pw@host/db`).

Everything else (PATH, HOME, LANG, VIRTUAL_ENV, ...) is kept, so programs run as they would
in the user's shell.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from parley.core.redact import SECRET_NAME

PROVIDER_PREFIXES = ("OPENAI_", "ANTHROPIC_")
URL_WITH_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@", re.IGNORECASE)


def is_secret(name: str, value: str) -> bool:
    """Whether a variable looks like it holds a credential."""
    return (
        name.upper().startswith(PROVIDER_PREFIXES)
        or SECRET_NAME.search(name) is not None
        or URL_WITH_PASSWORD.search(value) is not None
    )


def child_environment(
    secret_names: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A copy of `environ` (the server's environment by default) without its secrets.

    `secret_names` are further variables to leave out whatever they are called: the configured
    providers' key variables.
    """
    source = os.environ if environ is None else environ
    named = {name.upper() for name in secret_names if name}
    return {
        name: value
        for name, value in source.items()
        if name.upper() not in named and not is_secret(name, value)
    }


# What an MCP server started for a client inherits from the server: enough to find programs
# and run in the user's locale, nothing that could hold a credential.
MCP_BASE_VARIABLES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "SYSTEMROOT",  # Windows: programs fail without it
)


def mcp_server_environment(
    listed: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of an MCP server the client listed in `session/new`: a minimal base
    from the server's own (MCP_BASE_VARIABLES, none that looks like a secret) and exactly the
    variables the client listed for it, which win (the user configured them for that
    server, keys included)."""
    source = os.environ if environ is None else environ
    base = {
        name: source[name]
        for name in MCP_BASE_VARIABLES
        if name in source and not is_secret(name, source[name])
    }
    return {**base, **listed}
