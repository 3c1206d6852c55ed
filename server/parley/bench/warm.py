"""Rows 3w and 8w: `parley serve` through a running warm process (parley/warm_start.py), side
by side with rows 3 and 8b, the same measures of a cold start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from parley.bench.harness import BenchSizes, Row, server_environment
from parley.bench.sessions import first_prompt_at_once_rows
from parley.bench.streaming import cold_start_row
from parley.fakellm import FakeLLM

WARM_START_TIMEOUT_SECONDS = 120


@contextlib.asynccontextmanager
async def warm_process(fake: FakeLLM, home: Path) -> AsyncIterator[dict[str, str]]:
    """A warm process of the bench's own (its runtime directory under `home`), started by a
    cold start as a user's first start does and ended at the end; yields the environment
    its clients need."""
    runtime = home / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    warm = {"PARLEY_WARM": "1", "XDG_RUNTIME_DIR": str(runtime)}
    env = {**os.environ, **server_environment(fake, home), **warm}
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "parley", "serve"], input=b"", env=env, check=True
    )
    folder = runtime / "parley"
    deadline = time.monotonic() + WARM_START_TIMEOUT_SECONDS
    while not list(folder.glob("warm-*.sock")):
        if time.monotonic() > deadline:
            raise RuntimeError("the warm process did not start: see " + str(folder))
        await asyncio.sleep(0.1)
    try:
        yield warm
    finally:
        for log in folder.glob("warm-*.log"):
            for line in log.read_text().splitlines():
                if "listening on" in line:
                    pid = int(line.rsplit("(pid ", 1)[1].rstrip(")"))
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)


async def warm_rows(fake: FakeLLM, home: Path, sizes: BenchSizes) -> list[Row]:
    async with warm_process(fake, home) as warm:
        return [
            await cold_start_row(fake, home, sizes, warm),
            *await first_prompt_at_once_rows(fake, home, sizes, warm),
        ]
