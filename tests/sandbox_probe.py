"""Run a sandboxed child through the launcher (`sandbox.prepare`) that tries, for each path it
is given, what an attacker's command would: read it, write it (or a new file in it), rename
it away (to put another in its place). Used by tests/trust/test_sandbox_policy.py, as root and as
an unprivileged user.

The child is the system's Python (`/usr/bin/python3`: an unprivileged user may not enter the
directory of the virtualenv's interpreter), given the checks as JSON on its command line; it
prints what happened to each as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from parley.sandbox import ChildSpec, SandboxSettings, prepare

SYSTEM_PYTHON = "/usr/bin/python3"
NOBODY = 65534

# What the child does with each path: `read` (its text, or the names in a directory),
# `write` (appends to a file, makes a new file in a directory), `rename` (moves it aside and
# back). Each answers "ok: …" or the error's name.
CHECKER = r"""
import json, os, sys

def attempt(action, path):
    try:
        if action == "read":
            if os.path.isdir(path):
                return "ok: " + " ".join(sorted(os.listdir(path)))
            with open(path, errors="replace") as file:
                return "ok: " + file.read()
        if action == "write":
            target = os.path.join(path, "planted") if os.path.isdir(path) else path
            with open(target, "a") as file:
                file.write("planted\n")
            return "ok"
        if action == "rename":
            os.rename(path, path + ".moved")
            os.rename(path + ".moved", path)
            return "ok"
    except OSError as error:
        return type(error).__name__
    return "unknown action"

checks = json.loads(sys.argv[1])
print(json.dumps([attempt(action, path) for action, path in checks]))
"""


def probe(
    checks: Sequence[tuple[str, str]],
    workspace: Path,
    settings: SandboxSettings,
    writable: Sequence[Path] = (),
    uid: int | None = None,
    runs_later: Sequence[Path] = (),
) -> list[str]:
    """What a sandboxed child got for each (action, path) of `checks`; as `uid` (the
    launch run through `setpriv`) when given; `runs_later`: places found below the roots."""
    spec = ChildSpec(
        (SYSTEM_PYTHON, "-c", CHECKER, json.dumps(list(checks))),
        workspace,
        {"PATH": os.defpath},
        label="policy-probe",
        writable=tuple(writable),
        runs_later=tuple(runs_later),
    )
    launch = prepare(spec, settings)
    try:
        done = subprocess.run(
            as_user(launch.argv, uid),
            cwd=launch.cwd,
            env=launch.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        launch.end()
    assert done.returncode == 0, done.stderr
    answers: Any = json.loads(done.stdout.strip().splitlines()[-1])
    return [str(answer) for answer in answers]


def run_in_sandbox(
    script: str, workspace: Path, settings: SandboxSettings, uid: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`/bin/sh -c script` as the launcher starts it (as `uid`, when given); its output."""
    spec = ChildSpec(("/bin/sh", "-c", script), workspace, {"PATH": os.defpath}, label="policy-sh")
    launch = prepare(spec, settings)
    try:
        return subprocess.run(
            as_user(launch.argv, uid),
            cwd=launch.cwd,
            env=launch.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        launch.end()


def as_user(argv: Sequence[str], uid: int | None) -> list[str]:
    """`argv` run as `uid` (None: as this process's user)."""
    if uid is None:
        return list(argv)
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
