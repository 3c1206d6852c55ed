"""The `parley` command as a user runs it."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from conftest import TESTS, server_env
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


def test_demo_runs_the_tests_fixes_the_failure_offline_and_keeps_its_session(
    tmp_path: Path,
) -> None:
    """README's demo: a scripted model, real tools: the tests really fail, the edit really
    lands, the tests really pass; the session is kept where `parley sessions` finds it."""
    env = {"PARLEY_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": ""}
    done = run_parley("demo", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "SCRIPTED" in done.stderr
    failed, passed = done.stderr.index("FAILED (failures=1)"), done.stderr.index("\n│ OK\n")
    assert failed < done.stderr.index("Edited geometry.py (+1 -1 lines)") < passed
    assert "Exit code: 1" in done.stderr and "Exit code: 0" in done.stderr
    assert done.stdout.rstrip().endswith("Both tests pass now.")
    project = tmp_path / "parley-demo" / "project"
    assert "return 2 * (width + height)" in (project / "geometry.py").read_text()
    assert "What the scripted model was asked" not in done.stderr  # plain words at the end
    assert "`parley sessions` lists it" in done.stderr
    listed = run_parley("sessions", env=env)
    assert "The tests fail. Find out why and fix it." in listed.stdout
    exported = run_parley("export", "last", env=env)
    assert "python3 -m unittest -v" in exported.stdout


def test_chat_streams_the_answer_to_stdout(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script([Reply(thinking="Easy.", text="Width times height.")])
    done = run_parley(
        "chat", "What is area?", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home")
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
        env=server_env(fake, tmp_path / "home"),
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
        "PARLEY_HOME": str(tmp_path / "home"),
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
    env = server_env(fake, tmp_path / "home")
    done = run_parley("chat", "What is area?", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    listing = run_parley("sessions", env=env)
    assert "What is area?" in listing.stdout
    session_id = listing.stdout.splitlines()[0].split()[0]  # piped: no header
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
    marker = workspace / "marker"  # where an eval may write (the sandbox's only place)
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="Not allowed.")])
    done = run_parley(
        "chat", "Compute.", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Not allowed."
    assert "did not run Python: there is no terminal to ask on" in done.stderr
    assert "--yes" in done.stderr
    assert not marker.exists()
    assert "rejected" in json.dumps(fake.requests[-1].body)


def test_json_lines_all_parse_when_a_permission_is_refused(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = workspace / "marker"  # where an eval may write (the sandbox's only place)
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="Not allowed.")])
    done = run_parley(
        "chat",
        "Compute.",
        "--json",
        "--cwd",
        str(workspace),
        env=server_env(fake, tmp_path / "home"),
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # every line parses
    assert all(set(line) in ({"sessionId", "update"}, {"sessionId", "result"}) for line in lines)
    assert lines[-1]["result"]["stopReason"] == "end_turn"
    assert "no terminal to ask on" in done.stderr


def test_yes_runs_the_tool_and_stdout_holds_only_the_answer(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = workspace / "marker"  # where an eval may write (the sandbox's only place)
    fake.set_script(
        [
            Reply(thinking="Let me run it.", tool_calls=(eval_writing(marker),)),
            Reply(text="It is 42."),
        ]
    )
    done = run_parley(
        "chat",
        "Compute.",
        "--yes",
        "--cwd",
        str(workspace),
        env=server_env(fake, tmp_path / "home"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\n"
    assert marker.read_text() == "ran"
    assert "→ Run Python" in done.stderr and "│ Let me run it." in done.stderr


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
    chat = start_chat("Talk.", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home"))
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
    chat = start_chat("Talk.", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home"))
    assert chat.stdout is not None and chat.stderr is not None
    read_until(chat.stdout.fileno(), b"word word")  # like `| head -c 10`
    chat.stdout.close()
    assert chat.wait(timeout=60) == 141  # 128 + SIGPIPE, like `yes | head`
    stderr = chat.stderr.read().decode()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert len(fake.requests) == 1  # the turn ended: nothing more was asked of the model


QUESTION_END = b"[n/Enter] no: "  # the question's last words, before the key is read


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
        env=server_env(fake, tmp_path / "home"),
        preexec_fn=lambda: _take_terminal(slave),
        pass_fds=(slave,),
    )


def test_the_question_is_asked_on_the_terminal_and_y_allows(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    marker = workspace / "marker"  # where an eval may write (the sandbox's only place)
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="It is 42.")])
    master, slave = os.openpty()
    try:
        chat = start_chat_on_terminal(slave, fake, tmp_path, workspace)
        os.write(master, b"n\n")  # typed before the question: it must not answer it
        asked = read_until(master, QUESTION_END).decode().replace("\r\n", "\n")
        assert "Parley asks to run Python:" in asked
        # The code in full, as code: one line each, not a line of JSON.
        assert "\n  ```python\n  from pathlib import Path\n  Path(" in asked
        assert "\n  6 * 7\n  ```\n" in asked
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
    marker = workspace / "marker"  # where an eval may write (the sandbox's only place)
    fake.set_script([Reply(tool_calls=(eval_writing(marker),)), Reply(text="Never.")])
    master, slave = os.openpty()
    try:
        chat = start_chat_on_terminal(slave, fake, tmp_path, workspace)
        assert QUESTION_END.decode() in read_until(master, QUESTION_END).decode()
        os.write(master, b"\x03")  # Ctrl-C typed at the terminal: its driver sends SIGINT
        stdout, stderr = chat.communicate(timeout=60)
        flags = termios.tcgetattr(slave)[3]  # the question's cbreak mode is gone with it
        assert flags & termios.ICANON and flags & termios.ECHO
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
    chat = start_chat("Talk.", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home"))
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

FAKE_EDIT_AGENT = TESTS / "fake_edit_agent.py"


class _TerminalWriter(io.StringIO):
    def isatty(self) -> bool:
        return True


def chat_with_edit_agent(monkeypatch, workspace: Path, typed: bytes | None, writer=None):
    """`parley.chat.chat` in this process against `fake_edit_agent.py` (it asks to edit
    notes.txt and create new.txt, with ACP diffs); the question goes to `writer`, and is
    answered with `typed` (None: there is no terminal)."""
    from parley import chat as chat_module
    from parley import chat_question
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
        return chat_question.QuestionTerminal(read_fd, writer, owned=False)

    monkeypatch.setattr(chat_module, "_start_server", start_fake)
    monkeypatch.setattr(chat_question.QuestionTerminal, "open", staticmethod(terminal))
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
    assert "path:" not in question  # the title and the diff name the file
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
    from parley.chat_view import diff_lines

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
        asked = read_until(master, QUESTION_END).decode().replace("\r\n", "\n")
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


# --- scripts: the prompt on stdin, only the answer on stdout, sessions as JSON, ids -------


def test_chat_dash_reads_the_prompt_from_stdin(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script([Reply(text="Width times height.")])
    done = subprocess.run(
        [sys.executable, "-m", "parley", "chat", "-", "--cwd", str(workspace)],
        input="What does area do?\nAnswer in one line.\n",
        capture_output=True,
        text=True,
        env={**os.environ, **server_env(fake, tmp_path / "home")},
        timeout=60,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Width times height.\n"
    sent = json.dumps(fake.requests[0].body)
    assert "What does area do?\\nAnswer in one line." in sent
    assert '"-"' not in sent


def test_chat_dash_with_nothing_on_stdin_says_so(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    done = run_parley("chat", "-", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home"))
    assert done.returncode == 2
    assert "the prompt on stdin is empty" in done.stderr
    assert not fake.requests


def test_stdout_holds_only_the_answer_and_stderr_shows_the_rest_apart(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    code = "import math\nprint('hello')\nmath.pi * 2"
    fake.set_script(
        [
            Reply(
                thinking="Let me compute.\nWith Python.",
                tool_calls=(ScriptedToolCall("python_eval", {"code": code}),),
            ),
            Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "1/0"}),)),
            Reply(thinking="Got it.", text="It is **6.28**.\n\nDone."),
        ]
    )
    done = run_parley(
        "chat", "2 pi?", "--yes", "--cwd", str(workspace), env=server_env(fake, tmp_path / "home")
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is **6.28**.\n\nDone.\n"
    err = done.stderr
    assert "\n│ Let me compute.\n│ With Python.\n" in err  # thoughts marked, line by line
    assert "\n│ Got it.\n\n" in err  # and a blank line before the answer
    # The call under its title, the code as code, the result's meaningful lines.
    assert "→ Run Python\n  ```python\n  import math\n  print('hello')\n  math.pi * 2\n  ```" in err
    assert "✓ Run Python: hello\n  value: 6.28" in err
    assert "stdout:" not in err
    assert "✗ Run Python: ZeroDivisionError: division by zero\n" in err  # the error first
    summary = [line for line in err.splitlines() if line.strip()][-1]
    assert summary.startswith("openai:gpt-4.1-mini · 3 rounds · 2 tool calls · ")
    assert "stream(s)" not in err and "closed early" not in err


def test_why_the_turn_stopped_goes_to_stderr(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    env = server_env(fake, tmp_path / "home")
    config = tmp_path / "config.toml"
    config.write_text("max_turn_requests = 1\n")
    env["PARLEY_CONFIG"] = str(config)
    fake.set_script([Reply(text="Reading.", tool_calls=(READ_GEOMETRY,)), Reply(text="never")])
    done = run_parley("chat", "Read it.", "--cwd", str(workspace), env=env)
    assert done.returncode == 1
    assert done.stdout == "Reading.\n"
    # The server's notice, once, marked at its level (warning).
    said = "Stopped: the turn reached its limit of 1 model request."
    assert done.stderr.count(said) == 1 and f"\n⚠ {said}\n" in done.stderr
    # Kept with the session: the export shows it after the turn, as JSON and as Markdown.
    markdown = run_parley("export", "last", env=env).stdout
    assert "Reading.\n\n**Tool `read_file`** (done)" in markdown
    assert markdown.index("(done)") < markdown.index(f"> **Warning:** {said}")
    exported = json.loads(run_parley("export", "last", "--format", "json", env=env).stdout)
    assert exported["notices"] == [{"after": 3, "level": "warning", "text": said}]


def test_a_budget_notice_goes_to_stderr_once_and_never_to_stdout(
    fake: FakeLLM, tmp_path: Path, workspace
) -> None:
    env = server_env(fake, tmp_path / "home")
    config = tmp_path / "config.toml"
    config.write_text("[budget]\nsession_usd = 0.5\n")
    env["PARLEY_CONFIG"] = str(config)
    costly = (1_000_000, 100_000)  # $0.56 on gpt-4.1-mini
    fake.set_script(
        [Reply(text="Reading.", tool_calls=(READ_GEOMETRY,), usage=costly), Reply(text="never")]
    )
    stopped = run_parley("chat", "Read it.", "--cwd", str(workspace), env=env)
    refused = run_parley("chat", "More.", "--session", "last", "--cwd", str(workspace), env=env)
    assert stopped.returncode == 1 and refused.returncode == 1
    assert stopped.stdout == "Reading.\n"  # the model's answer, and only it
    assert stopped.stderr.count("spent $0.5600 of its $0.50 budget, so the turn stops here") == 1
    assert refused.stdout == ""  # no answer: nothing on stdout
    why = "This session spent $0.5600 of its $0.50 budget, so this prompt was not sent"
    assert refused.stderr.count(why) == 1
    # Said once: the notice (there is no other text for a stop).
    assert "Not started:" not in refused.stderr and "budget" not in stopped.stdout
    assert "Stopped: this session's budget" not in stopped.stderr


READ_GEOMETRY = ScriptedToolCall("read_file", {"path": "geometry.py"})


def two_sessions(fake: FakeLLM, env: dict[str, str], workspace: Path) -> None:
    for prompt, answer in (("First question", "First answer."), ("Second question", "Second")):
        fake.set_script([Reply(text=answer)])
        done = run_parley("chat", prompt, "--cwd", str(workspace), env=env)
        assert done.returncode == 0, done.stderr


def test_sessions_json_is_an_array_that_parses(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    env = server_env(fake, tmp_path / "home")
    two_sessions(fake, env, workspace)
    listed = json.loads(run_parley("sessions", "--json", env=env).stdout)
    assert [s["title"] for s in listed] == ["Second question", "First question"]  # newest first
    for session in listed:
        assert session["id"].startswith("sess_")
        assert session["cwd"] == str(workspace) and session["model"] == "openai:gpt-4.1-mini"
        assert session["createdAt"].endswith("Z") and session["updatedAt"].endswith("Z")
        assert session["turns"] == 1
        assert session["usage"]["inputTokens"] == 10 and session["usage"]["outputTokens"] == 5
    assert json.loads(run_parley("sessions", "--json", "--limit", "1", env=env).stdout)[0][
        "title"
    ] == ("Second question")


def test_sessions_shows_local_times(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    env = {
        **server_env(fake, tmp_path / "home"),
        "TZ": "Asia/Kolkata",
    }  # UTC+05:30: never UTC's clock
    two_sessions(fake, env, workspace)
    newest = json.loads(run_parley("sessions", "--json", env=env).stdout)[0]
    stamp = datetime.fromisoformat(newest["updatedAt"].replace("Z", "+00:00"))
    local = stamp.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%H:%M")
    row = run_parley("sessions", env=env).stdout.splitlines()[0]  # piped: no header
    assert row.startswith(newest["id"]) and f" {local} " in row
    assert "T" not in row.split()[1] and "Z" not in row.split()[1]


def test_export_last_and_unique_id_prefixes(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    env = server_env(fake, tmp_path / "home")
    two_sessions(fake, env, workspace)
    newest, oldest = (s["id"] for s in json.loads(run_parley("sessions", "--json", env=env).stdout))

    last = run_parley("export", "last", env=env)
    assert last.returncode == 0, last.stderr
    assert "# Second question" in last.stdout and "## Parley\n\nSecond\n" in last.stdout
    assert run_parley("export", newest, env=env).stdout == last.stdout

    # The shortest prefix that only one id starts with, with or without `sess_`.
    length = next(n for n in range(6, 30) if newest[:n] != oldest[:n])
    by_prefix = run_parley("export", newest[:length], env=env)
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert by_prefix.stdout == last.stdout
    without_sess = run_parley("export", newest[5:length], "--format", "json", env=env)
    assert json.loads(without_sess.stdout)["session"]["id"] == newest

    ambiguous = run_parley("export", "sess_", env=env)
    assert ambiguous.returncode == 1 and not ambiguous.stdout
    assert "'sess_' is the start of several sessions' ids:" in ambiguous.stderr
    assert newest in ambiguous.stderr and oldest in ambiguous.stderr
    assert "Second question" in ambiguous.stderr and "First question" in ambiguous.stderr

    unknown = run_parley("export", "nosuchsession", env=env)
    assert unknown.returncode == 1
    assert "no session 'nosuchsession' (see `parley sessions`)" in unknown.stderr


def test_chat_continues_the_last_session(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    env = server_env(fake, tmp_path / "home")
    two_sessions(fake, env, workspace)
    fake.set_script([Reply(text="Yes.")])
    done = run_parley("chat", "Sure?", "--session", "last", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Yes.\n"
    sent = fake.requests[-1].body["messages"]
    assert [m["content"] for m in sent[1:]] == ["Second question", "Second", "Sure?"]


def test_the_chat_imports_no_client_library_before_the_server_starts() -> None:
    """`parley chat` starts the server first and imports pygls (and lsprotocol, a second of
    imports) while the server imports its own: the command's modules must not import it."""
    probe = (
        "import sys, parley.cli, parley.chat_command, parley.transcript, parley.display\n"
        "print(sorted(m for m in ('pygls', 'lsprotocol', 'openai', 'anthropic') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_chat_with_another_model_than_the_default(fake: FakeLLM, tmp_path: Path, workspace) -> None:
    fake.set_script([Reply(thinking="Hm.", text="Width times height.")])
    env = server_env(fake, tmp_path / "home")  # the default model is OpenAI's
    done = run_parley(
        "chat", "Area?", "--model", "anthropic:claude-sonnet-4-5", "--cwd", str(workspace), env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Width times height.\n"
    assert fake.requests[0].api == "anthropic"
    assert "anthropic:claude-sonnet-4-5 · 1 round" in done.stderr
