"""A session: its settings, its conversation, its tools, its running turn."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import attrs

from parley.agent.compaction import Compaction
from parley.agent.history import History
from parley.core.conversation import Message
from parley.core.session_settings import SessionSettings
from parley.core.usage import CostBreakdown, Usage, UsageTotals
from parley.store import Store, StoredNotice, StoredSession
from parley.tools.command_rules import COMMAND_TOOL
from parley.tools.confined import Roots, printable_name, workspace_root
from parley.tools.registry import ToolRegistry

DEFAULT_SYSTEM_PROMPT = """\
You are Parley, a coding agent working inside the user's editor, on the project at {cwd}.
Look before you answer: use the tools to read the code and to inspect the live program, and \
prefer what they show over guesses. To change a file, read it first, then use edit_file (or \
write_file for a new file): the user reviews each diff. Be concise. Write Markdown; put code \
in fenced blocks."""

# Told the model after the system prompt when the client gave `additionalDirectories`.
OTHER_ROOTS_NOTE = (
    "\n\nThe workspace has more roots besides {cwd}: {others}. Name files there by absolute "
    "path (relative paths start at {cwd}); the file tools reach every root and nothing "
    "outside them."
)

TITLE_LENGTH = 60


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def title_from_prompt(text: str) -> str:
    """A short title: the prompt's first non-empty line, cut at a word near TITLE_LENGTH."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(line) <= TITLE_LENGTH:
        return line or "Untitled"
    cut = line[:TITLE_LENGTH].rsplit(" ", 1)[0]
    return (cut if len(cut) > TITLE_LENGTH // 2 else line[:TITLE_LENGTH]) + "…"


def _as_history(messages: Iterable[Message] | None) -> History | None:
    if messages is None or isinstance(messages, History):
        return messages
    return History(messages)


def tool_approvals(names: Iterable[str]) -> set[str]:
    """The tools a session always allows, from a list a client sent or the store kept:
    never `run_command`, whose calls only the workspace's prefix rules allow always."""
    return set(names) - {COMMAND_TOOL}


def load_compaction(store: Store, session_id: str) -> Compaction | None:
    stored = store.compaction(session_id)
    return None if stored is None else Compaction(*stored)


@attrs.define
class Session:
    """A session in memory. Every change that matters is written through to the store at
    once: a killed server loses at most the step in flight."""

    id: str
    cwd: Path
    # Its model, tool policy, mode, ... (core/session_settings.py); `model` always resolved.
    settings: SessionSettings
    tools: ToolRegistry
    store: Store
    # Tools always allowed, in `root` only (never `run_command`: `tool_approvals`); stored
    # under the resolved root, so a symlink pointed elsewhere later does not carry them.
    auto_approve: set[str] = attrs.field(factory=set, converter=tool_approvals)
    # The conversation (`history`), None until it is first needed: a session opened from the
    # store reads it then, not to be loaded; a replay streams it from the store instead.
    _history: History | None = attrs.field(factory=list, converter=_as_history)
    # The number of messages in the conversation, held or not (`length` only with `history`
    # None: the stored messages this session has, from the first).
    _length: int = 0
    title: str | None = None
    created_at: str = attrs.field(factory=now_iso)
    updated_at: str = attrs.field(factory=now_iso)
    totals: UsageTotals = attrs.field(factory=UsageTotals)
    running_turn: asyncio.Task[object] | None = None
    # Its MCP servers' start while it runs (agent/mcp_servers.py): a turn waits for it.
    mcp_starting: asyncio.Task[list[str]] | None = None
    # Written to the store? A new session is from its first prompt on (`start_storing`).
    stored: bool = True
    # The summary the model sees in place of the oldest messages (agent/compaction.py).
    compaction: Compaction | None = None
    # The workspace as the gate takes it (`cwd` with every symlink resolved), once, when the
    # session opens: its tools, checkpoints and system prompt all name files from it.
    root: Path = attrs.field(
        kw_only=True, default=attrs.Factory(lambda self: workspace_root(self.cwd), takes_self=True)
    )
    # Every root of the workspace (`root` first, then the client's `additionalDirectories`,
    # resolved): the gate's, the sandbox's writable places. Given with each new, load and
    # resume; never stored.
    roots: Roots = attrs.field(
        kw_only=True, default=attrs.Factory(lambda self: Roots(self.root), takes_self=True)
    )

    # How many turns of the stored session were replaced by a retry when this server last
    # read it (`catch_up`): another window's replacement makes it read the session again.
    _rewrites: int = 0

    def __attrs_post_init__(self) -> None:
        if self._history is not None:
            self._length = len(self._history)
        if self.stored:
            self._rewrites = self.store.rewrites(self.id)

    @property
    def length(self) -> int:
        """The number of messages in the conversation (held in memory or not)."""
        return self._length

    @property
    def history(self) -> History:
        """The conversation; in memory only from the compaction's cut on (`History`)."""
        if self._history is None:
            covers = self.compaction.covers if self.compaction is not None else 0
            offset = covers if covers < self._length else 0
            held = self.store.messages(self.id, after=offset, upto=self._length)
            self._history = History(held, offset, self._read_messages)
        return self._history

    def _read_messages(self, start: int, stop: int) -> list[Message]:
        return self.store.messages(self.id, after=start, upto=stop)

    def messages(self, start: int = 0) -> Iterator[Message]:
        """The conversation from message `start` on, without reading it all into memory if
        it is not yet (a replay)."""
        if self._history is not None and start >= self._history.offset:
            return iter(self._history[start:])
        return self.store.iter_messages(self.id, after=start, upto=self._length)

    def last_exchange(self) -> Sequence[Message]:
        """The conversation's end, from its last prompt or assistant message on (or all of
        it): enough to find the calls a killed server left without a result."""
        if self._history is not None:
            return self._history
        return self.store.last_exchange(self.id, upto=self._length)

    def system_text(self) -> str:
        text = self.settings.system_prompt or DEFAULT_SYSTEM_PROMPT.format(cwd=self.root)
        if self.roots.others:
            others = ", ".join(printable_name(str(root)) for root in self.roots.others)
            text += OTHER_ROOTS_NOTE.format(cwd=printable_name(str(self.root)), others=others)
        return text

    def command_rules(self, root: Path) -> frozenset[str]:
        """The command prefixes always allowed in `root` (one of this session's roots: the
        one a command runs in), as stored now: a rule another session added holds at once."""
        return self.store.command_rules(str(root))

    def add_command_rule(self, prefix: str, root: Path) -> None:
        """Always allow commands that start with `prefix` when they run in `root` (one of
        this session's roots), in every session."""
        self.store.add_command_rule(str(root), prefix, now_iso())

    def add_message(self, message: Message) -> None:
        if self._history is not None:
            self._history.append(message)
        self._length += 1
        self.updated_at = now_iso()
        self.store.append_message(self.id, message, self.updated_at)

    def add_notice(self, level: str, text: str) -> None:
        """Keep a notice (agent/notices.py) where the conversation is now: a replay shows it
        there again. Never part of the history: the model is not sent it."""
        if self.stored:
            self.store.add_notice(self.id, self._length, level, text, now_iso())

    def notices(self, start: int = 0) -> Iterator[StoredNotice]:
        """The notices said from message `start` on (all from 0; after start's, a window
        that missed turns is shown only theirs). Read when first iterated (off the loop)."""
        yield from self.store.notices(self.id, after=start + 1 if start else 0)

    def set_compaction(self, compaction: Compaction) -> None:
        self.compaction = compaction
        if self.stored:
            self.store.add_compaction(self.id, compaction.covers, compaction.summary, now_iso())
            self._hold_compacted()

    def _hold_compacted(self) -> None:
        """Let go of the messages the compaction covers (the store keeps them)."""
        if self._history is not None and self.compaction is not None:
            self._history.hold_from(self.compaction.covers, self._read_messages)

    def start_storing(self) -> None:
        """Store the session from now on (at its first prompt: an unused session is never
        stored or listed)."""
        if not self.stored:
            self.stored = True
            self.save()

    def save(self) -> None:
        """Write the settings and title (the conversation is written as it grows)."""
        self.updated_at = now_iso()
        if not self.stored:
            return  # kept in memory until its first prompt
        self.store.save_session(
            StoredSession(
                id=self.id,
                cwd=str(self.cwd),
                title=self.title,
                settings=self.settings,
                approvals={str(self.root): sorted(self.auto_approve)},
                turns=self.totals.turns,
                rounds=self.totals.rounds,
                created_at=self.created_at,
                updated_at=self.updated_at,
            )
        )

    def drop_last_turn(self, turn_start: int) -> Message | None:
        """Remove the last turn, the messages after the first `turn_start` (a cut-off turn a
        retry replaces: agent/sessions.py), here and in the store; returns its prompt."""
        prompt = self.store.drop_turn(self.id, turn_start)
        self._rewrites += 1
        self._history = None  # read again when next needed, up to the new end
        self._length = turn_start
        self.totals.turns = max(self.totals.turns - 1, 0)
        self.compaction = load_compaction(self.store, self.id)
        self.tools.forget_file_texts()  # what it read there, the model no longer sees
        return prompt

    def catch_up(self) -> int | None:
        """Take in what another server (another window on this session) stored since this
        one read the session: messages, title, approvals. Returns where the missed messages
        start in the history; None when another window replaced a turn this one had read
        (the conversation is read again: there is no place where the change starts)."""
        known = self._length
        start: int | None = known
        end = self.store.message_count(self.id)
        rewrites = self.store.rewrites(self.id)
        if rewrites != self._rewrites:
            self._rewrites = rewrites
            self._history = None
            self._length = end
            self.totals = self.store.usage_totals(self.id)
            start = None
        elif end > known:
            if self._history is not None:
                self._history.extend(self.store.messages(self.id, after=known, upto=end))
            self._length = end
            self.totals = self.store.usage_totals(self.id)
        stored = self.store.session(self.id)
        if stored is not None:
            self.title = stored.title
            self.auto_approve = set(stored.approvals.get(str(self.root), []))
            self.compaction = load_compaction(self.store, self.id)
            self._hold_compacted()
        return start

    async def close(self) -> None:
        """Release what the session holds in this server: its tools (the Python kernel
        ends; the session's MCP servers are to end here too). The store keeps the session."""
        await self.tools.aclose()

    def count_turn(self) -> None:
        self.totals.turns += 1
        self.updated_at = now_iso()
        self.store.count_turn(self.id, self.updated_at)

    def count_round(self) -> None:
        self.totals.rounds += 1
        self.store.count_round(self.id)

    def count_usage(
        self,
        call: str,
        model: str,
        usage: Usage,
        cost: float | None,
        breakdown: CostBreakdown | None = None,
    ) -> None:
        """Count one model call in the session's totals and the store; `breakdown`, the
        split of `cost`, is None when the price is unknown."""
        self.totals.add_call(usage, cost, breakdown, estimated=call == "estimate")
        self.store.record_usage(self.id, call, model, usage, cost, now_iso(), breakdown)
