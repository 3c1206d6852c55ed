"""The Jupyter kernels running on this machine: the connection files in Jupyter's runtime
directory (`jupyter --runtime-dir`, `JUPYTER_RUNTIME_DIR`), and which notebook each serves
where a local Jupyter Server says so (`parley kernels`, the `kernel` config option)."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import attrs

# At start, not at a session's first options (on the loop, behind the SDK's import): 17 ms.
from jupyter_core.paths import jupyter_runtime_dir

logger = logging.getLogger(__name__)

_KERNEL_FILE = re.compile(r"kernel-(.+)\.json")
MAX_LISTED = 100  # a runtime directory full of stale files lists the newest
SERVER_SECONDS = 1.0  # a Jupyter Server that does not answer within this is left out


@attrs.frozen
class RunningKernel:
    connection_file: str
    kernel_id: str
    modified: float  # the file's mtime: when the kernel started
    notebook: str | None = None  # the notebook a local Jupyter Server runs it for


def runtime_dir() -> Path:
    return Path(jupyter_runtime_dir())


def running_kernels(directory: Path | None = None) -> list[RunningKernel]:
    """The kernels whose connection files are in the runtime directory, newest first (a
    file is there while its kernel runs; one left by a crash is listed too)."""
    directory = directory or runtime_dir()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    kernels = []
    for entry in entries:
        match = _KERNEL_FILE.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            modified = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        kernels.append(RunningKernel(entry.path, match.group(1), modified))
    kernels.sort(key=lambda kernel: kernel.modified, reverse=True)
    return kernels[:MAX_LISTED]


def with_notebooks(
    kernels: list[RunningKernel], directory: Path | None = None
) -> list[RunningKernel]:
    """`kernels` with the notebook each serves, asked of the local Jupyter Servers whose
    `jpserver-*.json` files are in the runtime directory (their token is used for that
    request only). Blocking: for the command line."""
    import httpx

    notebooks: dict[str, str] = {}
    for server in sorted((directory or runtime_dir()).glob("jpserver-*.json")):
        try:
            info = json.loads(server.read_text()[:65536])
            url, token = str(info["url"]).rstrip("/"), str(info.get("token", ""))
            headers = {"Authorization": f"token {token}"} if token else {}
            sessions = httpx.get(f"{url}/api/sessions", headers=headers, timeout=SERVER_SECONDS)
            for session in sessions.json():
                notebooks[str(session["kernel"]["id"])] = str(session["path"])
        except (OSError, ValueError, KeyError, TypeError, httpx.HTTPError) as error:
            logger.info("%s did not say its notebooks: %s", server.name, type(error).__name__)
    return [attrs.evolve(k, notebook=notebooks.get(k.kernel_id)) for k in kernels]
