"""The server's start and end: SIGTERM/SIGINT answer the pending prompt and exit 0 with a
valid history; a data folder (PARLEY_HOME) that can't be used is one line and exit 2."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import server_env
from parley.fakellm import FakeLLM, Pacing, Reply
from test_sessions import shown, started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_signal_answers_the_pending_prompt_cancelled_and_exits_0(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    home = tmp_path / "home"
    client = await started(start_server, home)
    fake.set_script([Reply(text="word " * 500, pacing=Pacing(chunks_per_second=40))])
    session = await client.new_session(str(workspace))
    pending = asyncio.ensure_future(client.prompt(session, "Write a lot"))
    await client.wait_for_update(session, lambda u: "word" in str(u), timeout=30)
    assert client.process is not None
    client.process.send_signal(signum)

    assert (await asyncio.wait_for(pending, 20))["stopReason"] == "cancelled"
    assert await asyncio.wait_for(client.process.wait(), 20) == 0
    assert not any("Traceback" in line for line in client.stderr_lines)
    seen = shown(client.updates_of(session))["text"]

    again = await started(start_server, home)
    await again.request(
        "session/load", {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
    )
    assert seen.startswith("word") and shown(again.updates_of(session))["text"] == seen
    fake.set_script([Reply(text="Back.")])
    assert (await again.prompt(session, "Go on"))["stopReason"] == "end_turn"
    sent = fake.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]


def unusable_homes(tmp_path: Path) -> list[Path]:
    """Folders the database can't be written in, even by root (whom chmod does not stop)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    homes = [a_file / "parley"]  # missing, and can't be created under a file
    if Path("/proc/self").is_dir():
        homes.append(Path("/proc/self"))  # exists, but holds no new files
    return homes


@pytest.mark.parametrize("command", [["serve"], ["sessions"], ["chat", "hello"]])
def test_an_unusable_parley_home_is_one_clear_line_and_exit_2(
    fake: FakeLLM, tmp_path: Path, command: list[str]
) -> None:
    for home in unusable_homes(tmp_path):
        env = {**os.environ, **server_env(fake, tmp_path / "home"), "PARLEY_HOME": str(home)}
        done = subprocess.run(
            [sys.executable, "-m", "parley", *command],
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"parley: the data folder {home} (PARLEY_HOME) can't be used: ")
        assert done.stdout == ""


async def test_a_server_that_crashes_leaves_its_threads_tracebacks_in_its_log(
    start_server, tmp_path: Path
) -> None:
    """A segfault in a library's C code (as SQLite's once was, under a close in another
    thread): the editor's log of the server (its stderr) says where each thread was, not
    only that the server died (faulthandler, enabled by `run_stdio`)."""
    # Cold: the signal must reach the server itself, not a warm start's client.
    client = await started(start_server, tmp_path / "home", extra_env={"PARLEY_WARM": "0"})
    assert client.process is not None
    client.process.send_signal(signal.SIGSEGV)
    assert await asyncio.wait_for(client.process.wait(), 20) == -signal.SIGSEGV
    for _ in range(100):  # the log's reader may still hold its last lines
        log = "\n".join(client.stderr_lines)
        if "(most recent call first)" in log:
            break
        await asyncio.sleep(0.05)
    assert "Fatal Python error: Segmentation fault" in log
    assert "(most recent call first)" in log and "parley/server.py" in log
