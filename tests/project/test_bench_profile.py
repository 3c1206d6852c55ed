"""`parley bench --profile` prints where a cold start's time goes: the start's phases and
the import tree to `initialize`. Only what it prints is checked, never a time."""

from __future__ import annotations

import subprocess
import sys

from parley.bench.profile import import_tree, tree_lines

PHASES = [
    "process start: the interpreter up",
    "imports done (the last one before `initialize` is answered)",
    "`initialize` answered",
    "`session/new` answered",
    "the first `agent_message_chunk`",
]


def test_the_profile_prints_the_starts_phases_and_its_import_tree() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "parley", "bench", "--profile"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    phases, _, tree = done.stdout.partition("## The import tree to `initialize`")
    assert phases.startswith("## The start's phases")
    rows = [line for line in phases.splitlines() if line.startswith("| ") and " ms |" in line]
    assert len(rows) == len(PHASES), phases
    assert all(row.startswith(f"| {phase}") for row, phase in zip(rows, PHASES, strict=True))
    # The server's own module is in the tree, with what it imports beneath it.
    top = [line for line in tree.splitlines() if line.startswith("- `")]
    assert any(line.startswith("- `parley.server`: ") for line in top), tree
    assert any(line.startswith("  - `") for line in tree.splitlines())


def test_the_import_tree_nests_each_import_under_the_one_that_made_it() -> None:
    # As `python -X importtime` prints them: an import after those inside it.
    lines = [
        "import time: self [us] | cumulative | imported package",
        "import time:       100 |        100 |     c",
        "import time:       200 |        300 |   b",
        "import time:       400 |        400 |   d",
        "import time:      1500 |       2200 | a",
        "import time:      3000 |       3000 | e",
    ]
    (a, e) = import_tree(lines)
    assert (a.module, a.cumulative_us, [child.module for child in a.children]) == (
        "a",
        2200,
        ["b", "d"],
    )
    assert [child.module for child in a.children[0].children] == ["c"]
    assert e.children == []
    # Shown slowest first; imports under a millisecond are left out.
    assert list(tree_lines([a, e])) == [
        "- `e`: 3.0 ms (itself 3.0 ms)",
        "- `a`: 2.2 ms (itself 1.5 ms)",
    ]
