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


def run_the_script(tmp_path: Path, statuses: dict[str, int]) -> subprocess.CompletedProcess[str]:
    """scripts/test in a copy where each step prints its lines and exits with its status."""
    for step, (relative, passed, failed) in STEPS.items():
        stand_in = tmp_path / "repo" / relative
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        output = failed if statuses[step] else passed
        stand_in.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\nexit {statuses[step]}\n")
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    script = tmp_path / "repo" / "scripts" / "test"
    shutil.copy2(REPO / "scripts" / "test", script)
    return subprocess.run([str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)


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
