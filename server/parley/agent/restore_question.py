"""The question a restore asks before it overwrites files the user changed since Parley
wrote them (`session/request_permission`), for `Sessions.restore` and its redo."""

from __future__ import annotations

import asyncio
import logging

from parley.agent.checkpoints import (
    NAMED_AT_MOST,
    RestoreCancelled,
    Restored,
    more_than_named,
    restore_question,
)
from parley.agent.session import new_id
from parley.agent.turn import TurnPorts
from parley.core.call_view import CallView, Location
from parley.core.choices import rejects
from parley.core.conversation import ToolCall

logger = logging.getLogger(__name__)


async def ask_before_overwrite(
    ports: TurnPorts,
    session_id: str,
    turn: int,
    changed: list[Restored],
    *,
    stop: asyncio.Event,
    redo: bool = False,
) -> bool:
    """Ask the user (`session/request_permission`) before a restore overwrites files they
    changed since Parley wrote them. `stop` set (`session/cancel`) ends the question:
    `RestoreCancelled`."""
    if stop.is_set():
        raise RestoreCancelled
    names = [file.shown for file in changed]
    call_id = new_id("restore")
    shown = {"turn": turn, "changed": names[:NAMED_AT_MOST]}
    call = ToolCall(call_id, "restore", shown, call_id)
    listed = [f"- {name}" for name in names[:NAMED_AT_MOST]]  # not 3,000 lines: the rest counted
    if more := more_than_named(tuple(changed)):
        listed.append(f"- {more}")
    view = CallView(
        title=restore_question(turn, redo=redo),
        locations=tuple(Location(file.path) for file in changed[:NAMED_AT_MOST]),
        content=(
            "These files changed since Parley last wrote them; restoring them loses "
            "those changes:\n" + "\n".join(listed),
        ),
    )
    asking = asyncio.ensure_future(ports.request_permission(session_id, call, "edit", view))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((asking, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if stop.is_set() or not asking.done():
            asking.cancel()
    if stop.is_set():
        if asking.done() and not asking.cancelled():
            asking.exception()  # retrieved: an answer that failed meanwhile is moot
        raise RestoreCancelled
    try:
        decision = asking.result()
    except Exception as error:  # the editor could not ask: keep the user's changes
        logger.warning("Asking before a restore failed: %s", error)
        return False
    return not rejects(decision)
