"""Parley's one adapter to griffe (griffelib, pinned `griffelib==2.4.1`): `static_python.py`
imports griffe from here, so the one thing Parley changes in griffe is always in effect.

griffe asks `git` about every package it loads (its loader calls `GitInfo.from_package` once
a package is loaded, for source links Parley never shows), and in a hostile repository `git`
runs what `.git/config` says (`core.fsmonitor`). griffe has no public switch for that, so
this module replaces that one classmethod of the public `griffe.GitInfo` with one that finds
nothing. It relies on griffe's loader calling it (not its own `git` helpers) and on nothing
of `griffe._internal`. tests/tools/test_griffe_adapter.py fails when an upgrade runs git again
(a fake `git` on PATH records any call), or stops calling the hook; and
tests/trust/test_hostile_workspace.py checks the whole tool over the wire.
"""

from __future__ import annotations

import logging

import griffe

__all__ = ["griffe"]

# griffe logs every file it cannot parse, with a traceback; the tools report those to the
# model themselves, and the server's log must stay one line per expected problem.
logging.getLogger("griffe").setLevel(logging.CRITICAL)

# Kept for the adapter's test, which checks that griffe still calls the hook replaced here.
GRIFFE_GIT_INFO = griffe.GitInfo.from_package


def _no_git_info(cls: type[griffe.GitInfo], package: griffe.Module) -> None:
    return None


# Fail loudly, not open, if an upgrade moved the hook: a silent miss would run git again.
if not callable(getattr(griffe.GitInfo, "from_package", None)):
    raise ImportError("griffe changed where it looks up git: re-check griffe_adapter.py")
griffe.GitInfo.from_package = classmethod(_no_git_info)  # type: ignore[method-assign,assignment]
