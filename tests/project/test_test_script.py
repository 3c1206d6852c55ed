"""`scripts/test` itself: the real script, run in a copy of the repository whose steps
(install, ruff, pytest, the Emacs and VS Code suites) are stand-ins that print what the real
ones print and end with the status a test gives them. What is checked is what a developer or
CI reads at the end: each step's time and result, the counts over all suites, and the exit
status, which says "failed" whenever any step failed."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

# Each step: where its stand-in lives in the copy, and what the real one prints at its end
# when it passes and when it fails.
STEPS = {
    "install": ("scripts/install", "", "npm ERR!"),
    "ruff": (".venv/bin/ruff", "All checks passed!", "Found 1 error."),
    "pytest": (".venv/bin/pytest", "4 passed in 2.00s", "3 passed, 1 failed in 2.00s"),
    "Emacs": ("scripts/test-emacs", "5 passed, 0 failed", "4 passed, 1 failed"),
    "VS Code": ("scripts/test-vscode", "# pass 7\n# fail 0", "# pass 6\n# fail 1"),
}
SUITES = ("ruff", "pytest", "Emacs", "VS Code")


def run_the_script(
    tmp_path: Path, statuses: dict[str, int], real: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """scripts/test in a copy where each step prints its lines and exits with its status;
    `real`: steps whose stand-in is this shell script instead."""
    for step, (relative, passed, failed) in STEPS.items():
        stand_in = tmp_path / "repo" / relative
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        output = failed if statuses[step] else passed
        text = f"#!/bin/sh\nprintf '%s\\n' '{output}'\nexit {statuses[step]}\n"
        stand_in.write_text((real or {}).get(step, text))
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    script = tmp_path / "repo" / "scripts" / "test"
    shutil.copy2(REPO / "scripts" / "test", script)
    return subprocess.run([str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=90)


def step_rows(stdout: str) -> dict[str, str]:
    """The table at the end: each step's result, every time shown as minutes:seconds."""
    table = stdout[stdout.rindex("\nstep ") :]
    rows = re.findall(r"^(\w+(?: \w+)?) +\d+:\d\d(?:  (ok|failed))?$", table, re.MULTILINE)
    return {name: result for name, result in rows}


# None, each one alone, all: the steps' results are kept apart, so these cover the mixes.
@pytest.mark.parametrize("failing", [set(), *({suite} for suite in SUITES), set(SUITES)])
def test_the_table_and_the_exit_status_say_which_suites_failed(
    tmp_path: Path, failing: set[str]
) -> None:
    statuses = {step: (1 if step in failing else 0) for step in STEPS}
    done = run_the_script(tmp_path, statuses)
    assert (done.returncode != 0) == bool(failing), done.stdout + done.stderr
    rows = step_rows(done.stdout)
    assert rows == {
        "install": "ok",
        **{suite: ("failed" if suite in failing else "ok") for suite in SUITES},
        "all": "",
    }
    # pytest runs twice (the wheel's tests alone, after the rest): its stand-in prints twice.
    runs = {"ruff": 0, "pytest": 2, "Emacs": 1, "VS Code": 1}
    passed = 2 * 4 + 5 + 7 - sum(runs[suite] for suite in failing)  # one failure a run
    failures = sum(max(runs[suite], 1) for suite in failing)
    last = done.stdout.rstrip().splitlines()[-1]
    assert last == f"total: {passed} passed, {failures} failed"


def test_a_failed_install_stops_with_its_row_and_a_failure(tmp_path: Path) -> None:
    done = run_the_script(tmp_path, {step: int(step == "install") for step in STEPS})
    assert done.returncode == 1
    assert step_rows(done.stdout) == {"install": "failed", "all": ""}
    assert done.stdout.rstrip().splitlines()[-1] == "total: 0 passed, 1 failed"


def test_a_vscode_test_past_its_timeout_counts_as_failed(tmp_path: Path) -> None:
    # node --test counts a test past --test-timeout as "cancelled", and exits 1.
    timed_out = "#!/bin/sh\nprintf '# pass 5\\n# fail 0\\n# cancelled 2\\n'\nexit 1\n"
    done = run_the_script(tmp_path, dict.fromkeys(STEPS, 0), {"VS Code": timed_out})
    assert done.returncode == 1
    assert step_rows(done.stdout)["VS Code"] == "failed"
    assert done.stdout.rstrip().splitlines()[-1] == "total: 18 passed, 2 failed"


# --- no test can hang: pytest-timeout (pyproject.toml's [tool.pytest.ini_options]) ---------

HUNG = """import asyncio
import time


def test_that_hangs():
    time.sleep(3600)  # the line the stack must show


async def test_that_awaits_forever():
    await asyncio.Event().wait()  # the line the task's stack must show


def test_after_them():
    assert True
"""
INNER_TIMEOUT = 3  # seconds: the inner run's limit, in place of the suite's


def test_the_suite_has_a_per_test_timeout_that_fails_with_a_stack() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    options = config["ini_options"]
    # signal, not thread: under pytest-xdist the thread method kills the worker and its
    # stack is lost; SIGALRM fails the one test, with its traceback, and the run goes on.
    assert options["timeout_method"] == "signal"
    assert 60 <= int(options["timeout"]) <= 600


def test_a_hung_test_fails_within_its_timeout_in_scripts_test(tmp_path: Path) -> None:
    """The real pytest with the project's config, run by the real scripts/test (its other
    steps stand-ins), on a test that sleeps forever and one that awaits forever: each fails
    at the limit, with the stack of where it hung, the next test still runs, and the script
    says pytest failed."""
    copy = tmp_path / "repo"
    (copy / "tests").mkdir(parents=True)
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")
    (copy / "tests" / "test_hung.py").write_text(HUNG)
    shutil.copy2(REPO / "tests" / "timeout_stacks.py", copy / "tests")
    (copy / "tests" / "conftest.py").write_text('pytest_plugins = ("timeout_stacks",)\n')
    (copy / "tests" / "project").mkdir()
    (copy / "tests" / "project" / "test_distribution.py").write_text(
        "def test_wheel():\n    pass\n"
    )
    pytest_bin = REPO / ".venv" / "bin" / "pytest"
    real = {"pytest": f'#!/bin/sh\nexec "{pytest_bin}" -o timeout={INNER_TIMEOUT} "$@"\n'}
    started = time.monotonic()
    done = run_the_script(tmp_path, dict.fromkeys(STEPS, 0), real)
    took = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert step_rows(done.stdout)["pytest"] == "failed"
    assert f"Failed: Timeout (>{INNER_TIMEOUT}.0s) from pytest-timeout" in output
    # Where each hung: the interrupted stack; for the async test, its task's (the signal
    # finds only the event loop's select).
    assert "time.sleep(3600)  # the line the stack must show" in output
    assert "test_hung.py:6: Failed" in output
    assert "Task Task-1 (pytest-timeout)" in output
    assert 'test_hung.py", line 10, in test_that_awaits_forever' in output
    assert "in wait\n    await fut" in output  # and on into what it awaited: asyncio.Event.wait
    assert "2 failed, 1 passed" in output  # the run went on past them (no worker crashed)
    assert "crashed" not in output
    assert took < INNER_TIMEOUT + 45  # the limit, and pytest-xdist's start, not an hour
