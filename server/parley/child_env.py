"""The environment a child process of Parley gets: an allow-list of the server's own.

The server holds the user's API keys in its environment, and the user's shell may hold more
(a `GITHUB_PAT`, an `SSH_AUTH_SOCK`, a `SENTRY_DSN`): the processes it starts (the Python
kernel, the model's shell commands, the editor's terminal for them) must see none of them.
No list of secret-looking names can know them all, so a child gets only what a tool needs
to run as it would in the user's shell (CHILD_VARIABLES: where programs are, the user, the
locale, the terminal, the toolchains' homes) and the names the user adds (config.toml's
`[sandbox] env`). Even among those, a value is left out when it looks like a credential:

- the providers' variables: every `OPENAI_*` and `ANTHROPIC_*`, and the variables the
  configuration names for a provider's key (`api_key_env`), whatever they are called;
- any name with KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL(S) at its end or right
  before a `_`, in any case (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `HF_TOKEN`);
- any value that is a URL with a user part or a credential's parameter in it
  (`https_proxy=http://user:pw@proxy`, `https://TOKEN@host`, `?private_token=…`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from parley.core.redact import SECRET_NAME

PROVIDER_PREFIXES = ("OPENAI_", "ANTHROPIC_")
# A URL carrying a credential: any user part (`https://TOKEN@host`, `user:pw@`), or a query
# parameter named as one (`?private_token=…`, `access_token`, `api_key`, `password`).
URL_WITH_PASSWORD = re.compile(
    r"[a-z][a-z0-9+.-]*://[^/@\s]+@"
    r"|[?&][a-z0-9_.-]*(token|key|secret|password|passwd|auth|sig|signature)[a-z0-9_.-]*=",
    re.IGNORECASE,
)

# What a child gets of the server's environment (docs/security.md): nothing that names a
# socket (SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, DISPLAY, XDG_RUNTIME_DIR) or a secret.
CHILD_VARIABLES = frozenset(
    {
        # who and where
        *("PATH", "HOME", "USER", "LOGNAME", "USERNAME", "SHELL", "TMPDIR", "TZ"),
        # the locale and the terminal
        *("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES"),
        *("LC_NUMERIC", "LC_TIME", "LC_MONETARY", "TERM", "COLORTERM", "COLUMNS", "LINES"),
        *("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "EDITOR", "VISUAL"),
        *("PAGER", "CI"),
        # the XDG base directories (not XDG_RUNTIME_DIR: the user's sockets)
        *("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"),
        *("XDG_CONFIG_DIRS", "XDG_DATA_DIRS"),
        # Python
        *("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "PYTHONHOME"),
        *("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8"),
        *("PYTHONHASHSEED", "PYENV_ROOT", "PYENV_VERSION", "PIP_INDEX_URL"),
        # other toolchains
        *("CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "GOPATH", "GOROOT", "GOFLAGS"),
        *("GOCACHE", "GOMODCACHE", "GOPROXY", "JAVA_HOME", "NODE_PATH", "NVM_DIR", "NVM_BIN"),
        *("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS"),
        *("CPPFLAGS", "MAKEFLAGS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"),
        *("MPLBACKEND",),
        # certificates and proxies (a proxy URL with a password is still left out)
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"),
        *("NODE_EXTRA_CA_CERTS", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy"),
        *("https_proxy", "no_proxy"),
    }
)


def is_secret(name: str, value: str) -> bool:
    """Whether a variable looks like it holds a credential."""
    return (
        name.upper().startswith(PROVIDER_PREFIXES)
        or SECRET_NAME.search(name) is not None
        or URL_WITH_PASSWORD.search(value) is not None
    )


def child_environment(
    secret_names: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    extra: Iterable[str] = (),
) -> dict[str, str]:
    """What a child gets of `environ` (the server's environment by default): the variables
    of CHILD_VARIABLES and `extra` (the user's `[sandbox] env`), none that looks like a
    credential. `secret_names` are further variables left out whatever they are called (the
    configured providers' key variables), even when `extra` names them."""
    source = os.environ if environ is None else environ
    named = {name.upper() for name in secret_names if name}
    allowed = CHILD_VARIABLES | set(extra)
    return {
        name: value
        for name, value in source.items()
        if name in allowed and name.upper() not in named and not is_secret(name, value)
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
