"""The snapshot's walk, in-process on real trees: what a later snapshot takes from the one
before it (the files' lstat, that a file is not ignored) never makes it differ from a
snapshot taken afresh; what is not a file, a link or a folder is passed over in a
repository as outside one."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.snapshot_store import SnapshotStore
from parley.agent.snapshots import (
    NOT_KEPT,
    changed_paths,
    latest_snapshot,
    load_snapshot,
    take_snapshot,
)


def trusted(snapshot: object) -> None:
    """As if the snapshot were taken long after its files were written (no clock doubt)."""
    snapshot.taken_ns = time.time_ns() + 10**10  # type: ignore[attr-defined]


def test_a_fifo_in_a_repository_is_passed_over_not_a_failure(tmp_path: Path) -> None:
    """A FIFO or a socket (a dev server's, an editor's) in a git workspace: every snapshot
    failed reading it as a link, so no turn there could be undone."""
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "kept.txt").write_text("kept")
    os.mkfifo(root / "pipe")
    for number in range(30):  # listed before and after the FIFO, in the listing's order
        (root / f"m{number}.py").write_text(str(number))
    store = SnapshotStore(tmp_path / "home")
    snapshot = take_snapshot(store, (root,), None)
    assert str(root / "pipe") not in snapshot.entries
    assert all(str(root / f"m{number}.py") in snapshot.entries for number in range(30))
    assert store.object(snapshot.entries[str(root / "kept.txt")][6]) == b"kept"


def test_a_gitignore_changed_between_snapshots_leaves_out_what_it_now_ignores(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "app.log").write_text("log")
    (root / "sub" / "data.csv").write_text("1,2")
    store = SnapshotStore(tmp_path / "home")
    first = take_snapshot(store, (root,), None)
    assert str(root / "app.log") in first.entries
    trusted(first)
    (root / ".gitignore").write_text("*.log\n")
    (root / "sub" / ".gitignore").write_text("*.csv\n")
    later = take_snapshot(store, (root,), first)
    assert str(root / "app.log") not in later.entries
    assert str(root / "sub" / "data.csv") not in later.entries
    assert later.entries.keys() == take_snapshot(store, (root,), None).entries.keys()


def test_the_latest_snapshot_of_another_process_is_read_from_the_store(tmp_path: Path) -> None:
    """The snapshot a process keeps in memory is used only while it is the store's latest."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a").write_text("a")
    store = SnapshotStore(tmp_path / "home")
    mine = take_snapshot(store, (root,), None)
    assert latest_snapshot(store, (root,)) is mine
    (root / "b").write_text("b")
    theirs = take_snapshot(SnapshotStore(tmp_path / "home"), (root,), None)
    store.set_latest(*_latest_of(store, theirs.manifest_id))
    found = latest_snapshot(store, (root,))
    assert found is not None and found.manifest_id == theirs.manifest_id
    assert str(root / "b") in found.entries


def _latest_of(store: SnapshotStore, manifest_id: str) -> tuple[str, str]:
    (name,) = os.listdir(store.folder / "latest")
    return name, manifest_id


NAMES = st.sampled_from(["a.py", "b.log", "c.txt", "sub/d.py", "sub/e.log", "sub/deep/f.csv"])
IGNORE_LINES = st.lists(
    st.sampled_from(["*.log", "*.csv", "sub/", "deep/", "!b.log", "c.txt", "/a.py", "*.py"]),
    max_size=4,
)
CHANGES = st.lists(
    st.one_of(
        st.tuples(st.just("write"), NAMES),
        st.tuples(st.just("delete"), NAMES),
        st.tuples(st.just("ignore"), st.sampled_from(["", "sub/"]), IGNORE_LINES),
    ),
    max_size=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tree=st.lists(NAMES, min_size=1, max_size=6),
    rules=IGNORE_LINES,
    changes=CHANGES,
    extra=st.sampled_from([(), ("*.txt",), ("sub/deep/",)]),
)
def test_a_later_snapshot_is_the_snapshot_taken_afresh(
    tmp_path_factory: object, tree: list[str], rules: list[str], changes: list, extra: tuple
) -> None:
    """Whatever the tree, its `.gitignore` files and what changed since: the snapshot taken
    with the one before it (its lstats trusted, its files taken as not ignored) records the
    same paths with the same content as one taken with no snapshot before it."""
    base = tmp_path_factory.mktemp("walk")  # type: ignore[attr-defined]
    root = base / "ws"
    (root / ".git").mkdir(parents=True)
    for name in tree:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / ".gitignore").write_text("\n".join(rules))
    store = SnapshotStore(base / "home")
    first = take_snapshot(store, (root,), None, ignore=extra)
    trusted(first)
    for change in changes:
        if change[0] == "write":
            (root / change[1]).parent.mkdir(parents=True, exist_ok=True)
            (root / change[1]).write_text(f"new {change[1]}")
        elif change[0] == "delete" and (root / change[1]).is_file():
            (root / change[1]).unlink()
        elif change[0] == "ignore":
            (root / change[1]).mkdir(parents=True, exist_ok=True)
            (root / change[1] / ".gitignore").write_text("\n".join(change[2]))
    later = take_snapshot(store, (root,), first, ignore=extra)
    afresh = take_snapshot(SnapshotStore(base / "home2"), (root,), None, ignore=extra)
    assert later.entries.keys() == afresh.entries.keys()
    for path, entry in afresh.entries.items():
        assert later.entries[path][0] == entry[0] and later.entries[path][6] == entry[6]


def test_a_gitignore_outside_a_repository_means_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".gitignore").write_text("*.log\n")
    (root / "app.log").write_text("log")
    snapshot = take_snapshot(SnapshotStore(tmp_path / "home"), (root,), None)
    assert str(root / "app.log") in snapshot.entries


def test_an_unchanged_tree_gives_the_same_snapshot_and_writes_nothing(tmp_path: Path) -> None:
    """Files older than the clock's doubt, as they were: trusted, not read, no new manifest."""
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for number in range(50):
        (root / "pkg" / f"m{number}.py").write_text(f"x = {number}\n")
    store = SnapshotStore(tmp_path / "home")
    first = take_snapshot(store, (root,), None)
    trusted(first)
    later = take_snapshot(store, (root,), first)
    assert later.manifest_id == first.manifest_id and later.stored_bytes == 0


def test_what_counts_as_a_change() -> None:
    """Content, kind or mode; a touched file with the same bytes is no change; a file whose
    bytes were not kept counts as changed when its lstat is."""
    kept = ["f", 0o644, 3, 100, 100, 7, "digest"]
    touched = ["f", 0o644, 3, 200, 200, 7, "digest"]
    assert changed_paths({"a": kept}, {"a": touched}) == []
    assert changed_paths({"a": kept}, {"a": [*kept[:6], "other"]}) == ["a"]
    assert changed_paths({"a": kept}, {"a": ["f", 0o600, *kept[2:]]}) == ["a"]
    big = [NOT_KEPT, 0o644, 3, 100, 100, 7, None]
    assert changed_paths({"b": big}, {"b": [NOT_KEPT, 0o644, 3, 200, 200, 7, None]}) == ["b"]
    assert changed_paths({"b": big}, {"b": list(big)}) == []


def test_every_place_that_runs_later_is_recorded_and_kept_with_the_manifest(
    tmp_path: Path,
) -> None:
    """A snapshot names each place it passes that runs later outside the sandbox (a name of
    `RUNS_LATER_IN_ROOT`), at any depth and ignored or not: a `.git` folder (never walked
    into, its content never kept) or a file naming a repository elsewhere, an `.envrc`, a
    `.vscode/` …; its manifest keeps them, so a turn can tell which ones its calls made."""
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (root / "lib" / ".git").mkdir(parents=True)
    (root / "vendor").mkdir()
    (root / "vendor" / ".git").write_text("gitdir: ../elsewhere\n")
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "x.git").write_text("not a repository")
    (root / "deep" / "er" / ".envrc").write_text("export A=1\n")
    (root / "deep" / ".vscode").mkdir()
    (root / "deep" / ".vscode" / "tasks.json").write_text("{}")
    (root / ".gitignore").write_text(".envrc\n")  # ignored: still named, and kept
    store = SnapshotStore(tmp_path / "home")
    snapshot = take_snapshot(store, (root,), None)
    places = sorted(
        str(root / place)
        for place in (".git", "lib/.git", "vendor/.git", "deep/er/.envrc", "deep/.vscode")
    )
    assert sorted(snapshot.later_places or []) == places
    assert not any("/.git/" in path for path in snapshot.entries)
    assert str(root / "deep" / "er" / ".envrc") in snapshot.entries  # a change is seen
    assert str(root / "deep" / ".vscode" / "tasks.json") in snapshot.entries
    assert load_snapshot(store, snapshot.manifest_id).later_places == snapshot.later_places
    trusted(snapshot)
    later = take_snapshot(store, (root,), snapshot)  # nothing changed: the same manifest
    assert later.manifest_id == snapshot.manifest_id
    assert later.later_places == snapshot.later_places
    (root / "deep" / ".git").mkdir()
    (root / "sub").mkdir()
    (root / "sub" / ".pre-commit-config.yaml").write_text("repos: []\n")
    made = take_snapshot(store, (root,), later)
    assert sorted(set(made.later_places or []) - set(places)) == [
        str(root / "deep" / ".git"),
        str(root / "sub" / ".pre-commit-config.yaml"),
    ]
