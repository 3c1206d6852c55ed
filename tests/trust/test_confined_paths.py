"""The workspace gate's rules as a file tool's caller sees them (tools/confined.py),
in-process on a real directory tree: what opens, where it really is, and the sentence a
refusal gives the model. The hostile property tests are in test_path_gate.py; these name each
rule once and run against every mutant of confined.py (scripts/mutation)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parley.tools.confined import (
    MAX_SYMLINKS,
    OutsideWorkspace,
    Refused,
    open_confined,
    open_confined_directory,
    open_confined_parent,
    open_regular_at,
    printable_name,
    replace_at,
    resolve_confined,
    workspace_root,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "a.txt").write_bytes(b"inside a\n")
    (tmp_path / "secret.txt").write_bytes(b"SECRET\n")
    return workspace_root(workspace)


def read(root: Path, path: str) -> tuple[bytes, str]:
    with open_confined(root, path) as file:
        return file.read(), file.name  # type: ignore[return-value]


def test_a_file_is_read_by_a_relative_or_an_absolute_path_inside(root: Path) -> None:
    assert read(root, "src/a.txt") == (b"inside a\n", "src/a.txt")
    assert read(root, str(root / "src" / "a.txt")) == (b"inside a\n", "src/a.txt")
    assert read(root, "./src//../src/a.txt") == (b"inside a\n", "src/a.txt")


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "..", "~/x"])
def test_a_path_above_the_root_is_refused_with_a_sentence(root: Path, path: str) -> None:
    with pytest.raises(OutsideWorkspace) as refused:
        read(root, path)
    assert str(refused.value) == (
        f"{path!r} is outside the workspace ({root}); only paths inside it can be used."
    )


def test_an_absolute_path_elsewhere_is_refused(root: Path) -> None:
    with pytest.raises(OutsideWorkspace):
        read(root, str(root.parent / "secret.txt"))
    with pytest.raises(OutsideWorkspace):
        read(root, str(root) + "-sibling/a.txt")  # a prefix of the root's name is not in it


def test_a_symlink_is_followed_inside_and_shows_where_the_file_really_is(root: Path) -> None:
    (root / "link").symlink_to("src/a.txt")
    (root / "abs").symlink_to(root / "src")
    (root / "src" / "up").symlink_to("../src/a.txt")
    assert read(root, "link") == (b"inside a\n", "src/a.txt")
    assert read(root, "abs/a.txt") == (b"inside a\n", "src/a.txt")
    assert read(root, "src/up") == (b"inside a\n", "src/a.txt")
    assert resolve_confined(root, "link") == "src/a.txt"
    assert resolve_confined(root, "abs/new/dirs/b.txt") == "src/new/dirs/b.txt"


def test_a_symlink_out_of_the_workspace_is_refused(root: Path) -> None:
    (root / "out").symlink_to(root.parent / "secret.txt")
    (root / "rel").symlink_to("../secret.txt")
    for path in ("out", "rel"):
        with pytest.raises(OutsideWorkspace):
            read(root, path)
    with pytest.raises(OutsideWorkspace):
        open_confined_parent(root, "out")


def test_a_chain_of_symlinks_up_to_the_kernels_limit_is_followed_one_more_is_not(
    root: Path,
) -> None:
    (root / "l0").symlink_to("src/a.txt")
    for n in range(1, MAX_SYMLINKS + 1):
        (root / f"l{n}").symlink_to(f"l{n - 1}")
    assert read(root, f"l{MAX_SYMLINKS - 1}") == (b"inside a\n", "src/a.txt")
    with pytest.raises(Refused) as refused:
        read(root, f"l{MAX_SYMLINKS}")
    assert str(refused.value) == (
        f"'l{MAX_SYMLINKS}' goes through too many symbolic links "
        "(or one is being changed while it is read)."
    )
    (root / "loop").symlink_to("loop")
    with pytest.raises(Refused):
        resolve_confined(root, "loop/x")


def test_only_regular_files_with_one_name_are_read(root: Path) -> None:
    os.mkfifo(root / "fifo")
    os.link(root / "src" / "a.txt", root / "hard")
    expected = {
        "fifo": "fifo is a FIFO (named pipe); only regular files can be read.",
        "hard": "hard has 2 hard links; a file with another name elsewhere cannot be "
        "shown to be inside the workspace, so it is not read.",
    }
    for name, sentence in expected.items():
        with pytest.raises(Refused) as refused:
            read(root, name)
        assert str(refused.value) == sentence
    with pytest.raises(IsADirectoryError):
        read(root, "src")
    with pytest.raises(Refused, match="is a device"):
        open_regular_at(None, "/dev/null")


def test_a_missing_file_or_directory_is_not_found(root: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read(root, "src/missing.txt")
    with pytest.raises(FileNotFoundError):
        read(root, "missing/a.txt")
    with pytest.raises(NotADirectoryError):
        read(root, "src/a.txt/b")
    assert resolve_confined(root, "missing/deeper/b.txt") == "missing/deeper/b.txt"
    assert resolve_confined(root, "missing/../src/a.txt") == "src/a.txt"
    assert resolve_confined(root, ".") == "."


def test_a_nul_in_a_path_is_refused(root: Path) -> None:
    with pytest.raises(Refused) as refused:
        read(root, "src/a\0.txt")
    assert str(refused.value) == "'src/a\\x00.txt' has a NUL character; no file is named so."


def test_a_directory_opens_as_itself_and_the_root_as_dot(root: Path) -> None:
    fd, relative = open_confined_directory(root, "src/")
    try:
        assert relative == "src" and stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    fd, relative = open_confined_directory(root, "")
    os.close(fd)
    assert relative == "."


def test_a_write_makes_its_directories_inside_and_nothing_when_refused(root: Path) -> None:
    fd, name, relative = open_confined_parent(root, "new/deeper/b.txt", create=True)
    try:
        replace_at(fd, name, b"made", None)
    finally:
        os.close(fd)
    assert (root / "new" / "deeper" / "b.txt").read_bytes() == b"made"
    assert relative == "new/deeper/b.txt"
    with pytest.raises(OutsideWorkspace):
        open_confined_parent(root, "made/../../escape/b.txt", create=True)
    assert not (root / "made").exists() and not (root.parent / "escape").exists()
    with pytest.raises(IsADirectoryError):
        open_confined_parent(root, "src")
    with pytest.raises(FileNotFoundError):
        open_confined_parent(root, "missing/b.txt")


def test_a_replaced_file_gets_the_mode_asked_for_or_a_new_files_default(root: Path) -> None:
    fd, name, _ = open_confined_parent(root, "src/a.txt")
    umask = os.umask(0o022)
    try:
        replace_at(fd, name, b"one", 0o640)
        assert stat.S_IMODE((root / "src" / "a.txt").stat().st_mode) == 0o640
        replace_at(fd, "new.txt", b"two", None)
        assert stat.S_IMODE((root / "src" / "new.txt").stat().st_mode) == 0o644
    finally:
        os.umask(umask)
        os.close(fd)
    assert (root / "src" / "a.txt").read_bytes() == b"one"
    assert sorted(os.listdir(root / "src")) == ["a.txt", "new.txt"]  # no temporary file left


def test_a_failed_replace_leaves_the_file_and_no_temporary_file(root: Path) -> None:
    (root / "src" / "dir").mkdir()
    fd, _, _ = open_confined_parent(root, "src/a.txt")
    try:
        with pytest.raises(IsADirectoryError):
            replace_at(fd, "dir", b"x", None)  # renaming a file over a directory fails
    finally:
        os.close(fd)
    assert sorted(os.listdir(root / "src")) == ["a.txt", "dir"]


def test_a_name_that_is_not_utf8_is_shown_escaped_and_found_again(root: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (root / name).write_bytes(b"latin-1")
    assert printable_name(name) == "caf\\xe9.txt"
    assert read(root, "caf\\xe9.txt") == (b"latin-1", name)
    assert printable_name("\ud800") == "\\ud800"  # a surrogate no file system gave
    for escaped in ("\\x2e\\x2e/secret.txt", "src\\x2fa.txt", "\\x41"):
        with pytest.raises((Refused, FileNotFoundError)):
            read(root, escaped)


def test_reading_files_leaves_no_descriptor_open(root: Path) -> None:
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    read(root, "src/a.txt")
    before = open_descriptors()
    for _ in range(20):
        assert read(root, "src/a.txt") == (b"inside a\n", "src/a.txt")
    assert open_descriptors() == before


def swap_after_look(monkeypatch: pytest.MonkeyPatch, name: str, swap: Callable[[], None]) -> None:
    """Make the entry `name` change right after the gate looked at it (its `stat`), before
    it is opened or read: the race a symlink swapped in or out makes."""
    real_stat = os.stat
    swapped = False

    def stat_then_swap(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        nonlocal swapped
        status = real_stat(path, *args, **kwargs)
        if path == name and kwargs.get("dir_fd") is not None and not swapped:
            swapped = True
            swap()
        return status

    monkeypatch.setattr(os, "stat", stat_then_swap)


def test_a_symlink_swapped_for_a_directory_while_walked_is_walked_as_the_directory(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d").symlink_to("src")

    def to_directory() -> None:
        (root / "d").unlink()
        (root / "d").mkdir()
        (root / "d" / "a.txt").write_bytes(b"in d\n")

    swap_after_look(monkeypatch, "d", to_directory)
    assert read(root, "d/a.txt") == (b"in d\n", "d/a.txt")


def test_a_directory_swapped_for_a_symlink_while_walked_is_followed_inside(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d").mkdir()
    (root / "d" / "a.txt").write_bytes(b"in d\n")

    def to_symlink() -> None:
        (root / "d" / "a.txt").unlink()
        (root / "d").rmdir()
        (root / "d").symlink_to("src")

    swap_after_look(monkeypatch, "d", to_symlink)
    assert read(root, "d/a.txt") == (b"inside a\n", "src/a.txt")


def test_a_directory_swapped_for_a_symlink_out_while_walked_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d").mkdir()

    def to_symlink_out() -> None:
        (root / "d").rmdir()
        (root / "d").symlink_to(root.parent)

    swap_after_look(monkeypatch, "d", to_symlink_out)
    with pytest.raises(OutsideWorkspace):
        read(root, "d/secret.txt")


def test_a_file_swapped_for_a_symlink_while_opened_is_followed_inside(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "f").write_bytes(b"f itself\n")

    def to_symlink() -> None:
        (root / "f").unlink()
        (root / "f").symlink_to("src/a.txt")

    swap_after_look(monkeypatch, "f", to_symlink)
    assert read(root, "f") == (b"inside a\n", "src/a.txt")


def test_a_file_opened_as_a_directory_is_not_a_directory(root: Path) -> None:
    with pytest.raises(NotADirectoryError):
        open_confined_directory(root, "src/a.txt")


def test_the_directories_a_write_makes_get_the_default_permissions(root: Path) -> None:
    umask = os.umask(0o022)
    try:
        fd, _, _ = open_confined_parent(root, "made/deeper/b.txt", create=True)
        os.close(fd)
    finally:
        os.umask(umask)
    for made in (root / "made", root / "made" / "deeper"):
        assert stat.S_IMODE(made.stat().st_mode) == 0o755
