"""Parley's display rules (docs/display.md) for `parley chat`, `sessions` and `export`, and
for the figures in the server's notices: token counts, cost, the context's fill, a tool's
input and the summary of its result, times, the turn summary. (Why a turn stopped is the
server's notice, agent/notices.py: no client words for it.)

Pure functions of their arguments (and of the local time zone): no other parley module.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from typing import Any

# --- usage --------------------------------------------------------------------------------


def format_tokens(count: int | None) -> str:
    """`950`, `1.2k`, `12k`, `999k`, `1.2M`."""
    count = int(count or 0)
    if count < 1_000:
        return str(count)
    if count < 10_000:
        return f"{count / 1_000:.1f}k"
    if count < 1_000_000:
        return f"{count // 1_000}k"
    return f"{count / 1_000_000:.1f}M"


def format_cost(amount: float | None) -> str:
    """`$1.25` from $1, `$0.0123` below, `$0` for zero; None (no known price): `cost unknown`."""
    if amount is None:
        return "cost unknown"
    if amount == 0:
        return "$0"
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"


def format_context(used: int | None, size: int | None) -> str:
    """`context 12k/200k (6%)` when the window is known, `context 12k` when not (never `/0`)."""
    if size:
        percent = round(100 * (used or 0) / size)
        return f"context {format_tokens(used)}/{format_tokens(size)} ({percent}%)"
    return f"context {format_tokens(used)}"


# --- tool calls ---------------------------------------------------------------------------

BACKTICK_RUNS = re.compile(r"`+")


def fence_for(text: str) -> str:
    """A fence that no run of backticks in `text` can close: one longer than the longest
    (CommonMark: a closing fence is at least as long as the opening one), at least three."""
    longest = max((len(run) for run in BACKTICK_RUNS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


# The argument of a tool that is code, and its language; `command` is code of any tool.
CODE_ARGUMENTS = {("python_eval", "code"): "python", ("elisp_eval", "form"): "elisp"}
COMMAND_LANGUAGE = "sh"


def code_argument(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, language) of the call's code argument, when it has one that is text."""
    for (name, key), language in CODE_ARGUMENTS.items():
        if name == tool and isinstance(arguments.get(key), str):
            return key, language
    if isinstance(arguments.get("command"), str):
        return "command", COMMAND_LANGUAGE
    return None


def tool_input_parts(tool: str, raw_input: Any) -> list[tuple[str, str]]:
    """A tool's input as (language, text) parts: its code argument, if any, in its language
    (`python`, `elisp`, `sh`), and the other arguments, if any, as `json` (see `_json`)."""
    if not isinstance(raw_input, Mapping):
        return [("json", _json(raw_input, 0))]
    code = code_argument(tool, raw_input)
    if code is None:
        return [("json", _json(raw_input, 0))]
    key, language = code
    parts = [(language, str(raw_input[key]).rstrip("\n"))]
    rest = {name: value for name, value in raw_input.items() if name != key}
    return [*parts, ("json", _json(rest, 0))] if rest else parts


def format_tool_input(tool: str, raw_input: Any) -> str:
    """A tool's input for reading: its code argument as a fenced code block in its language
    (the other arguments, if any, follow as JSON); any other input as JSON indented by two
    spaces, a string with newlines shown as its lines rather than `\\n` escapes."""
    return "\n".join(
        text if language == "json" else f"```{language}\n{text}\n```"
        for language, text in tool_input_parts(tool, raw_input)
    )


def _json(value: Any, indent: int) -> str:
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, Mapping) and value:
        entries = []
        for name, item in value.items():
            key = json.dumps(str(name), ensure_ascii=False)
            if isinstance(item, str) and "\n" in item:
                lines = item.rstrip("\n").split("\n")
                entries.append(f"{inner}{key}:\n" + "\n".join(f"{inner}  {line}" for line in lines))
            else:
                entries.append(f"{inner}{key}: {_json(item, indent + 2)}")
        return "{\n" + ",\n".join(entries) + f"\n{pad}}}"
    if isinstance(value, list | tuple) and value:
        items = ",\n".join(f"{inner}{_json(item, indent + 2)}" for item in value)
        return f"[\n{items}\n{pad}]"
    if isinstance(value, str) and "\n" in value:  # its lines, each at this indentation
        return f"\n{pad}".join(value.rstrip("\n").split("\n"))
    return json.dumps(value, ensure_ascii=False)


SECTION_LABELS = frozenset({"stdout:", "stderr:", "result:"})
SUMMARY_LINES = 3
SUMMARY_WIDTH = 120


def summarize_tool_result(text: str | None, error: str | None = None) -> str:
    """The first three non-blank lines of a result, lines that only label a section
    (`stdout:`) dropped, each cut at 120 characters with `…`; `(no output)` when none is
    left. A failed call's summary starts with its `error` line."""
    lines = [
        line.rstrip()
        for line in (text or "").splitlines()
        if line.strip() and line.strip() not in SECTION_LABELS
    ]
    if error and error.strip():
        first = error.strip().splitlines()[0]
        lines = [first, *(line for line in lines if line.strip() != first.strip())]
    lines = [_cut(line) for line in lines[:SUMMARY_LINES]]
    return "\n".join(lines) if lines else "(no output)"


def error_line(text: str | None, raw_output: Any = None) -> str | None:
    """A failed call's error line: its `rawOutput.error` (`ZeroDivisionError: division by
    zero`, or the error's text), else a traceback's last line, else None (the result's
    first line says it)."""
    error = raw_output.get("error") if isinstance(raw_output, Mapping) else None
    if isinstance(error, Mapping) and error.get("message") is not None:
        kind = error.get("type")
        return f"{kind}: {error['message']}" if kind else str(error["message"])
    if isinstance(error, str) and error.strip():
        return error.strip().splitlines()[0]
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1].strip()
    return None


def _cut(line: str) -> str:
    return line if len(line) <= SUMMARY_WIDTH else line[:SUMMARY_WIDTH] + "…"


# --- what the user judges ------------------------------------------------------------------

ESCAPED_CATEGORIES = ("Cc", "Cf", "Cs")  # controls, format characters (bidi), surrogates


def escape_controls(text: str, one_line: bool = False) -> str:
    """`text` with its control and format characters shown as escapes (`\\x1b`, `\\u202e`),
    tab and newline kept: what a user judges (a command, a title, a path) cannot hide code,
    reorder itself (bidi overrides) or drive a terminal. `one_line`: a newline escaped too
    (a title, a path cannot start a line of its own)."""
    kept = "\t" if one_line else "\n\t"
    return "".join(
        ch
        if ch in kept or unicodedata.category(ch) not in ESCAPED_CATEGORIES
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


# --- times --------------------------------------------------------------------------------


def _local(when: str | datetime) -> datetime | None:
    """`when` in local time: a datetime, or an ISO 8601 text as the store writes it (UTC,
    `Z`); None for a text that is not one."""
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return None
    return when.astimezone()


def format_time(when: str | datetime | None, now: datetime | None = None) -> str:
    """Local time: today `14:05`, this year `Nov 22 14:05`, older `2025-11-22 14:05`.
    A text that is not a time is returned as it is."""
    if when is None:
        return ""
    local = _local(when)
    if local is None:
        return str(when)
    today = (now or datetime.now()).astimezone()
    if local.date() == today.date():
        return local.strftime("%H:%M")
    if local.year == today.year:
        return f"{local.strftime('%b')} {local.day} {local.strftime('%H:%M')}"
    return local.strftime("%Y-%m-%d %H:%M")


def format_full_time(when: str | datetime) -> str:
    """Local time with its date, `2025-11-22 14:05`: for what is read on another day (an
    exported transcript)."""
    local = _local(when)
    return local.strftime("%Y-%m-%d %H:%M") if local is not None else str(when)


# --- what a turn did ------------------------------------------------------------------------


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def turn_summary(turn: Mapping[str, Any], usage: Mapping[str, Any]) -> str:
    """A turn in one line from the prompt result's `_meta.parley.turn` and `.usage`: model,
    rounds, tool calls, tokens, cost, and the tokens re-sent for tool calls when there were."""
    cost = turn.get("cost")
    parts = [
        str(turn.get("model", "")),
        _count(int(turn.get("rounds", 0)), "round"),
        _count(int(turn.get("toolCalls", 0)), "tool call"),
        f"{format_tokens(usage.get('inputTokens'))} tokens in, "
        f"{format_tokens(usage.get('outputTokens'))} out",
        format_cost(cost.get("amount") if isinstance(cost, Mapping) else None),
    ]
    wasted = int(turn.get("wastedTokensEstimate") or 0)
    if wasted > 0:
        parts.append(f"about {format_tokens(wasted)} tokens re-sent for tool calls")
    return " · ".join(part for part in parts if part)
