"""`parley kernels` (the Jupyter kernels running here, with their notebooks where a local
Jupyter Server says) and `parley chat --kernel FILE|URL` (the session's Python tools on that
kernel: docs/protocol.md, "The user's own kernel")."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from parley.core.kernel_choice import OWN_KERNEL, kernel_choice

# Jupyter's own name for a server's token in the environment (`jupyter server` reads it).
DEFAULT_TOKEN_ENV = "JUPYTER_TOKEN"
_KERNEL_PATH = re.compile(r"(?P<prefix>.*)/api/kernels/(?P<id>[^/]+)/?")


class BadKernel(ValueError):
    """A `--kernel` Parley cannot use: the sentence says why."""


def kernel_argument(text: str, token_env: str = DEFAULT_TOKEN_ENV) -> dict[str, Any]:
    """`--kernel`'s value as `_meta.parley.kernel`: a connection file (its path), or a
    kernel's URL on a Jupyter Server (`http://host:8888/api/kernels/ID`), whose token is
    read by the server from `token_env` (never from the URL: it would be in the shell's
    history)."""
    if not text.startswith(("http://", "https://")):
        wire: dict[str, Any] = {"connectionFile": os.path.abspath(os.path.expanduser(text))}
    else:
        parts = urlsplit(text)
        if parts.query or parts.fragment:
            raise BadKernel("give the token in an environment variable, not in the URL")
        found = _KERNEL_PATH.fullmatch(parts.path)
        if found is None:
            raise BadKernel("a kernel's URL ends in /api/kernels/KERNEL_ID")
        server = f"{parts.scheme}://{parts.netloc}{found['prefix']}"
        wire = {"server": server, "kernelId": found["id"], "tokenEnv": token_env}
    try:
        kernel_choice(wire)
    except ValueError as error:
        raise BadKernel(str(error)) from None
    return wire


def list_kernels(as_json: bool) -> int:
    """`parley kernels`: the running local kernels, newest first."""
    from parley.tools.jupyter_runtime import running_kernels, with_notebooks

    kernels = with_notebooks(running_kernels())
    if as_json:
        rows = [
            {
                "connectionFile": k.connection_file,
                "kernelId": k.kernel_id,
                "started": k.modified,
                "notebook": k.notebook,
            }
            for k in kernels
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not kernels:
        print("No Jupyter kernel is running here (none in Jupyter's runtime directory).")
        return 0
    for kernel in kernels:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(kernel.modified))
        notebook = f"  {kernel.notebook}" if kernel.notebook else ""
        print(f"{started}  {kernel.connection_file}{notebook}")
    print('Attach one: parley chat --kernel CONNECTION_FILE "…"', file=sys.stderr)
    return 0


def kernel_name(options: list[dict[str, Any]]) -> str | None:
    """The server's name of the user's kernel the `kernel` option says the session is on
    (None: Parley's own)."""
    option = next((o for o in options if o.get("id") == "kernel"), {})
    current = option.get("currentValue")
    if current is None or current == OWN_KERNEL:
        return None
    names = {choice.get("value"): choice.get("name") for choice in option.get("options", [])}
    return str(names.get(current) or current)


async def attach_failure(
    client: Any, session_id: str, options: list[dict[str, Any]], kernel: dict[str, Any] | None
) -> str | None:
    """Why the session is not on the kernel `--kernel` named (the server's notice), or None.
    The `kernel` option says where it is; the notice comes with the answer or right after."""
    if kernel is None:
        return None
    current = next((o.get("currentValue") for o in options if o.get("id") == "kernel"), None)
    if current != OWN_KERNEL:
        return None

    def is_notice(update: dict[str, Any]) -> bool:
        return "notice" in update.get("_meta", {}).get("parley", {})

    try:
        update = await client.wait_for_update(session_id, is_notice, timeout=10)
    except TimeoutError:
        return "the session could not attach to that kernel"
    return str(update["content"]["text"])
