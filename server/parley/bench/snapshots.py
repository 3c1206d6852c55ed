"""Row 11: the snapshots `/undo` takes of every root before a writing call, and a restore
from them, on a workspace of 10,000 files (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from parley.bench.harness import BenchSizes, Row, ms, percentile, verdict

SUBSEQUENT_TARGET_MS = 50.0
CHANGED_FILES = 100


def write_workspace(root: Path, files: int) -> None:
    """A git repository of `files` files: a `.gitignore` leaving out Python's caches (as a
    project's does: every file is then matched against it) and small source files, 100 to a
    folder."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n*.egg-info/\n")
    for number in range(files - 1):
        folder = root / f"pkg{number // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{number}.py").write_text(f"VALUE = {number}\n" * 20)


def bare_walk(root: Path) -> int:
    """The floor of any stat-based snapshot: every entry listed and `lstat`ed, nothing else."""
    count, pending = 0, [str(root)]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for item in listing:
                count += 1
                if item.is_dir(follow_symlinks=False):
                    pending.append(item.path)
                item.stat(follow_symlinks=False)
    return count


def git_files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root / ".git"))


def measure(home: Path, sizes: BenchSizes) -> dict[str, float]:
    from parley.agent.snapshot_restore import apply_changes, not_kept, turn_changes, with_now
    from parley.agent.snapshot_store import SnapshotStore
    from parley.agent.snapshots import take_snapshot
    from parley.tools.confined import workspace_roots

    root = home / "snapshot-workspace"
    write_workspace(root, sizes.snapshot_files)
    time.sleep(2.1)  # older than a clock tick's doubt (`RACY_NS`), as a real tree's files are
    roots = workspace_roots(root)
    store = SnapshotStore(home / "snapshot-home")
    started = time.perf_counter()
    first = take_snapshot(store, roots.all, None)
    figures = {"first": time.perf_counter() - started}
    later, bare = [], []
    for _ in range(sizes.snapshot_repeats):  # interleaved: the machine's load hits both alike
        started = time.perf_counter()
        take_snapshot(store, roots.all, first)
        later.append(time.perf_counter() - started)
        started = time.perf_counter()
        bare_walk(root)
        bare.append(time.perf_counter() - started)
    figures["later_p50"], figures["later_p90"] = percentile(later, 0.5), percentile(later, 0.9)
    figures["bare_p50"] = percentile(bare, 0.5)
    for number in range(CHANGED_FILES):  # a turn: `sed -i` over 100 files
        path = root / f"pkg{number}" / f"mod{number * 100}.py"
        path.write_text(path.read_text().replace("VALUE", "RENAMED"))
    started = time.perf_counter()
    after = take_snapshot(store, roots.all, first)
    figures["changed"] = time.perf_counter() - started
    started = time.perf_counter()
    record = {"before": first.manifest_id, "after": after.manifest_id, "roots": [str(root)]}
    changes = turn_changes(store, [record], str(root))
    now = take_snapshot(store, roots.all, after)
    kept, _ = not_kept(with_now(changes, now.entries))
    failures = asyncio.run(apply_changes(store, kept, roots, None))
    figures["restore"] = time.perf_counter() - started
    assert not failures and len(kept) == CHANGED_FILES, failures
    assert "RENAMED" not in (root / "pkg0" / "mod0.py").read_text()
    figures["files"] = float(sum(len(files) for _, _, files in os.walk(root)) - git_files(root))
    return figures


async def snapshot_rows(home: Path, sizes: BenchSizes) -> list[Row]:
    figures = await asyncio.to_thread(measure, home, sizes)
    files = f"{int(figures['files']):,} files"
    later = figures["later_p50"] * 1000
    return [
        Row(
            measure=f"11a. Snapshot of a workspace of {files}, first (every file read, stored)",
            parley=ms(figures["first"]),
        ),
        Row(
            measure=f"11b. Snapshot of the {files}, later, nothing changed: p50 of "
            f"{sizes.snapshot_repeats} (p90 {figures['later_p90'] * 1000:,.1f} ms)",
            parley=ms(figures["later_p50"]),
            baseline=f"{ms(figures['bare_p50'])} (a bare scandir + lstat walk)",
            compared=f"{figures['later_p50'] / figures['bare_p50']:.2f}x",
            target=verdict(f"≤ {SUBSEQUENT_TARGET_MS:.0f} ms", later <= SUBSEQUENT_TARGET_MS),
        ),
        Row(
            measure=f"11c. Snapshot of the {files} after a turn changed {CHANGED_FILES} of them",
            parley=ms(figures["changed"]),
        ),
        Row(
            measure=f"11d. Restore of that turn: its changes planned, the roots now, "
            f"{CHANGED_FILES} files written",
            parley=ms(figures["restore"]),
        ),
    ]
