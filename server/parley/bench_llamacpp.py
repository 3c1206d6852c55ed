"""`parley bench` row 4e: prompt → tool start against a real llama.cpp server (the
`xllamacpp` wheel running `parley.scriptllm`'s script model), with and without continuing
the streamed text, printed beside row 4d's figure from the fake."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from parley.client import ParleyClient, allow_all

MODEL = "llamacpp:script"
PROMPT = "Read it, good dog."  # the script model's tool round (parley/scriptllm/scripts.py)
FORMS = {"with": 'continue_streamed = "prefill"', "without": "continue_streamed = false"}


class _TimingClient(ParleyClient):
    """Notes when each session's first tool started."""

    def __init__(self) -> None:
        super().__init__()
        self.tool_started_at: dict[str, float] = {}

        def on_update(session: str, update: dict[str, Any]) -> None:
            if update.get("status") == "in_progress":
                self.tool_started_at.setdefault(session, time.monotonic())

        self.on_update = on_update


async def _tool_start_seconds(client: _TimingClient, workspace: Path) -> float:
    """From sending the prompt (in a new session) to the tool's `in_progress` update."""
    session = await client.new_session(str(workspace))
    started = time.monotonic()
    result = await client.prompt(session, PROMPT, timeout=120)
    if result.get("stopReason") != "end_turn":
        raise RuntimeError(f"4e: the prompt ended with {result}")
    if session not in client.tool_started_at:
        raise RuntimeError("4e: the tool never started")
    return client.tool_started_at[session] - started


async def _median_tool_start(
    base_url: str, home: Path, workspace: Path, form: str, repeats: int
) -> float:
    config = home / f"llamacpp-{form}.toml"
    config.write_text(f'[providers.llamacpp]\nbase_url = "{base_url}"\n{FORMS[form]}\n')
    env = {
        "PARLEY_MODEL": MODEL,
        "PARLEY_HOME": str(home / f"llamacpp-{form}-data"),
        "PARLEY_CONFIG": str(config),
        "XDG_CONFIG_HOME": str(home / "config"),
        "PARLEY_WARM": "0",  # cold, as every bench row but 3w and 8w: no warm process left after
    }
    client = await _TimingClient.spawn(env=env)
    try:
        await client.initialize()
        client.permission_handler = allow_all
        await _tool_start_seconds(client, workspace)  # warm: SDK imported, prompt cached
        return statistics.median(
            [await _tool_start_seconds(client, workspace) for _ in range(repeats)]
        )
    finally:
        await client.stop()


async def real_server_tool_start(home: Path, repeats: int) -> dict[str, float] | str:
    """Median seconds to tool start with and without continuation, or why not measured."""
    try:
        import xllamacpp  # noqa: F401
    except ImportError as error:
        return f"not measured: no xllamacpp wheel here ({error})"
    from parley.scriptllm.model import built_model
    from parley.scriptllm.scripts import HELLO_PY
    from parley.scriptllm.serve import ScriptServer

    workspace = home / "llamacpp-workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "hello.py").write_text(HELLO_PY)
    with ScriptServer(built_model(), home / "llamacpp-server.log") as server:
        return {
            form: await _median_tool_start(server.openai_base_url, home, workspace, form, repeats)
            for form in FORMS
        }
