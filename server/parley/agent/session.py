"""A session: its settings, its conversation, its tools, its running turn."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

import attrs

from parley.agent.conversation import Message
from parley.agent.usage import UsageTotals
from parley.tools.registry import ToolRegistry

DEFAULT_SYSTEM_PROMPT = """\
You are Parley, a coding agent working inside the user's editor, on the project at {cwd}.
Look before you answer: use the tools to read the code and to inspect the live program, and \
prefer what they show over guesses. Be concise. Write Markdown; put code in fenced blocks."""

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


@attrs.define
class Session:
    id: str
    cwd: Path
    model: str
    tool_policy: str
    tools: ToolRegistry
    system_prompt: str | None = None
    auto_approve: set[str] = attrs.field(factory=set)
    history: list[Message] = attrs.field(factory=list)
    title: str | None = None
    created_at: str = attrs.field(factory=now_iso)
    updated_at: str = attrs.field(factory=now_iso)
    totals: UsageTotals = attrs.field(factory=UsageTotals)
    running_turn: asyncio.Task[object] | None = None

    def system_text(self) -> str:
        return self.system_prompt or DEFAULT_SYSTEM_PROMPT.format(cwd=self.cwd)

    def add_message(self, message: Message) -> None:
        self.history.append(message)
        self.updated_at = now_iso()
