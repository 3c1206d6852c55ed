"""The user's own kernel in the tests: a real ipykernel started through jupyter_client, as
JupyterLab, VS Code or `jupyter console` start one, with a client of the user's own that runs
their cells (tests/test_user_kernel*.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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
    manager = AsyncKernelManager(kernel_name="python3")
    await manager.start_kernel(cwd=str(tmp_path))
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        yield UsersKernel(manager, client)
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)
