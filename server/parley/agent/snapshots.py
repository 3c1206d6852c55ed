"""Snapshots of every root: what a turn's commands, evaluations, MCP tools and edits changed.

Before each call of a tool whose kind can write (anything but read, search, think, fetch
and switch_mode: `run_command`, `python_eval`, the edits, MCP tools not marked read-only,
editor tools that edit) the turn takes a snapshot of every root, and another after the call.
A snapshot is a manifest, path → entry: a regular file's mode and sha256 (its bytes kept in
`SnapshotStore`, content-addressed), a symlink's target (recorded, never followed), a
directory's mode. It is cheap when nothing changed: each entry keeps the `lstat` it was read
with (size, mtime_ns, ctime_ns, mode, inode), and a file whose `lstat` is the previous
snapshot's is not read again (unless it changed less than `RACY_NS` before that snapshot:
a write in the same clock tick would not show). Left out: what `.gitignore` ignores (as
`tools/workspace.py` reads it), `[checkpoints] ignore`, `.git`, the places the sandbox hides
(`sandbox_policy`: Parley's own data among them), other kinds of file (sockets, FIFOs), and
new content past the turn's `max_turn_megabytes` — the undo report names what was left out. A
place that runs later (`sandbox_policy.RUNS_LATER_IN_ROOT`: an `.envrc`, a `.vscode/`), and
what it holds, is kept even when ignored (a `.git` never).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import attrs

from parley import sandbox_policy
from parley.agent.snapshot_store import SnapshotStore, roots_key
from parley.config import CheckpointsTable
from parley.core.off_loop import off_loop
from parley.sandbox import SandboxSettings, sandbox_status
from parley.tools.workspace import IgnoreRules, matchable, repository_of

logger = logging.getLogger(__name__)

# The kinds of tool that cannot write (ACP's ToolKind): no snapshot around their calls.
READ_ONLY_KINDS = frozenset({"read", "search", "think", "fetch", "switch_mode"})
# A file changed this close before a snapshot is read again by the next one: the file
# system's clock ticks coarsely (ext4: a jiffy), and a same-size write in the same tick
# leaves the same lstat.
RACY_NS = 2_000_000_000
# How many left-out paths a snapshot names (the rest are counted).
NAMED_AT_MOST = 20
# How many places that run later a snapshot records, besides each `.git` (a tree of vendored
# repositories has many): a command's sandbox binds the first (`sandbox_policy.FOUND_AT_MOST`).
LATER_PLACES_AT_MOST = 1000
# The snapshots a process keeps in memory, one per set of roots, for the next one's stat cache.
RECENT_AT_MOST = 4
_RECENT: dict[tuple[Path, str], Snapshot] = {}
_RECENT_LOCK = threading.Lock()
OVER_CAP = "over the turn's size cap, `[checkpoints] max_turn_megabytes`"
READ_CHUNK = 1 << 20  # a file is read this much at a time (`_read_at_most`)

# An entry: [kind, mode, size, mtime_ns, ctime_ns, inode, ref]. Kinds:
FILE = "f"  # ref: the bytes' sha256
LINK = "l"  # ref: the link's target
DIRECTORY = "d"  # ref: None
NOT_KEPT = "x"  # a file whose bytes were not kept (past the cap, unreadable): ref None
Entry = list[Any]
# A folder still to walk: its path relative to the root, its whole path, and the (device,
# inode) its parent's listing saw (`_Walk._directory` walks only that very folder).
Folder = tuple[str, str, tuple[int, int]]
# `stat`'s constants as plain ints, for the walk's hot loop (a global, not a module's attribute)
_KIND_BITS, _MODE_BITS = 0o170000, 0o7777  # S_IFMT's and S_IMODE's
_FOLDER, _REGULAR, _SYMLINK = stat.S_IFDIR, stat.S_IFREG, stat.S_IFLNK
# The names that run later outside the sandbox, wherever they are (`Snapshot.later_places`).
_RUNS_LATER = frozenset(sandbox_policy.RUNS_LATER_IN_ROOT)


def what_it_is(entry: Entry | None) -> tuple[Any, ...] | None:
    """What a restore compares: the kind, the mode and the content (not the lstat)."""
    if entry is None:
        return None
    if entry[0] == NOT_KEPT:  # bytes not kept: the same while its lstat is
        return (NOT_KEPT, entry[1], *entry[2:6])
    return (entry[0], entry[1] if entry[0] != LINK else None, entry[6])


@attrs.define
class Snapshot:
    """One snapshot of the roots."""

    entries: dict[str, Entry]
    taken_ns: int
    manifest_id: str = ""
    rules_id: str = ""  # the ignore rules it was taken under (`_Walk.rules_id`)
    ignored: list[str] = attrs.field(factory=list)  # left out by an ignore rule (named)
    ignored_count: int = 0
    not_kept: dict[str, str] = attrs.field(factory=dict)  # path → why its bytes were not kept
    stored_bytes: int = 0  # new content this snapshot put in the store
    # Every place the walk passed that runs later outside the sandbox (a name of
    # `sandbox_policy.RUNS_LATER_IN_ROOT`: a `.git`, an `.envrc`, a `.vscode/` …), ignored or
    # not; a `.git` (a folder, or a file naming one) is never walked into. None: a manifest
    # of an older version, which kept none.
    later_places: list[str] | None = attrs.field(factory=list)

    def to_manifest(self) -> dict[str, Any]:
        return {
            "taken_ns": self.taken_ns,
            "rules": self.rules_id,
            "later": self.later_places,
            "entries": self.entries,
        }


def load_snapshot(store: SnapshotStore, manifest_id: str) -> Snapshot:
    manifest = store.manifest(manifest_id)
    rules_id = manifest.get("rules", "")
    later_places = manifest.get("later")
    return Snapshot(
        manifest["entries"],
        manifest["taken_ns"],
        manifest_id,
        rules_id,
        later_places=later_places if isinstance(later_places, list) else None,
    )


class _Walk:
    """One snapshot being taken: the roots walked, each file's bytes kept when new.

    With `rules_as_before`, a file the previous snapshot has is taken as not ignored without
    matching it against the ignore rules (most of a later snapshot's time in a repository):
    the same rules decide the same. `take_snapshot` checks after the walk that the rules
    were the same (`rules_id`), and walks again matching every path when they were not."""

    def __init__(
        self,
        store: SnapshotStore,
        previous: Snapshot | None,
        ignore: tuple[str, ...],
        byte_budget: int,
        rules_as_before: bool = False,
    ) -> None:
        import pathspec  # imported here: `parley serve` need not load it before a snapshot

        self.store = store
        self.previous = previous.entries if previous is not None else {}
        self.trusted_before = (previous.taken_ns - RACY_NS) if previous is not None else 0
        self.known_files = self.previous if rules_as_before else {}
        # `[checkpoints] ignore`, less what pathspec cannot match in bounded time, or read
        patterns = [pattern for pattern in ignore if matchable(pattern)]
        self.extra = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
        self.byte_budget = byte_budget
        self.snapshot = Snapshot({}, time.time_ns())
        self.unchanged = 0  # entries just as `previous` has them
        self.rules_read: list[Any] = [patterns]  # what decided what is ignored, per root

    def rules_id(self) -> str:
        """The ignore rules this walk read, as a digest: equal digests, equal decisions."""
        text = json.dumps(self.rules_read, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    def root(self, root: Path) -> None:
        repository = repository_of(root)
        rules = IgnoreRules(repository, root) if repository is not None else None
        status = os.lstat(root)
        self.snapshot.entries[str(root)] = self._entry(str(root), status)
        pending: list[Folder] = [("", str(root), (status.st_dev, status.st_ino))]
        while pending:
            pending += self._directory(*pending.pop(), rules)
        # Sorted: the order directories are walked in must not change the digest.
        self.rules_read.append([str(root), sorted(rules.sources) if rules is not None else None])

    def _directory(
        self, relative: str, directory: str, identity: tuple[int, int], rules: IgnoreRules | None
    ) -> list[Folder]:
        """Record a directory's entries; the subdirectories to walk. Listed through a
        descriptor, each entry's `lstat` is taken relative to it (`fstatat`): the kernel
        looks up one name, not the whole path, a fifth less time on a 10,000-file tree.
        Opened by its whole path, it must be the directory its parent's listing saw
        (`identity`: device and inode): a folder on its way swapped for a link since (`x ->
        ~`, so `x/.ssh` is the user's) is not walked, nor a root that became a link."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        try:  # a subfolder replaced by a link since its parent was listed is not followed
            descriptor = os.open(directory, flags | (os.O_NOFOLLOW if relative else 0))
        except OSError as error:
            self._leave_out(f"{directory}/", f"not read: {error.strerror}")
            return []
        opened = os.fstat(descriptor)
        if (opened.st_dev, opened.st_ino) != identity:
            os.close(descriptor)
            self._leave_out(f"{directory}/", "not read: it changed while it was walked")
            return []
        try:
            with os.scandir(descriptor) as listing:
                found = list(listing)
            if rules is not None and any(item.name == ".gitignore" for item in found):
                rules.add_directory(relative or ".", descriptor)
            return self._listed(relative, directory, found, rules)
        except OSError as error:
            self._leave_out(f"{directory}/", f"not read: {error.strerror}")
            return []
        finally:
            os.close(descriptor)  # after the entries' `lstat`s, which are taken through it

    def _listed(
        self,
        relative: str,
        directory: str,
        found: list[os.DirEntry[str]],
        rules: IgnoreRules | None,
    ) -> list[Folder]:
        below = []
        filtered = rules is not None or self.extra is not None
        known_files, previous, entries = self.known_files, self.previous, self.snapshot.entries
        trusted_before, unchanged = self.trusted_before, 0
        prefix = directory if directory.endswith("/") else directory + "/"
        for item in found:  # the hot loop: ~10,000 entries in 30 ms, most of it the `lstat`s
            place = prefix + item.name
            status = item.stat(follow_symlinks=False)  # `fstatat`, cached by the entry
            kind = status.st_mode & _KIND_BITS
            if kind == _FOLDER:
                name = f"{relative}/{item.name}" if relative else item.name
                if not self._ignored(name, place, True, rules):
                    # An ignored folder is never descended into.
                    below.append((name, place, (status.st_dev, status.st_ino)))
                    entries[place] = self._entry(place, status)
                continue
            if kind != _REGULAR and kind != _SYMLINK:
                continue  # a socket, a FIFO, a device: nothing to keep
            if item.name in _RUNS_LATER:  # (a `.git` file names a repository elsewhere)
                self._later_place(place)
            elif filtered and place not in known_files:
                name = f"{relative}/{item.name}" if relative else item.name
                if self._ignored(name, place, False, rules):
                    continue
            known = previous.get(place)
            if (  # a file as the previous snapshot saw it, not read again (`_entry`'s test)
                known is not None
                and kind == _REGULAR
                and status.st_ctime_ns < trusted_before  # ctime: any write or chmod moves it
                and known[3] == status.st_mtime_ns
                and known[0] == FILE
                and known[2] == status.st_size
                and known[5] == status.st_ino
                and known[4] == status.st_ctime_ns
                and known[1] == status.st_mode & _MODE_BITS
            ):
                unchanged += 1
                entries[place] = known
            else:
                entries[place] = self._entry(place, status)
        self.unchanged += unchanged
        return below

    def _ignored(self, name: str, place: str, folder: bool, rules: IgnoreRules | None) -> bool:
        shown = name + "/" if folder else name
        if folder and (base := os.path.basename(name)) in _RUNS_LATER:
            self._later_place(place)
            if base == ".git":
                return self._named(shown)
        if folder and sandbox_policy.refused_to_tools(place):
            return self._named(shown)
        if rules is not None and rules.ignored(name, directory=folder):
            return self._named_unless_runs_later(name, shown)
        if self.extra is not None and self.extra.check_file(shown).include:
            return self._named_unless_runs_later(name, shown)
        return False

    def _named_unless_runs_later(self, name: str, shown: str) -> bool:
        """An ignored path is left out, unless it is in a place that runs later (an ignored
        `.envrc`, what an ignored `.vscode/` holds): kept, so that the turn's warning sees
        a call make or change it (`TurnSnapshots.runs_later_left`) and an undo puts it back."""
        if any(part in _RUNS_LATER for part in name.split("/")):
            return False
        return self._named(shown)

    def _later_place(self, place: str) -> None:
        """Record `place`: past LATER_PLACES_AT_MOST a `.git` still, whose making nothing
        else shows (never walked into, it has no entries)."""
        later_places = self.snapshot.later_places
        if later_places is None:
            return
        if len(later_places) < LATER_PLACES_AT_MOST or place.endswith("/.git"):
            later_places.append(place)

    def _named(self, shown: str) -> bool:
        self.snapshot.ignored_count += 1
        if len(self.snapshot.ignored) < NAMED_AT_MOST:
            self.snapshot.ignored.append(shown)
        return True

    def _leave_out(self, place: str, why: str) -> None:
        self.snapshot.not_kept[place] = why

    def _entry(self, place: str, status: os.stat_result) -> Entry:
        known = self.previous.get(place)
        mode = status.st_mode
        if (  # the hot path: a file as the previous snapshot saw it, not read again
            known is not None
            and known[0] == FILE
            and status.st_ctime_ns < self.trusted_before  # ctime: any write or chmod moves it
            and known[3] == status.st_mtime_ns
            and known[2] == status.st_size
            and known[5] == status.st_ino
            and known[4] == status.st_ctime_ns
            and known[1] == stat.S_IMODE(mode)
            and stat.S_ISREG(mode)
        ):
            self.unchanged += 1
            return known
        seen = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino]
        if stat.S_ISREG(mode):
            return self._file(place, stat.S_IMODE(mode), seen)
        entry = (
            [DIRECTORY, stat.S_IMODE(mode), *seen, None]
            if stat.S_ISDIR(mode)
            else [LINK, stat.S_IMODE(mode), *seen, os.readlink(place)]
        )
        self.unchanged += entry == known
        return entry

    def _file(self, place: str, mode: int, seen: list[int]) -> Entry:
        """A file read and kept (its bytes stored once), or NOT_KEPT saying why."""
        spent = self.snapshot.stored_bytes
        if seen[0] > self.byte_budget - spent:
            self._leave_out(place, OVER_CAP)
            return [NOT_KEPT, mode, *seen, None]
        try:
            descriptor = os.open(place, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(descriptor, "rb") as file:
                data = _read_at_most(file, self.byte_budget - spent, seen[0])
        except OSError as error:
            self._leave_out(place, f"not read: {error.strerror}")
            return [NOT_KEPT, mode, *seen, None]
        digest = hashlib.sha256(data).hexdigest()
        if not self.store.has_object(digest):
            if len(data) > self.byte_budget - spent:
                self._leave_out(place, OVER_CAP)
                return [NOT_KEPT, mode, *seen, None]
            self.store.put_object(digest, data)
            self.snapshot.stored_bytes += len(data)
        return [FILE, mode, *seen, digest]


def _read_at_most(file: Any, most: int, size: int) -> bytes:
    """The file's bytes, or `most` + 1 of them when it has more (past the cap): never more
    in memory, whatever size it grew to since its `lstat` said `size` (a sparse 200 GB
    file reads as zeros as fast as memory takes them). One read, as a rule: its size and a
    byte more, to see it did not grow."""
    first: bytes = file.read(min(most, size) + 1)
    if len(first) <= size or len(first) > most:
        return first
    chunks, left = [first], most + 1 - len(first)  # it grew: read on, up to the cap
    while left > 0 and (chunk := file.read(min(left, READ_CHUNK))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def take_snapshot(
    store: SnapshotStore,
    roots: tuple[Path, ...],
    previous: Snapshot | None,
    ignore: tuple[str, ...] = (),
    byte_budget: int = 1 << 62,
) -> Snapshot:
    """A snapshot of `roots` (a root inside another is walked as part of it), reusing what
    `previous` read of files whose lstat is unchanged. Kept in `store`; when every entry is
    `previous`'s, `previous`'s manifest is reused. Blocking: run it off the loop."""
    walk = _walked(store, roots, previous, ignore, byte_budget, previous is not None)
    if previous is not None and walk.snapshot.rules_id != previous.rules_id:
        # The rules changed: the files taken as not ignored are matched this time.
        spent = walk.snapshot.stored_bytes
        walk = _walked(store, roots, previous, ignore, byte_budget - spent, False)
        walk.snapshot.stored_bytes += spent
    snapshot = walk.snapshot
    if (
        previous is not None
        and walk.unchanged == len(snapshot.entries) == len(previous.entries)
        and snapshot.rules_id == previous.rules_id
        and snapshot.later_places == previous.later_places
    ):
        snapshot.manifest_id = previous.manifest_id  # nothing changed: nothing written
        snapshot.taken_ns = previous.taken_ns
    else:
        snapshot.manifest_id = store.put_manifest(snapshot.to_manifest())
    key = roots_key(roots)
    if store.latest(key) != snapshot.manifest_id:
        store.set_latest(key, snapshot.manifest_id)
    _remember(store, key, snapshot)
    return snapshot


def _walked(
    store: SnapshotStore,
    roots: tuple[Path, ...],
    previous: Snapshot | None,
    ignore: tuple[str, ...],
    byte_budget: int,
    rules_as_before: bool,
) -> _Walk:
    walk = _Walk(store, previous, ignore, byte_budget, rules_as_before)
    for root in outermost(roots):
        walk.root(root)
    walk.snapshot.rules_id = walk.rules_id()
    return walk


def outermost(roots: tuple[Path, ...]) -> list[Path]:
    """The roots not inside another: a nested one is walked with the one holding it."""
    return [root for root in dict.fromkeys(roots) if not any(o in root.parents for o in roots)]


def latest_snapshot(store: SnapshotStore, roots: tuple[Path, ...]) -> Snapshot | None:
    """The snapshot last taken of these roots (the next one's stat cache), if readable: the
    one this process took, when no other process took one since (a 10,000-file manifest
    takes 30-40 ms to read)."""
    key = roots_key(roots)
    manifest_id = store.latest(key)
    if manifest_id is None:
        return None
    recent = _RECENT.get((store.folder, key))
    if recent is not None and recent.manifest_id == manifest_id:
        return recent
    try:
        return load_snapshot(store, manifest_id)
    except (OSError, ValueError, KeyError):
        return None


def _remember(store: SnapshotStore, key: str, snapshot: Snapshot) -> None:
    """Keep the snapshot just taken for `latest_snapshot` (a few sets of roots at most)."""
    with _RECENT_LOCK:  # two snapshots may end at once, in two threads
        _RECENT.pop((store.folder, key), None)
        _RECENT[(store.folder, key)] = snapshot
        while len(_RECENT) > RECENT_AT_MOST:
            _RECENT.pop(next(iter(_RECENT)), None)


def _git_runs(later_places: list[str]) -> list[str]:
    """What git runs in the repositories of these places besides their `.git` (resolved):
    a hooks path (`core.hooksPath = .githooks`), a `.git` file's git directory."""
    places = {
        str(place)
        for later in later_places
        if os.path.basename(later) == ".git"
        for place in sandbox_policy.git_places_anywhere(Path(os.path.dirname(later)))
    }
    return sorted(places)


def _holding(places: list[str], path: str) -> str | None:
    """The one of `places` that is or holds `path`, if any."""
    return next((place for place in places if path == place or path.startswith(place + "/")), None)


def changed_paths(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    """The paths whose kind, mode or content differ (or that one of them lacks)."""
    return sorted(
        path
        for path in before.keys() | after.keys()
        if what_it_is(before.get(path)) != what_it_is(after.get(path))
    )


class TurnSnapshots:
    """The snapshots of one turn of one session: before its first writing call, and after
    each writing call (the last is how the turn left the roots), the one after in the
    background (`after_call`). Recorded in the store as
    the turn's record: `{before, after, ran, kinds, sandboxed, roots, ignore, ignored,
    ignoredCount, notKept}`."""

    def __init__(
        self,
        store: SnapshotStore,
        session_id: str,
        turn: int,
        roots: tuple[Path, ...],
        settings: CheckpointsTable,
        sandbox: SandboxSettings | None = None,
    ) -> None:
        self.store = store
        self.sandbox = sandbox
        self._sandboxed = False  # whether the turn's children could write only in the roots
        self.session_id = session_id
        self.turn = turn
        self.roots = roots
        self.settings = settings
        self._before: Snapshot | None = None
        self._latest: Snapshot | None = None
        self._open = False  # a writing call runs: the snapshot after it is due
        self._ran: set[str] = set()  # the writing tools called, by name
        self._kinds: set[str] = set()  # and by kind
        self._stored_bytes = 0
        self._not_kept: dict[str, str] = {}
        self._earlier: dict[str, Any] = {}  # the record of an attempt this turn replaces
        self._pending: asyncio.Future[None] | None = None  # the snapshot after, while it runs

    async def before_call(self, kind: str, tool: str) -> None:
        # No tool runs while the snapshot after the last writing call walks: it sees the
        # roots as that call left them (a tool that says it only reads may not).
        await self.settled()
        if kind in READ_ONLY_KINDS:
            return
        self._open = True
        self._ran.add(tool)
        self._kinds.add(kind)
        if self._before is None:
            if self.sandbox is not None:
                status = await off_loop(sandbox_status, self.sandbox)
                self._sandboxed = status.sandboxed
            # Pending as the one after is: a Stop meanwhile leaves it for `finished`.
            self._pending = asyncio.ensure_future(off_loop(self._first))
            await self.settled()

    async def after_call(self) -> None:
        """Start the snapshot after a writing call, and return: it walks the roots while the
        turn goes on (the call's result to the editor, the model asked again), off the
        call's path. The next call and the turn's end wait for it (`settled`)."""
        if not self._open:
            return
        self._open = False
        await self.settled()  # one at a time: each starts from the one before it
        if self._before is not None:
            self._pending = asyncio.ensure_future(off_loop(self._later))

    async def settled(self) -> None:
        """Wait for the snapshot running (the turn's first, or the one after the last
        writing call) and its record: before the next call of any tool. A cancelled wait
        leaves it pending, for the next one."""
        while (pending := self._pending) is not None:
            await asyncio.shield(pending)
            if self._pending is pending:
                self._pending = None

    def runs_later_found(self) -> tuple[Path, ...]:
        """The places that run later the last snapshot found (once `settled`: a writing
        call's `before_call` waits for it, so it is the roots as the call finds them)."""
        latest = self._latest.later_places if self._latest is not None else None
        return tuple(Path(place) for place in latest or ())

    def runs_later_left(self, written: Collection[str]) -> list[str]:
        """The places that run later outside the sandbox (`Snapshot.later_places`) which the
        turn's calls made where none was, or changed (a file in them made, changed or
        removed; or in what git runs in a repository found: its hooks path), besides the
        files the edit tools wrote (`written`: each was asked about, saying why). Sorted,
        absolute. A `.git` is never walked into: only its making is seen. Known once
        settled; it compares the snapshots' entries: call it off the loop."""
        before, after = self._before, self._latest
        if before is None or after is None or after.manifest_id == before.manifest_id:
            return []
        if before.later_places is None or after.later_places is None:
            return []
        old, new = before.entries, after.entries
        changed = {
            path
            for path in old.keys() | new.keys()
            if what_it_is(old.get(path)) != what_it_is(new.get(path))
            and DIRECTORY not in (old.get(path, [None])[0], new.get(path, [None])[0])
        }.difference(written)
        # Each changed file's place that runs later (every one, not only those recorded); a
        # `.git` holds no entries: its making is in the recorded places.
        git_runs = _git_runs(after.later_places)
        left = {
            place
            for path in changed
            if (place := self._runs_later_place(path) or _holding(git_runs, path))
        }
        made = set(after.later_places).difference(before.later_places)
        left.update(place for place in made if os.path.basename(place) == ".git")
        return sorted(left)

    def _runs_later_place(self, path: str) -> str | None:
        """The place that runs later holding `path` (or `path` itself), below its root."""
        for root in self.roots:
            prefix = f"{root}/"
            if path.startswith(prefix):
                parts = path[len(prefix) :].split("/")
                for depth, part in enumerate(parts):
                    if part in _RUNS_LATER:
                        return prefix + "/".join(parts[: depth + 1])
                return None
        return None

    async def finished(self) -> None:
        """`settled`, through any Stop: the turn's end waits for it, so the turn never ends
        (and frees its session for a restore, a deletion, another window) while one of its
        snapshots still walks and has its record to write. A Stop meanwhile is raised after."""
        stopped: asyncio.CancelledError | None = None
        while True:
            try:
                await self.settled()
                break
            except asyncio.CancelledError as error:  # the walk is bounded: waited for
                stopped = error
        if stopped is not None:
            raise stopped

    def _first(self) -> None:
        """The turn's first snapshot and its record, under the store's lock (blocking)."""
        try:
            with self.store.in_use():
                taken = self._take()
                if taken is None:
                    return
                # A retry replaces a cut-off turn under its number: the turn began before
                # that attempt did, so its record's `before` stays (what an undo gives back).
                earlier = self.store.turn_record(self.session_id, self.turn)
                if earlier is not None:
                    taken = load_snapshot(self.store, earlier["before"])
                    self._earlier = earlier
                self._before = taken
                self.store.put_restores(self.session_id, [])  # nothing to redo now
                self._record()
        except (OSError, ValueError, KeyError) as error:  # a full disk, a damaged store
            self._failed(error)

    def _later(self) -> None:
        """The snapshot after a writing call and the record, under the store's lock."""
        try:
            with self.store.in_use():
                if self._take() is not None:
                    self._record()
        except OSError as error:
            self._failed(error)

    def _failed(self, error: Exception) -> None:
        logger.warning("A snapshot of the roots failed: %s", error)
        self._not_kept["(the snapshot)"] = f"failed: {error}"

    def _take(self) -> Snapshot | None:
        """A snapshot (blocking); None (logged) when it could not be taken."""
        previous = self._latest or latest_snapshot(self.store, self.roots)
        budget = self.settings.max_turn_megabytes * 1024 * 1024 - self._stored_bytes
        try:
            taken = take_snapshot(self.store, self.roots, previous, self.settings.ignore, budget)
        except (OSError, ValueError) as error:  # a full disk, a store damaged by hand
            self._failed(error)
            return None
        self._stored_bytes += taken.stored_bytes
        self._not_kept.update(taken.not_kept)
        self._latest = taken
        return taken

    def _record(self) -> None:
        assert self._before is not None and self._latest is not None
        earlier = self._earlier
        record = {
            "before": self._before.manifest_id,
            "after": self._latest.manifest_id,
            "ran": sorted(self._ran | set(earlier.get("ran", ()))),
            "kinds": sorted(self._kinds | set(earlier.get("kinds", ()))),
            "sandboxed": self._sandboxed,
            "roots": [str(root) for root in self.roots],
            "ignore": list(self.settings.ignore),
            "maxBytes": self.settings.max_turn_megabytes * 1024 * 1024,
            "ignored": earlier.get("ignored", self._before.ignored),
            "ignoredCount": earlier.get("ignoredCount", self._before.ignored_count),
            "notKept": {**earlier.get("notKept", {}), **self._not_kept},
        }
        self.store.put_turn_record(self.session_id, self.turn, record)
