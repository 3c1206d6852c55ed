"""`to_anthropic_messages`: any conversation becomes messages Anthropic takes — roles that
alternate (a tool's result is the user's), no empty message — with every block of every
message kept, in order, and only signed or redacted thoughts sent back."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from parley.core.conversation import (
    AssistantMessage,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.providers.anthropic_provider import to_anthropic_messages

texts = st.sampled_from(["", " ", "hi", "two words"])
thoughts = st.builds(
    ThinkingBlock,
    texts,
    signature=st.one_of(st.none(), st.just("sig")),
    redacted=st.one_of(st.none(), st.just("opaque")),
)
calls = st.builds(
    ToolCall, st.sampled_from(["c1", "c2"]), st.just("f"), st.just({"a": 1}), st.just("w")
)
users = st.builds(
    UserMessage,
    st.lists(
        st.one_of(st.builds(TextBlock, texts), st.just(ImageBlock("image/png", "iVBORw0KGgo="))),
        max_size=3,
    ).map(tuple),
)
assistants = st.builds(
    AssistantMessage,
    texts,
    st.lists(thoughts, max_size=2).map(tuple),
    st.lists(calls, max_size=2).map(tuple),
)
results = st.builds(ToolResultMessage, st.just("c1"), st.just("f"), texts, st.booleans())
conversations = st.lists(st.one_of(users, assistants, results), max_size=8).map(tuple)


def expected_blocks(message: Message) -> list[dict[str, Any]]:
    """What each message contributes, by kind of block (the details are the provider tests')."""
    if isinstance(message, AssistantMessage):
        kinds = [
            "redacted_thinking" if t.redacted else "thinking"
            for t in message.thinking
            if t.redacted or t.signature
        ]
        kinds += ["text"] * bool(message.text) + ["tool_use"] * len(message.tool_calls)
        return [{"type": kind} for kind in kinds]
    if isinstance(message, ToolResultMessage):
        return [{"type": "tool_result", "content": message.content or "(no output)"}]
    if not message.images:
        return [{"type": "text"}]
    return [
        {"type": "image" if isinstance(part, ImageBlock) else "text"}
        for part in message.parts()
        if isinstance(part, ImageBlock) or part.strip()
    ]


@given(conversations)
def test_any_conversation_becomes_alternating_messages_with_every_block_kept(
    conversation: tuple[Message, ...],
) -> None:
    wire = to_anthropic_messages(conversation)
    roles = [message["role"] for message in wire]
    assert all(first != second for first, second in itertools.pairwise(roles))
    assert all(message["content"] for message in wire)
    sent = [block for message in wire for block in message["content"]]
    wanted = [block for message in conversation for block in expected_blocks(message)]
    assert [block["type"] for block in sent] == [block["type"] for block in wanted]
    for block, want in zip(sent, wanted, strict=True):
        assert block.get("content", want.get("content")) == want.get(
            "content", block.get("content")
        )
