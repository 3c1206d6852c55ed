"""A turn undone (or redone) from its snapshots: what each path becomes, and putting it there.

`turn_changes` reads the records of a turn and every later one (`agent/snapshots.py`) and
gives each path the turns changed what it becomes (as it was before the oldest of those
turns touched it), what Parley's turns left there, and whether someone changed it between
the turns. `apply_changes` puts the paths there, every write through the one gate
(`tools/confined.py`: a path outside the roots, or through a symlink out of them, is refused):
removals deepest first, then directories, files (atomically, with their mode) and symlinks
(as links, never followed) shallowest first; a text file that is there now goes through the
editor when it writes files (its buffer follows, one undoable change).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from parley.agent.snapshot_store import SnapshotStore
from parley.agent.snapshots import (
    DIRECTORY,
    FILE,
    LINK,
    NOT_KEPT,
    Entry,
    Snapshot,
    changed_paths,
    latest_snapshot,
    load_snapshot,
    take_snapshot,
    what_it_is,
)
from parley.config import CheckpointsTable
from parley.core.off_loop import off_loop
from parley.tools.confined import (
    Roots,
    Want,
    as_roots,
    file_mode,
    open_in_workspace,
    printable_name,
    replace_at,
    restore_place,
    written_in_place,
)
from parley.tools.workspace import EDITOR_WRITE_SECONDS

# What happened to a path, on the wire (`files[].action`) and in the report.
RESTORED = "restored"  # its content, mode or link target put back
REMOVED = "removed"  # the turn created it: deleted
RECREATED = "recreated"  # the turn deleted it: made again
ACTION_WORDS = {
    RESTORED: "restored",
    REMOVED: "removed (the turn created it)",
    RECREATED: "re-created (the turn deleted it)",
}

# Writes a file's whole text through the editor: its absolute path, the text.
EditorWrite = Callable[[str, str], Awaitable[None]]
# Reads a file's text as the editor holds it (its buffer, saved or not): its absolute path.
EditorRead = Callable[[str], Awaitable[str]]
CHANGED_SINCE = "not overwritten: it changed after the restore looked at it (while it asked)"
EDITOR_LATE = "the editor did not write it in time; it may be unchanged"
EDITOR_SILENT = "not given to the editor: it let an earlier write of this restore time out"


@attrs.frozen
class PathChange:
    """One path of a restore: what it becomes (`target`, None: absent), what Parley's turns
    left there (`expected`), what it is now (`now`, set when the restore starts)."""

    path: str  # absolute
    cwd: str  # the root paths are shown relative to
    target: Entry | None
    expected: Entry | None
    changed_between: bool = False
    now: Entry | None = None
    unsaved: bool = False  # the editor's buffer of it holds text the disk does not

    @property
    def action(self) -> str:
        if self.target is None:
            return REMOVED
        return RECREATED if self.now is None else RESTORED

    @property
    def shown(self) -> str:
        """As a person reads it: relative to the workspace, a directory with a `/`."""
        entry = self.target if self.target is not None else self.now or self.expected
        folder = "/" if entry is not None and entry[0] == DIRECTORY else ""
        return printable_name(as_roots(Path(self.cwd)).shown(self.path)) + folder

    @property
    def user_changed(self) -> bool:
        """Someone but Parley changed it since a turn left it: restoring loses that."""
        if self.unsaved or self.changed_between:
            return True
        return what_it_is(self.now) != what_it_is(self.expected)

    @property
    def depth(self) -> int:
        return self.path.count("/")


# What a record whose snapshots the store cannot give back raises (`_snapshots_of`).
DAMAGED = (OSError, ValueError, KeyError, TypeError)


def turn_changes(
    store: SnapshotStore,
    records: list[dict[str, Any]],
    cwd: str,
    damaged: list[dict[str, Any]] | None = None,
) -> dict[str, PathChange]:
    """Each path the turns' records (oldest first) changed, and what it becomes. A record
    whose snapshots are damaged in the store is skipped (added to `damaged`): one bad
    manifest must not make every later undo of the session fail."""
    plan: dict[str, PathChange] = {}
    for record in records:
        snapshots = _snapshots_of(store, record)
        if snapshots is None:
            if damaged is not None:
                damaged.append(record)
            continue
        before, after = snapshots
        roots = set(record.get("roots", ()))
        for path in changed_paths(before, after):
            if path in roots:  # a root itself is never written
                continue
            old = plan.get(path)
            if old is None:
                plan[path] = PathChange(path, cwd, before.get(path), after.get(path))
                continue
            between = what_it_is(old.expected) != what_it_is(before.get(path))
            plan[path] = attrs.evolve(
                old, expected=after.get(path), changed_between=old.changed_between or between
            )
    return plan


def _snapshots_of(
    store: SnapshotStore, record: dict[str, Any]
) -> tuple[dict[str, Entry], dict[str, Entry]] | None:
    """A record's entries before and after its turn; None when the store cannot give them."""
    try:
        before = load_snapshot(store, record["before"]).entries
        after = load_snapshot(store, record["after"]).entries
    except DAMAGED:
        return None
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    return before, after


def redo_changes(
    store: SnapshotStore, before_id: str, after_id: str, cwd: str
) -> dict[str, PathChange]:
    """What a redo does: each path a restore changed goes back to how the restore found it."""
    before = load_snapshot(store, before_id).entries
    after = load_snapshot(store, after_id).entries
    return {
        path: PathChange(path, cwd, before.get(path), after.get(path))
        for path in changed_paths(before, after)
    }


def with_now(changes: dict[str, PathChange], now: dict[str, Entry]) -> list[PathChange]:
    """The changes still to make, each with what its path is now (those already as they
    would become are left out)."""
    due = []
    for change in changes.values():
        current = now.get(change.path)
        if what_it_is(current) != what_it_is(change.target):
            due.append(attrs.evolve(change, now=current))
    return sorted(due, key=lambda change: change.path)


def not_kept(changes: list[PathChange]) -> tuple[list[PathChange], list[PathChange]]:
    """(the changes that can be made, those whose old bytes were not kept)."""
    kept = [c for c in changes if c.target is None or c.target[0] != NOT_KEPT]
    return kept, [c for c in changes if c not in kept]


async def apply_changes(
    store: SnapshotStore,
    changes: list[PathChange],
    roots: Roots,
    editor: EditorWrite | None,
) -> list[tuple[PathChange, str]]:
    """Make each change inside `roots`; the failures, each with why."""
    texts = await off_loop(editor_texts, store, changes) if editor is not None else {}
    on_disk = [change for change in changes if change.path not in texts]
    failures = await off_loop(_apply_on_disk, store, on_disk, roots)
    silent = False  # an editor that let one write time out is not waited on for each other
    for change in changes:
        if editor is not None and change.path in texts:
            if silent:
                failures.append((change, EDITOR_SILENT))
                continue
            why = await _through_editor(editor, change, texts[change.path], roots, store)
            silent = why == EDITOR_LATE
            if why is not None:
                failures.append((change, why))
    return failures


async def with_buffers(
    store: SnapshotStore, changes: list[PathChange], read: EditorRead
) -> list[PathChange]:
    """The changes, each file the editor would write marked `unsaved` when the editor's
    buffer of it differs from the disk: writing it would lose what the user typed."""
    through_editor = await off_loop(editor_texts, store, changes)
    on_disk = await off_loop(_texts_now, store, changes, set(through_editor))
    marked = []
    silent = False  # an editor that let one read time out is asked no more: 30 s, not 30 s each
    for change in changes:
        if change.path in on_disk:
            held = on_disk[change.path]  # no buffer, or the editor cannot say: the disk's
            if not silent:
                try:
                    async with asyncio.timeout(EDITOR_WRITE_SECONDS):
                        held = await read(change.path)
                except TimeoutError:
                    silent = True
                except Exception:
                    pass
            change = attrs.evolve(change, unsaved=held != on_disk[change.path])
        marked.append(change)
    return marked


def editor_texts(store: SnapshotStore, changes: list[PathChange]) -> dict[str, str]:
    """The files that are files now and become text, with that text: the editor may hold
    them in a buffer, so they go through it — unless their name is not UTF-8: ACP's JSON
    carries it as U+FFFD, another name, which the editor would write instead (the disk
    takes such a file back). Blocking: off the loop."""
    texts = {}
    for change in changes:
        if change.target is None or change.target[0] != FILE:
            continue
        if change.now is None or change.now[0] != FILE or not _utf8(change.path):
            continue
        try:
            texts[change.path] = store.object(change.target[6]).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return texts


def _utf8(path: str) -> bool:
    """Whether `path` is text the wire carries as it is (no surrogate escape of a byte)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _texts_now(store: SnapshotStore, changes: list[PathChange], paths: set[str]) -> dict[str, str]:
    """What those of `paths` hold on disk now, as the restore's snapshot kept them (one
    that is not text: left out, no buffer can hold it as it is)."""
    texts = {}
    for change in changes:
        if change.path in paths and change.now is not None and change.now[0] == FILE:
            try:
                texts[change.path] = store.object(change.now[6]).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return texts


async def _through_editor(
    editor: EditorWrite, change: PathChange, text: str, roots: Roots, store: SnapshotStore
) -> str | None:
    """Write the file through the editor, then its mode on disk; why not, or None. The
    editor follows links, so it is asked only while the path has none (a process the turn
    left running may have put one there since the restore looked: then the disk takes the
    file back, replacing a link at its end, and one on its way refuses it)."""
    assert change.target is not None
    try:
        _, status = await off_loop(restore_place, roots, change.path)
    except FileNotFoundError:  # a folder on its way is gone: the disk makes it again
        status = None
    except (OSError, ValueError) as error:  # `Refused`: a link on its way
        return error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    if not _as_found(change, status):
        return CHANGED_SINCE
    if not written_in_place(status):  # a link, a hard link, missing: the disk takes it
        failures: list[tuple[PathChange, str]] = []
        await off_loop(_attempt, failures, change, _put, store, roots, change)
        return failures[0][1] if failures else None
    try:
        async with asyncio.timeout(EDITOR_WRITE_SECONDS):
            await editor(change.path, text)
    except TimeoutError:
        return EDITOR_LATE
    except Exception as error:  # the editor's JSON-RPC error: it did not write
        reason = getattr(error, "message", None) or str(error) or type(error).__name__
        return f"the editor could not write it: {reason}"
    try:
        await off_loop(_set_mode, roots, change.path, change.target[1])
    except (OSError, ValueError) as error:
        return f"its mode could not be set: {error}"
    return None


def _apply_on_disk(
    store: SnapshotStore, changes: list[PathChange], roots: Roots
) -> list[tuple[PathChange, str]]:
    failures: list[tuple[PathChange, str]] = []
    removals = [c for c in changes if c.now is not None and _must_go(c)]
    for change in sorted(removals, key=lambda c: -c.depth):
        _attempt(failures, change, _remove, roots, change)
    failed = {change.path for change, _ in failures}
    removed = {change.path for change in removals} - failed
    for change in sorted(changes, key=lambda c: c.depth):
        if change.target is not None and change.path not in failed:
            put = functools.partial(_put, removed=change.path in removed)
            _attempt(failures, change, put, store, roots, change)
    return failures


def _attempt(failures: list[tuple[PathChange, str]], change: PathChange, *call: Any) -> None:
    function, *arguments = call
    try:
        function(*arguments)
    except (OSError, ValueError) as error:  # `Refused` is a ValueError
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        failures.append((change, str(reason)))


def _must_go(change: PathChange) -> bool:
    """What is there now must be removed first: the path becomes absent, or another kind
    (a file over a directory; a directory, or a link, over a file)."""
    assert change.now is not None
    if change.target is None:
        return True
    return change.now[0] != change.target[0] and (DIRECTORY in (change.now[0], change.target[0]))


def _as_found(change: PathChange, status: os.stat_result | None) -> bool:
    """Whether the path is still as the restore found it before it asked (a file's or a
    link's `lstat`: size, mtime, ctime, inode): one the user saved while the question was
    open is theirs, and was not asked about. A folder's own entries change as the restore
    removes them: not compared."""
    now = change.now
    if now is None or status is None:
        return now is None and status is None
    if now[0] == DIRECTORY:
        return True
    seen = [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino]
    return bool(now[2:6] == seen)


def _remove(roots: Roots, change: PathChange) -> None:
    assert change.now is not None
    entry = open_in_workspace(roots, change.path, Want.ENTRY)
    assert entry.fd is not None and entry.name is not None
    if not _as_found(change, entry.status):
        os.close(entry.fd)
        raise ValueError(CHANGED_SINCE)
    try:
        if change.now[0] == DIRECTORY:
            os.rmdir(entry.name, dir_fd=entry.fd)  # what is left in it (ignored) keeps it
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=entry.fd)
    finally:
        os.close(entry.fd)


def _put(store: SnapshotStore, roots: Roots, change: PathChange, *, removed: bool = False) -> None:
    """Put `change.target` there (`removed`: what was there, this restore removed first)."""
    target = change.target
    assert target is not None
    entry = open_in_workspace(roots, change.path, Want.ENTRY, create=True)
    assert entry.fd is not None and entry.name is not None
    if not removed and not _as_found(change, entry.status):
        os.close(entry.fd)
        raise ValueError(CHANGED_SINCE)
    try:
        if target[0] == FILE:
            replace_at(entry.fd, entry.name, store.object(target[6]), target[1])
        elif target[0] == LINK:
            temporary = f".{entry.name}.parley-{secrets.token_hex(4)}.tmp"
            os.symlink(target[6], temporary, dir_fd=entry.fd)
            os.replace(temporary, entry.name, src_dir_fd=entry.fd, dst_dir_fd=entry.fd)
        else:
            with contextlib.suppress(FileExistsError):
                os.mkdir(entry.name, target[1], dir_fd=entry.fd)
            _chmod_at(entry.fd, entry.name, target[1])
    finally:
        os.close(entry.fd)


def _set_mode(roots: Roots, path: str, mode: int) -> None:
    entry = open_in_workspace(roots, path, Want.ENTRY)
    assert entry.fd is not None and entry.name is not None
    try:
        _chmod_at(entry.fd, entry.name, mode)
    finally:
        os.close(entry.fd)


def _chmod_at(directory_fd: int, name: str, mode: int) -> None:
    """The mode of `name` (a directory, or a file with one name: never a link's target, nor
    a file's other name) set: opened as a place only (O_PATH: no read permission needed),
    then changed through /proc, which names that very entry. A file never gets setuid or
    setgid (`file_mode`)."""
    descriptor = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=directory_fd)
    try:
        status = os.fstat(descriptor)
        if stat.S_ISLNK(status.st_mode):
            raise ValueError(f"{name} is a symlink now")
        if not stat.S_ISDIR(status.st_mode):
            if not written_in_place(status):
                raise ValueError(f"{name} has another name now (a hard link): its mode is kept")
            mode = file_mode(mode)
        os.chmod(f"/proc/self/fd/{descriptor}", mode)
    finally:
        os.close(descriptor)


# --- undo and redo, planned (blocking: run off the loop) ---------------------------------


@attrs.frozen
class UndoPlan:
    """A restore's snapshot side: the changes due, and what it cannot put back."""

    turn: int
    changes: list[PathChange]
    known: set[str]  # every path the turns changed (printable): the checkpoints leave them
    roots: Roots
    before_id: str  # the roots as the restore found them: what a redo returns to
    records: dict[int, dict[str, Any]]
    not_covered: tuple[str, ...]


def plan_undo(
    store: SnapshotStore, session_id: str, turn: int, others: tuple[Path, ...]
) -> UndoPlan | None:
    """What undoing `turn` and every later one does (None: none of them has snapshots)."""
    records = {
        number: record
        for number in store.turns(session_id)
        if number >= turn and (record := store.turn_record(session_id, number)) is not None
    }
    if not records:
        return None
    ordered = [records[number] for number in sorted(records)]
    cwd = ordered[0]["roots"][0]
    roots = Roots(Path(cwd), others)
    damaged: list[dict[str, Any]] = []
    every = turn_changes(store, ordered, cwd, damaged)
    current = _current(store, roots, ordered[-1])
    kept, missing = not_kept(with_now(every, current.entries))
    said = not_covered(ordered, missing)
    if damaged:
        numbers = [number for number, record in records.items() if record in damaged]
        said += (DAMAGED_NOT_COVERED.format(", ".join(map(str, sorted(numbers)))),)
    known = {printable_name(path) for path in every}
    return UndoPlan(turn, kept, known, roots, current.manifest_id, records, said)


def keep_for_redo(store: SnapshotStore, session_id: str, turn: int, undo: UndoPlan) -> None:
    """After an undo: its turns' records go (a next undo goes further back), and the
    restore is kept, so that a redo can put back what it changed."""
    last = undo.records[max(undo.records)]
    after = _current(store, undo.roots, last)
    for number in undo.records:
        store.drop_turn_record(session_id, number)
    restores = store.restores(session_id)
    restores.append(
        {
            "turn": turn,
            "cwd": str(undo.roots.cwd),
            "before": undo.before_id,
            "after": after.manifest_id,
            "ignore": last.get("ignore", []),
            "maxBytes": last.get("maxBytes"),
            "records": {str(number): record for number, record in undo.records.items()},
        }
    )
    store.put_restores(session_id, restores)


@attrs.frozen
class RedoPlan:
    turn: int
    changes: list[PathChange]
    roots: Roots
    not_covered: tuple[str, ...]


def plan_redo(store: SnapshotStore, session_id: str, others: tuple[Path, ...]) -> RedoPlan | None:
    """What redoing the last restore does (None: there is none to redo)."""
    restores = store.restores(session_id)
    if not restores:
        return None
    last = restores[-1]
    roots = Roots(Path(last["cwd"]), others)
    changes = redo_changes(store, last["before"], last["after"], last["cwd"])
    current = _current(store, roots, last)
    kept, missing = not_kept(with_now(changes, current.entries))
    return RedoPlan(last["turn"], kept, roots, not_covered([], missing))


def finish_redo(store: SnapshotStore, session_id: str) -> None:
    """After a redo: the turns it put back can be undone again."""
    restores = store.restores(session_id)
    last = restores.pop()
    for number, record in last["records"].items():
        store.put_turn_record(session_id, int(number), record)
    store.put_restores(session_id, restores)


def last_changing_turn(store: SnapshotStore, session_id: str) -> int | None:
    """The last turn whose snapshots differ, before and after it."""
    for number in reversed(store.turns(session_id)):
        record = store.turn_record(session_id, number)
        if record is None or record["before"] == record["after"]:
            continue
        if turn_changes(store, [record], record["roots"][0]):
            return number
    return None


def _current(store: SnapshotStore, roots: Roots, record: dict[str, Any]) -> Snapshot:
    """The roots now, with the ignore rules and the size cap the turn had (its content
    kept, for a redo, up to that cap: a 200 GB file a command made is not read whole)."""
    ignore = tuple(record.get("ignore", ()))
    cap = record.get("maxBytes") or CheckpointsTable().max_turn_megabytes * 1024 * 1024
    return take_snapshot(store, roots.all, latest_snapshot(store, roots.all), ignore, cap)


# --- what a restore cannot put back ------------------------------------------------------

# The kinds of tool that write only through the gate (Parley's edits): nothing outside.
CONFINED_KINDS = frozenset({"edit", "delete", "move"})
KERNEL_NOT_COVERED = (
    "The Python kernel's variables: an evaluation's effect on the live kernel is not undone."
)
PROCESSES_NOT_COVERED = "Processes the turn's commands left running: they were not stopped."
OUTSIDE_SANDBOXED = (
    "Anything outside the workspace's roots (the sandbox let the turn's commands and "
    "evaluations write nowhere else)."
)
OUTSIDE_UNSANDBOXED = (
    "Anything outside the workspace's roots: the turn's commands and evaluations ran "
    "unsandboxed and may have written there (`parley doctor` says why)."
)
IGNORED_NOT_COVERED = (
    "Paths left out of the snapshots (`.gitignore`, `[checkpoints] ignore`, `.git`):"
)
NOT_KEPT_NOT_COVERED = "Files whose content was not kept:"
DAMAGED_NOT_COVERED = (
    "What turn(s) {} changed: their snapshots are damaged in Parley's store, so it is not "
    "undone (the other turns' changes are)."
)


def not_covered(records: list[dict[str, Any]], missing: list[PathChange]) -> tuple[str, ...]:
    """What a restore of these turns' records cannot put back, in sentences."""
    ran = {tool for record in records for tool in record.get("ran", ())}
    said = []
    if "python_eval" in ran:
        said.append(KERNEL_NOT_COVERED)
    if "run_command" in ran:
        said.append(PROCESSES_NOT_COVERED)
    kinds = {kind for record in records for kind in record.get("kinds", ())}
    if kinds - CONFINED_KINDS:  # something but the gate's edits wrote
        sandboxed = all(record.get("sandboxed") for record in records)
        said.append(OUTSIDE_SANDBOXED if sandboxed else OUTSIDE_UNSANDBOXED)
    cwd = Roots(Path(records[0]["roots"][0])) if records else None
    ignored = list(dict.fromkeys(name for r in records for name in r.get("ignored", ())))
    if ignored:
        more = max(r.get("ignoredCount", 0) for r in records) - len(ignored)
        listed = ", ".join(f"`{printable_name(name)}`" for name in ignored)
        said.append(f"{IGNORED_NOT_COVERED} {listed}" + (f" and {more} more." if more > 0 else "."))
    reasons = {path: why for record in records for path, why in record.get("notKept", {}).items()}
    for change in missing:
        reasons.setdefault(change.path, "its content was not kept")
    if reasons:
        listed = "; ".join(
            f"`{printable_name(cwd.shown(path) if cwd else path)}` ({why})"
            for path, why in sorted(reasons.items())
        )
        said.append(f"{NOT_KEPT_NOT_COVERED} {listed}.")
    return tuple(said)
