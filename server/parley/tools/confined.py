"""The gate: the one way a path that a model, a client or a restore names becomes an
opened file or directory inside the workspace, or a refusal (`open_in_workspace`; the
`open_confined*` functions below are its common uses).

The workspace is one root or several (`Roots`: the session's cwd, then the client's
`additionalDirectories`), resolved once, when a session starts (`workspace_roots`), and every
tool and checkpoint of the session is given those same roots. A relative path starts at the
cwd's root. A path is walked from a descriptor of a root one component at a time, each
opened with `O_NOFOLLOW` relative to the directory before it, so no step follows a symlink
the kernel finds there. A symlink met on the way is read and resolved here: its target is
spliced into the remaining components and the walk goes on (`..` goes back to the directory
actually walked through). Outside every root the walk takes only the directories that hold
a root (they were resolved with it: no symlink among them) until it enters a root again; any
other step there is refused, so nothing outside the roots is ever looked at. A symlink
swapped in after it was read is met again by the next `O_NOFOLLOW` open, never followed.

A file is opened with `O_NONBLOCK` (a FIFO cannot block the open) and checked with `fstat`
on the descriptor itself, after opening: only regular files are answered, and a file with
another hard link is refused, because the other name may be outside the workspace and
nothing tells where. Names that are not UTF-8 are `str` with surrogate escapes, as `os`
gives them; `printable_name` shows them as `\\xff`, and a component written that way is
found again, but only as the exact inverse of `printable_name`: `\\x2e\\x2e`, `\\x2f`,
`\\x00` or `\\x41` never stand for `..`, `/`, NUL or `A`.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import functools
import io
import os
import posixpath
import re
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import attrs

from parley import sandbox_policy

# As Linux's own limit for one path lookup.
MAX_SYMLINKS = 40
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_ESCAPED_BYTE = re.compile(rb"\\x([0-9a-fA-F]{2})")
_ESCAPE_TEXT = re.compile(r"\\x[0-9a-fA-F]{2}")
# The mode bits no file Parley writes gets (`file_mode`).
SET_ID_BITS = stat.S_ISUID | stat.S_ISGID


class Refused(ValueError):
    """A path the file tools will not open; `str()` is a sentence for the model."""


class OutsideWorkspace(Refused):
    """A path that leads outside the workspace root."""


class RootRefused(Refused):
    """A directory too broad to be a workspace root (`/`, one that holds the home)."""


def workspace_root(cwd: Path | str) -> Path:
    """The workspace root as the gate takes it: absolute, every symlink resolved. Resolved
    once per session, so its tools and its checkpoints name files the same way."""
    return Path(os.path.realpath(cwd))


def _ancestors(roots: tuple[Path, ...]) -> frozenset[str]:
    return frozenset(str(parent) for root in roots for parent in root.parents)


def _ways_in(roots: tuple[Path, ...]) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """How each root is opened: from the outermost root holding it (itself, for most), then
    down the components between them. A root inside another is never opened by its path:
    the outer root is writable, and a symlink put there in the inner one's place must not
    be followed."""
    ways = {}
    for root in roots:
        outer = min((r for r in roots if _within(str(root), str(r))), key=lambda r: len(str(r)))
        ways[str(root)] = (outer, tuple(_components(posixpath.relpath(root, outer))))
    return ways


@attrs.frozen
class Roots:
    """A session's workspace roots as the gate takes them (`workspace_roots`): each absolute,
    every symlink resolved. `cwd`'s is where relative paths start and what the gate's answers
    are relative to; `others` are the client's `additionalDirectories`."""

    cwd: Path
    others: tuple[Path, ...] = ()
    # The directories that hold a root (the only ones a walk may pass outside every root),
    # as text.
    holders: frozenset[str] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: _ancestors(self.all), takes_self=True),
    )
    ways_in: dict[str, tuple[Path, tuple[str, ...]]] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: _ways_in(self.all), takes_self=True),
    )

    @property
    def all(self) -> tuple[Path, ...]:
        return (self.cwd, *self.others)

    def holding(self, place: str) -> Path | None:
        """The deepest root that `place` (absolute, normal) is in, if any."""
        holders = [root for root in self.all if _within(place, str(root))]
        return max(holders, key=lambda root: len(str(root)), default=None)

    def shown(self, absolute: str) -> str:
        """A place inside a root as the gate answers it: relative to the cwd's root with `/`
        ("." for the root itself) when inside it, else absolute."""
        cwd = str(self.cwd)
        if absolute == cwd:
            return "."
        below = cwd.rstrip("/") + "/"
        return absolute[len(below) :] if absolute.startswith(below) else absolute

    def describe(self) -> str:
        return ", ".join(printable_name(str(root)) for root in self.all)


def _within(place: str, directory: str) -> bool:
    return place == directory or place.startswith(directory.rstrip("/") + "/")


def workspace_roots(cwd: Path | str, additional: Iterable[Path | str] = ()) -> Roots:
    """The session's roots as the gate takes them (`workspace_root` of each), resolved once:
    the cwd's first, then each additional directory not already among them."""
    first = workspace_root(cwd)
    others: list[Path] = []
    for directory in additional:
        root = workspace_root(directory)
        if root != first and root not in others:
            others.append(root)
    return Roots(first, tuple(others))


def refuse_too_broad(roots: Roots) -> None:
    """RootRefused for a root no session may have (`sandbox_policy.too_broad`: `/`, the
    home and what holds it, the system's directories, Parley's own places)."""
    for root in roots.all:
        if (why := sandbox_policy.too_broad(root)) is not None:
            raise RootRefused(
                f"{printable_name(str(root))} cannot be a workspace root: {why}. "
                "Open a project directory instead."
            )


def resolved_roots(workspace: Roots | Path) -> Roots:
    """The session's roots as given, or a single root resolved (`workspace_root`)."""
    return workspace if isinstance(workspace, Roots) else workspace_roots(workspace)


def as_roots(workspace: Roots | Path) -> Roots:
    """`workspace` as `Roots`: a single root (resolved, as `workspace_root` gives it) is the
    cwd's."""
    return workspace if isinstance(workspace, Roots) else _single_root(Path(workspace))


@functools.lru_cache(maxsize=64)
def _single_root(root: Path) -> Roots:
    return Roots(root)


def printable_name(name: str) -> str:
    """A file name as text that is safe in JSON: bytes that are not UTF-8 (surrogate
    escapes from `os`) shown as `\\xff`."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file system gave: show its code point
        raw = name.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _unescaped(component: str) -> str | None:
    """The one ordinary name that `printable_name` shows as `component`, when it has a
    `\\xHH` escape; None when there is none. Only bytes that are not UTF-8 are shown
    escaped, so the decoding is kept only when showing it gives `component` back: escapes
    of `/`, NUL, `.` or any other character that shows as itself never decode."""
    if "\\x" not in component:
        return None
    try:
        raw = component.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
    unescaped = _ESCAPED_BYTE.sub(lambda match: bytes([int(match[1], 16)]), raw)
    name = unescaped.decode("utf-8", "surrogateescape")
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        return None
    return name if printable_name(name) == component else None


def _outside(roots: Roots, path: str) -> OutsideWorkspace:
    if not roots.others:
        return OutsideWorkspace(
            f"{printable_name(path)!r} is outside the workspace ({roots.describe()}); "
            "only paths inside it can be used."
        )
    return OutsideWorkspace(
        f"{printable_name(path)!r} is outside the workspace's roots ({roots.describe()}); "
        "only paths inside one of them can be used."
    )


def _components(path: str) -> list[str]:
    """`path` as its components; `..` stays, for the walk to apply to the directories it
    really walked through."""
    return [part for part in path.split("/") if part not in ("", ".")]


class Want(enum.Enum):
    """What the gate opens at the end of a path."""

    FILE = "a regular file with one name, open for reading"
    DIRECTORY = "a directory"
    # The directory that holds the path's last entry (to write it), the entry's own symlink
    # followed (a symlink to a file inside is written through; one leading out is refused).
    PARENT = "the directory holding the file"
    # A restore's: the directory holding the last entry, no symlink followed on the way nor
    # at the end (a restore puts back what the roots held at that very path: a symlink met
    # is something that changed since, and writing through it could write anywhere the
    # link leads, `.git` among them; at the end, it is replaced).
    ENTRY = "the directory holding the entry"
    # Nothing opened: where the path leads (to show it); a missing directory on the way is
    # fine, the rest of the path then taken as written.
    WHERE = "where the path leads"


@attrs.frozen
class Opened:
    """What the gate answers: a descriptor the caller closes (None for `Want.WHERE`), where
    the path really is (`Roots.shown`: relative to the cwd's root with `/`, or absolute in
    another root; names as `os` gives them), the last entry's name in the directory `fd`
    (PARENT, ENTRY) and its own status (None: missing)."""

    fd: int | None
    relative: str
    name: str | None = None
    status: os.stat_result | None = None


def open_in_workspace(root: Roots | Path, path: str, want: Want, *, create: bool = False) -> Opened:
    """The gate: what `path` names in the workspace's roots (`Roots`, or a single root as
    `workspace_root` gives it), opened as `want` says, or a refusal. With `create` (PARENT,
    ENTRY), missing directories on the way are made, each inside the one walked through.

    Raises `OutsideWorkspace` or `Refused` (a sentence for the model), `FileNotFoundError`,
    `IsADirectoryError`, `NotADirectoryError`, or another `OSError`.
    """
    roots = as_roots(root)
    if create:  # refused before anything is made: the whole path is looked at first
        looked_at = _Walk(roots, path, links=want is not Want.ENTRY)
        try:
            _where(looked_at, follow=want is not Want.ENTRY)
        finally:
            looked_at.close()
    walk = _Walk(roots, path, links=want is not Want.ENTRY)
    try:
        if want is Want.FILE:
            fd, relative = _open_last(walk, _FILE_FLAGS)
            opened = Opened(_checked_regular(fd, relative), relative)
        elif want is Want.DIRECTORY:
            opened = Opened(*_open_last(walk, _DIRECTORY_FLAGS))
        elif want is Want.WHERE:
            opened = _where(walk)
        else:
            opened = _holder(walk, create=create, follow=want is Want.PARENT)
    finally:
        walk.close()
    _refuse_hidden(roots, opened)
    return opened


def _refuse_hidden(roots: Roots, opened: Opened) -> None:
    """Refuse (closing what was opened) a place the sandbox hides from every child: the
    credentials' usual places and Parley's own data and configuration, even inside a root
    (a workspace at the home). sandbox_policy declares them."""
    relative = opened.relative
    place = relative if relative.startswith("/") else posixpath.join(str(roots.cwd), relative)
    place = posixpath.normpath(place)
    if not sandbox_policy.refused_to_tools(place):
        return
    if opened.fd is not None:
        os.close(opened.fd)
    raise Refused(
        f"{printable_name(roots.shown(place))} holds credentials or Parley's own data, which "
        "no tool may read or write."
    )


class _Walk:
    """The walk of one path: a descriptor per directory walked through from the root it is
    in (all closed by `close`), the components still to walk, and those past a missing
    directory (`Want.WHERE` only). Between roots (`root` None) it is at `outside`, a
    directory that holds a root, and opens nothing."""

    def __init__(self, roots: Roots, path: str, *, links: bool = True) -> None:
        if "\0" in path:
            raise Refused(f"{printable_name(path)!r} has a NUL character; no file is named so.")
        self.roots = roots
        self.path = path  # as the model wrote it, for messages
        expanded = os.path.expanduser(path)
        self.pending = _components(expanded)
        self.names: list[str] = []
        self.missing: list[str] = []  # below a directory that does not exist
        self.fds: list[int] = []
        self.root: Path | None = None  # the root walked in; None: outside every root
        self.outside = "/"
        self.symlinks = 0
        self.links = links  # False: a symlink on the way is refused, never followed
        if os.path.isabs(expanded):
            self.from_the_top()
        else:
            self.enter(roots.cwd)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def enter(self, root: Path, below: list[str] | None = None) -> None:
        """Walk on from `root`, one of the roots; `below`: the components from it to where
        the walk is (walked first)."""
        self.close()
        self.fds = [self.open_root(root)]
        self.root, self.names = root, []
        self.pending = [*(below or []), *self.pending]

    def open_root(self, root: Path) -> int:
        """A descriptor of `root`: the outermost root holding it opened by its path (what
        holds it is outside every root), then each component down to it with `O_NOFOLLOW`."""
        outer, down = self.roots.ways_in[str(root)]
        fd = os.open(outer, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if os.readlink(f"/proc/self/fd/{fd}") != str(outer):  # where the kernel opened it
            os.close(fd)
            raise Refused(
                f"The workspace root {printable_name(str(outer))} is no longer the directory "
                "the session started in (a symlink stands in its place or on its way), so "
                "nothing in it is opened."
            )
        for name in down:
            try:
                inner = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise Refused(
                    f"The workspace root {printable_name(str(root))} is no longer a directory "
                    f"inside {printable_name(str(outer))} (a symlink or a file stands in its "
                    "place), so nothing in it is opened."
                ) from None
            finally:
                os.close(fd)
            fd = inner
        return fd

    def from_the_top(self) -> None:
        """Walk the pending components from the file system's root: straight into the
        deepest root they begin with (the directories above a root hold no symlink: they
        were resolved with it), else one step at a time."""
        place, entered = "/", None
        for count, name in enumerate(self.pending, start=1):
            place = posixpath.join(place, name)
            if place in self.roots.ways_in:
                entered = count, place
            elif name == ".." or place not in self.roots.holders:
                break
        if entered is None:
            self.move_to("/")
            return
        count, place = entered
        self.pending = self.pending[count:]
        self.enter(Path(place))

    def move_to(self, place: str) -> None:
        """Go to `place`: the file system's root or a directory that holds a root (resolved
        with the roots: no symlink on its way). Inside a root, the walk goes on from the
        deepest root holding it; else it is outside every root."""
        holder = self.roots.holding(place)
        if holder is not None:
            self.enter(holder, _components(posixpath.relpath(place, holder)))
            return
        self.close()
        self.root, self.names, self.outside = None, [], place

    def step_outside(self, name: str) -> None:
        """From outside every root, into `name`: a root (entered) or a directory holding one;
        anything else is outside the workspace, refused without being looked at."""
        self.check_unlisted(name)
        for candidate in (name, _unescaped(name)):
            if candidate is None:
                continue
            place = posixpath.join(self.outside, candidate)
            if self.roots.holding(place) is not None:  # a root
                self.move_to(place)
                return
            if place in self.roots.holders:
                self.outside = place
                return
        raise _outside(self.roots, self.path)

    def up(self) -> None:
        if self.missing:
            self.missing.pop()
        elif self.root is None:
            self.outside = posixpath.dirname(self.outside)
        elif self.names:
            self.names.pop()
            os.close(self.fds.pop())
        else:  # above the root: real, as the root was resolved
            self.move_to(str(self.root.parent))

    def entry(self, name: str) -> tuple[str, os.stat_result | None]:
        """`name` as it is in the current directory — as written, or the ordinary name its
        `\\xHH` escapes stand for when only that exists — and its own status (not followed;
        None when there is no such entry)."""
        for candidate in (name, _unescaped(name)):
            if candidate is None:
                continue
            try:
                return candidate, os.stat(candidate, dir_fd=self.fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                continue
        self.check_unlisted(name)
        return name, None

    def check_unlisted(self, name: str) -> None:
        """Refuse a name that is not there and looks escaped without standing for any name
        (`\\x2e\\x2e`, `\\x2f`): it was never shown, and is not made."""
        if _ESCAPE_TEXT.search(name) and _unescaped(name) is None:
            raise Refused(
                f"{printable_name(self.path)!r}: {printable_name(name)!r} is no file name in "
                "the workspace; a \\xHH escape only shows a byte that is not UTF-8 text. "
                "Write '.', '/' and other characters as themselves."
            )

    def count_symlink(self) -> None:
        self.symlinks += 1
        if self.symlinks > MAX_SYMLINKS:
            raise Refused(
                f"{printable_name(self.path)!r} goes through too many symbolic links "
                "(or one is being changed while it is read)."
            )

    def follow(self, name: str) -> None:
        """`name` (in the current directory) seemed a symlink: put its target in front of
        the pending components (from the file system's root for an absolute target). Swapped
        for something else since, it is looked at again. A walk that follows no link refuses."""
        if not self.links:
            raise Refused(
                f"{printable_name(self.relative(name))} is a symbolic link now, where the "
                "restore expects a folder; a restore follows no link, so nothing was written "
                "through it."
            )
        self.count_symlink()
        try:
            target = os.readlink(name, dir_fd=self.fds[-1])
        except OSError:
            self.pending.insert(0, name)
            return
        self.pending = _components(target) + self.pending
        if os.path.isabs(target):
            self.from_the_top()  # refused as the walk leaves the roots, when it is elsewhere

    def to_last(self, *, create: bool = False, lexical: bool = False) -> str | None:
        """Walk every directory of the path but the last component, and take that from
        the pending ones (None: the path ends at the directory reached). A missing
        directory is made with `create`, taken as written with `lexical`, an error else."""
        while self.pending:
            name = self.pending.pop(0)
            if name == "..":
                self.up()
                continue
            if self.root is None:
                self.step_outside(name)
                continue
            if not self.pending:
                return name
            if self.missing:
                self.check_unlisted(name)
                self.missing.append(name)
                continue
            actual, status = self.entry(name)
            if status is None and lexical:
                self.missing.append(name)
                continue
            if status is None and create:
                os.mkdir(actual, 0o777, dir_fd=self.fds[-1])  # exists already: raises
            elif status is not None and stat.S_ISLNK(status.st_mode):
                self.follow(actual)
                continue
            try:
                fd = os.open(actual, _DIRECTORY_FLAGS, dir_fd=self.fds[-1])
            except OSError as exc:
                # A symlink swapped in after the status: ELOOP, or ENOTDIR with O_DIRECTORY.
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not _is_symlink(self, actual):
                    raise
                self.follow(actual)
                continue
            self.fds.append(fd)
            self.names.append(actual)
        if self.root is None:  # the path ends outside every root
            raise _outside(self.roots, self.path)
        return None

    def relative(self, name: str | None = None) -> str:
        """Where the walk is (and `name` in it), as `Roots.shown` says it."""
        assert self.root is not None
        parts = [*self.names, *self.missing, *([name] if name else [])]
        return self.roots.shown(posixpath.join(str(self.root), *parts))


def _is_symlink(walk: _Walk, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=walk.fds[-1], follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_last(walk: _Walk, flags: int) -> tuple[int, str]:
    """The path's last component opened with `flags`, symlinks resolved on the way;
    its descriptor and where it really is, relative to the root."""
    while True:
        name = walk.to_last()
        if name is None:
            return os.dup(walk.fds[-1]), walk.relative()
        actual, status = walk.entry(name)
        if status is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", walk.relative(name))
        if stat.S_ISLNK(status.st_mode):
            walk.follow(actual)
            continue
        try:
            return os.open(actual, flags, dir_fd=walk.fds[-1]), walk.relative(actual)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not _is_symlink(walk, actual):
                raise
            walk.follow(actual)


def _holder(walk: _Walk, *, create: bool, follow: bool) -> Opened:
    """The directory that holds the path's last entry (its own symlink resolved when
    `follow`); raises `IsADirectoryError` when the path is a directory."""
    while True:
        name = walk.to_last(create=create)
        if name is None:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", walk.relative())
        actual, status = walk.entry(name)
        if status is not None and follow and stat.S_ISLNK(status.st_mode):
            walk.follow(actual)
            continue
        if status is not None and follow and stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", walk.relative(actual))
        return Opened(os.dup(walk.fds[-1]), walk.relative(actual), actual, status)


def _where(walk: _Walk, *, follow: bool = True) -> Opened:
    """Where the path leads, nothing opened at its end; symlinks resolved on the way (and
    at its end, with `follow`)."""
    while True:
        name = walk.to_last(lexical=True)
        if name is None:
            status = None if walk.missing else os.fstat(walk.fds[-1])
            return Opened(None, walk.relative(), status=status)
        if walk.missing:
            walk.check_unlisted(name)
            return Opened(None, walk.relative(name), name)
        actual, status = walk.entry(name)
        if follow and status is not None and stat.S_ISLNK(status.st_mode):
            walk.follow(actual)
            continue
        return Opened(None, walk.relative(actual), actual, status)


# --- the gate's common uses ------------------------------------------------------------------


def restore_place(root: Roots | Path, path: str) -> tuple[str, os.stat_result | None]:
    """Where a restore finds `path` (`Want.ENTRY`: no symlink followed on the way), as an
    absolute path, and its entry's own status (None: missing). What a restore asks the
    editor to write: the editor follows links, so the path it is given has none on its
    way. Raises as the gate does (`Refused` for a link on the way)."""
    roots = as_roots(root)
    opened = open_in_workspace(roots, path, Want.ENTRY)
    assert opened.fd is not None
    os.close(opened.fd)
    return str(roots.cwd / opened.relative), opened.status


def written_in_place(status: os.stat_result | None) -> bool:
    """Whether a restore may have the editor write the entry `restore_place` found, which it
    does in place: a regular file with one name. A file with another name (a hard link, to
    `.env` or past the roots) would be written under that name too; the disk replaces the
    name instead, and the other keeps its bytes."""
    return status is not None and stat.S_ISREG(status.st_mode) and status.st_nlink == 1


def open_confined(root: Path, path: str) -> BinaryIO:
    """The regular file at `path` in the workspace `root`, open for binary reading. Its
    `name` is where it really is, relative to the root with `/`. Raises as the gate does."""
    opened = open_in_workspace(root, path, Want.FILE)
    assert opened.fd is not None
    return _file_object(opened.fd, opened.relative)


def open_confined_directory(root: Path, path: str) -> tuple[int, str]:
    """A descriptor of the directory at `path` in the workspace `root` (the caller closes
    it), and where it really is, relative to the root. Raises as the gate does."""
    opened = open_in_workspace(root, path, Want.DIRECTORY)
    assert opened.fd is not None
    return opened.fd, opened.relative


def resolve_confined(root: Path, path: str) -> str:
    """Where `path` leads inside the workspace, relative to the root (to show it: a
    symlink's target, the file an edit will write); nothing at its end is opened, and a
    missing directory on the way is fine. Raises `OutsideWorkspace` or `Refused`."""
    return open_in_workspace(root, path, Want.WHERE).relative


def open_confined_parent(root: Path, path: str, *, create: bool = False) -> tuple[int, str, str]:
    """The directory in the workspace `root` where the file at `path` is or would be, for
    writing it: a descriptor of that directory (the caller closes it), the file's name in
    it, and where the file really is, relative to the root (`Want.PARENT`)."""
    opened = open_in_workspace(root, path, Want.PARENT, create=create)
    assert opened.fd is not None and opened.name is not None
    return opened.fd, opened.name, opened.relative


def open_regular_at(directory_fd: int | None, name: str) -> BinaryIO:
    """The regular file `name` in a directory the gate opened (or, for None, a path outside
    any workspace: the `.gitignore` files of the repository above it), checked as
    `open_confined` checks it; `name` itself is not followed when it is a symlink."""
    fd = os.open(name, _FILE_FLAGS, dir_fd=directory_fd)
    return _file_object(_checked_regular(fd, name), name)


def _checked_regular(fd: int, relative: str) -> int:
    """`fd`, once `fstat` shows a regular file with one name (closed otherwise); checked on
    the descriptor itself, so nothing can be swapped in after the check."""
    try:
        _check_regular(os.fstat(fd), printable_name(relative))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _file_object(fd: int, relative: str) -> BinaryIO:
    try:
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


def file_mode(mode: int) -> int:
    """The permission bits Parley gives a file it writes: `mode` without setuid and setgid. A
    file written is Parley's user's (a stored mode carries no owner): a setuid bit put back
    on a file another user owned would make it run as Parley's user, root's in a container."""
    return mode & ~SET_ID_BITS


def replace_at(directory_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """`data` as the whole content of `name` in the open directory, atomically: written to a
    temporary file beside it (never through a symlink), synced, then renamed over it, so a
    reader sees the old file or the new one, never part of one. The file gets `mode` (less
    setuid and setgid: `file_mode`), or a new file's default permissions (0o666 less the
    umask) when `mode` is None."""
    temporary = f".{name}.parley-{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o666 if mode is None else 0o600, dir_fd=directory_fd)
    try:
        with os.fdopen(fd, "wb") as file:
            if mode is not None:
                os.fchmod(file.fileno(), file_mode(mode))
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory_fd)
        raise
