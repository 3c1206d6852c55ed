"""`run_command`'s arguments, whatever the model sends: `cwd` only ever a directory inside the
workspace (through the gate, symlinks and escapes included), `timeout` only within
(0, max]; anything else refused with a sentence before anything runs (Hypothesis)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.tools.base import ToolContext
from parley.tools.run_command import ArgumentRefused, CommandSettings, RunCommandTool

MAX = 600.0


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workspace with a directory, a file, symlinks in→in, in→out, dangling and looping;
    and a directory outside it."""
    base = tmp_path_factory.mktemp("arguments")
    root, outside = base / "workspace", base / "outside"
    (root / "sub" / "deeper").mkdir(parents=True)
    outside.mkdir()
    (root / "file.txt").write_text("x")
    (root / "link_in").symlink_to(root / "sub")
    (root / "link_out").symlink_to(outside)
    (root / "sub" / "up_out").symlink_to("../../outside")
    (root / "dangling").symlink_to(root / "missing")
    (root / "loop").symlink_to(root / "loop")
    return root, outside


PARTS = st.sampled_from(
    [
        "sub", "deeper", "..", ".", "", "link_in", "link_out", "up_out", "dangling", "loop",
        "file.txt", "missing", "~", "\\x2e\\x2e", "%2e%2e", "\x00", "sub\\x2f..", "outside",
        "\uff0e\uff0e",
    ]
)  # fmt: skip
CWD = st.one_of(
    st.lists(PARTS, min_size=1, max_size=6).map("/".join),
    st.lists(PARTS, min_size=1, max_size=6).map(lambda parts: "/" + "/".join(parts)),
    st.text(max_size=30),
)


def inside(path: Path, root: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cwd=CWD)
def test_a_cwd_is_a_directory_inside_the_workspace_or_refused(
    tree: tuple[Path, Path], cwd: str
) -> None:
    root, outside = tree
    tool = RunCommandTool(root)
    for asked in (cwd, cwd.replace("outside", str(outside)), str(root / cwd.lstrip("/"))):
        try:
            where = tool.directory(asked)
        except ArgumentRefused as refused:
            assert str(refused).startswith("cwd: ")
            continue
        assert where.is_dir() and inside(where, root.resolve()), (asked, where)
        assert where == Path(os.path.realpath(where))  # resolved: bwrap's --chdir follows nothing


@pytest.mark.parametrize(
    "cwd", ["..", "../outside", "link_out", "sub/up_out", "/etc", "file.txt", "loop", "missing"]
)
def test_a_cwd_outside_or_not_a_directory_is_refused(tree: tuple[Path, Path], cwd: str) -> None:
    with pytest.raises(ArgumentRefused):
        RunCommandTool(tree[0]).directory(cwd)


def test_a_cwd_inside_is_taken_where_it_leads(tree: tuple[Path, Path]) -> None:
    root = tree[0].resolve()
    tool = RunCommandTool(root)
    assert tool.directory(None) == tool.directory(".") == root
    assert tool.directory("link_in/deeper") == root / "sub" / "deeper"
    assert tool.directory(str(root / "sub")) == root / "sub"


@settings(max_examples=300, deadline=None)
@given(
    asked=st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.floats(min_value=MAX - 1, max_value=MAX + 1),
        st.sampled_from([0.0, -0.0, MAX, math.nextafter(MAX, math.inf), 1e-9, 5e-324]),
        st.none(),
    )
)
def test_a_timeout_is_within_the_maximum_or_refused_naming_it(asked: float | None) -> None:
    tool = RunCommandTool(Path("."), CommandSettings(timeout_seconds=120, max_timeout_seconds=MAX))
    if asked is None:
        assert tool.timeout(asked) == 120
    elif 0 < asked <= MAX:
        assert tool.timeout(asked) == asked
    else:
        with pytest.raises(ArgumentRefused) as refused:
            tool.timeout(asked)
        if asked > MAX:
            assert "over the maximum of 600 s" in str(refused.value)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    arguments=st.fixed_dictionaries(
        {"command": st.just("touch ran")},
        optional={
            "timeout": st.one_of(
                st.floats(min_value=MAX, exclude_min=True),
                st.floats(max_value=0),
                st.just(float("nan")),
                st.text(max_size=5),
                st.booleans(),
                st.integers(min_value=601),
            ),
            "cwd": st.sampled_from(["..", "link_out", "/", "file.txt", 3, ["sub"]]),
        },
    ).filter(lambda arguments: len(arguments) > 1)
)
async def test_a_refused_call_runs_nothing(
    tree: tuple[Path, Path], arguments: dict[str, Any]
) -> None:
    root = tree[0]
    tool = RunCommandTool(root, CommandSettings(max_timeout_seconds=MAX))
    result = await tool.run(arguments, ToolContext("s", "t", root))
    assert result.is_error, result.content
    assert not (root / "ran").exists() and not (root.parent / "ran").exists()
