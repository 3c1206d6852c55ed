"""The `parley` command in a day's use: pipes that close early, piped input with a prompt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, server_env
from parley.fakellm import FakeLLM
from test_cli import run_parley, two_sessions


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
    env = server_env(fake, tmp_path / "home")
    two_sessions(fake, env, workspace)
    for args in (("sessions",), ("sessions", "--json"), ("export", "last"), ("--help",)):
        done = run_into_closed_pipe(*args, env=env)
        assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, args
        assert "Exception ignored" not in done.stderr, args
        assert done.returncode in (0, 141), (args, done.returncode)


def test_the_readme_offline_recipe_works_as_written(tmp_path: Path, workspace: Path) -> None:
    """README's "Try it without an API key": the bundled fake LLM with the example script,
    and `parley chat` pointed at it with the variable the fake LLM itself prints."""
    script = REPO / "docs" / "examples" / "fake-script.json"
    (workspace / "README.md").write_text("# A project\n")
    fake = subprocess.Popen(
        [sys.executable, "-m", "parley.fakellm", "--script", str(script), "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None and fake.stderr is not None
        url = fake.stdout.readline().strip()
        hint = fake.stderr.readline()
        assert f"OPENAI_BASE_URL={url}/v1 " in hint
        base_url = hint.split("OPENAI_BASE_URL=")[1].split()[0]
        env = {
            "PARLEY_HOME": str(tmp_path / "home"),
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "x",
        }
        done = run_parley("chat", "--yes", "What is README.md?", env=env, cwd=workspace)
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith("it says how to install and run Parley.\n")
        assert "Read README.md" in done.stderr
    finally:
        fake.kill()
        fake.wait()
