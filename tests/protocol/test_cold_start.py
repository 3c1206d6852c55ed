"""A cold `parley serve` answers `initialize` and `session/new` without loading a provider's
SDK. The SDK is imported in the background, and only the first prompt that needs it waits
for it (`ProviderRegistry.resolved`).

pygls and its LSP types (`lsprotocol.types`) are imported at start: the server is a pygls
server, and every pygls module imports them. What the answers need not wait for is the SDK
(openai, anthropic) and the HTTP client it brings (httpx2).

The server runs with an import hook (a `sitecustomize` on its `PYTHONPATH`) that notes every
module it imports, in order, and holds an SDK's import until the test opens a gate: an SDK
read from a slow disk. The gate gives up by itself after a while and notes that it did, so a
server that waited for the SDK before answering is seen to have waited.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MODELS, server_env
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply

IMPORT_HOOK = """
import importlib.abc
import os
import sys
import time

LOG = os.environ["PARLEY_TEST_IMPORT_LOG"]
GATE = os.environ["PARLEY_TEST_SDK_GATE"]


def note(line):
    with open(LOG, "a") as log:
        log.write(line + "\\n")


class SlowSdkImports(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        note(name)
        if name in ("openai", "anthropic"):
            deadline = time.monotonic() + 5
            while not os.path.exists(GATE):
                if time.monotonic() > deadline:
                    note("the gate gave up")
                    break
                time.sleep(0.01)
        return None


sys.meta_path.insert(0, SlowSdkImports())
"""

GAVE_UP = "the gate gave up"
NOT_AT_START = ("openai", "anthropic", "httpx2")


def imported(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def among(names: list[str], packages: tuple[str, ...]) -> list[str]:
    return [name for name in names if name.partition(".")[0] in packages]


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_session_new_is_answered_before_the_sdk_is_imported_and_the_prompt_waits_for_it(
    fake: FakeLLM, tmp_path: Path, workspace: Path, provider: str
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(IMPORT_HOOK)
    log, gate = tmp_path / "imports.log", tmp_path / "gate"
    env = {
        **server_env(fake, tmp_path / "home", MODELS[provider]),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])),
        "PARLEY_TEST_IMPORT_LOG": str(log),
        "PARLEY_TEST_SDK_GATE": str(gate),
    }
    client = await ParleyClient.spawn(env=env)
    try:
        answer = await client.initialize()
        assert answer["agentInfo"]["name"] == "parley"
        assert "parley.server" in imported(log)  # the hook sees the server's imports
        assert "pygls" in imported(log)  # a pygls server: its framework is there from start
        assert among(imported(log), NOT_AT_START) == []

        session = await client.new_session(str(workspace))
        assert GAVE_UP not in imported(log)  # answered while the SDK's import was held

        gate.touch()  # the disk catches up: the prompt gets the SDK and streams
        fake.set_script([Reply(text="Width times height.")])
        result = await client.prompt(session, "What does area do?", timeout=60)
        assert result["stopReason"] == "end_turn"
        assert client.text_of(session) == "Width times height."
    finally:
        await client.stop()
    names = imported(log)
    assert provider in names and GAVE_UP not in names


def test_importing_the_server_loads_no_sdk() -> None:
    probe = (
        "import sys, parley.server, parley.cli\n"
        f"print(sorted({{m.partition('.')[0] for m in sys.modules}} & {set(NOT_AT_START)!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
