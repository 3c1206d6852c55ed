"""The command line's papercuts (issue 42, point 5): `parley sessions | head -1` is the newest
session, `parley fake-llm` runs the README's offline recipe with the installed command, and
`parley export` gives a turn one `## Parley` and an edit as its diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, server_env
from hypothesis import assume, given
from hypothesis import strategies as st
from parley.agent.export import edit_diff
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from test_cli import read_until, run_parley, two_sessions

PARLEY = Path(sys.executable).with_name("parley")  # the installed command, as on a PATH


def sessions_on_a_terminal(*args: str, env: dict[str, str]) -> str:
    """What `parley sessions ARGS` shows with stdout a terminal (a pty)."""
    master, slave = os.openpty()
    try:
        listing = subprocess.Popen(
            [sys.executable, "-m", "parley", "sessions", *args],
            stdout=slave,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        os.close(slave)
        shown = read_until(master, b"\x00never")  # all of it, to the end
        listing.wait(timeout=60)
        return shown.decode().replace("\r\n", "\n")
    finally:
        os.close(master)


def test_sessions_piped_starts_with_the_newest_and_a_terminal_gets_the_header(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    env = server_env(fake, tmp_path / "home")
    empty = run_parley("sessions", env=env)
    assert empty.returncode == 0 and empty.stdout == ""  # nothing a script could take for one
    assert "No sessions yet." in empty.stderr

    two_sessions(fake, env, workspace)
    newest = json.loads(run_parley("sessions", "--json", env=env).stdout)[0]["id"]
    piped = run_parley("sessions", env=env).stdout.splitlines()
    assert piped[0].startswith(newest + " ") and len(piped) == 2
    head = subprocess.run(
        f"{sys.executable} -m parley sessions | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert head.stdout.split()[0] == newest

    shown = sessions_on_a_terminal(env=env).splitlines()
    assert shown[0].split() == ["session", "updated", "model", "title"]
    assert shown[1].startswith(newest)
    bare = sessions_on_a_terminal("--no-header", env=env).splitlines()
    assert bare[0].startswith(newest) and len(bare) == 2


def test_the_readme_recipe_with_the_parley_command_on_the_path(
    tmp_path: Path, workspace: Path
) -> None:
    """README's "Try it without an API key" as a user who ran `uv tool install .` types it:
    `parley fake-llm`, no `.venv/bin/python -m …`; the variable it prints points the chat."""
    (workspace / "README.md").write_text("# A project\n")
    env = {**os.environ, "PATH": f"{PARLEY.parent}{os.pathsep}{os.environ['PATH']}"}
    script = REPO / "docs" / "examples" / "fake-script.json"
    fake = subprocess.Popen(
        ["parley", "fake-llm", "--script", str(script), "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert fake.stdout is not None and fake.stderr is not None
        url = fake.stdout.readline().strip()
        hint = fake.stderr.readline()
        assert url.startswith("http://127.0.0.1:") and f"OPENAI_BASE_URL={url}/v1 " in hint
        chat = subprocess.run(
            ["parley", "chat", "--yes", "What is README.md?"],
            capture_output=True,
            text=True,
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            env={
                **env,
                "PARLEY_HOME": str(tmp_path / "home"),
                "OPENAI_BASE_URL": f"{url}/v1",
                "OPENAI_API_KEY": "unused",
            },
            timeout=120,
        )
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.endswith("it says how to install and run Parley.\n")
    finally:
        fake.kill()
        fake.wait()
    helped = subprocess.run(
        ["parley", "fake-llm", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert helped.returncode == 0 and helped.stdout.startswith("usage: parley fake-llm ")
    assert "--script" in helped.stdout


def test_export_gives_a_turn_one_heading_and_an_edit_its_diff(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    edit = {
        "path": "geometry.py",
        "old_text": "    return width * height\n",
        "new_text": "    return abs(width * height)\n",
    }
    fake.set_script(
        [
            Reply(
                text="Reading first.",
                tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),),
            ),
            Reply(tool_calls=(ScriptedToolCall("edit_file", edit),)),
            Reply(text="Made it **positive**."),
        ]
    )
    env = server_env(fake, tmp_path / "home")
    done = run_parley("chat", "--yes", "Make the area positive.", "--cwd", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    fake.set_script([Reply(text="Yes.")])
    again = run_parley("chat", "Sure?", "--session", "last", "--cwd", str(workspace), env=env)
    assert again.returncode == 0, again.stderr

    exported = run_parley("export", "last", env=env).stdout
    assert exported.count("## Parley") == 2  # one per turn, not one per model round (4)
    assert exported.count("## You") == 2
    first_turn = exported.split("## You")[1]
    assert first_turn.index("Reading first.") < first_turn.index("Made it **positive**.")
    assert (
        "```diff\n--- a/geometry.py\n+++ b/geometry.py\n@@ -6 +6 @@\n"
        "-    return width * height\n+    return abs(width * height)\n```"
    ) in exported
    assert "old_text" not in exported and '"new_text"' not in exported


@given(
    old=st.lists(st.sampled_from(["a", "b", "", "```", "c d"]), min_size=1, max_size=6),
    new=st.lists(st.sampled_from(["a", "b", "", "```", "x"]), min_size=1, max_size=6),
    line=st.none() | st.integers(min_value=1, max_value=500),
)
def test_an_edits_diff_holds_exactly_its_removed_and_added_lines(
    old: list[str], new: list[str], line: int | None
) -> None:
    """Whatever the edit, its diff's `-` lines are the old text's, its `+` lines the new
    text's (in order, the unchanged ones left out), and the hunk starts at the edit's line."""
    # The line of the first change is past the edit's own unchanged first lines: an edit
    # starts at line 1 at the earliest (Hypothesis found `a a` -> `a a a` said at line 1).
    pairs = zip(old, new, strict=False)
    same = next((i for i, (was, now) in enumerate(pairs) if was != now), min(len(old), len(new)))
    assume(line is None or line > same)
    diff = edit_diff({"path": "f.py", "old_text": "\n".join(old), "new_text": "\n".join(new)}, line)
    assert diff is not None
    body = diff.split("\n")[2:]
    if old == new:
        assert body == []
        return
    removed = [entry[1:] for entry in body if entry.startswith("-")]
    added = [entry[1:] for entry in body if entry.startswith("+")]
    kept = [entry[1:] for entry in body if entry.startswith(" ")]
    assert len(removed) + len(kept) <= len(old) and len(added) + len(kept) <= len(new)
    assert all(entry in old for entry in removed) and all(entry in new for entry in added)
    hunks = [entry for entry in body if entry.startswith("@@")]
    if line is None:
        assert hunks and set(hunks) == {"@@"}
    else:
        first_changed = next(i for i, entry in enumerate(body[1:]) if entry[:1] in "+-")
        start = int(hunks[0].split()[1].lstrip("-").split(",")[0])
        assert start + first_changed == line or (start == line - 1 and first_changed == 0)
