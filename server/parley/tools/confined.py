"""Opening a workspace file so that nothing on disk can lead the open outside the workspace.

A path is walked from a descriptor of the workspace root one component at a time, each
opened with `O_NOFOLLOW` relative to the directory before it, so no step follows a symlink
the kernel finds there. A symlink met on the way is read and resolved here: its target is
spliced into the remaining components and the walk goes on (`..` goes back to the directory
actually walked through); a target outside the root is refused. A symlink swapped in after
it was read is met again by the next `O_NOFOLLOW` open, never followed.

The final file is opened with `O_NONBLOCK` (a FIFO cannot block the open) and checked with
`fstat` on the descriptor itself, after opening: only regular files are answered, and a
file with another hard link is refused, because the other name may be outside the workspace
and nothing tells where. Names that are not UTF-8 are `str` with surrogate escapes, as `os`
gives them; `printable_name` shows them as `\\xff`, and a component written that way is
found again.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import posixpath
import re
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

# As Linux's own limit for one path lookup.
MAX_SYMLINKS = 40
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_ESCAPED_BYTE = re.compile(rb"\\x([0-9a-fA-F]{2})")


class Refused(ValueError):
    """A path the file tools will not open; `str()` is a sentence for the model."""


class OutsideWorkspace(Refused):
    """A path that leads outside the workspace root."""


def printable_name(name: str) -> str:
    """A file name as text that is safe in JSON: bytes that are not UTF-8 (surrogate
    escapes from `os`) shown as `\\xff`."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file system gave: show its code point
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _unescaped(component: str) -> str | None:
    """The name `printable_name` showed as `component`, when it has a `\\xHH` escape."""
    if "\\x" not in component:
        return None
    try:
        raw = component.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
    unescaped = _ESCAPED_BYTE.sub(lambda match: bytes([int(match[1], 16)]), raw)
    return unescaped.decode("utf-8", "surrogateescape")


def _outside(root: Path, path: str) -> OutsideWorkspace:
    return OutsideWorkspace(
        f"{printable_name(path)!r} is outside the workspace ({printable_name(str(root))}); "
        "only paths inside it can be used."
    )


def _components(root: Path, path: str, asked: str) -> list[str]:
    """`path` (relative to the root, or absolute inside it) as components below the root.
    `..` stays, for the walk to apply to the directories it really walked through."""
    if os.path.isabs(path):
        relative = os.path.relpath(posixpath.normpath(path), root)
        if relative == ".." or relative.startswith("../"):
            raise _outside(root, asked)
        path = relative
    return [part for part in path.split("/") if part not in ("", ".")]


class _Walk:
    """The walk of one path from the root: a descriptor per directory walked through (all
    closed by `close`), and the components still to walk."""

    def __init__(self, root: Path, path: str) -> None:
        self.root = root
        self.path = path  # as the model wrote it, for messages
        self.pending = _components(root, os.path.expanduser(path), path)
        self.names: list[str] = []
        self.fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
        self.symlinks = 0

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def up(self) -> None:
        if not self.names:
            raise _outside(self.root, self.path)
        self.names.pop()
        os.close(self.fds.pop())

    def follow(self, name: str) -> bool:
        """When `name` in the current directory is a symlink, put its target in front of the
        pending components (from the root again for an absolute target) and answer True."""
        try:
            target = os.readlink(name, dir_fd=self.fds[-1])
        except OSError:
            return False
        self.symlinks += 1
        if self.symlinks > MAX_SYMLINKS:
            raise Refused(
                f"{printable_name(self.path)!r} goes through too many symbolic links "
                "(or one is being changed while it is read)."
            )
        if os.path.isabs(target):
            parts = _components(self.root, target, self.path)  # refused when it is elsewhere
            while self.names:
                self.up()
        else:
            parts = [part for part in target.split("/") if part not in ("", ".")]
        self.pending = parts + self.pending
        return True

    def open_at(self, name: str, flags: int) -> int:
        """`name` opened in the current directory; a `\\xHH`-escaped name is tried as the
        bytes it stands for when the name as written does not exist."""
        try:
            return os.open(name, flags, dir_fd=self.fds[-1])
        except FileNotFoundError:
            unescaped = _unescaped(name)
            if unescaped is None:
                raise
            return os.open(unescaped, flags, dir_fd=self.fds[-1])

    def to_last(self, create: bool = False) -> str | None:
        """Walk every directory of the path but the last component, and take that from
        the pending ones (None: the path ends at the directory reached). With `create`, a
        directory that does not exist is made (in the directory walked through)."""
        while self.pending:
            name = self.pending.pop(0)
            if name == "..":
                self.up()
                continue
            if not self.pending:
                return name
            try:
                fd = self.open_at(name, _DIRECTORY_FLAGS)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o777, dir_fd=self.fds[-1])  # exists already: raises, no follow
                fd = self.open_at(name, _DIRECTORY_FLAGS)
            except OSError as exc:
                # O_NOFOLLOW met a symlink: ELOOP, or ENOTDIR along with O_DIRECTORY.
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not self.follow(name):
                    raise
                continue
            self.fds.append(fd)
            self.names.append(name)
        return None

    def relative(self, name: str | None = None) -> str:
        return "/".join([*self.names, name] if name else self.names) or "."


def _open_final(walk: _Walk, flags: int) -> tuple[int, str]:
    """The path's final component opened with `flags`, symlinks resolved on the way;
    its descriptor and where it really is, relative to the root."""
    while True:
        name = walk.to_last()
        if name is None:
            return os.dup(walk.fds[-1]), walk.relative()
        try:
            return walk.open_at(name, flags), walk.relative(name)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not walk.follow(name):
                raise


def open_confined(root: Path, path: str) -> BinaryIO:
    """The regular file at `path` in the workspace `root` (resolved), open for binary
    reading. Its `name` is where it really is, relative to the root with `/`.

    Raises `OutsideWorkspace` or `Refused` (with a sentence for the model),
    `FileNotFoundError`, `IsADirectoryError`, `NotADirectoryError`, or another `OSError`.
    """
    walk = _Walk(root, path)
    try:
        fd, relative = _open_final(walk, _FILE_FLAGS)
    finally:
        walk.close()
    return _regular_file(fd, relative)


def open_regular_at(directory_fd: int | None, name: str) -> BinaryIO:
    """The regular file `name` in an already opened directory (or a path, for None), checked
    as `open_confined` checks it; `name` itself is not followed when it is a symlink."""
    fd = os.open(name, _FILE_FLAGS, dir_fd=directory_fd)
    return _regular_file(fd, name)


def _regular_file(fd: int, relative: str) -> BinaryIO:
    """The file object for `fd` once `fstat` shows a regular file with one name; checked on
    the descriptor itself, so nothing can be swapped in after the check."""
    try:
        _check_regular(os.fstat(fd), printable_name(relative))
        os.set_blocking(fd, True)
        raw = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    raw.name = relative  # type: ignore[misc]  # FileIO's name is the descriptor otherwise
    return io.BufferedReader(raw)


def _check_regular(status: os.stat_result, shown: str) -> None:
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", shown)
    if not stat.S_ISREG(mode):
        if stat.S_ISFIFO(mode):
            kind = "a FIFO (named pipe)"
        elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            kind = "a device"
        elif stat.S_ISSOCK(mode):
            kind = "a socket"
        else:
            kind = "not a regular file"
        raise Refused(f"{shown} is {kind}; only regular files can be read.")
    if status.st_nlink > 1:
        raise Refused(
            f"{shown} has {status.st_nlink} hard links; a file with another name elsewhere "
            "cannot be shown to be inside the workspace, so it is not read."
        )


def open_confined_directory(root: Path, path: str) -> tuple[int, str]:
    """A descriptor of the directory at `path` in the workspace `root` (the caller closes
    it), and where it really is, relative to the root. Raises as `open_confined` does, and
    `NotADirectoryError`."""
    walk = _Walk(root, path)
    try:
        return _open_final(walk, _DIRECTORY_FLAGS)
    finally:
        walk.close()


def resolve_confined(root: Path, path: str) -> str:
    """Where `path` leads inside the workspace, relative to the root (to show a symlink's
    target; only directories are opened). Raises `OutsideWorkspace` or `Refused`."""
    walk = _Walk(root, path)
    try:
        while True:
            name = walk.to_last()
            if name is None:
                return walk.relative()
            if not walk.follow(name):
                return walk.relative(name)
    finally:
        walk.close()


def open_confined_parent(root: Path, path: str, *, create: bool = False) -> tuple[int, str, str]:
    """The directory in the workspace `root` where the file at `path` is or would be, for
    writing it: a descriptor of that directory (the caller closes it), the file's name in
    it, and where the file really is, relative to the root. Symlinks are resolved as
    `open_confined` resolves them, the file's own name too (a symlink to a file inside the
    workspace is written through; one leading out is refused). With `create`, missing
    directories on the way are made, each inside the one walked through.

    Raises `OutsideWorkspace` or `Refused`, `FileNotFoundError` (a missing directory without
    `create`), `IsADirectoryError` (the path is a directory), `NotADirectoryError`, or another
    `OSError`; the file itself need not exist.
    """
    walk = _Walk(root, path)
    try:
        while True:
            name = walk.to_last(create)
            if name is None:
                raise IsADirectoryError(errno.EISDIR, "Is a directory", walk.relative())
            name, status = _status_at(walk.fds[-1], name)
            if status is None:
                break  # a new file
            if stat.S_ISLNK(status.st_mode):
                walk.follow(name)
                continue
            if stat.S_ISDIR(status.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", walk.relative(name))
            break
        return os.dup(walk.fds[-1]), name, walk.relative(name)
    finally:
        walk.close()


def _status_at(directory_fd: int, name: str) -> tuple[str, os.stat_result | None]:
    """`name` in the directory (the bytes a `\\xHH`-escaped name stands for, when only that
    exists) and its own status, not followed; None when there is no such entry."""
    for candidate in (name, _unescaped(name)):
        if candidate is None:
            continue
        try:
            return candidate, os.stat(candidate, dir_fd=directory_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
    return name, None


def replace_at(directory_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """`data` as the whole content of `name` in the open directory, atomically: written to a
    temporary file beside it (never through a symlink), synced, then renamed over it, so a
    reader sees the old file or the new one, never part of one. The file gets `mode`, or a
    new file's default permissions (0o666 less the umask) when `mode` is None."""
    temporary = f".{name}.parley-{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o666 if mode is None else 0o600, dir_fd=directory_fd)
    try:
        with os.fdopen(fd, "wb") as file:
            if mode is not None:
                os.fchmod(file.fileno(), mode)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory_fd)
        raise
