"""The gate with several roots (`confined.Roots`: the cwd's root and the client's
`additionalDirectories`), in-process: a path is opened only where its real location — where
the kernel itself would find it — is inside some root, and then it is that very file; never
anything else. Relative paths start at the cwd's root.

The tree: three sibling roots and one nested in the first, a canary outside them all (beside
the roots, and beside a root one level deeper), and symlinks between roots, out of them,
into a root's parent directory and back, absolute and relative, and up. Each example takes
up to three of the roots (any of them the cwd's) and a generated path (absolute or relative,
with `..`, the symlinks' names, the roots' names) and opens it every way the gate can. The
over-the-wire tests are in tests/protocol/test_additional_directories.py;
tests/trust/test_path_gate.py holds the single root's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.tools.confined import (
    OutsideWorkspace,
    Refused,
    Roots,
    Want,
    open_in_workspace,
    workspace_roots,
)
from parley.tools.workspace import files_in_roots

CANARY = "CANARY-OUTSIDE-EVERY-ROOT"
EXAMPLES = int(os.environ.get("GATE_EXAMPLES", "2000")) // 4
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
# Where each candidate root is, relative to the tree's base.
CANDIDATES = ("r1", "r2", "deep/r3", "r1/inner")


class RootsTree:
    """base/{r1, r1/inner, r2, deep/r3} (the candidate roots), base/outside and
    base/deep/sibling (canaries), and symlinks every way between them."""

    def __init__(self, base: Path) -> None:
        self.base = Path(os.path.realpath(base))
        files = {
            "r1/a.txt": "in r1\n",
            "r1/inner/i.txt": "in inner\n",
            "r2/c.txt": "in r2\n",
            "r2/sub/e.txt": "in r2 sub\n",
            "deep/r3/g.txt": "in r3\n",
            "outside/s.txt": CANARY,
            "deep/sibling/x.txt": CANARY,
            "deep/beside.txt": CANARY,
        }
        for relative, text in files.items():
            (self.base / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.base / relative).write_text(text)
        base = self.base
        links = {
            "r1/to_r2": "../r2",
            "r1/to_r2_file": f"{base}/r2/c.txt",
            "r1/to_r3": "../deep/r3",
            "r1/out": "../outside",
            "r1/out_abs": f"{base}/outside/s.txt",
            "r1/through_r2_out": "../r2/../outside/s.txt",
            "r1/up": "..",
            "r1/inner/up2": "../..",
            "r1/inner/to_a": "../a.txt",
            "r2/back": "../r1/a.txt",
            "r2/out": "../outside",
            "r2/escape": "sub/../../outside/s.txt",
            "r2/sub/to_r3": "../../deep/r3/g.txt",
            "deep/r3/to_r1": "../../r1/a.txt",
            "deep/r3/sibling": "../sibling/x.txt",
            "deep/r3/beside": "../beside.txt",
            "deep/r3/abs_base": str(base),
        }
        for name, target in links.items():
            (self.base / name).symlink_to(target)

    def roots(self, chosen: list[str]) -> Roots:
        first, *others = chosen
        return workspace_roots(self.base / first, [self.base / name for name in others])


NAMES = [
    *("..", ".", "", "...", "~"),
    *("a.txt", "c.txt", "e.txt", "g.txt", "i.txt", "s.txt", "x.txt", "beside.txt"),
    *("r1", "r2", "r3", "deep", "inner", "sub", "outside", "sibling", "missing"),
    *("to_r2", "to_r2_file", "to_r3", "out", "out_abs", "through_r2_out", "up", "up2"),
    *("to_a", "back", "escape", "beside", "abs_base", "to_r1"),
]


@st.composite
def roots_and_paths(draw: st.DrawFn, tree: RootsTree) -> tuple[list[str], str]:
    chosen = draw(st.lists(st.sampled_from(CANDIDATES), min_size=1, max_size=3, unique=True))
    base = str(tree.base)
    prefix = draw(
        st.sampled_from(
            ["", "", "", "/", f"{base}/", f"{base}/deep/", f"{base}/r1/../", "../", "../../"]
            + [f"{base}/{name}/" for name in CANDIDATES]
        )
    )
    parts = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6))
    return chosen, prefix + "/".join(parts) + draw(st.sampled_from(["", "", "/"]))


@pytest.fixture(scope="module")
def tree() -> Iterator[RootsTree]:
    base = Path(tempfile.mkdtemp(prefix="parley-roots-"))
    yield RootsTree(base)
    shutil.rmtree(base, ignore_errors=True)


def inside(roots: Roots, place: str) -> bool:
    return any(place == str(root) or place.startswith(f"{root}/") for root in roots.all)


def where_the_kernel_finds(roots: Roots, path: str) -> str:
    """The path's real location as the kernel resolves it (from the cwd's root)."""
    return os.path.realpath(os.path.join(roots.cwd, os.path.expanduser(path)))


def opened_place(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def test_a_path_is_opened_only_where_it_really_is_inside_a_root(tree: RootsTree) -> None:
    @PROPERTY
    @given(roots_and_paths(tree))
    def check(case: tuple[list[str], str]) -> None:
        roots = tree.roots(case[0])
        path = case[1]
        real = where_the_kernel_finds(roots, path)
        for want in (Want.FILE, Want.DIRECTORY, Want.WHERE, Want.PARENT, Want.ENTRY):
            try:
                opened = open_in_workspace(roots, path, want)
            except OutsideWorkspace:
                continue  # refused: the only answer for a path that is outside
            except (Refused, OSError):
                continue  # missing, a file for a directory, a loop ...
            # Where the gate says the path leads (relative to the cwd's root, or absolute).
            answered = os.path.normpath(roots.cwd / opened.relative)
            assert inside(roots, answered), (path, want, answered)
            if opened.fd is None:  # WHERE: nothing opened
                continue
            try:
                place = opened_place(opened.fd)
                assert inside(roots, place), (path, want, place)
                if want in (Want.FILE, Want.DIRECTORY):
                    # The very file the kernel would open, found where the gate says.
                    assert place == real == answered, (path, want, place, real)
                    if want is Want.FILE:
                        assert os.pread(opened.fd, 200, 0) != CANARY.encode()
                else:  # the directory holding the path's last entry
                    assert place == os.path.dirname(answered), (path, want, place)
                if want is Want.ENTRY:  # a restore's: no link followed, the path as written
                    written = os.path.join(roots.cwd, os.path.expanduser(path))
                    assert place == os.path.dirname(os.path.normpath(written)), (path, place)
            finally:
                os.close(opened.fd)

    check()


def test_a_path_that_really_is_inside_a_root_is_opened(tree: RootsTree) -> None:
    """The other way round, for the files themselves: a path whose real location is a
    regular file inside a root, reached without passing through a directory outside every
    root, opens that file (a file in another root by its absolute path, through `..` from
    the cwd, through a symlink from one root into another)."""
    roots = tree.roots(["r1", "r2", "deep/r3"])
    base = tree.base
    for path, text in [
        ("a.txt", "in r1\n"),
        (f"{base}/r2/c.txt", "in r2\n"),
        ("../r2/sub/e.txt", "in r2 sub\n"),
        ("to_r2/sub/e.txt", "in r2 sub\n"),
        ("to_r2_file", "in r2\n"),
        ("to_r3/to_r1", "in r1\n"),
        (f"{base}/deep/r3/to_r1", "in r1\n"),
        ("up/r2/back", "in r1\n"),
        (f"{base}/r2/sub/to_r3", "in r3\n"),
        ("../deep/r3/g.txt", "in r3\n"),
        ("inner/to_a", "in r1\n"),
    ]:
        opened = open_in_workspace(roots, path, Want.FILE)
        assert opened.fd is not None
        try:
            assert os.pread(opened.fd, 100, 0).decode() == text, path
        finally:
            os.close(opened.fd)
    assert open_in_workspace(roots, "../r2/c.txt", Want.WHERE).relative == f"{base}/r2/c.txt"
    assert open_in_workspace(roots, f"{base}/r1/a.txt", Want.WHERE).relative == "a.txt"


def test_a_restores_walk_follows_no_link_on_the_way(tree: RootsTree) -> None:
    """`Want.ENTRY` (a restore's) refuses every path with a link on its way, even one
    between roots the other walks follow, and opens the holder of a link at its end (a
    restore replaces it); paths without links open as written."""
    roots = tree.roots(["r1", "r2", "deep/r3"])
    base = tree.base
    for path in ("to_r2/sub/e.txt", "to_r2/c.txt", "to_r3/to_r1", "up/r2/back", "to_r3/x"):
        with pytest.raises(Refused, match="is a symbolic link now"):
            open_in_workspace(roots, path, Want.ENTRY)
        with pytest.raises(Refused, match="is a symbolic link now"):
            open_in_workspace(roots, path, Want.ENTRY, create=True)
    for path, holder in [
        ("to_r2", base / "r1"),
        ("inner/to_a", base / "r1" / "inner"),
        (f"{base}/r2/sub/e.txt", base / "r2" / "sub"),
        ("../r2/sub/to_r3", base / "r2" / "sub"),
    ]:
        opened = open_in_workspace(roots, path, Want.ENTRY)
        assert opened.fd is not None
        try:
            assert opened_place(opened.fd) == str(holder), path
        finally:
            os.close(opened.fd)


@pytest.mark.parametrize(
    "path",
    [
        "out/s.txt",
        "out_abs",
        "through_r2_out",
        "../outside/s.txt",
        "../outside/../r2/c.txt",  # comes back, but passed outside every root
        "to_r2/escape",
        "to_r2/out/s.txt",
        "to_r3/sibling",
        "to_r3/beside",
        "to_r3/abs_base/outside/s.txt",
        "/etc/hostname",
        "../../../../../../etc/hostname",
    ],
)
def test_a_path_that_leaves_every_root_is_refused_as_outside(tree: RootsTree, path: str) -> None:
    roots = tree.roots(["r1", "r2", "deep/r3"])
    for want in (Want.FILE, Want.WHERE, Want.PARENT):
        with pytest.raises(OutsideWorkspace) as refused:
            open_in_workspace(roots, path, want)
        assert "outside the workspace's roots" in str(refused.value)


def test_the_listing_covers_every_root_once(tree: RootsTree) -> None:
    roots = tree.roots(["r1", "r2", "r1/inner"])
    listed = files_in_roots(roots)
    assert listed[:2] == ["a.txt", "inner/i.txt"]  # the cwd's, relative; `inner` once
    assert set(listed[2:]) == {f"{tree.base}/r2/c.txt", f"{tree.base}/r2/sub/e.txt"}
    assert not any("s.txt" in name or "x.txt" in name for name in listed)


def test_a_root_inside_another_swapped_for_a_symlink_is_not_followed(tmp_path: Path) -> None:
    """The outer root is writable (by an approved eval, say): a symlink put in the place of
    a root inside it, leading out, is never followed — by a path from the outer root, by the
    inner root's own path, nor by a relative path when the inner root is the cwd's."""
    outer, outside = tmp_path / "outer", tmp_path / "outside"
    (outer / "inner").mkdir(parents=True)
    (outer / "inner" / "f.txt").write_text("inside\n")
    outside.mkdir()
    (outside / "f.txt").write_text(CANARY)
    for chosen in (["outer/inner", "outer"], ["outer", "outer/inner"]):
        roots = workspace_roots(tmp_path / chosen[0], [tmp_path / chosen[1]])
        (outer / "inner").rename(outer / "away")
        (outer / "inner").symlink_to(outside)
        try:
            for path in ("f.txt", f"{outer}/inner/f.txt", "inner/f.txt", f"{outer}/inner"):
                for want in (Want.FILE, Want.DIRECTORY, Want.PARENT, Want.WHERE):
                    try:
                        opened = open_in_workspace(roots, path, want)
                    except (Refused, OSError):
                        continue
                    assert opened.fd is None or not opened_place(opened.fd).startswith(
                        str(outside)
                    ), (chosen, path, want)
                    if opened.fd is not None:
                        os.close(opened.fd)
        finally:
            (outer / "inner").unlink()
            (outer / "away").rename(outer / "inner")
