"""Checkpoints: what a turn's edits overwrite, kept in the store, and putting it back.

`TurnCheckpoints` is the `EditJournal` a turn hands its tools: before an edit tool first
writes a file in a turn, the file's bytes (or that it did not exist) are stored; after each
tool call, how the call left the files it wrote (a hash), so that a restore can tell a file
the user changed since. `restore_turn` puts every file edited from a turn on back as it was
before that turn, byte for byte, removing the files the turns created, and leaves a note the
model gets with the next prompt. The conversation is never changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from parley.agent import snapshot_restore
from parley.agent.session import now_iso
from parley.agent.snapshot_restore import EditorRead, EditorWrite, PathChange
from parley.agent.snapshot_store import SnapshotStore, store_in_use
from parley.agent.snapshots import TurnSnapshots
from parley.config import Settings
from parley.core.off_loop import off_loop
from parley.display import escape_controls
from parley.sandbox_policy import GIT_REFERENCE_REASON, RUNS_LATER_IN_ROOT
from parley.store import Checkpoint, Store
from parley.tools.base import ClientFiles, ClientWrites
from parley.tools.confined import (
    Refused,
    Roots,
    Want,
    as_roots,
    open_confined,
    open_in_workspace,
    printable_name,
    replace_at,
    restore_place,
    written_in_place,
)
from parley.tools.workspace import EDITOR_WRITE_SECONDS

# `Checkpoint.written` of a file Parley left absent.
ABSENT = ""
# A file that cannot be read now (a directory, a FIFO, no permission): never what was written.
UNREADABLE = "unreadable"


class TurnCheckpoints:
    """The `EditJournal` of one turn of one session: keeps each file's bytes before the
    turn's first write to it (only the first), and how the turn left it."""

    def __init__(
        self,
        store: Store,
        session_id: str,
        turn: int,
        root: Roots | Path,
        settings: Settings | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.turn = turn
        self.root = as_roots(root)  # the checkpoints keep the cwd's root
        self._kept: set[str] = set()
        self._written: set[str] = set()  # written since `record_written` last ran
        # Every root snapshotted around each writing call (None: edits only, as in tests
        # that drive the journal alone).
        self.snapshots = (
            None
            if settings is None
            else TurnSnapshots(
                SnapshotStore(settings.home),
                session_id,
                turn,
                self.root.all,
                settings.checkpoints,
                settings.sandbox,
            )
        )

    async def before_call(self, kind: str, tool: str) -> None:
        """Before a tool runs: a snapshot of every root when its kind can write."""
        if self.snapshots is not None:
            await self.snapshots.before_call(kind, tool)

    async def after_call(self) -> None:
        """After a tool ran: how it left the files it wrote, and the roots (that snapshot
        in the background: `settled`)."""
        self.record_written()
        if self.snapshots is not None:
            await self.snapshots.after_call()

    async def settled(self) -> list[tuple[str, str]]:
        """The turn's snapshots taken and recorded, even through a Stop: before the turn ends
        (`TurnSnapshots.finished`). What runs later outside the sandbox that its calls made
        or changed, besides the edits it asked about (`TurnSnapshots.runs_later_left`): each
        shown relative to the cwd's root, with what runs it."""
        if self.snapshots is None:
            return []
        await self.snapshots.finished()
        left = await off_loop(self.snapshots.runs_later_left, frozenset(self._kept))
        return [
            (
                escape_controls(printable_name(self.root.shown(place)), one_line=True),
                RUNS_LATER_IN_ROOT.get(os.path.basename(place), GIT_REFERENCE_REASON),
            )
            for place in left
        ]

    def runs_later_found(self) -> tuple[Path, ...]:
        return self.snapshots.runs_later_found() if self.snapshots is not None else ()

    def before_write(self, path: Path) -> None:
        """Raises `OSError` (or `Refused`) when the file is there but cannot be read: an
        edit that cannot be undone must not be made."""
        key = printable_name(str(path))  # the gate finds a name that is not UTF-8 again
        self._written.add(key)
        if key in self._kept:
            return
        content, mode = _current(self.root, key)
        self.store.keep_checkpoint(
            self.session_id, self.turn, str(self.root.cwd), key, content, mode, now_iso()
        )
        self._kept.add(key)

    def record_written(self) -> None:
        """After a tool call: how the files it wrote are now (what a restore expects)."""
        for key in sorted(self._written):
            self.store.mark_written(self.session_id, self.turn, key, fingerprint(self.root, key))
        self._written.clear()


def _current(root: Roots | Path, path: str) -> tuple[bytes | None, int | None]:
    """The file's bytes and permission bits; (None, None) when there is no file."""
    try:
        with open_confined(root, path) as file:
            return file.read(), os.fstat(file.fileno()).st_mode & 0o7777
    except FileNotFoundError:
        return None, None


def fingerprint(root: Roots | Path, path: str) -> str:
    """What a file is now, as `Checkpoint.written` says it: its bytes' sha256, or ABSENT."""
    try:
        content, _ = _current(root, path)
    except (OSError, ValueError):  # `Refused` is a ValueError
        return UNREADABLE
    return ABSENT if content is None else _digest(content)


def _digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# --- restoring ---------------------------------------------------------------------------


@attrs.frozen
class FileRestore:
    """One file of a restore: what it becomes (`content` None: removed), and what Parley
    last wrote to it (`expected`, as `Checkpoint.written`)."""

    path: str
    root: str
    content: bytes | None
    mode: int | None
    expected: str | None
    # Between the turns being undone, someone else changed the file (a later turn found it
    # otherwise than an earlier one left it): restoring it loses that change.
    changed_between: bool = False

    @property
    def action(self) -> str:
        return "removed" if self.content is None else "restored"

    @property
    def target(self) -> str:
        """What the file becomes, as `Checkpoint.written` says it."""
        return ABSENT if self.content is None else _digest(self.content)

    @property
    def shown(self) -> str:
        """The path as a person reads it: relative to the workspace (absolute in another
        root)."""
        return printable_name(as_roots(Path(self.root)).shown(os.path.normpath(self.path)))

    def roots(self, others: tuple[Path, ...]) -> Roots:
        """Where the file may be restored: the root its turn ran in, and the session's other
        roots now (`additionalDirectories` are not stored: a root no longer given is not
        written in)."""
        return Roots(Path(self.root), others)


# A path a restore put back: from the edit tools' checkpoints, or from the snapshots.
Restored = FileRestore | PathChange


@attrs.frozen
class RestoreResult:
    turn: int | None  # None: no turn had checkpoints
    files: tuple[Restored, ...] = ()  # those put back
    rejected: tuple[Restored, ...] = ()  # the user kept them: nothing was restored
    failures: tuple[tuple[Restored, str], ...] = ()  # (file, why it could not be)
    cancelled: bool = False  # stopped (`session/cancel`) while asking: nothing was restored
    not_covered: tuple[str, ...] = ()  # what the restore cannot put back, in sentences
    redo: bool = False  # a redo: the turn's result put back

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "files": [{"path": file.path, "action": file.action} for file in self.files]
        }
        if self.rejected:
            wire["rejected"] = True
        if self.cancelled:
            wire["cancelled"] = True
        if self.failures:
            wire["failed"] = [{"path": file.path, "reason": why} for file, why in self.failures]
        if self.not_covered:
            wire["notCovered"] = list(self.not_covered)
        return wire

    @property
    def touched(self) -> tuple[str, ...]:
        """The files the restore wrote or tried to (a failed write may have happened)."""
        return tuple(file.path for file in (*self.files, *(file for file, _ in self.failures)))


# Asked before files the user changed are overwritten: True to go on; raises
# `RestoreCancelled` when the restore is stopped while it waits for the answer.
AskUser = Callable[[int, list[Restored]], Awaitable[bool]]


def editor_reads(files: ClientFiles | None, session_id: str) -> EditorRead | None:
    """What the editor's buffers hold, when it offers `fs/read_text_file`: a restore asks
    before it writes over text the user typed and did not save."""
    if files is None:
        return None
    return lambda path: files.read_text_file(session_id, path)


def editor_writes(writes: ClientWrites | None, session_id: str) -> EditorWrite | None:
    """A restore's writes through the editor's buffers, when it offers
    `fs/write_text_file` (as the edits were: one undoable change per file there)."""
    if writes is None:
        return None
    return lambda path, text: writes.write_text_file(session_id, path, text)


class RestoreCancelled(Exception):
    """The user stopped the restore while it asked them (`session/cancel`)."""


def plan_restore(checkpoints: list[Checkpoint]) -> list[FileRestore]:
    """What each file becomes, from the checkpoints of a turn and the later turns (newest
    first): each older checkpoint replaces what a newer one gave, so the oldest wins; what
    Parley last wrote is the newest turn's."""
    plan: dict[str, FileRestore] = {}
    for checkpoint in checkpoints:
        newer = plan.get(checkpoint.path)
        plan[checkpoint.path] = FileRestore(
            checkpoint.path,
            checkpoint.root,
            checkpoint.content,
            checkpoint.mode,
            newer.expected if newer is not None else checkpoint.written,
            newer is not None and (newer.changed_between or newer.target != checkpoint.written),
        )
    return sorted(plan.values(), key=lambda file: file.path)


def changed_since_written(
    plan: list[FileRestore], others: tuple[Path, ...] = ()
) -> list[FileRestore]:
    """The files not already as the restore would make them that someone else changed:
    now (not as Parley last left them), or between the turns undone (a later turn found
    the file otherwise than an earlier one left it). Restoring them would lose that change.
    A file whose write was never recorded (the server died mid-call) counts as changed."""
    changed = []
    for file in plan:
        now = fingerprint(file.roots(others), file.path)
        if now != file.target and (file.changed_between or now != file.expected):
            changed.append(file)
    return changed


async def restore_turn(
    store: Store,
    session_id: str,
    turn: int,
    ask: AskUser,
    others: tuple[Path, ...] = (),
    editor: EditorWrite | None = None,
    snapshots: SnapshotStore | None = None,
    buffers: EditorRead | None = None,
) -> RestoreResult:
    """Put the files changed from `turn` on back as they were before it, inside the root
    each turn ran in or `others` (the session's other roots): every path the turns' snapshots
    saw change (`snapshots`: commands', evaluations' and MCP tools' writes too), and the
    files the edit tools' checkpoints hold that the snapshots do not. Through the editor when
    it writes files (`editor`: its buffers, one undoable change each; a file it cannot take —
    removed, not text — on disk), else on disk. Paths the user changed since are overwritten
    only if `ask` says so (otherwise nothing is restored). The checkpoints and the turns'
    snapshot records are used up (unless a path failed: then all stay, to try again), and
    the restore is kept so that a redo can put the turns' result back."""
    undo = None
    if snapshots is not None:
        undo = await off_loop(snapshot_restore.plan_undo, snapshots, session_id, turn, others)
    known = undo.known if undo is not None else set()
    # A file the turns left as they found it (a write that failed) has nothing to undo.
    plan = [
        file
        for file in plan_restore(store.checkpoints(session_id, turn))
        if file.expected != file.target and file.path not in known
    ]
    changes = undo.changes if undo is not None else []
    if snapshots is not None and editor is not None and buffers is not None:
        changes = await snapshot_restore.with_buffers(snapshots, changes, buffers)
    not_covered = undo.not_covered if undo is not None else ()
    if not plan and not changes:
        store.drop_checkpoints(session_id, turn)
        return RestoreResult(turn, not_covered=not_covered)
    changed: list[Restored] = [
        *await asyncio.to_thread(changed_since_written, plan, others),
        *(change for change in changes if change.user_changed),
    ]
    try:
        if changed and not await ask(turn, changed):
            return RestoreResult(turn, rejected=tuple(changed), not_covered=not_covered)
    except RestoreCancelled:
        return RestoreResult(turn, cancelled=True)
    failures: list[tuple[Restored, str]] = [*await _restore_checkpointed(plan, others, editor)]
    if undo is not None and snapshots is not None:
        failures += await snapshot_restore.apply_changes(snapshots, changes, undo.roots, editor)
    failed = {file.path for file, _ in failures}
    restored = tuple(file for file in (*plan, *changes) if file.path not in failed)
    if not failures:
        store.drop_checkpoints(session_id, turn)
        if undo is not None and snapshots is not None:
            await off_loop(snapshot_restore.keep_for_redo, snapshots, session_id, turn, undo)
    if restored:
        store.add_restore_note(session_id, model_note(turn, restored))
    return RestoreResult(turn, restored, failures=tuple(failures), not_covered=not_covered)


async def _restore_checkpointed(
    plan: list[FileRestore], others: tuple[Path, ...], editor: EditorWrite | None
) -> list[tuple[FileRestore, str]]:
    """The edit tools' checkpoints put back; the failures."""
    by_editor = [file for file in plan if editor is not None and _as_text(file) is not None]
    on_disk = [file for file in plan if file not in by_editor]
    failures = await asyncio.to_thread(_apply, on_disk, others)
    if editor is None:
        return failures
    silent = False  # an editor that let one write time out is not waited on for each other
    for file in by_editor:
        if silent:
            failures.append((file, snapshot_restore.EDITOR_SILENT))
            continue
        failure = await _through(editor, file, others)
        silent = failure is not None and failure[1] == snapshot_restore.EDITOR_LATE
        if failure is not None:
            failures.append(failure)
    return failures


async def redo_restore(
    store: Store,
    session_id: str,
    ask: AskUser,
    snapshots: SnapshotStore,
    others: tuple[Path, ...] = (),
    editor: EditorWrite | None = None,
    buffers: EditorRead | None = None,
) -> RestoreResult:
    """Undo the last restore (`/redo`): every path it changed back as the restore found it,
    asking first about paths changed since; the turns it undid can be undone again."""
    redo = await off_loop(snapshot_restore.plan_redo, snapshots, session_id, others)
    if redo is None:
        return RestoreResult(None, redo=True)
    changes = redo.changes
    if editor is not None and buffers is not None:
        changes = await snapshot_restore.with_buffers(snapshots, changes, buffers)
    changed: list[Restored] = [change for change in changes if change.user_changed]
    try:
        if changed and not await ask(redo.turn, changed):
            return RestoreResult(redo.turn, rejected=tuple(changed), redo=True)
    except RestoreCancelled:
        return RestoreResult(redo.turn, cancelled=True, redo=True)
    failures = await snapshot_restore.apply_changes(snapshots, changes, redo.roots, editor)
    failed = {file.path for file, _ in failures}
    restored = tuple(change for change in changes if change.path not in failed)
    if not failures:
        await off_loop(snapshot_restore.finish_redo, snapshots, session_id)
    if restored:
        store.add_restore_note(session_id, model_note(redo.turn, restored, redo=True))
    return RestoreResult(
        redo.turn, restored, failures=tuple(failures), not_covered=redo.not_covered, redo=True
    )


async def restore_or_redo(
    store: Store,
    session_id: str,
    turn: int | None,
    ask: AskUser,
    others: tuple[Path, ...],
    editor: EditorWrite | None,
    snapshots: SnapshotStore,
    buffers: EditorRead | None,
) -> RestoreResult:
    """`restore_turn` of `turn`, or (None) `redo_restore`: what `Sessions.restore` runs,
    holding the snapshot store's lock (no collection meanwhile)."""
    async with store_in_use(snapshots):
        if turn is None:
            return await redo_restore(store, session_id, ask, snapshots, others, editor, buffers)
        return await restore_turn(store, session_id, turn, ask, others, editor, snapshots, buffers)


async def last_undoable_turn(store: Store, snapshots: SnapshotStore, session_id: str) -> int | None:
    """The last turn that changed files (its edits checkpointed, or its snapshots differ:
    compared off the loop, they grow with the tree)."""
    checkpointed = store.last_checkpointed_turn(session_id)
    snapshotted = await off_loop(snapshot_restore.last_changing_turn, snapshots, session_id)
    found = [turn for turn in (checkpointed, snapshotted) if turn is not None]
    return max(found, default=None)


def restore_question(turn: int, *, redo: bool) -> str:
    """The title of the question asked before a restore overwrites the user's changes."""
    if redo:
        return f"Put back what turn {turn} and the later turns did, overwriting your changes"
    return f"Restore files as they were before turn {turn}, overwriting your changes"


# What a path became, as the model is told.
NOTE_WORDS = {
    snapshot_restore.REMOVED: "removed: it did not exist then",
    snapshot_restore.RECREATED: "re-created: the turn deleted it",
    snapshot_restore.RESTORED: "restored",
}


# The paths a restore's note to the model, and its report to the user, name (the rest are
# counted): a turn that made 20,000 files would cost the next prompt that many names.
NAMED_AT_MOST = 50


def more_than_named(files: tuple[Any, ...]) -> str:
    """The words for what `NAMED_AT_MOST` leaves unnamed of `files` ("" when nothing)."""
    more = len(files) - NAMED_AT_MOST
    return f"and {more:,} more path{'s' * (more != 1)}" if more > 0 else ""


def model_note(turn: int, files: tuple[Restored, ...], *, redo: bool = False) -> str:
    """What the model is told with the next prompt (prepended to it)."""
    named = [f"{file.shown} ({NOTE_WORDS[file.action]})" for file in files[:NAMED_AT_MOST]]
    listed = ", ".join([*named, more_than_named(files)] if len(files) > NAMED_AT_MOST else named)
    if redo:
        return (
            f"[Parley: the user undid their restore of turn {turn}: the files are back as "
            f"that turn and the later ones left them (the conversation is unchanged): "
            f"{listed}. Read a file again before editing it.]"
        )
    return (
        f"[Parley: the user restored files to how they were before turn {turn}, undoing the "
        f"edits made from that turn on (the conversation is unchanged): {listed}. Read a file "
        "again before editing it.]"
    )


def _as_text(file: FileRestore) -> str | None:
    """What the editor is given to write: the file's old bytes as text (None: removed, or
    not UTF-8, which only the disk can take back exactly)."""
    if file.content is None:
        return None
    try:
        return file.content.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def _through(
    editor: EditorWrite, file: FileRestore, others: tuple[Path, ...]
) -> tuple[FileRestore, str] | None:
    """Restore `file` through the editor; None when it did, else why not."""
    text = _as_text(file)
    assert text is not None
    try:
        where = await asyncio.to_thread(_editor_path, file, others)
    except UnicodeEncodeError:  # a name the wire cannot carry: the disk takes it back
        where = None
    except (Refused, OSError, ValueError) as error:
        return file, str(error.strerror if isinstance(error, OSError) and error.strerror else error)
    if where is None:
        failures = await asyncio.to_thread(_apply, [file], others)
        return failures[0] if failures else None
    try:
        async with asyncio.timeout(EDITOR_WRITE_SECONDS):
            await editor(where, text)
    except TimeoutError:
        return file, snapshot_restore.EDITOR_LATE
    except Exception as error:  # the editor's JSON-RPC error: it did not write
        reason = getattr(error, "message", None) or str(error) or type(error).__name__
        return file, f"the editor could not write it: {reason}"
    return None


def _editor_path(file: FileRestore, others: tuple[Path, ...]) -> str | None:
    """The absolute path the editor writes, as UTF-8 text the wire can carry: where the
    gate finds `file` inside its roots now, following no link (`restore_place`: one on the
    way is refused). None when only the disk can take it back: a link or a file with another
    name stands at its end (the editor would write through it; the disk replaces it) or a
    folder on its way is missing (the disk makes it, inside the roots)."""
    try:
        where, status = restore_place(file.roots(others), file.path)
    except FileNotFoundError:
        return None
    if status is not None and not written_in_place(status):  # a link, a hard link: the disk's
        return None
    where.encode("utf-8")  # a name that is not UTF-8 raises (UnicodeEncodeError)
    return where


def _apply(plan: list[FileRestore], others: tuple[Path, ...]) -> list[tuple[FileRestore, str]]:
    """Write (or remove) each file; what failed, and why."""
    failures = []
    for file in plan:
        try:
            if file.content is None:
                _remove(file.roots(others), file.path)
            else:
                _write(file.roots(others), file.path, file.content, file.mode)
        except (OSError, ValueError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            failures.append((file, str(reason)))
    return failures


def _write(root: Roots, path: str, content: bytes, mode: int | None) -> None:
    """Atomically: a temporary file beside it, renamed over it (a symlink there is replaced,
    never followed), in its folder as the gate opens it (made if missing, inside the root)."""
    entry = open_in_workspace(root, path, Want.ENTRY, create=True)
    assert entry.fd is not None and entry.name is not None
    try:
        replace_at(entry.fd, entry.name, content, 0o644 if mode is None else mode)
    finally:
        os.close(entry.fd)


def _remove(root: Roots, path: str) -> None:
    try:
        entry = open_in_workspace(root, path, Want.ENTRY)
    except FileNotFoundError:
        return  # its folder is gone: so is the file
    assert entry.fd is not None and entry.name is not None
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.name, dir_fd=entry.fd)
    finally:
        os.close(entry.fd)
