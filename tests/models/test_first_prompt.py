"""The provider SDK's import (a second or more) is started in the background and waited for
only by what needs it: neither `initialize`, `session/new` (issue 39: answered at once) nor a
`session/load` (an editor reopening a session) waits for it; the first prompt waits for what
is left of it (tests/protocol/test_cold_start.py holds it back for good). The import is made
slow here, by a `sitecustomize` in the server's path, so that the
order of events shows who waited for it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply

SLOW_IMPORT = '''
import importlib.abc, os, sys, time

class SlowSdk(importlib.abc.MetaPathFinder):
    """Logs when the openai SDK's import starts (then takes 1.5 s more) and when Parley's
    OpenAI provider, imported right after it, is."""

    def find_spec(self, name, path=None, target=None):
        if name in ("openai", "parley.providers.openai_provider"):
            with open(os.environ["PARLEY_TEST_IMPORT_LOG"], "a") as log:
                log.write(f"{name} {time.monotonic()}\\n")
            if name == "openai":
                time.sleep(1.5)
        return None

sys.meta_path.insert(0, SlowSdk())
'''


def import_ended(log: Path) -> float:
    """When the SDK's import had ended (it started: the slow part is in it)."""
    times = dict(line.split() for line in log.read_text().splitlines())
    assert float(times["openai"]) < float(times["parley.providers.openai_provider"])
    return float(times["parley.providers.openai_provider"])


async def slow_import_server(start_server, tmp_path: Path) -> tuple[ParleyClient, Path]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_IMPORT)
    log = tmp_path / "imports.log"
    env = {"PYTHONPATH": str(hook), "PARLEY_TEST_IMPORT_LOG": str(log)}
    client: ParleyClient = await start_server(home=tmp_path / "home", extra_env=env)
    return client, log


async def wait_for(log: Path) -> float:
    for _ in range(300):
        try:
            return import_ended(log)
        except (OSError, KeyError):
            await asyncio.sleep(0.05)
    raise AssertionError(f"the SDK was never imported: {log.read_text()!r}")


async def test_session_new_is_answered_before_the_sdk_is_imported_and_the_prompt_waits_for_it(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client, log = await slow_import_server(start_server, tmp_path)
    await client.initialize()
    initialized = time.monotonic()
    session = await client.new_session(str(workspace))
    opened = time.monotonic()
    fake.set_script([Reply(text="Quick.")])
    await client.prompt(session, "Hello.")
    ended = await wait_for(log)
    assert initialized < ended  # `initialize` did not wait for the import
    assert opened < ended  # nor did `session/new`: answered while it still ran (1.5 s)
    assert client.text_of(session) == "Quick."  # the prompt waited for it


async def test_a_session_load_does_not_wait_for_the_sdk(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    first: ParleyClient = await start_server(home=tmp_path / "home")
    await first.initialize()
    session = await first.new_session(str(workspace))
    fake.set_script([Reply(text="Stored.")])
    await first.prompt(session, "Keep this.")

    client, log = await slow_import_server(start_server, tmp_path)
    await client.initialize()
    await client.load_session(session, str(workspace))
    loaded = time.monotonic()
    ended = await wait_for(log)  # it starts after the load's answer
    assert loaded < ended and client.text_of(session) == "Stored."
