"""The sessions a server has open: the one place a session is created, opened from the
store, prompted, configured, closed and deleted.

Two servers (two editor windows) may share a session. A turn holds the session's lease in
the store; under it, the server first takes in (and shows) the turns another window added,
and mends the calls a dead server left without a result.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from parley.agent import notices
from parley.agent.budgets import BudgetSpent, overrun
from parley.agent.call_usage import count_call
from parley.agent.checkpoints import (
    RestoreResult,
    editor_reads,
    editor_writes,
    last_undoable_turn,
    restore_or_redo,
)
from parley.agent.commands import CommandCall, available_commands, parse_command, run_command
from parley.agent.compactor import Compactor
from parley.agent.config_options import (
    InvalidChoice,
    budget_value,
    requested_change,
    session_config_options,
)
from parley.agent.learned_windows import LearnedWindows
from parley.agent.mcp_servers import SessionMcpServers
from parley.agent.modes import current_mode_update
from parley.agent.replay import replay_updates, turn_start, unanswered_calls
from parley.agent.restore_question import ask_before_overwrite
from parley.agent.session import Session, load_compaction, new_id
from parley.agent.snapshot_gc import collect_soon
from parley.agent.snapshot_store import SnapshotStore
from parley.agent.turn import (
    Turn,
    TurnPorts,
    TurnResult,
    TurnStats,
    refused_by_budget,
    session_request,
)
from parley.agent.user_kernels import kernel_option
from parley.config import Settings
from parley.core import updates
from parley.core.conversation import (
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    UserMessage,
)
from parley.core.off_loop import off_loop
from parley.core.session_settings import SessionOptions, SessionSettings
from parley.providers.base import Completion, ModelRequest
from parley.providers.registry import ProviderRegistry, split_model_id
from parley.store import ConversationRewritten, SessionBusy, SessionGone, Store, StoredSession
from parley.tools.base import Tool
from parley.tools.confined import RootRefused, Roots, refuse_too_broad, workspace_roots
from parley.tools.jupyter_runtime import running_kernels
from parley.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)

# How long a turn holds its session against other servers without renewing (it renews every
# third of it); a holder that died is taken over at once.
LEASE_SECONDS = 30.0
# A replay is made off the event loop this many updates at a time.
REPLAY_BATCH = 200
BUSY_HERE = "A turn is already running in this session; cancel it or wait for it to end."
BUSY_ELSEWHERE = (
    "This session is busy in another window; wait for its turn to end (or cancel it there), "
    "then try again."
)

# The tools of a session in a workspace (its roots), given the kernel's limit per call (None:
# default).
ToolsFor = Callable[[Roots, float | None], list[Tool]]


class SessionError(Exception):
    """A request about a session that cannot be served; `message` is for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownSession(SessionError):
    """No such session: never created, or deleted (maybe in another window)."""


class SessionInUse(SessionError):
    """A turn runs in the session, in this server or in another."""


class InvalidOptions(SessionError):
    """Options a session cannot have (a workspace that is no directory, a bad model id)."""


class UnsupportedContent(SessionError):
    """A prompt the session's model cannot take (an image for a model without vision)."""


@attrs.define
class Sessions:
    store: Store
    providers: ProviderRegistry
    settings: Settings
    ports: TurnPorts
    tools_for: ToolsFor
    instance_id: str = attrs.field(factory=lambda: new_id("srv"))  # names us in the leases
    _open: dict[str, Session] = attrs.field(factory=dict)
    _prompts: set[asyncio.Task[Any]] = attrs.field(factory=set)  # the requests running a turn
    # Each session's MCP servers (agent/mcp_servers.py).
    mcp: SessionMcpServers = attrs.field(
        init=False, default=attrs.Factory(lambda self: SessionMcpServers(self.settings), True)
    )
    # The sessions this server holds the lease of, and what for (`_leased`).
    _held: dict[str, str] = attrs.field(factory=dict)
    # The sessions whose files are being restored: each restore's stop (`session/cancel`).
    _restoring: dict[str, asyncio.Event] = attrs.field(factory=dict)
    # Context windows providers told this server (agent/learned_windows.py), for every session.
    _windows: LearnedWindows = attrs.field(
        default=attrs.Factory(lambda sessions: LearnedWindows(sessions.store), takes_self=True)
    )

    # --- opening ---------------------------------------------------------------------------

    def new(self, cwd: Path, options: SessionOptions, additional: Sequence[Path] = ()) -> Session:
        """A new session in `cwd`, with `additional` roots (absolute directories, checked
        by the protocol); stored from its first prompt on."""
        if not cwd.is_absolute():
            raise InvalidOptions(f"cwd must be an absolute path, not {str(cwd)!r}")
        if not cwd.is_dir():
            raise InvalidOptions(f"cwd {str(cwd)!r} is not a directory")
        settings = attrs.evolve(
            options.settings, model=options.settings.model or self.settings.default_model
        )
        _check_model_id(settings.model)
        roots = _roots(cwd, additional)  # once: the tools and the checkpoints share them
        session = Session(
            id=new_id("sess"),
            cwd=cwd,
            root=roots.cwd,
            roots=roots,
            settings=settings,
            tools=ToolRegistry(self.tools_for(roots, settings.eval_timeout_seconds)),
            store=self.store,
            auto_approve=set(options.auto_approve),
            stored=False,  # from its first prompt on
        )
        self._open[session.id] = session
        return session

    async def load(
        self, session_id: str, cwd: Path, *, replay: bool = True, additional: Sequence[Path] = ()
    ) -> Session:
        """Open a stored session (or catch up the open one) with the `additional` roots given
        now, then replay its conversation to the client (`session/load`; `session/resume`
        does not replay)."""
        unstored = self._open.get(session_id)
        if unstored is not None and not unstored.stored:
            # Never prompted: nothing stored, nothing to show; only the roots may change.
            await self._reroot(unstored, _roots(unstored.cwd, additional))
            return unstored
        # A turn in another window does not stop a load; only its calls are not mended.
        async with self._leased(session_id, "load", unless_held_elsewhere=True) as held:
            stored = self.store.session(session_id)
            if stored is None:  # deleted in another window since the lease was looked at
                await self.forget(session_id)
                raise _unknown(session_id)
            # The client's cwd is where the user is now; fall back to where the session began.
            cwd = cwd if cwd.is_dir() else Path(stored.cwd)
            session = self._open.get(stored.id)
            roots = _roots(cwd, additional)
            if session is not None and (session.cwd != cwd or session.roots != roots):
                await self.forget(session.id)  # its tools and approvals belong to its workspace
                session = None
            if session is None:
                session = self._open_stored(stored, cwd, roots)
            else:
                session.catch_up()
            if held:  # a turn running in another window: its calls are not stranded, they run
                _mend_unanswered(session)
        if replay:
            replayed = replay_updates(session.messages(), session.tools, 0, session.notices())
            await self._replay(session, replayed)
        return session

    async def resume_from(
        self, session_id: str, cwd: Path, turn: int | None, additional: Sequence[Path] = ()
    ) -> Session:
        """ACP v2's `session/resume`: `load`, replaying from turn `turn` (1: all; None: none)."""
        session = await self.load(session_id, cwd, replay=False, additional=additional)
        if turn is not None:
            start = await off_loop(turn_start, session.messages(), turn)
            if start is None:
                raise InvalidOptions(f"replayFrom.turn: the session has no turn {turn}")
            missed = session.messages(start), session.tools, start, session.notices(start)
            await self._replay(session, replay_updates(*missed))
        return session

    async def _replay(self, session: Session, replayed: Iterator[dict[str, Any]]) -> None:
        """Send a replay's updates. They are made off the event loop, a batch at a time
        (reading and decoding the stored messages, and an older session's calls' views, grow
        with the history); only sending them is the loop's."""

        def next_batch() -> asyncio.Future[list[dict[str, Any]]]:
            return asyncio.ensure_future(off_loop(list, itertools.islice(replayed, REPLAY_BATCH)))

        # The next batch is made while this one is sent (the iterator is used by one thread
        # at a time: the next job starts only once the one before it is done).
        coming = next_batch()
        try:
            while batch := await coming:
                coming = next_batch()
                for update in batch:
                    self.ports.send_update(session.id, update)
                await self.ports.drained()  # at the client's pace: never held whole
        except ConversationRewritten as rewritten:  # a turn replaced in another window
            raise SessionInUse(str(rewritten)) from rewritten

    def _open_stored(self, stored: StoredSession, cwd: Path, roots: Roots) -> Session:
        session = Session(
            id=stored.id,
            cwd=cwd,
            root=roots.cwd,
            roots=roots,  # once: the tools and the checkpoints share them
            settings=attrs.evolve(
                stored.settings, model=stored.settings.model or self.settings.default_model
            ),
            tools=ToolRegistry(self.tools_for(roots, stored.settings.eval_timeout_seconds)),
            store=self.store,
            auto_approve=set(stored.approvals.get(str(roots.cwd), [])),  # this root's only
            history=None,  # read when first needed: a replay streams it from the store
            length=self.store.message_count(stored.id),
            title=stored.title,
            created_at=stored.created_at,
            updated_at=stored.updated_at,
            totals=self.store.usage_totals(stored.id),
            compaction=load_compaction(self.store, stored.id),
        )
        self._open[session.id] = session
        return session

    async def _reroot(self, session: Session, roots: Roots) -> None:
        """A session not yet stored given other roots: its tools are made anew for them (the
        kernel's sandbox writes only in its roots; the MCP servers are restarted by the
        caller). Its own kernel limit per call is not kept: the configured one applies."""
        if roots == session.roots:
            return
        await session.tools.aclose()
        session.roots = roots
        session.tools = ToolRegistry(self.tools_for(roots, None))

    def is_open(self, session_id: str) -> bool:
        return session_id in self._open

    def get(self, session_id: str) -> Session:
        session = self._open.get(session_id)
        if session is None:
            hint = " (load it first with session/load)" if self.store.session(session_id) else ""
            raise _unknown(session_id, hint)
        return session

    def __contains__(self, session_id: str) -> bool:
        """Whether the session is open in this server."""
        return session_id in self._open

    def is_unprompted(self, session_id: str) -> bool:
        """A new session of this server that had no prompt yet (so it is not stored)."""
        session = self._open.get(session_id)
        return session is not None and not session.stored

    def config_options(self, session: Session) -> list[dict[str, Any]]:
        """The session's `configOptions` as ACP clients show them."""
        levels = self.settings.thought_levels(session.settings.model)
        level = session.settings.thought_level
        if level not in levels:  # none chosen, or one this model (now) does not take
            level = self.settings.default_thought_level(session.settings.model)
        options = session_config_options(
            session.settings.model,
            session.settings.tool_policy,
            self.providers.model_infos(),
            levels,
            level,
            budget=budget_value(session.settings.budget, self.settings.budget.session_usd),
            configured_budget=self.settings.budget.session_usd,
            mode=session.settings.mode,
        )
        return [*options, kernel_option(session.settings.kernel, running_kernels())]

    def announce_commands(self, session_id: str) -> None:
        """Tell the client which slash commands the session takes (once it has started)."""
        if session_id in self._open:
            self.ports.send_update(session_id, updates.available_commands(available_commands()))

    # --- a turn ----------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        content: tuple[ContentBlock, ...],
        *,
        literal: bool = False,
        retry: bool = False,
    ) -> TurnResult:
        """Run a turn under the session's lease; the other windows' turns are shown first.
        A prompt that is a slash command runs the command instead (unless `literal`). A
        `retry` replaces the last turn if it was cut off and nothing came after it
        (`_replace_cut_off_turn`)."""
        session = self.get(session_id)
        command = None if literal else parse_command(content)
        if command is not None:  # never replaces a turn: a retry of one is said not to have
            result = await self._run_command(session, command)
            return attrs.evolve(result, replaced=False) if retry else result
        self._check_content(session, content)
        if not session.stored:  # refused at once, a session nobody used stays unstored
            refused = refused_by_budget(session, self.settings)
            if refused is not None:
                return self._said(session, refused)
        session.start_storing()  # the first prompt stores a new session
        this_request = asyncio.current_task()
        assert this_request is not None
        async with self._leased(session.id, "prompt"):
            self._prompts.add(this_request)
            try:
                cut_off_at = self.store.take_cut_off(session.id)  # any prompt ends retrying
                await self._show_missed_turns(session)
                replaced = False
                if retry and cut_off_at is not None:
                    cut_off_prompt = self.store.messages(session.id, cut_off_at, cut_off_at + 1)
                    replaced = _same_prompt(cut_off_prompt, content)
                if replaced and cut_off_at is not None:
                    content = (*_notes_for_model(session.drop_last_turn(cut_off_at)), *content)
                note = self.store.take_restore_note(
                    session.id
                )  # files restored since the last turn
                if note is not None:  # for the model only: never replayed as the user's
                    content = (TextBlock(note, for_model=True), *content)
                result = await self._run_turn(session, UserMessage(content), this_request)
                return attrs.evolve(result, replaced=replaced) if retry else result
            finally:
                self._prompts.discard(this_request)

    async def _run_command(self, session: Session, command: CommandCall) -> TurnResult:
        """The command's answer is an agent message (not in the history); a notice when it
        says why nothing was done (a budget, nothing to undo)."""
        reply = await run_command(command, session, self)
        if not reply.refused:
            # Kept, to be replayed where it was said; its notice, if any, is kept by `_said`.
            answer_kept = None if reply.notice else reply.text
            notices.keep_command_turn(session, command.typed, answer_kept, warning=reply.warning)
        if reply.notice is None:
            answer = updates.command_chunk(
                new_id("msg"), reply.text, typed=False, warning=reply.warning
            )
            self.ports.send_update(session.id, answer)
        totals = attrs.evolve(session.totals)
        stats = TurnStats(model=session.settings.model)
        result = TurnResult(reply.stop_reason, stats, totals, reply.notice)
        if reply.refused:  # said, not kept: the client may drop the command from its view
            return self._said(session, attrs.evolve(result, kept=False), keep=False)
        return self._said(session, result)

    def _said(self, session: Session, result: TurnResult, *, keep: bool = True) -> TurnResult:
        """The prompt's result, once its notice (why it stopped or was refused) is said: the
        one place a notice is sent, before the answer (a request cancelled instead is
        answered with an error, and says none); kept with the session unless not `keep`."""
        if result.notice is not None:
            notices.say(session, self.ports.send_update, result.notice, keep=keep)
        return result

    def _check_content(self, session: Session, content: tuple[ContentBlock, ...]) -> None:
        """Refuse, before any model call, what the session's model cannot take."""
        if any(isinstance(block, ImageBlock) for block in content) and not (
            self.settings.takes_images(session.settings.model)
        ):
            raise UnsupportedContent(
                f"The model {session.settings.model} does not take images: send the prompt without "
                "the image, or switch to a model that does. (If it does take images, say so "
                f'in config.toml: vision = true under [models."{session.settings.model}"].)'
            )

    async def _show_missed_turns(self, session: Session) -> None:
        """Another window may have added turns since this one read the session: take them
        in (the model sees the same conversation) and tell this window. Parley's own
        clients show them in place (a replay); ACP defines no replay inside a prompt, so any
        other client is told in one notice to reload instead (its user would see the other
        window's turn as the start of this reply)."""
        start = session.catch_up()
        _mend_unanswered(session)  # the other window may have died mid-turn
        if start is None:  # a turn this window shows was replaced there: nothing to add to
            notice = notices.rewritten_elsewhere()
            chunk = updates.notice_chunk(new_id("notice"), notice.level, notice.text)
            self.ports.send_update(session.id, chunk)
            return
        if self.ports.wants_revisions:
            missed = session.messages(start), session.tools, start, session.notices(start)
            await self._replay(session, replay_updates(*missed))
            return
        turns = await off_loop(_user_turns, session.messages(start))
        if turns:
            notice = notices.changed_elsewhere(turns)
            chunk = updates.notice_chunk(new_id("notice"), notice.level, notice.text)
            self.ports.send_update(session.id, chunk)

    async def _run_turn(
        self, session: Session, prompt: UserMessage, this_request: asyncio.Task[Any]
    ) -> TurnResult:
        turn = Turn(session, prompt, self.ports, self.providers, self.settings, self._windows)
        turn_start = session.length
        session.running_turn = asyncio.ensure_future(turn.run())
        cut_off = True  # unless it ends on its own: then a retry is an ordinary prompt
        try:
            result = await session.running_turn
            cut_off = result.stop_reason == "cancelled"
            # `$/cancelRequest` cancelled this request: the turn absorbed the cancellation
            # (and settled its history); the request itself is answered -32800.
            if this_request.cancelling():
                raise asyncio.CancelledError
            return self._said(session, result)
        finally:
            session.running_turn = None
            if cut_off and session.length > turn_start:  # a retry may replace it
                self.store.mark_cut_off(session.id, turn_start)

    def cancel(self, session_id: str) -> None:
        session = self._open.get(session_id)
        if session is not None and session.running_turn is not None:
            session.running_turn.cancel()
        restoring = self._restoring.get(session_id)
        if restoring is not None:
            restoring.set()

    # --- the lease ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _leased(
        self, session_id: str, purpose: str, *, unless_held_elsewhere: bool = False
    ) -> AsyncIterator[bool]:
        """Hold a stored session's lease for what runs inside (`purpose`: a prompt, a load, a
        compaction, a restore): the one place it is taken, renewed and released, and busy or
        gone decided. Refused (`SessionInUse`) while this server holds it for anything;
        while another server holds it too, unless `unless_held_elsewhere` (then the body
        runs without it: yields False). A session deleted elsewhere is forgotten here
        (`UnknownSession`)."""
        if session_id in self._held:
            raise SessionInUse(BUSY_HERE)
        try:
            self.store.take_lease(session_id, self.instance_id, LEASE_SECONDS)
        except SessionGone as gone:
            await self.forget(session_id)
            raise _unknown(session_id) from gone
        except SessionBusy as busy:
            logger.info("Session %s is busy in another server (%s): %s", session_id, purpose, busy)
            if not unless_held_elsewhere:
                raise SessionInUse(BUSY_ELSEWHERE) from busy
            held = False
        else:
            held = True
        if not held:
            yield False
            return
        self._held[session_id] = purpose
        # Renewed while it runs: a turn, or a question to the user, may take long.
        renewing = asyncio.ensure_future(self._renew_lease(session_id))
        try:
            yield True
        finally:
            renewing.cancel()
            del self._held[session_id]
            self.store.release_lease(session_id, self.instance_id)

    leased = _leased  # for what runs under a session's lease outside this class (fork.py)

    async def _renew_lease(self, session_id: str) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            self.store.renew_lease(session_id, self.instance_id, LEASE_SECONDS)

    # --- compaction -------------------------------------------------------------------------

    async def compact(self, session_id: str) -> tuple[int, int]:
        """Summarise the session's older turns now (`/compact`, `_parley/session/compact`),
        under its lease; the estimated tokens of the next request before and after."""
        session = self.get(session_id)
        if not session.stored:
            return 0, 0  # never prompted: nothing to compact
        async with self._leased(session_id, "compaction"):
            self.store.take_cut_off(session_id)  # a retry no longer replaces the last turn
            session.catch_up()
            spent = overrun(session, self.settings)  # the summary is a billed call
            if spent is not None:
                raise BudgetSpent(
                    spent, "the conversation was not compacted (that takes a model call)"
                )
            return await self._compact_now(session)

    async def _compact_now(self, session: Session) -> tuple[int, int]:
        """Compact the request the session's next round would send, summary forced, as a
        round's compactor would (its summary call counted in the session as a round's)."""
        resolved = await self.providers.resolved(
            session.settings.model, session.settings.tool_format
        )
        window = self._windows.window(resolved, self.settings)
        send = functools.partial(self.ports.send_update, session.id)

        async def summary_call(request: ModelRequest) -> Completion:
            completion = await resolved.provider.complete(request)
            count_call(session, self.settings, send, resolved.id, completion.usage, "sync", window)
            return completion

        thinking = self.settings.thinking(resolved.id, session.settings.thought_level)
        compactor = Compactor(session, self.settings.compaction_threshold, send)
        await compactor.compacted(
            lambda: session_request(session, self.settings, resolved, thinking),
            window,
            summary_call,
            resolved.model,
            force=True,
            on_demand=True,
        )
        return compactor.tokens_before, compactor.tokens_after

    # --- checkpoints ------------------------------------------------------------------------

    async def restore(
        self, session_id: str, turn: int | None, *, redo: bool = False
    ) -> RestoreResult:
        """Put the files changed from `turn` on (None: the last that changed any) back as
        they were before it, or (`redo`) undo the last restore, under the session's lease."""
        session = self._open.get(session_id)
        if session is not None and not session.stored:
            return RestoreResult(None, redo=redo)  # never prompted: no turn changed anything
        snapshots = SnapshotStore(self.settings.home)
        async with self._leased(session_id, "restore"):
            self.store.take_cut_off(session_id)  # a retry no longer replaces the last turn
            if turn is None and not redo:
                turn = await last_undoable_turn(self.store, snapshots, session_id)
                if turn is None:
                    return RestoreResult(None)
            stop = self._restoring[session_id] = asyncio.Event()
            others = session.roots.others if session is not None else ()
            editor = editor_writes(self.ports.client_writes, session_id)
            buffers = editor_reads(self.ports.client_files, session_id)
            ask = functools.partial(
                ask_before_overwrite, self.ports, session_id, stop=stop, redo=redo
            )
            # The lease is held for as long as the restore runs (its question may wait on the
            # user for long): another window's turn cannot start meanwhile and be written over.
            try:
                result = await restore_or_redo(
                    self.store, session_id, turn, ask, others, editor, snapshots, buffers
                )
            finally:
                del self._restoring[session_id]
        if session is not None:  # the model's picture of them is older than the files now
            session.tools.forget_files(result.touched)
        return result

    # --- changing and closing ---------------------------------------------------------------

    async def configure(
        self,
        session_id: str,
        *,
        auto_approve: list[str] | None = None,
        announce: bool = True,
        **changes: Any,
    ) -> None:
        """Change the settings given (`changes`: core/session_settings.py's names; None:
        unchanged) and the tools always allowed; the turn applies them from its next round
        (a mode from its next tool call). A new model starts at its own default thinking
        level, unless one is given with it. A change of the config options is announced
        (`config_option_update`) unless `announce` is False (`session/set_config_option`
        answers with them instead); a change of the mode always is (`current_mode_update`)."""
        session = self.get(session_id)
        if session.stored and self.store.session(session.id) is None:
            await self.forget(session.id)  # deleted in another window: don't bring it back
            raise _unknown(session.id)
        before, mode_before = self.config_options(session), session.settings.mode
        changes = {name: value for name, value in changes.items() if value is not None}
        session.settings = self._changed(session.settings, changes)
        if auto_approve is not None:
            session.auto_approve = set(auto_approve)
        session.save()
        if session.settings.mode != mode_before:
            self.ports.send_update(session.id, current_mode_update(session.settings.mode))
        options = self.config_options(session)
        if announce and options != before:
            self.ports.send_update(session.id, updates.config_options(options))

    def _changed(self, settings: SessionSettings, changes: dict[str, Any]) -> SessionSettings:
        """`settings` with `changes`, checked: a model's id, a thinking level the (new) model
        takes; a new model's thinking level is its default unless one is given."""
        model = changes.get("model", settings.model)
        if "model" in changes:
            _check_model_id(model)
            if model != settings.model:
                changes.setdefault("thought_level", None)
        level = changes.get("thought_level")
        levels = self.settings.thought_levels(model)
        if level is not None and level not in levels:
            takes = f"takes {', '.join(levels)}" if levels else "has no thinking level"
            raise InvalidOptions(f"thoughtLevel: the model {model} {takes}")
        return attrs.evolve(settings, **changes)

    async def set_config_option(
        self, session_id: str, config_id: str, value: Any
    ) -> list[dict[str, Any]]:
        """Set one of the session's config options; returns them all, as they are now."""
        session = self.get(session_id)
        try:
            change = requested_change(config_id, value, self.config_options(session))
        except InvalidChoice as error:
            raise InvalidOptions(str(error)) from error
        await self.configure(session_id, **change, announce=False)
        return self.config_options(session)

    async def close_session(self, session_id: str) -> None:
        """`session/close`: end the session's turn and free it here (its kernel ends); a
        stored session stays stored and can be loaded again."""
        if session_id not in self._open and self.store.session(session_id) is None:
            raise _unknown(session_id)
        await self.forget(session_id)

    async def delete(self, session_id: str) -> None:
        """Delete the session, here and in the store; an unknown one (never created, or
        deleted already) is no error: ACP's delete is idempotent."""
        session = self._open.get(session_id)
        if session is not None and session.running_turn is not None:
            session.running_turn.cancel()  # this window's turn ends with its session
            await asyncio.gather(session.running_turn, return_exceptions=True)
        try:
            self.store.delete_session(session_id, self.instance_id)
        except SessionBusy as busy:
            raise SessionInUse(BUSY_ELSEWHERE) from busy
        await off_loop(SnapshotStore(self.settings.home).forget_session, session_id)
        collect_soon(self.settings)  # its snapshots' content, unless another session's
        await self.forget(session_id)

    async def forget(self, session_id: str) -> None:
        """Close this server's copy of a session (the store keeps it, unless deleted)."""
        session = self._open.pop(session_id, None)
        if session is None:
            return
        if session.running_turn is not None:
            session.running_turn.cancel()
            await asyncio.gather(session.running_turn, return_exceptions=True)
        await session.close()
        await self.mcp.close(session)

    async def close(self) -> None:
        """End every turn (their histories settle), answer the pending prompts, close the
        sessions' tools (their kernels and MCP servers end)."""
        turns = [s.running_turn for s in self._open.values() if s.running_turn is not None]
        for turn in turns:
            turn.cancel()
        await asyncio.gather(*turns, return_exceptions=True)
        # The prompts' answers go out as their requests end (they release the leases too).
        await asyncio.gather(*self._prompts, return_exceptions=True)
        # MCP servers may take seconds each to stop: all at once, while the kernels stop.
        stopping = asyncio.gather(*(self.mcp.close(s) for s in self._open.values()))
        for session in self._open.values():
            await session.close()
        await stopping


def _mend_unanswered(session: Session) -> None:
    """A killed server leaves calls without results: answer them, so the provider takes the
    history. Only under the session's lease: another window's running calls are not dead."""
    for result in unanswered_calls(session.last_exchange()):
        session.add_message(result)


def _unknown(session_id: str, hint: str = "") -> UnknownSession:
    return UnknownSession(f"Unknown session {session_id!r}{hint}")


def _check_model_id(model: str) -> None:
    try:
        split_model_id(model)
    except ValueError as error:
        raise InvalidOptions(str(error)) from error


def _same_prompt(stored: Sequence[Message], content: tuple[ContentBlock, ...]) -> bool:
    """The cut-off turn's prompt (`stored`: its first message) is `content` again, Parley's
    notes to the model aside: a retry replaces only the turn of the prompt it retries. A
    client that took another turn for the cut-off one (it missed what came in between)
    gets a new turn, never the replacement of a turn it did not mean."""
    if not stored or not isinstance(stored[0], UserMessage):
        return False
    said = tuple(b for b in stored[0].content if not (isinstance(b, TextBlock) and b.for_model))
    return said == content


def _notes_for_model(prompt: Message | None) -> tuple[ContentBlock, ...]:
    """What a replaced turn's prompt said to the model for Parley (a restore note): its
    replacement says it again, the model has not seen it otherwise."""
    if not isinstance(prompt, UserMessage):
        return ()
    return tuple(b for b in prompt.content if isinstance(b, TextBlock) and b.for_model)


def _user_turns(messages: Iterable[Message]) -> int:
    """How many of `messages` are prompts: the turns another window added."""
    return sum(isinstance(message, UserMessage) for message in messages)


def _roots(cwd: Path, additional: Sequence[Path]) -> Roots:
    """The session's roots, or InvalidOptions for one too broad to be one (`/`, `/home`)."""
    roots = workspace_roots(cwd, additional)
    try:
        refuse_too_broad(roots)
    except RootRefused as refused:
        raise InvalidOptions(str(refused)) from None
    return roots
