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
    # Parley's own words to the model (a restore note), put in the user's turn because that
    # is where a model reads them: never replayed, exported or shown as the user's.
    for_model: bool = False
    # The block the user sent that this text stands for (a binary file, a link Parley did
    # not read), as ACP content: replayed in place of the text, which is Parley's note to
    # the model. Not part of the text's identity.
    sent: dict[str, Any] | None = attrs.field(default=None, eq=False)


@attrs.frozen
class ResourceBlock:
    """Embedded context from the editor: a buffer, a file, a region."""

    uri: str
    text: str
    mime_type: str | None = None


@attrs.frozen
class ImageBlock:
    """An image the user attached: its media type (`image/png` ...) and its bytes in base64,
    as the editor sent them (checked on the way in: `core/images.py`). `uri` names the file
    it came from, when it came as a resource."""

    media_type: str
    data: str
    uri: str | None = None

    @property
    def size(self) -> int:
        """The image's size in bytes (from the base64 length, without decoding)."""
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")


ContentBlock = TextBlock | ResourceBlock | ImageBlock


@attrs.frozen
class UserMessage:
    content: tuple[ContentBlock, ...]

    def as_text(self) -> str:
        """The prompt's text as one text (images left out), resources wrapped so the model
        sees where they came from."""
        return "\n\n".join(part for part in self.parts() if isinstance(part, str))

    def parts(self) -> list[str | ImageBlock]:
        """The prompt in order as texts and images; consecutive texts joined as `as_text`
        joins them. What a provider that takes images sends."""
        parts: list[str | ImageBlock] = []
        texts: list[str] = []
        for block in self.content:
            if isinstance(block, ImageBlock):
                if texts:
                    parts.append("\n\n".join(texts))
                    texts = []
                parts.append(block)
            elif isinstance(block, TextBlock):
                texts.append(block.text)
            else:
                texts.append(f'<resource uri="{block.uri}">\n{block.text}\n</resource>')
        if texts:
            parts.append("\n\n".join(texts))
        return parts

    @property
    def images(self) -> tuple[ImageBlock, ...]:
        return tuple(block for block in self.content if isinstance(block, ImageBlock))


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
    # Why the turn ended right after this text, when it was cut short: "cancelled" or
    # "failed" (a replay says so with the notice kept after the turn, agent/notices.py).
    stopped: str | None = None


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
    # How the call was shown (its `title` and `locations`, as on the wire, and the
    # `images` its result showed): a replay shows it so without computing it again. None:
    # stored by an older version, or never shown.
    shown: dict[str, Any] | None = None


Message = UserMessage | AssistantMessage | ToolResultMessage


def image_note(image: ImageBlock, why: str) -> str:
    """A short text in place of an image: what it was, and `why` it is not shown."""
    name = f"{image.uri}, " if image.uri else ""
    return f"[An image ({name}{image.media_type}, {image.size:,} bytes) {why}.]"


def without_images(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The conversation for a model that takes no images: each image a short note (a session
    whose earlier prompts had images may switch to such a model)."""
    return tuple(
        UserMessage(
            tuple(
                TextBlock(image_note(block, "was attached here; this model cannot see images"))
                if isinstance(block, ImageBlock)
                else block
                for block in message.content
            )
        )
        if isinstance(message, UserMessage) and message.images
        else message
        for message in messages
    )


def file_note(uri: str, media_type: str | None, size: int | None, why: str) -> TextBlock:
    """A short text in place of a file the user attached that the model is not shown."""
    details = ", ".join(
        part for part in (media_type, f"{size:,} bytes" if size is not None else None) if part
    )
    return TextBlock(f"[Attached file {uri}" + (f" ({details})" if details else "") + f": {why}.]")
