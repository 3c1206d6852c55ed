"""The snapshots' new inputs, each with the property it keeps: `[checkpoints] ignore` (any
patterns: a path they ignore is never in a snapshot, so never touched by a restore, and the
walk ends in bounded time), `[checkpoints]` in config.toml (checked as its table's keys), and
`_parley/session/redo`'s params (any JSON: a redo, or `-32602` naming what is wrong)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pathspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.agent.snapshot_store import SnapshotStore
from parley.agent.snapshots import take_snapshot
from parley.config import ConfigError, load_settings
from parley.protocol.params import RedoParams, parse_params
from parley.tools.workspace import matchable
from pygls.exceptions import JsonRpcInvalidParams

TREE = ["a.py", "a.log", "b/c.py", "b/d.log", "build/out.o", "build/deep/x", "e f/g", "h.txt"]
PATTERN_PARTS = st.sampled_from(["*", "**", "/", "a", "b", ".log", "build", "!", "?", "[ab]"])
PATTERNS = st.lists(st.lists(PATTERN_PARTS, min_size=1, max_size=6).map("".join), max_size=5)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ignored") / "ws"
    for name in TREE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    return root


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns=PATTERNS)
def test_a_path_the_ignore_patterns_ignore_is_never_in_a_snapshot(
    tree: Path, tmp_path_factory: pytest.TempPathFactory, patterns: list[str]
) -> None:
    store = SnapshotStore(tmp_path_factory.mktemp("home"))
    started = time.monotonic()
    snapshot = take_snapshot(store, (tree,), None, ignore=tuple(patterns))
    assert time.monotonic() - started < 10
    spec = pathspec.GitIgnoreSpec.from_lines([p for p in patterns if matchable(p)])
    for name in TREE:
        parts = name.split("/")
        folders = ["/".join(parts[: depth + 1]) + "/" for depth in range(len(parts) - 1)]
        ignored = any(spec.match_file(path) for path in [*folders, name])
        assert (str(tree / name) not in snapshot.entries) == ignored, (patterns, name)


checkpoint_values = st.one_of(
    st.integers(-5, 10**6),
    st.text(max_size=5),
    st.lists(st.text(max_size=5) | st.integers(), max_size=3),
    st.booleans(),
    st.floats(allow_nan=False),
)


@settings(max_examples=100, deadline=None)
@given(ignore=checkpoint_values, cap=checkpoint_values, keep=checkpoint_values)
def test_the_checkpoints_table_loads_or_names_its_key(
    tmp_path_factory: pytest.TempPathFactory, ignore: Any, cap: Any, keep: Any
) -> None:
    folder = tmp_path_factory.mktemp("config")
    path = folder / "config.toml"
    path.write_text(
        f"[checkpoints]\nignore = {_toml(ignore)}\nmax_turn_megabytes = {_toml(cap)}\n"
        f"keep_days = {_toml(keep)}\n",
        encoding="utf-8",
        errors="surrogatepass",
    )
    try:
        loaded = load_settings({"PARLEY_CONFIG": str(path), "PARLEY_HOME": str(folder)})
    except ConfigError as error:
        assert "checkpoints." in str(error) or "Cannot read" in str(error), str(error)
        return
    assert isinstance(loaded.checkpoints.max_turn_megabytes, int)
    assert loaded.checkpoints.max_turn_megabytes >= 0
    assert isinstance(loaded.checkpoints.keep_days, int) and loaded.checkpoints.keep_days >= 0
    assert loaded.checkpoints.keep_days == keep  # what the file says, or refused
    assert all(isinstance(pattern, str) for pattern in loaded.checkpoints.ignore)


def _toml(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(raw=json_values | st.dictionaries(st.sampled_from(["sessionId", "turn"]), json_values))
def test_redo_params_are_a_session_or_a_named_refusal(raw: Any) -> None:
    try:
        params = parse_params(RedoParams, raw)
    except JsonRpcInvalidParams as error:
        assert "params" in str(error)
        return
    assert isinstance(raw, dict) and isinstance(raw["sessionId"], str)
    assert params.session_id == raw["sessionId"]
