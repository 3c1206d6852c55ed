"""What Parley says about a turn that stopped, or a prompt or command it refused: one notice
per stop, `{level, text}` (docs/protocol.md, Notices). The words for each stop are written
here and nowhere else; the clients show what they are sent.

A notice is sent before the prompt's answer and kept with the session (never in the history
the model is sent), so `session/load` replays it where it came (agent/replay.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from parley.agent.budgets import Overrun
from parley.agent.session import Session, new_id
from parley.core import updates
from parley.core.errors import ProviderError

Level = Literal["info", "warning", "error"]

# How many characters of a tool's repeated error the circuit breaker's notice quotes.
QUOTED_ERROR = 500


@attrs.frozen
class Notice:
    level: Level
    text: str


CANCELLED = Notice("info", "Stopped.")
REFUSED_BY_MODEL = Notice("warning", "The model refused to answer.")
NOTHING_TO_UNDO = Notice(
    "info", "Nothing to undo: no turn of this session has edited files (or they were undone)."
)


def turn_stopped(
    stop_reason: str,
    *,
    request_limit: int,
    token_limit: int | None,
    overrun: Overrun | None = None,
) -> Notice | None:
    """Why a turn ended with `stop_reason`, with its figures; None for `end_turn`.
    `overrun`: the budget that stopped the turn (it ends `max_turn_requests`)."""
    if stop_reason == "end_turn":
        return None
    if stop_reason == "cancelled":
        return CANCELLED
    if stop_reason == "refusal":
        return REFUSED_BY_MODEL
    if stop_reason == "max_turn_requests":
        if overrun is not None:
            return budget_spent(overrun, starting=False)
        requests = "model request" if request_limit == 1 else "model requests"
        return Notice(
            "warning", f"Stopped: the turn reached its limit of {request_limit} {requests}."
        )
    if stop_reason == "max_tokens":
        figure = f" ({token_limit:,} tokens)" if token_limit else ""
        return Notice(
            "warning",
            f"The answer was cut off: the model reached its output token limit{figure}.",
        )
    return Notice("info", f"Turn ended: {stop_reason}.")


def turn_failed(error: Exception) -> Notice:
    """A turn that ended in an error (answered a JSON-RPC error, not a notice): what a
    replay shows where it failed."""
    if isinstance(error, ProviderError):
        return Notice("error", f"The turn failed: {error.message}")
    return Notice("error", "The turn failed: an internal error in Parley (see its log).")


def budget_spent(overrun: Overrun, *, starting: bool) -> Notice:
    """A budget refused the prompt (`starting`) or stopped the turn: which budget, what was
    spent of it, how to raise it (a command it refused: `BudgetSpent.message`)."""
    return Notice("warning", overrun.explain(starting=starting))


def circuit_breaker(tool: str, times: int, error: str) -> Notice:
    """The model called `tool` `times` times in a row with the same `error`: the turn ends."""
    return Notice(
        "warning",
        f"Stopped: `{tool}` failed {times} times in a row with the same error:\n\n"
        f"{error[:QUOTED_ERROR]}",
    )


NOTHING_TO_REDO = Notice(
    "info",
    "Nothing to redo: no undo of this session can be put back (or a turn changed files since).",
)


def redo_cancelled(turn: int) -> Notice:
    """`/redo` stopped while it asked about the user's changes: nothing was put back."""
    return Notice("info", f"Redo of turn {turn} cancelled: nothing was put back.")


def undo_cancelled(turn: int) -> Notice:
    """`/undo` stopped while it asked about the user's changes: nothing was restored."""
    return Notice("info", f"Undo of turn {turn} cancelled: nothing was restored.")


def model_refused(problem: str, model: str, offered: str) -> Notice:
    """`/model NAME` with a model that cannot answer (`problem` says why)."""
    return Notice("warning", f"{problem} The model is still `{model}`. Available: {offered}.")


def mode_refused(name: str, mode: str, modes: list[str]) -> Notice:
    """`/mode NAME` with a name that is no mode."""
    offered = ", ".join(f"`{choice}`" for choice in modes)
    return Notice(
        "warning", f"No mode {name[:60]!r}. The mode is still `{mode}`. Modes: {offered}."
    )


def changed_elsewhere(turns: int) -> Notice:
    """A window catching up, in a client that cannot show the missed turns in place."""
    added, them = ("a turn was", "it") if turns == 1 else (f"{turns} turns were", "them")
    return Notice(
        "info",
        f"This session changed in another window: {added} added there, which the model "
        f"sees. Reload the session to see {them} here.\n\n",
    )


def rewritten_elsewhere() -> Notice:
    """A window catching up after another window replaced a turn it shows (a retry)."""
    return Notice(
        "info",
        "This session changed in another window: a turn was retried there, which the model "
        "sees in place of the one shown here. Reload the session to see it.\n\n",
    )


# A command turn (`/cost`, `/model`, `/undo`, `/compact`) is kept with the notices, at its place
# in the conversation: the command as the user typed it, and its answer when that is not a
# notice. Never in the history (the model is told what it needs some other way); replayed as
# the user's words and Parley's answer, marked `_meta.parley.command` (agent/replay.py).
COMMAND = "command"
COMMAND_REPLY = "command_reply"
# An answer said as a warning (a restore that failed or was rejected in part): replayed so.
COMMAND_REPLY_WARNING = "command_reply_warning"
COMMAND_LEVELS = (COMMAND, COMMAND_REPLY, COMMAND_REPLY_WARNING)


def runs_later_left(places: list[tuple[str, str]]) -> Notice:
    """A turn's calls made or changed, inside a root, what runs later outside the sandbox
    (each place shown, and what runs it), which the sandbox could not make read-only: one
    made where none was, or below a root's own level (docs/security.md, "What runs later is
    protected where it exists")."""
    named = "\n".join(f"- `{place}`: {why}" for place, why in places)
    return Notice(
        "warning",
        "This turn made or changed what runs later on your machine, outside the sandbox, "
        f"where the sandbox could not keep it read-only:\n{named}\nLook at "
        f"{'it' if len(places) == 1 else 'each'} before you run what uses it (an undo "
        "takes back the files it kept, never a `.git`).",
    )


def keep_command_turn(
    session: Session, typed: str, answer: str | None, *, warning: bool = False
) -> None:
    """Keep a command turn with the session, for replay and export."""
    session.add_notice(COMMAND, typed)
    if answer is not None:
        session.add_notice(COMMAND_REPLY_WARNING if warning else COMMAND_REPLY, answer)


def say(
    session: Session,
    send_update: Callable[[str, dict[str, Any]], None],
    notice: Notice,
    *,
    keep: bool = True,
) -> None:
    """Send the notice, and keep it with the session at this point of its conversation
    (unless not `keep`: a refused command's, said once)."""
    send_update(session.id, updates.notice_chunk(new_id("notice"), notice.level, notice.text))
    if keep:
        session.add_notice(notice.level, notice.text)
