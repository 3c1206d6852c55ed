"""The `parley` command in a day's use: pipes that close early, piped input with a prompt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import server_env
from parley.fakellm import FakeLLM
from test_cli import two_sessions


def run_into_closed_pipe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`parley ARGS | head -0`: stdout's reader is gone before the first line is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "parley", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **env},
            timeout=60,
        )
    finally:
        os.close(write_end)


def test_every_listing_ends_quietly_on_a_closed_pipe(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = server_env(fake, tmp_path)
    two_sessions(fake, env, workspace)
    for args in (("sessions",), ("sessions", "--json"), ("export", "last"), ("--help",)):
        done = run_into_closed_pipe(*args, env=env)
        assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, args
        assert "Exception ignored" not in done.stderr, args
        assert done.returncode in (0, 141), (args, done.returncode)
