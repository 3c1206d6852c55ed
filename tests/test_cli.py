"""The `parley` command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall


def run_parley(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "parley", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_demo_runs_a_hybrid_tool_turn_offline_and_says_it_is_scripted(tmp_path: Path) -> None:
    done = run_parley("demo", env={"PARLEY_HOME": str(tmp_path), "OPENAI_API_KEY": ""})
    assert done.returncode == 0, done.stderr
    assert "SCRIPTED" in done.stderr
    assert "value: 12" in done.stderr  # the kernel really evaluated geometry.area(3, 4)
    assert "a 3 by 4 rectangle gives **12**" in done.stdout
    assert "stream (closed early), sync" in done.stderr


def test_chat_streams_the_answer_to_stdout(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script([Reply(thinking="Easy.", text="Width times height.")])
    done = run_parley(
        "chat", "What is area?", "--cwd", str(workspace), env=server_env(fake, tmp_path)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Width times height."
    assert "[thinking] Easy." in done.stderr
    assert "openai:gpt-4.1-mini" in done.stderr


def test_chat_json_prints_one_update_per_line(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),)),
            Reply(text="Read it."),
        ]
    )
    done = run_parley(
        "chat",
        "Read geometry.py",
        "--json",
        "--cwd",
        str(workspace),
        env=server_env(fake, tmp_path),
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [line["update"]["sessionUpdate"] for line in lines if "update" in line]
    assert "tool_call" in kinds and "agent_message_chunk" in kinds
    assert lines[-1]["result"]["stopReason"] == "end_turn"
    finished = [
        line["update"] for line in lines if line.get("update", {}).get("status") == "completed"
    ]
    assert "def area" in finished[0]["content"][0]["content"]["text"]


def test_chat_without_a_key_names_the_variable_to_set(tmp_path: Path, workspace) -> None:
    env = {
        "OPENAI_API_KEY": "",
        "PARLEY_MODEL": "openai:gpt-4.1-mini",
        "PARLEY_HOME": str(tmp_path),
        "PARLEY_CONFIG": str(tmp_path / "none.toml"),
    }
    done = run_parley("chat", "hi", "--cwd", str(workspace), env=env)
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr


def test_a_bad_config_file_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[models.nocolon]\n")
    done = run_parley("serve", env={"PARLEY_CONFIG": str(config)})
    assert done.returncode == 2
    assert "provider:model" in done.stderr


def test_sessions_and_export(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script(
        [
            Reply(
                thinking="Read it.",
                text="Reading.",
                tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),),
            ),
            Reply(text="It multiplies width by height."),
        ]
    )
    env = server_env(fake, tmp_path)
    done = run_parley("chat", "What is area?", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    listing = run_parley("sessions", env=env)
    assert "What is area?" in listing.stdout
    session_id = listing.stdout.splitlines()[1].split()[0]
    markdown = run_parley("export", session_id, env=env).stdout
    assert "## You\n\nWhat is area?" in markdown
    assert "**Tool `read_file`** (done)" in markdown and "def area" in markdown
    assert "It multiplies width by height." in markdown
    exported = json.loads(run_parley("export", session_id, "--format", "json", env=env).stdout)
    assert [m["role"] for m in exported["messages"]] == ["user", "assistant", "tool", "assistant"]

    # `parley chat --session` continues it with the whole conversation.
    fake.set_script([Reply(text="Yes.")])
    done = run_parley("chat", "Sure?", "--session", session_id, "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Yes."
    assert "It multiplies width by height." in json.dumps(fake.requests[-1].body)
