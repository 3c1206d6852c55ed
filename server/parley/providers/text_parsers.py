"""Streaming parsers for the text of local models: inline thinking and text tool calls.

Many local models (Ollama, llama.cpp, vLLM) put their reasoning inline, inside
`<think>…</think>` or `<thinking>…</thinking>`, and, lacking native tool calling, call tools
in a text protocol (borrowed from Forge):

    <tool><tool_name>NAME</tool_name><arguments>{JSON object}</arguments></tool>

The parsers here turn such text, arriving in chunks cut anywhere, into typed events. They do
no I/O. Every parser has `feed(text) -> list[event]` and `finish() -> list[event]`, and
gives the same events (after `coalesce`) however the text is cut into chunks.

- `ThinkTagParser`: thinking sections only -> `TextPiece`, `ThoughtPiece`.
- `TextToolCallParser`: tool calls only -> `TextPiece` and the `ToolCall*` events.
- `LocalModelStreamParser`: both in one pass; `parse_complete` for a whole reply.
- `render_tool_protocol_instructions` / `render_tool_result`: the prompt side of the protocol.

Decisions (the tests pin each of them):

- Tags are exact and lowercase: `<think>`, `<thinking>`, `<tool>`, … — no attributes, no
  spaces inside the angle brackets. Anything else that starts with `<` is plain text.
- Text that might be the start of a tag (`<thi`, `<too`) is held back, and only that: it is
  released as soon as the next character shows it is not a tag, or by `finish()`.
- A thinking section opened by either tag is closed by either `</think>` or `</thinking>`
  (models mix them up; nothing is lost by accepting both). Sections do not nest: inside one,
  `<think>` and `<tool>` are thought text. A stray closing tag outside a section is text.
  A section left open at the end of the reply is flushed as thought by `finish()`.
- Inside a tool call only the call's own tags count: `<think>` there is part of the call.
- The arguments end at the first `</arguments>`, so they must not contain that string. A
  `</tool>` inside the arguments (e.g. in a JSON string of code) is part of them, unless the
  arguments before it are already a complete JSON value, in which case the model forgot
  `</arguments>` and the call is malformed (rather than swallowing the rest of the reply).
- Whitespace is allowed between the call's tags; any other stray text there makes the call
  malformed. A call without an `<arguments>` section, or with empty arguments, means `{}`.
- A reply that ends where `</tool>` would come (e.g. cut by a `</tool>` stop sequence) still
  completes the call; a reply that ends anywhere else inside a call makes it malformed.
- Tool calls are numbered from 0 (`index`, like OpenAI's stream deltas); error sentences,
  which are written for the model, count from 1 ("tool call 1" is the first).
- Tool names are not checked against the tool set here: the agent does that.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any, cast

import attrs

from parley.tools.base import ToolSpec

# --- Events ---------------------------------------------------------------------------------


@attrs.frozen
class TextPiece:
    """Prose for the user (outside thinking sections and tool calls)."""

    text: str


@attrs.frozen
class ThoughtPiece:
    """Reasoning, from inside a `<think>` / `<thinking>` section."""

    text: str


@attrs.frozen
class ToolCallOpened:
    """A `<tool>` tag was seen: a tool call has started."""

    index: int


@attrs.frozen
class ToolCallNamed:
    """The call's `</tool_name>` was seen: its name is known, its arguments are not yet."""

    index: int
    name: str


@attrs.frozen
class ToolCallComplete:
    """A whole, well-formed tool call. The name is not checked against any tool set."""

    index: int
    name: str
    arguments: dict[str, Any]


@attrs.frozen
class ToolCallMalformed:
    """A tool call that could not be parsed.

    `raw` is the call's text as the model wrote it; `error` is a sentence for the model,
    saying what is wrong and what to send instead.
    """

    index: int
    raw: str
    error: str


Piece = TextPiece | ThoughtPiece
ToolCallEvent = ToolCallOpened | ToolCallNamed | ToolCallComplete | ToolCallMalformed
Event = TextPiece | ThoughtPiece | ToolCallEvent


def coalesce(events: Iterable[Event]) -> list[Event]:
    """Merge consecutive pieces of the same kind, so that equal texts compare equal.

    The parsers emit text as soon as they can, so one run of prose may arrive as any number
    of pieces depending on how the input was chunked; after `coalesce` it is one piece.
    """
    merged: list[Event] = []
    for event in events:
        if isinstance(event, TextPiece | ThoughtPiece) and not event.text:
            continue
        previous = merged[-1] if merged else None
        if isinstance(event, TextPiece) and isinstance(previous, TextPiece):
            merged[-1] = TextPiece(previous.text + event.text)
        elif isinstance(event, ThoughtPiece) and isinstance(previous, ThoughtPiece):
            merged[-1] = ThoughtPiece(previous.text + event.text)
        else:
            merged.append(event)
    return merged


# --- Tags -----------------------------------------------------------------------------------

THINK_OPEN_TAGS = ("<think>", "<thinking>")
THINK_CLOSE_TAGS = ("</think>", "</thinking>")
TOOL_OPEN = "<tool>"
TOOL_CLOSE = "</tool>"
NAME_OPEN = "<tool_name>"
NAME_CLOSE = "</tool_name>"
ARGUMENTS_OPEN = "<arguments>"
ARGUMENTS_CLOSE = "</arguments>"

CALL_FORMAT = (
    f'{TOOL_OPEN}{NAME_OPEN}NAME{NAME_CLOSE}{ARGUMENTS_OPEN}{{"argument": "value"}}'
    f"{ARGUMENTS_CLOSE}{TOOL_CLOSE}"
)

# Where a tool call is, between its tags, and the tags that end that part.
_NAME = "name"  # after <tool>, until </tool_name>
_BEFORE_ARGUMENTS = "before arguments"  # after </tool_name>, until <arguments>
_ARGUMENTS = "arguments"  # after <arguments>, until </arguments>
_AFTER_ARGUMENTS = "after arguments"  # after </arguments>, until </tool>

_TAGS_ENDING_PART = {
    _NAME: (NAME_CLOSE, TOOL_CLOSE),
    _BEFORE_ARGUMENTS: (ARGUMENTS_OPEN, TOOL_CLOSE),
    _ARGUMENTS: (ARGUMENTS_CLOSE, TOOL_CLOSE),
    _AFTER_ARGUMENTS: (TOOL_CLOSE,),
}
_LONGEST_CALL_TAG = max(len(tag) for tags in _TAGS_ENDING_PART.values() for tag in tags)
# The tag a call still needed when the reply ended inside that part of it.
_MISSING_TAG = {
    _NAME: NAME_CLOSE,
    _BEFORE_ARGUMENTS: ARGUMENTS_OPEN,
    _ARGUMENTS: ARGUMENTS_CLOSE,
    _AFTER_ARGUMENTS: TOOL_CLOSE,
}


@attrs.define
class _OpenCall:
    """A tool call whose `</tool>` has not been seen yet."""

    index: int
    body: str = ""  # everything after <tool> received so far
    part: str = _NAME
    part_start: int = 0  # offset in body where the current part began
    scan_from: int = 0  # offset in body before which no tag of the current part can start
    name: str | None = None
    arguments_text: str | None = None
    error: str | None = None  # the first structural problem found


def _excerpt(text: str, limit: int = 40) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _call_label(index: int, name: str | None) -> str:
    return f"tool call {index + 1}" + (f" ({name})" if name else "")


def _is_complete_json(text: str) -> bool:
    if not text.strip():
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# --- The parser -----------------------------------------------------------------------------


class _TaggedTextParser:
    """The one state machine behind the three public parsers.

    It is in one of three modes: prose, a thinking section, or a tool call. `_pending` holds
    a possible tag prefix at the end of what was fed (prose and thought modes); an open call
    keeps its own text in `_call.body`.
    """

    def __init__(self, *, think_tags: bool, tool_calls: bool, starts_in_thought: bool) -> None:
        self._prose_tags: tuple[str, ...] = (THINK_OPEN_TAGS if think_tags else ()) + (
            (TOOL_OPEN,) if tool_calls else ()
        )
        self._longest_tag = max(len(tag) for tag in self._prose_tags + THINK_CLOSE_TAGS)
        self._starts_in_thought = starts_in_thought
        self._reset()

    def _reset(self) -> None:
        self._in_thought = self._starts_in_thought
        self._pending = ""
        self._call: _OpenCall | None = None
        self._calls_seen = 0

    def feed(self, text: str) -> list[Event]:
        # The common case, plain prose or thought: one scan for "<" and out it goes.
        if not self._pending and self._call is None and "<" not in text:
            return [self._piece(text)] if text else []
        events: list[Event] = []
        rest = self._pending + text
        self._pending = ""
        while rest:
            if self._call is not None:
                rest = self._feed_call(self._call, rest, events)
            else:
                rest = self._feed_outside_call(rest, events)
        return events

    def finish(self) -> list[Event]:
        """End of the reply: flush what was held back, close what is open, and reset."""
        events: list[Event] = []
        if self._call is not None:
            events.append(self._end_call_at_end_of_reply(self._call))
        elif self._pending:
            events.append(self._piece(self._pending))
        self._reset()
        return events

    # -- Prose and thinking sections

    def _piece(self, text: str) -> Piece:
        return ThoughtPiece(text) if self._in_thought else TextPiece(text)

    def _feed_outside_call(self, buffer: str, events: list[Event]) -> str:
        """Emit `buffer` up to the next tag and act on the tag; return what follows it.

        Returns "" when the whole buffer was used, a possible tag prefix at its end being
        kept in `_pending`.
        """
        tags = THINK_CLOSE_TAGS if self._in_thought else self._prose_tags
        search_from = 0
        while True:
            tag_start = buffer.find("<", search_from)
            if tag_start < 0:
                if buffer:
                    events.append(self._piece(buffer))
                return ""
            tag = next((t for t in tags if buffer.startswith(t, tag_start)), None)
            if tag is not None:
                if tag_start:
                    events.append(self._piece(buffer[:tag_start]))
                self._enter(tag, events)
                return buffer[tag_start + len(tag) :]
            tail_length = len(buffer) - tag_start
            if tail_length < self._longest_tag and any(
                t.startswith(buffer[tag_start:]) for t in tags
            ):
                # Maybe a tag, cut by the chunk boundary: hold back this much, and no more.
                if tag_start:
                    events.append(self._piece(buffer[:tag_start]))
                self._pending = buffer[tag_start:]
                return ""
            search_from = tag_start + 1

    def _enter(self, tag: str, events: list[Event]) -> None:
        if tag in THINK_OPEN_TAGS:
            self._in_thought = True
        elif tag in THINK_CLOSE_TAGS:
            self._in_thought = False
        else:
            self._call = _OpenCall(index=self._calls_seen)
            self._calls_seen += 1
            events.append(ToolCallOpened(self._call.index))

    # -- Tool calls

    def _feed_call(self, call: _OpenCall, text: str, events: list[Event]) -> str:
        """Add `text` to the open call; return what follows its `</tool>`, or ""."""
        call.body += text
        while True:
            found = self._next_tag_of_part(call)
            if found is None:
                # A tag may straddle this chunk and the next: rescan only that much.
                call.scan_from = max(call.scan_from, len(call.body) - _LONGEST_CALL_TAG + 1)
                return ""
            tag_start, tag = found
            tag_end = tag_start + len(tag)
            call.scan_from = tag_end
            part_text = call.body[call.part_start : tag_start]
            if tag == TOOL_CLOSE:
                if call.part == _ARGUMENTS and not _is_complete_json(part_text):
                    continue  # "</tool>" inside a JSON string of the arguments
                events.append(self._end_call(call, call.body[:tag_end], part_text))
                self._call = None
                return call.body[tag_end:]
            if call.part == _NAME:
                self._read_name(call, part_text)
                if call.name is not None:
                    events.append(ToolCallNamed(call.index, call.name))
                call.part = _BEFORE_ARGUMENTS
            elif call.part == _BEFORE_ARGUMENTS:
                self._check_only_whitespace(call, part_text, NAME_CLOSE, ARGUMENTS_OPEN)
                call.part = _ARGUMENTS
            else:  # _ARGUMENTS, closed by </arguments>
                call.arguments_text = part_text
                call.part = _AFTER_ARGUMENTS
            call.part_start = tag_end

    @staticmethod
    def _next_tag_of_part(call: _OpenCall) -> tuple[int, str] | None:
        earliest: tuple[int, str] | None = None
        for tag in _TAGS_ENDING_PART[call.part]:
            at = call.body.find(tag, call.scan_from)
            if at >= 0 and (earliest is None or at < earliest[0]):
                earliest = (at, tag)
        return earliest

    @staticmethod
    def _read_name(call: _OpenCall, head: str) -> None:
        head = head.strip()
        if not head.startswith(NAME_OPEN):
            call.error = call.error or (
                f"Tool call {call.index + 1} must start with {NAME_OPEN}, but it starts with "
                f"{_excerpt(head)}. Send the call again as {CALL_FORMAT}"
            )
            return
        name = head[len(NAME_OPEN) :].strip()
        if not name:
            call.error = call.error or (
                f"Tool call {call.index + 1} has an empty {NAME_OPEN}. Send the call again "
                f"with the name of one of your tools: {CALL_FORMAT}"
            )
            return
        call.name = name

    @staticmethod
    def _check_only_whitespace(call: _OpenCall, text: str, after: str, before: str) -> None:
        if text.strip():
            call.error = call.error or (
                f"In {_call_label(call.index, call.name)} there is unexpected text "
                f"{_excerpt(text)} between {after} and {before}. Send the call again as "
                f"{CALL_FORMAT}"
            )

    def _end_call(self, call: _OpenCall, raw_body: str, last_part_text: str) -> ToolCallEvent:
        """The call's `</tool>` has come (or the reply ended where it would)."""
        raw = TOOL_OPEN + raw_body
        if call.part == _NAME:
            return ToolCallMalformed(
                call.index,
                raw,
                f"Tool call {call.index + 1} has no name: it ended before {NAME_CLOSE}. "
                f"Send the call again as {CALL_FORMAT}",
            )
        if call.part == _BEFORE_ARGUMENTS:
            self._check_only_whitespace(call, last_part_text, NAME_CLOSE, TOOL_CLOSE)
        elif call.part == _ARGUMENTS:
            return ToolCallMalformed(
                call.index,
                raw,
                f"The arguments of {_call_label(call.index, call.name)} are not closed with "
                f"{ARGUMENTS_CLOSE}. Send the call again as {CALL_FORMAT}",
            )
        else:
            self._check_only_whitespace(call, last_part_text, ARGUMENTS_CLOSE, TOOL_CLOSE)
        if call.error is not None or call.name is None:
            return ToolCallMalformed(call.index, raw, call.error or "")
        return self._parse_arguments(call, raw)

    @staticmethod
    def _parse_arguments(call: _OpenCall, raw: str) -> ToolCallEvent:
        label = _call_label(call.index, call.name)
        text = (call.arguments_text or "").strip()
        if not text:
            return ToolCallComplete(call.index, cast(str, call.name), {})
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as error:
            return ToolCallMalformed(
                call.index,
                raw,
                f"The arguments of {label} are not valid JSON: {error.msg} at line "
                f"{error.lineno} column {error.colno}. Send the call again with a JSON object.",
            )
        if not isinstance(arguments, dict):
            kind = {list: "an array", str: "a string", bool: "a boolean"}.get(
                type(arguments), "a number" if arguments is not None else "null"
            )
            return ToolCallMalformed(
                call.index,
                raw,
                f"The arguments of {label} are {kind}, not a JSON object. Send the call again "
                f'with a JSON object of named arguments, such as {{"path": "README.md"}}.',
            )
        return ToolCallComplete(call.index, cast(str, call.name), arguments)

    def _end_call_at_end_of_reply(self, call: _OpenCall) -> ToolCallEvent:
        rest = call.body[call.part_start :].strip()
        ends_where_close_tag_would = call.part in (_BEFORE_ARGUMENTS, _AFTER_ARGUMENTS) and (
            not rest or TOOL_CLOSE.startswith(rest)
        )
        if ends_where_close_tag_would:
            return self._end_call(call, call.body, "")
        return ToolCallMalformed(
            call.index,
            TOOL_OPEN + call.body,
            f"The reply ended inside {_call_label(call.index, call.name)}, before "
            f"{_MISSING_TAG[call.part]}. Send the complete call again, ending with {TOOL_CLOSE}.",
        )


# --- The public parsers ---------------------------------------------------------------------


class ThinkTagParser:
    """Splits text into thoughts (`<think>`/`<thinking>` sections) and the rest.

    `starts_in_thought=True` is for models whose chat template opens the section itself, so
    the reply begins with reasoning and only `</think>` appears.
    """

    def __init__(self, *, starts_in_thought: bool = False) -> None:
        self._parser = _TaggedTextParser(
            think_tags=True, tool_calls=False, starts_in_thought=starts_in_thought
        )

    def feed(self, text: str) -> list[Piece]:
        return cast(list[Piece], self._parser.feed(text))

    def finish(self) -> list[Piece]:
        return cast(list[Piece], self._parser.finish())


class TextToolCallParser:
    """Finds tool calls in the text protocol; everything else is `TextPiece`.

    Meant for text that has no thinking sections left (see `LocalModelStreamParser`).
    """

    def __init__(self) -> None:
        self._parser = _TaggedTextParser(think_tags=False, tool_calls=True, starts_in_thought=False)

    def feed(self, text: str) -> list[Event]:
        return self._parser.feed(text)

    def finish(self) -> list[Event]:
        return self._parser.finish()


class LocalModelStreamParser:
    """Thinking sections and tool calls in one pass, events in the order of the text.

    One pass rather than `ThinkTagParser` piped into `TextToolCallParser`, so that each kind
    of section hides the other's tags: `<tool>` inside a thought is thought, and `<think>`
    inside a call's arguments (code that handles think tags, say) is part of the call.
    """

    def __init__(self, *, starts_in_thought: bool = False) -> None:
        self._parser = _TaggedTextParser(
            think_tags=True, tool_calls=True, starts_in_thought=starts_in_thought
        )

    def feed(self, text: str) -> list[Event]:
        return self._parser.feed(text)

    def finish(self) -> list[Event]:
        return self._parser.finish()


@attrs.frozen
class ParsedReply:
    """A whole reply of a local model, taken apart."""

    thoughts: str
    text: str
    tool_calls: list[ToolCallComplete]
    errors: list[ToolCallMalformed]


def parse_complete(text: str, *, starts_in_thought: bool = False) -> ParsedReply:
    """Parse a complete (non-streamed) reply; the same rules as `LocalModelStreamParser`.

    `text` is the prose outside thoughts and calls, exactly as written (not stripped).
    """
    parser = LocalModelStreamParser(starts_in_thought=starts_in_thought)
    events = parser.feed(text) + parser.finish()
    return ParsedReply(
        thoughts="".join(e.text for e in events if isinstance(e, ThoughtPiece)),
        text="".join(e.text for e in events if isinstance(e, TextPiece)),
        tool_calls=[e for e in events if isinstance(e, ToolCallComplete)],
        errors=[e for e in events if isinstance(e, ToolCallMalformed)],
    )


# --- The prompt side ------------------------------------------------------------------------


def render_tool_protocol_instructions(tools: list[ToolSpec]) -> str:
    """The system-prompt text that teaches a model without native tool calling our tools.

    Returns "" when there are no tools.
    """
    if not tools:
        return ""
    lines = [
        "# Tools",
        "",
        "You can call tools. To call one, write this in your reply, exactly:",
        "",
        f'{TOOL_OPEN}{NAME_OPEN}NAME{NAME_CLOSE}{ARGUMENTS_OPEN}{{"argument": "value"}}'
        f"{ARGUMENTS_CLOSE}{TOOL_CLOSE}",
        "",
        "Rules:",
        "- NAME is the name of one of the tools listed below.",
        f"- Between {ARGUMENTS_OPEN} and {ARGUMENTS_CLOSE} goes one JSON object whose keys are "
        "the tool's arguments, as its schema describes. Write {} when it takes none.",
        "- The tags must be written exactly as shown, lowercase, without spaces inside them.",
        "- After your tool call (or several calls, one after another), stop writing and wait.",
        '  The results come back in the next user message, each as <tool_result name="NAME">'
        "…</tool_result>",
        '  (with error="true" when the call failed). Then continue.',
        "- Do not write a tool call when you only mean to talk about one.",
        "",
        "Available tools:",
    ]
    for tool in tools:
        schema = json.dumps(tool.input_schema, ensure_ascii=False)
        lines += ["", f"## {tool.name}", tool.description.strip(), f"Arguments schema: {schema}"]
    return "\n".join(lines) + "\n"


def render_tool_result(name: str, content: str, is_error: bool = False) -> str:
    """A tool's result as it is sent back in a user message (the content is not escaped)."""
    error_attribute = ' error="true"' if is_error else ""
    return f'<tool_result name="{html.escape(name)}"{error_attribute}>\n{content}\n</tool_result>'


__all__ = [
    "Event",
    "LocalModelStreamParser",
    "ParsedReply",
    "Piece",
    "TextPiece",
    "TextToolCallParser",
    "ThinkTagParser",
    "ThoughtPiece",
    "ToolCallComplete",
    "ToolCallEvent",
    "ToolCallMalformed",
    "ToolCallNamed",
    "ToolCallOpened",
    "coalesce",
    "parse_complete",
    "render_tool_protocol_instructions",
    "render_tool_result",
]
