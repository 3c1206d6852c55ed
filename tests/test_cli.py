"""The `parley` command as a user runs it."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import server_env
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall


def run_parley(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "parley", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal, as in a pipeline or a CI job
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
    assert done.stdout == "Width times height.\n"
    assert "\n│ Easy.\n" in done.stderr  # the thought on a line of its own, marked
    assert "openai:gpt-4.1-mini · 1 round · 0 tool calls" in done.stderr
    assert "stream(s)" not in done.stderr


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


def eval_writing(marker: Path) -> ScriptedToolCall:
    """A python_eval call (it needs permission) whose code leaves `marker` when it runs."""
    code = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n6 * 7"
    return ScriptedToolCall("python_eval", {"code": code})


def test_without_a_terminal_a_tool_call_is_rejected_and_stdout_stays_clean(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = tmp_path / "marker"
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="Not allowed.")])
    done = run_parley("chat", "Compute.", "--cwd", str(workspace), env=server_env(fake, tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Not allowed."
    assert "did not run Python: there is no terminal to ask on" in done.stderr
    assert "--yes" in done.stderr
    assert not marker.exists()
    assert "rejected" in json.dumps(fake.requests[-1].body)


def test_json_lines_all_parse_when_a_permission_is_refused(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = tmp_path / "marker"
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="Not allowed.")])
    done = run_parley(
        "chat", "Compute.", "--json", "--cwd", str(workspace), env=server_env(fake, tmp_path)
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # every line parses
    assert all(set(line) in ({"sessionId", "update"}, {"sessionId", "result"}) for line in lines)
    assert lines[-1]["result"]["stopReason"] == "end_turn"
    assert "no terminal to ask on" in done.stderr


def test_yes_runs_the_tool_and_stdout_holds_only_the_answer(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = tmp_path / "marker"
    fake.set_script(
        [
            Reply(thinking="Let me run it.", tool_calls=(eval_writing(marker),)),
            Reply(text="It is 42."),
        ]
    )
    done = run_parley(
        "chat", "Compute.", "--yes", "--cwd", str(workspace), env=server_env(fake, tmp_path)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\n"
    assert marker.read_text() == "ran"
    assert "python_eval" in done.stderr and "Let me run it." in done.stderr


def start_chat(*args: str, env: dict[str, str], **popen: object) -> subprocess.Popen[bytes]:
    options: dict[str, object] = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "start_new_session": True,
    }
    options.update(popen)
    return subprocess.Popen(
        [sys.executable, "-m", "parley", "chat", *args], env={**os.environ, **env}, **options
    )


def read_until(fd: int, wanted: bytes, timeout: float = 60) -> bytes:
    """What `fd` gives until `wanted` appears (or the time is up, or it ends)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # a pty whose other side has closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


SLOW_ANSWER = Reply(text="word " * 400, chunk_size=5, pacing=Pacing(chunks_per_second=20))


def test_ctrl_c_cancels_the_turn_with_one_line_and_exit_130(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    fake.set_script([SLOW_ANSWER])
    chat = start_chat("Talk.", "--cwd", str(workspace), env=server_env(fake, tmp_path))
    assert chat.stdout is not None
    assert read_until(chat.stdout.fileno(), b"word word").count(b"word") >= 2
    chat.send_signal(signal.SIGINT)
    stdout, stderr = chat.communicate(timeout=60)
    assert chat.returncode == 130, stderr
    text = stderr.decode()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert [line for line in text.splitlines() if line.strip()] == ["Cancelled."]
    assert stdout.count(b"word") < 400  # the stream was cut short, not waited for


def test_a_closed_pipe_ends_the_chat_quietly(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script([SLOW_ANSWER])
    chat = start_chat("Talk.", "--cwd", str(workspace), env=server_env(fake, tmp_path))
    assert chat.stdout is not None and chat.stderr is not None
    read_until(chat.stdout.fileno(), b"word word")  # like `| head -c 10`
    chat.stdout.close()
    assert chat.wait(timeout=60) == 141  # 128 + SIGPIPE, like `yes | head`
    stderr = chat.stderr.read().decode()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert len(fake.requests) == 1  # the turn ended: nothing more was asked of the model


def _take_terminal(slave_fd: int) -> None:
    # In the child, after setsid: make the pty its controlling terminal (what a shell does).
    import fcntl
    import termios

    fcntl.ioctl(slave_fd, termios.TIOCSCTTY, 0)


def start_chat_on_terminal(
    slave: int, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> subprocess.Popen[bytes]:
    """`parley chat "Compute."` with the pty `slave` as its controlling terminal."""
    return start_chat(
        "Compute.",
        "--cwd",
        str(workspace),
        env=server_env(fake, tmp_path),
        preexec_fn=lambda: _take_terminal(slave),
        pass_fds=(slave,),
    )


def test_the_question_is_asked_on_the_terminal_and_y_allows(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = tmp_path / "marker"
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="It is 42.")])
    master, slave = os.openpty()
    try:
        chat = start_chat_on_terminal(slave, fake, tmp_path, workspace)
        os.write(master, b"n\n")  # typed before the question: it must not answer it
        asked = read_until(master, b"[n] no: ").decode()
        assert "Parley asks to run Python:" in asked
        # The code in full, as code: one line each, not a line of JSON.
        assert "    Path(" in asked and "\n    6 * 7" in asked.replace("\r\n", "\n")
        assert not marker.exists()
        os.write(master, b"y\n")
        stdout, stderr = chat.communicate(timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert chat.returncode == 0, stderr.decode()
    assert stdout == b"It is 42.\n"
    assert b"Parley asks" not in stdout + stderr
    assert marker.read_text() == "ran"


def test_ctrl_c_at_the_question_cancels_without_running_the_tool(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = tmp_path / "marker"
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="Never.")])
    master, slave = os.openpty()
    try:
        chat = start_chat_on_terminal(slave, fake, tmp_path, workspace)
        assert "[n] no: " in read_until(master, b"[n] no: ").decode()
        os.write(master, b"\x03")  # Ctrl-C typed at the terminal: its driver sends SIGINT
        stdout, stderr = chat.communicate(timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert chat.returncode == 130, stderr.decode()
    # Ctrl-C's one line, and nothing after it.
    assert [line for line in stderr.decode().splitlines() if line.strip()][-1] == "Cancelled."
    assert stderr.decode().count("Cancelled.") == 1
    assert stdout.strip() == b""
    assert not marker.exists()
    assert {r.reply_index for r in fake.requests} == {0}  # no second round: the turn ended


def _children_of(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # the field after the state is the parent's pid
            children.append(int(stat.parent.name))
    return children


def test_a_second_ctrl_c_exits_at_once(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script([SLOW_ANSWER])
    chat = start_chat("Talk.", "--cwd", str(workspace), env=server_env(fake, tmp_path))
    assert chat.stdout is not None
    read_until(chat.stdout.fileno(), b"word word")
    (server,) = _children_of(chat.pid)
    os.kill(server, signal.SIGSTOP)  # a server that will not answer the cancellation
    try:
        chat.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert chat.poll() is None  # still waiting for the cancelled turn
        chat.send_signal(signal.SIGINT)
        started = time.monotonic()
        _, stderr = chat.communicate(timeout=30)
        assert time.monotonic() - started < 5  # not the 10 s grace, nor the stop's timeout
    finally:
        os.kill(server, signal.SIGCONT)  # its stdin is closed now: it exits by itself
    assert chat.returncode == 130
    assert "Traceback" not in stderr.decode()
    assert stderr.decode().count("Cancelled.") == 1


# --- edits: the diff in the question, --yes, the files in the summary -----------------------

FAKE_EDIT_AGENT = Path(__file__).with_name("fake_edit_agent.py")


class _TerminalWriter(io.StringIO):
    def isatty(self) -> bool:
        return True


def chat_with_edit_agent(monkeypatch, workspace: Path, typed: bytes | None, writer=None):
    """`parley.chat.chat` in this process against `fake_edit_agent.py` (it asks to edit
    notes.txt and create new.txt, with ACP diffs); the question goes to `writer`, and is
    answered with `typed` (None: there is no terminal)."""
    from parley import chat as chat_module
    from parley.client import ParleyClient

    async def start_fake(env):
        client = ParleyClient()
        await client.start_io(sys.executable, str(FAKE_EDIT_AGENT))
        return client

    def terminal():
        if typed is None:
            return None
        read_fd, write_fd = os.pipe()
        os.write(write_fd, typed)
        os.close(write_fd)
        return chat_module._Terminal(read_fd, writer, owned=False)

    monkeypatch.setattr(chat_module, "_start_server", start_fake)
    monkeypatch.setattr(chat_module._Terminal, "open", staticmethod(terminal))
    monkeypatch.setattr(chat_module._Terminal, "forget_typeahead", lambda self: None)
    return chat_module


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("first line\nsecond line\n")
    return root


async def test_the_question_shows_the_edit_as_a_diff(monkeypatch, capsys, notes: Path) -> None:
    writer = io.StringIO()
    chat_module = chat_with_edit_agent(monkeypatch, notes, b"y\n", writer)
    code = await chat_module.chat("Edit.", model=None, cwd=notes)
    assert code == 0
    question = writer.getvalue()
    assert "Parley asks to edit notes.txt:" in question
    assert "\n  --- a/notes.txt\n  +++ b/notes.txt\n" in question
    assert "\n  -second line\n  +second line, edited\n  +third line\n" in question
    assert "\n  --- /dev/null\n  +++ b/new.txt\n" in question and "\n  +x\n" in question
    assert "old_text" not in question  # the texts are shown by the diff, once
    assert "path: notes.txt" in question
    assert "\x1b[" not in question  # not a terminal: no colour
    out, err = capsys.readouterr()
    assert out == "Done.\n"
    assert err.rstrip().endswith("Edited: notes.txt, new.txt")
    assert (notes / "notes.txt").read_text().endswith("third line\n")


async def test_the_diff_is_coloured_on_a_terminal(monkeypatch, notes: Path) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    writer = _TerminalWriter()
    chat_module = chat_with_edit_agent(monkeypatch, notes, b"n\n", writer)
    assert await chat_module.chat("Edit.", model=None, cwd=notes) == 0
    question = writer.getvalue()
    assert "\x1b[31m-second line\x1b[0m" in question
    assert "\x1b[32m+third line\x1b[0m" in question
    assert "\x1b[36m@@" in question
    assert (notes / "notes.txt").read_text() == "first line\nsecond line\n"  # rejected


async def test_yes_applies_the_edit_and_the_summary_lists_the_files(
    monkeypatch, capsys, notes: Path
) -> None:
    chat_module = chat_with_edit_agent(monkeypatch, notes, None)
    assert await chat_module.chat("Edit.", model=None, cwd=notes, allow_all=True) == 0
    assert (notes / "notes.txt").read_text().endswith("third line\n")
    assert (notes / "new.txt").read_text() == "x\n"
    out, err = capsys.readouterr()
    assert out == "Done.\n"
    assert "Edited: notes.txt, new.txt" in err


async def test_a_rejected_edit_is_not_listed_as_edited(monkeypatch, capsys, notes: Path) -> None:
    chat_module = chat_with_edit_agent(monkeypatch, notes, None)  # no terminal: rejected
    assert await chat_module.chat("Edit.", model=None, cwd=notes) == 0
    out, err = capsys.readouterr()
    assert out == "Not edited.\n"
    assert "did not edit notes.txt" in err and "Edited:" not in err


def test_a_diff_is_terminal_safe_and_marks_a_missing_final_newline() -> None:
    from parley.chat import diff_lines

    lines = diff_lines(
        {"type": "diff", "path": "/w/a.py", "oldText": "x = 1\r\n", "newText": "x = '\x1b[2J'"},
        cwd=Path("/w"),
    )
    assert lines[:2] == ["--- a/a.py", "+++ b/a.py"]
    assert "-x = 1" in lines  # the CRLF is the line's end, not shown
    assert "+x = '\\x1b[2J'  (no newline at end of file)" in lines


def test_an_edit_tool_call_is_asked_with_its_diff_on_the_terminal(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    """The real edit tools (skipped until they are merged): the question on the terminal
    shows the edit as a diff, `y` applies it, the summary names the file."""
    pytest.importorskip("parley.tools.edits")
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),)),
            Reply(
                tool_calls=(
                    ScriptedToolCall(
                        "edit_file",
                        {"path": "geometry.py", "old_text": "Shapes.", "new_text": "Plane shapes."},
                    ),
                )
            ),
            Reply(text="Edited."),
        ]
    )
    master, slave = os.openpty()
    try:
        chat = start_chat_on_terminal(slave, fake, tmp_path, workspace)
        asked = read_until(master, b"[n] no: ").decode().replace("\r\n", "\n")
        os.write(master, b"y\n")
        stdout, stderr = chat.communicate(timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert "--- a/geometry.py" in asked and "+++ b/geometry.py" in asked
    assert '-"""Shapes."""' in asked and '+"""Plane shapes."""' in asked
    assert ("\x1b[31m" in asked) == (not os.environ.get("NO_COLOR"))  # a terminal: coloured
    assert chat.returncode == 0, stderr.decode()
    assert stdout == b"Edited.\n"
    assert (workspace / "geometry.py").read_text().startswith('"""Plane shapes."""')
    assert "Edited: geometry.py" in stderr.decode()
