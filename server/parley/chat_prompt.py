"""`parley chat`'s prompt: the words given, text piped in, and whether a slash command runs.

`echo code | parley chat "Review this"` sends the words first, then the piped text as a
fenced block named `stdin` (as llm and aichat combine them); `-` as the prompt reads the whole
prompt from stdin; a stdin that is a terminal, or that ends at once (`< /dev/null`), adds
nothing. A prompt that starts with a slash command (`/undo`) runs it only when it comes from
a terminal (stdin is one) or with `--command`: text piped in is sent as text.
"""

from __future__ import annotations

import sys
from typing import BinaryIO

from parley.display import BACKTICK_RUNS as BACKTICK_RUNS  # (the fence's rule: read here too)
from parley.display import escape_controls, fence_for

STDIN_BLOCK = "stdin"  # the fenced block's name (its info string)


class NotACommand(ValueError):
    """`--command` with a prompt that is no slash command."""


def with_piped_text(words: str, piped: str) -> str:
    """The prompt's words, then the piped text as a fenced block named `stdin`."""
    fence = fence_for(piped)
    body = piped if piped.endswith("\n") else piped + "\n"
    return f"{words}\n\n{fence}{STDIN_BLOCK}\n{body}{fence}"


def piped_text(stdin: BinaryIO | None) -> str:
    """What is piped in, as UTF-8 (a byte that is not: U+FFFD); "" when stdin is a terminal
    (nobody pipes into it: reading would wait for the user), closed, or ends at once."""
    if stdin is None or stdin.isatty():
        return ""
    return stdin.read().decode("utf-8", errors="replace")


def read_prompt(prompt: str, explicit_command: bool = False) -> str | None:
    """The prompt: `-` reads it from stdin (all of it; None when that is empty); other words
    get what is piped in appended (not with `--command`: a command takes no document)."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    if prompt != "-":
        piped = "" if explicit_command else piped_text(stdin)
        return with_piped_text(prompt, piped) if piped.strip() else prompt
    if stdin is not None and stdin.isatty():
        print("parley: type the prompt, then Ctrl-D on a line of its own.", file=sys.stderr)
    text = stdin.read().decode("utf-8", errors="replace") if stdin is not None else ""
    return text if text.strip() else None


def is_slash_command(text: str) -> bool:
    """Whether the server would run `text` as a slash command."""
    from parley.agent.commands import parse_command
    from parley.core.conversation import TextBlock

    return text.lstrip().startswith("/") and parse_command((TextBlock(text),)) is not None


def runs_commands(prompt: str, explicit: bool, typed: bool) -> bool:
    """Whether a slash command in the prompt runs: with `--command` (`explicit`: then the
    prompt must be one, else `NotACommand`), or when the prompt comes from a terminal
    (`typed`: stdin is one); never from text piped in."""
    if explicit:
        if is_slash_command(prompt):
            return True
        shown = escape_controls(prompt.strip()[:60])
        raise NotACommand(
            f"--command runs a slash command (/undo, /compact, /cost, /model), not {shown!r}"
        )
    return typed
