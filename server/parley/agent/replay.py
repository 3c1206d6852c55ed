"""Showing a stored conversation again: `session/load` replays it as `session/update`s.

Also mends the end of a history that a killed server left behind: a tool call without a
result gets one that says it was interrupted, so the provider accepts the history.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from parley.agent import notices
from parley.core import updates
from parley.core.conversation import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.store import StoredNotice
from parley.tools.arguments import InvalidArguments
from parley.tools.kernel_images import stored_images
from parley.tools.plan import UpdatePlanTool, plan_update, read_plan
from parley.tools.registry import ToolRegistry

INTERRUPTED = "Interrupted: Parley stopped before this call finished; it may not have run."


def unanswered_calls(history: Sequence[Message]) -> list[ToolResultMessage]:
    """Results for the calls of the last assistant message that have none."""
    for position in range(len(history) - 1, -1, -1):
        message = history[position]
        if isinstance(message, AssistantMessage):
            answered = {
                later.tool_call_id
                for later in history[position + 1 :]
                if isinstance(later, ToolResultMessage)
            }
            return [
                ToolResultMessage(call.id, call.name, INTERRUPTED, True, wire_id=call.wire_id)
                for call in message.tool_calls
                if call.id not in answered
            ]
        if isinstance(message, UserMessage):
            return []
    return []


def turn_start(messages: Iterable[Message], turn: int) -> int | None:
    """Where turn `turn` (1: the first; a prompt to the model is a turn, a slash command is
    not) begins among `messages`: its prompt's position; 0 for the first turn of a session
    without any, None when there is no such turn."""
    if turn == 1:
        return 0
    prompts = (position for position, m in enumerate(messages) if isinstance(m, UserMessage))
    return next(itertools.islice(prompts, turn - 1, None), None)


def replay_updates(
    messages: Iterable[Message],
    tools: ToolRegistry,
    start: int = 0,
    notices: Iterable[StoredNotice] = (),
) -> Iterator[dict[str, Any]]:
    """The updates that show `messages` (the conversation from its message `start` on) as a
    client first saw it, in order (a window that was behind is shown only the turns it
    missed); each call titled as `tools` shows it, with the result that followed it; each of
    `notices` (in order) where it was said, after the messages before it.

    Streamed: a message is read, shown and dropped, so a replay is sent as it is built and
    the conversation is never held whole. Only an assistant message whose calls still await
    their results is held back (with what follows it) until they arrive, or the end."""
    held: deque[tuple[int, Message | StoredNotice]] = deque()
    awaited: set[str] = set()  # the held calls' ids without a result yet
    results: dict[str, ToolResultMessage] = {}  # the held calls' results, by call id
    for position, item in _with_notices(enumerate(messages, start), notices):
        if isinstance(item, ToolResultMessage):
            if item.tool_call_id in awaited:
                awaited.discard(item.tool_call_id)
                results[item.tool_call_id] = item
        elif held or (isinstance(item, AssistantMessage) and item.tool_calls):
            held.append((position, item))
            if isinstance(item, AssistantMessage):
                awaited.update(call.id for call in item.tool_calls)
        else:
            yield from _message_updates(position, item, results, tools)
        while held and not _awaits_results(held[0][1], awaited):
            yield from _message_updates(*held.popleft(), results, tools)
    while held:  # calls never answered: shown failed
        yield from _message_updates(*held.popleft(), results, tools)


def _with_notices(
    messages: Iterable[tuple[int, Message]], notices: Iterable[StoredNotice]
) -> Iterator[tuple[int, Message | StoredNotice]]:
    """The messages with each notice put before the first message that came after it (a
    notice's position: its index among the notices, for its `messageId`)."""
    pending = enumerate(notices)
    notice = next(pending, None)
    for position, message in messages:
        while notice is not None and notice[1].after <= position:
            yield notice
            notice = next(pending, None)
        yield position, message
    while notice is not None:
        yield notice
        notice = next(pending, None)


def _awaits_results(message: Message | StoredNotice, awaited: set[str]) -> bool:
    return isinstance(message, AssistantMessage) and any(
        call.id in awaited for call in message.tool_calls
    )


def _message_updates(
    position: int,
    message: Message | StoredNotice,
    results: dict[str, ToolResultMessage],
    tools: ToolRegistry,
) -> Iterator[dict[str, Any]]:
    """The updates of one user or assistant message, or a notice; a message's calls' results
    are taken out of `results` (a later call with the same id waits for its own)."""
    if isinstance(message, StoredNotice):
        message_id = f"notice_{message.after}_{position}"
        if message.level in notices.COMMAND_LEVELS:
            typed = message.level == notices.COMMAND
            warning = message.level == notices.COMMAND_REPLY_WARNING
            yield updates.command_chunk(message_id, message.text, typed=typed, warning=warning)
        else:
            yield updates.notice_chunk(message_id, message.level, message.text)
    elif isinstance(message, UserMessage):
        for block in message.content:
            if isinstance(block, TextBlock) and block.for_model:
                continue  # Parley's note to the model: never the user's words
            yield updates.user_chunk(f"user_{position}", _user_content(block))
    elif isinstance(message, AssistantMessage):
        for thought in message.thinking:
            if thought.text:
                yield updates.thought_chunk(f"{message.message_id}_thought", thought.text)
        if message.text:
            # A turn cut short here (`stopped`) is said by the notice that follows it.
            yield updates.message_chunk(message.message_id, message.text)
        for call in message.tool_calls:
            result = results.pop(call.id, None)
            yield _call_update(call, result, tools)
            yield from _plan_shown(call, result, tools)


def _call_update(
    call: ToolCall, result: ToolResultMessage | None, tools: ToolRegistry
) -> dict[str, Any]:
    view = _stored_view(result.shown if result is not None else None)
    if view is None:  # stored by an older version (the replay runs off the event loop)
        view = updates.call_view(tools.view_of(call.name, call.arguments))
        view.pop("content", None)  # what it showed before it ran: the output follows
    update = updates.tool_call(
        call.wire_id,
        view.pop("title"),
        tools.kind_of(call.name),
        status="failed" if result is None or result.is_error else "completed",
        raw_input=call.arguments,
    )
    update.update(view)
    if result is not None:
        update["rawOutput"] = updates.raw_output(result.raw_output, result.content, result.is_error)
        shown = result.shown if isinstance(result.shown, dict) else {}
        # The images it showed (an evaluation's plots) first, as they were live.
        update["content"] = [
            *stored_images(shown.get("images")),
            updates.text_content(result.content),
        ]
    return update


def _plan_shown(
    call: ToolCall, result: ToolResultMessage | None, tools: ToolRegistry
) -> Iterator[dict[str, Any]]:
    """The plan an `update_plan` call showed (read back from its stored arguments), right
    after the call, as the client saw it then; nothing for any other call, or one that
    failed (it showed no plan)."""
    if result is None or result.is_error or not isinstance(tools.get(call.name), UpdatePlanTool):
        return
    try:
        yield plan_update(read_plan(call.arguments))
    except InvalidArguments:  # not what it ran with (a row mangled elsewhere): not shown
        return


def _stored_view(shown: Any) -> dict[str, Any] | None:
    """How a call was shown, as stored with its result (a title, and files with their
    lines); None for anything else (an older version's row, or one mangled elsewhere)."""
    if not isinstance(shown, dict) or not isinstance(shown.get("title"), str):
        return None
    locations = shown.get("locations", [])
    if not isinstance(locations, list) or not all(_is_location(where) for where in locations):
        return None
    return {"title": shown["title"], **({"locations": locations} if locations else {})}


def _is_location(where: Any) -> bool:
    line = where.get("line", 0) if isinstance(where, dict) else None
    return (
        isinstance(where, dict)
        and isinstance(where.get("path"), str)
        and type(line) is int
        and line >= 0
        and set(where) <= {"path", "line"}
    )


def _user_content(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        # A note standing for a file the user sent: the file, as they sent it.
        return block.sent if block.sent is not None else {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        image = {"type": "image", "mimeType": block.media_type, "data": block.data}
        return {**image, "uri": block.uri} if block.uri else image
    resource: dict[str, Any] = {"uri": block.uri, "text": block.text}
    if block.mime_type:
        resource["mimeType"] = block.mime_type
    return {"type": "resource", "resource": resource}
