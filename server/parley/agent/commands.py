"""Slash commands: a prompt whose text starts with an advertised command runs it instead of
calling the model, and is answered with a short agent message.

The commands are advertised (`available_commands_update`) when a session starts. Only those
that work are listed.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Protocol

import attrs

from parley.agent import notices
from parley.agent.budgets import BudgetSpent, describe_budgets
from parley.agent.checkpoints import NAMED_AT_MOST, RestoreResult, more_than_named
from parley.agent.config_options import MODEL
from parley.agent.modes import MODES, is_mode
from parley.agent.notices import Notice
from parley.agent.session import Session
from parley.agent.snapshot_restore import ACTION_WORDS
from parley.config import Settings
from parley.core.choices import Mode
from parley.core.conversation import ContentBlock, TextBlock
from parley.core.usage import UsageTotals
from parley.providers.registry import ProviderRegistry, split_model_id


@attrs.frozen
class Command:
    name: str  # without the slash, as ACP's `AvailableCommand.name`
    description: str
    hint: str | None = None  # what the user types after the name, when it takes input

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint is not None:
            wire["input"] = {"hint": self.hint}
        return wire


COMMANDS = (
    Command(
        "model",
        "Switch this session's model from the next prompt on (without a name: list them)",
        hint="provider:model",
    ),
    Command(
        "mode",
        "Switch this session's mode: ask, accept_edits (edits apply unasked) or plan "
        "(read only); without a name: say which it is",
        hint="ask|accept_edits|plan",
    ),
    Command("cost", "What this session has used and spent so far, and its budgets"),
    Command(
        "undo",
        "Put every file the last turn that changed files changed (its edits, commands, "
        "evaluations) back as it was before it (the conversation stays)",
    ),
    Command("redo", "Undo the last /undo: put back what the undone turns did"),
    Command(
        "compact",
        "Summarise the older turns so the model sees a shorter conversation "
        "(the history stays for replay and export)",
    ),
)


@attrs.frozen
class CommandCall:
    name: str
    argument: str  # the text after the name, stripped

    @property
    def typed(self) -> str:
        """The command as a person types it: `/model openai:gpt-4.1`."""
        return f"/{self.name} {self.argument}".rstrip()


@attrs.frozen
class CommandReply:
    """What a command answers: its text (Markdown, an agent message), or, when it did
    nothing, the notice that says why; and how the prompt ends."""

    text: str = ""
    stop_reason: str = "end_turn"  # "cancelled": stopped; "refusal": a budget is spent
    notice: Notice | None = None  # in place of `text`
    # The command's input was refused (`/mode pl`, a model that cannot answer): a typo to
    # fix, not a turn of the session, so neither it nor its notice is kept.
    refused: bool = False
    warning: bool = False  # `text` is said as a warning (`went_wrong`): live and replayed


class CommandHost(Protocol):
    """What the commands need from the sessions."""

    providers: ProviderRegistry
    settings: Settings

    def config_options(self, session: Session) -> list[dict[str, Any]]: ...

    async def configure(
        self, session_id: str, *, model: str | None = None, mode: Mode | None = None
    ) -> None: ...

    async def restore(
        self, session_id: str, turn: int | None, *, redo: bool = False
    ) -> RestoreResult: ...

    async def compact(self, session_id: str) -> tuple[int, int]: ...


def available_commands() -> list[dict[str, Any]]:
    return [command.to_wire() for command in COMMANDS]


def parse_command(content: tuple[ContentBlock, ...]) -> CommandCall | None:
    """The command a prompt runs: its first block is text that starts with `/NAME` of an
    advertised command (then whitespace or the end). None for any other prompt."""
    if not content or not isinstance(content[0], TextBlock):
        return None
    text = content[0].text.strip()
    if not text.startswith("/"):
        return None
    name, *argument = text[1:].split(maxsplit=1) or [""]
    if name not in {command.name for command in COMMANDS}:
        return None
    return CommandCall(name, argument[0].strip() if argument else "")


async def run_command(call: CommandCall, session: Session, host: CommandHost) -> CommandReply:
    """Run the command; returns the reply for the user."""
    if call.name == "model":
        return await _switch_model(call.argument, session, host)
    if call.name == "mode":
        return await _switch_mode(call.argument, session, host)
    if call.name in ("undo", "redo"):
        return await _undo(session, host, redo=call.name == "redo")
    if call.name == "compact":
        return await _compact(session, host)
    return CommandReply(_cost(session, host.settings))


async def _undo(session: Session, host: CommandHost, *, redo: bool) -> CommandReply:
    restored = await host.restore(session.id, None, redo=redo)
    if restored.turn is None:  # nothing was done: a notice says why
        return CommandReply(notice=notices.NOTHING_TO_REDO if redo else notices.NOTHING_TO_UNDO)
    if restored.cancelled:
        cancelled = notices.redo_cancelled if redo else notices.undo_cancelled
        return CommandReply(stop_reason="cancelled", notice=cancelled(restored.turn))
    return CommandReply(describe_restore(restored), warning=went_wrong(restored))


async def _compact(session: Session, host: CommandHost) -> CommandReply:
    try:
        before, after = await host.compact(session.id)
    except BudgetSpent as refused:
        return CommandReply(stop_reason="refusal", notice=Notice("warning", refused.message))
    if after >= before:
        return CommandReply(f"Nothing to compact: the model sees about {before:,} tokens.")
    return CommandReply(f"Compacted the conversation: {before:,} → {after:,} tokens (estimated).")


async def _switch_model(name: str, session: Session, host: CommandHost) -> CommandReply:
    (model_option,) = [o for o in host.config_options(session) if o["id"] == MODEL]
    offered = ", ".join(f"`{choice['value']}`" for choice in model_option["options"])
    if not name:
        return CommandReply(
            f"The model is `{session.settings.model}`. Available: {offered}. "
            "Switch with `/model NAME`."
        )
    problem = _model_problem(name, host.providers)
    if problem is not None:  # refused: a notice
        notice = notices.model_refused(problem, session.settings.model, offered)
        return CommandReply(notice=notice, refused=True)
    if name == session.settings.model:
        return CommandReply(f"The model is `{name}` already.")
    await host.configure(session.id, model=name)
    return CommandReply(f"Switched to `{name}` from the next prompt on.")


async def _switch_mode(name: str, session: Session, host: CommandHost) -> CommandReply:
    choices = "; ".join(
        f"`{mode}` ({title}: {description.lower()})" for mode, (title, description) in MODES.items()
    )
    if not name:
        return CommandReply(
            f"The mode is `{session.settings.mode}`. The modes: {choices}. "
            "Switch with `/mode NAME`."
        )
    if not is_mode(name):  # refused: a notice
        notice = notices.mode_refused(name, session.settings.mode, list(MODES))
        return CommandReply(notice=notice, refused=True)
    if name == session.settings.mode:
        return CommandReply(f"The mode is `{name}` already.")
    await host.configure(session.id, mode=name)
    return CommandReply(f"Switched to `{name}`: {MODES[name][1].lower()}.")


def _model_problem(name: str, providers: ProviderRegistry) -> str | None:
    """Why `name` cannot answer (a malformed id, a provider without its key), or None."""
    try:
        provider, _ = split_model_id(name)
    except ValueError as error:
        return f"{error}."
    available, reason = providers.availability(provider)
    return None if available else reason or f"`{name}` is not available."


def _cost(session: Session, settings: Settings) -> str:
    totals = session.store.usage_totals(session.id) if session.stored else session.totals
    reply = f"This session so far: {describe_totals(totals)}"
    budgets = describe_budgets(session, settings)
    return reply if budgets is None else f"{reply}\n\n{budgets}"


def went_wrong(result: RestoreResult) -> bool:
    """A restore some of whose files failed or that the user rejected in part: its report
    is a warning (the clients show it so, live and when the session is loaded again)."""
    return bool(result.failures or result.rejected)


def describe_restore(result: RestoreResult) -> str:
    """What a restore (`/undo`, `/redo`, `_parley/session/restore` and `redo`) did, for the
    user, the words every client shows: each path and what happened to it, then what it does
    not cover."""
    if result.turn is None:
        return (notices.NOTHING_TO_REDO if result.redo else notices.NOTHING_TO_UNDO).text
    if result.cancelled:
        cancelled = notices.redo_cancelled if result.redo else notices.undo_cancelled
        return cancelled(result.turn).text
    if result.rejected:
        kept = f"you kept your changes to {_listed(result.rejected)}."
        return f"Nothing was {'put back' if result.redo else 'restored'}: {kept}"
    if result.redo:
        lines = [f"Put back what turn {result.turn} and the later turns did:"]
    else:
        lines = [f"Restored the files of turn {result.turn} as they were before it:"]
    shown = result.files[:NAMED_AT_MOST]
    lines += [f"- `{file.shown}` {ACTION_WORDS[file.action]}" for file in shown]
    if more := more_than_named(result.files):
        lines.append(f"- {more}")
    lines += [f"- `{file.shown}` could not be restored: {why}" for file, why in result.failures]
    if len(lines) == 1:
        lines = [f"Turn {result.turn} left no files to restore."]
    if result.not_covered:
        lines += ["", "Not covered:"] + [f"- {sentence}" for sentence in result.not_covered]
    return "\n".join(lines)


def _listed(files: tuple[Any, ...]) -> str:
    return ", ".join(f"`{file.shown}`" for file in files)


def describe_totals(totals: UsageTotals) -> str:
    """`UsageTotals` in a sentence a person reads."""
    if not totals.rounds:
        return "no model calls yet."
    usage = totals.usage
    tokens = f"{usage.input_tokens:,} tokens in"
    if usage.cached_read_tokens:
        tokens += f" ({usage.cached_read_tokens:,} read from the cache)"
    tokens += f", {usage.output_tokens:,} out"
    if usage.thought_tokens:
        tokens += f" ({usage.thought_tokens:,} of them thinking)"
    if totals.estimated_calls:  # cut off before the provider reported them
        cut = totals.estimated_calls
        tokens += f", of which {cut} call{'s' * (cut != 1)} cut off, estimated"
    if totals.cost is None:
        cost = "cost unknown (no price is known for the models used)"
    elif totals.cost_complete:
        cost = f"cost {_cost_with_parts(totals)}"
    else:
        cost = f"cost at least {_cost_with_parts(totals)} (some calls' prices are unknown)"
    turns = f"{totals.turns} turn{'s' * (totals.turns != 1)}"
    rounds = f"{totals.rounds} model round{'s' * (totals.rounds != 1)}"
    return f"{turns}, {rounds}; {tokens}; {cost}."


def _cost_with_parts(totals: UsageTotals) -> str:
    """`$0.0075 (uncached input $0.0005, cache reads $0.0003, …)`: the total and its parts
    that are not zero, all to as many places as the smallest part needs to show two
    significant digits (4 to 8), and the total the sum of the parts as shown, so that what a
    person adds up is what they read."""
    assert totals.cost is not None
    split = totals.cost_breakdown
    if split is None or not split.total:
        return f"${totals.cost:.4f}"
    parts = [
        ("uncached input", split.uncached_input),
        ("cache reads", split.cache_reads),
        ("cache writes", split.cache_writes),
        ("output", split.output),
        ("earlier calls not split", totals.cost - split.total),  # counted before the split
    ]
    # Float sums leave dust (1e-19): below half of the smallest place shown, it is nothing.
    parts = [(name, amount if amount >= SMALLEST_AMOUNT else 0.0) for name, amount in parts]
    places = money_places([amount for _, amount in parts])
    unit = Decimal(1).scaleb(-places)
    rounded = [(name, Decimal(repr(amount)).quantize(unit)) for name, amount in parts]
    shown = [(name, amount) for name, amount in rounded if amount]
    total = sum((amount for _, amount in shown), Decimal(0))
    listed = ", ".join(f"{name} ${amount}" for name, amount in shown)
    return f"${total} ({listed})"


SMALLEST_AMOUNT = 5e-9  # half of $0.00000001, the last place shown


def money_places(amounts: list[float]) -> int:
    """Decimal places that show each non-zero amount with two significant digits: 4 at
    least (a hundredth of a cent), 8 at most."""
    places = 4
    for amount in amounts:
        if amount > 0:
            places = max(places, 1 - math.floor(math.log10(amount)))
    return min(places, 8)
