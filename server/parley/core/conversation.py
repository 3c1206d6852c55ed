"""The conversation, in a provider-neutral form.

This is what a session's history is made of, what the store keeps, and what each provider
translates into its own wire format. Reasoning is kept apart from the answer text, and each
tool call is linked to its result by the provider's call id.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class TextBlock:
    text: str


@attrs.frozen
class ResourceBlock:
    """Embedded context from the editor: a buffer, a file, a region."""

    uri: str
    text: str
    mime_type: str | None = None


ContentBlock = TextBlock | ResourceBlock


@attrs.frozen
class UserMessage:
    content: tuple[ContentBlock, ...]

    def as_text(self) -> str:
        """The prompt as one text, resources wrapped so the model sees where they came from."""
        parts = []
        for block in self.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            else:
                parts.append(f'<resource uri="{block.uri}">\n{block.text}\n</resource>')
        return "\n\n".join(parts)


@attrs.frozen
class ThinkingBlock:
    """Reasoning. Anthropic's `signature` (or `redacted` data) must be sent back verbatim
    in tool loops; other providers' reasoning has neither and is not sent back."""

    text: str
    signature: str | None = None
    redacted: str | None = None


@attrs.frozen
class ToolCall:
    """A call the model made. `id` is the provider's; `wire_id` is the toolCallId the
    editor knows it by. `arguments_error` is set when the model's arguments were not a
    JSON object (the call is then answered with that error instead of being run)."""

    id: str
    name: str
    arguments: dict[str, Any]
    wire_id: str
    arguments_error: str | None = None


@attrs.frozen
class AssistantMessage:
    text: str
    thinking: tuple[ThinkingBlock, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    message_id: str = ""  # the messageId of its agent_message_chunk updates


@attrs.frozen(eq=False)
class ToolResultMessage:
    tool_call_id: str  # the provider's id of the call it answers
    name: str
    content: str
    is_error: bool = False
    # What the editor was shown, so a reloaded session shows the call again exactly.
    wire_id: str = ""
    raw_output: Any = None
    started_at: str | None = None
    ended_at: str | None = None


Message = UserMessage | AssistantMessage | ToolResultMessage
