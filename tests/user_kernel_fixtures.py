"""The user's own kernel in the tests: a real ipykernel started through jupyter_client, as
JupyterLab, VS Code or `jupyter console` start one, with a client of the user's own that runs
their cells (tests/test_user_kernel*.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jupyter_client.manager import AsyncKernelManager


class UsersKernel:
    """A kernel the user runs, and their notebook's client."""

    def __init__(self, manager: AsyncKernelManager, client: Any) -> None:
        self.manager = manager
        self.client = client

    @property
    def connection_file(self) -> str:
        return str(self.manager.connection_file)

    async def run_cell(self, code: str, timeout: float = 60) -> str:
        """Run a cell as the user does (kept in their history); its printed output."""
        printed: list[str] = []

        def output(message: dict[str, Any]) -> None:
            content = message["content"]
            if message["header"]["msg_type"] == "stream":
                printed.append(content["text"])
            elif message["header"]["msg_type"] == "execute_result":
                printed.append(content["data"].get("text/plain", ""))

        reply = await self.client.execute_interactive(code, timeout=timeout, output_hook=output)
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(printed)

    async def history(self) -> list[str]:
        """The cells the user's history holds (`In[]`), oldest first."""
        msg_id = self.client.history(hist_access_type="tail", n=100, raw=True, output=False)
        while True:
            reply = await self.client.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                return [entry[2] for entry in reply["content"]["history"]]


@pytest.fixture
async def users_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[UsersKernel]:
    """A real ipykernel, its connection file in a runtime directory of the test's own."""
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # its own In[] history
    # Where Jupyter's own frontends put it: kernel-<id>.json in the runtime directory.
    connection_file = runtime / f"kernel-{secrets.token_hex(8)}.json"
    manager = AsyncKernelManager(kernel_name="python3", connection_file=str(connection_file))
    await manager.start_kernel(cwd=str(tmp_path))
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        yield UsersKernel(manager, client)
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)


class JupyterServer:
    """A real Jupyter Server the test started, with a token, and a kernel it runs."""

    def __init__(self, url: str, token: str, runtime: Path) -> None:
        self.url = url
        self.token = token
        self.runtime = runtime

    async def start_kernel(self) -> str:
        async with httpx.AsyncClient(headers={"Authorization": f"token {self.token}"}) as http:
            response = await http.post(f"{self.url}/api/kernels", json={"name": "python3"})
            response.raise_for_status()
            return str(response.json()["id"])

    async def users_notebook(self, kernel_id: str) -> Any:
        """The user's own client of that kernel (as their notebook's), by its connection
        file in the server's runtime directory."""
        from jupyter_client.asynchronous import AsyncKernelClient

        client = AsyncKernelClient()
        client.load_connection_file(str(self.runtime / f"kernel-{kernel_id}.json"))
        client.start_channels()
        await client.wait_for_ready(timeout=60)
        return client


@pytest.fixture
async def jupyter_server(tmp_path: Path) -> AsyncIterator[JupyterServer]:
    runtime = tmp_path / "server-runtime"
    runtime.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = "jupyter-token-" + secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(tmp_path),
        "IPYTHONDIR": str(tmp_path / "ipython"),  # its kernels' own In[] history
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp_path}", "--ServerApp.port_retries=0", "--allow-root",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"token {token}"}) as http:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{url}/api/status")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
        yield JupyterServer(url, token, runtime)
    finally:
        process.terminate()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 20)
        if process.returncode is None:
            process.kill()
            await process.wait()
