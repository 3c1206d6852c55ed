"""What the model is sent once a conversation is compacted (agent/compaction.py), in-process:
which tool outputs are pruned, where a summary cuts, what the summary call is shown and
asked for. The same rules through the running server are in test_compaction.py; these run
against every mutant of compaction.py (scripts/mutation)."""

from __future__ import annotations

import asyncio

import attrs
from parley.agent.compaction import (
    SUMMARY_HEADER,
    SUMMARY_SYSTEM,
    Compaction,
    compacted_view,
    is_context_exceeded,
    pruned,
    request_tokens,
    summarise,
    summary_cut,
    summary_request,
)
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
from parley.core.errors import ProviderError
from parley.providers.base import Completion, ModelRequest
from parley.tools.base import ToolSpec


def user(text: str) -> UserMessage:
    return UserMessage((TextBlock(text),))


def result(content: str, *, name: str = "read_file", error: bool = False) -> ToolResultMessage:
    return ToolResultMessage("call_1", name, content, is_error=error)


def called(name: str = "read_file", **arguments: object) -> AssistantMessage:
    return AssistantMessage("", tool_calls=(ToolCall("c1", name, dict(arguments), "w1"),))


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def marker(size: int) -> str:
    return (
        f"[tool output of {size:,} characters removed to save context; run the tool again "
        "if needed]"
    )


def test_old_tool_outputs_are_pruned_but_the_last_three_are_kept() -> None:
    outputs = [f"output {n} " + "x" * 5_000 for n in range(5)]
    messages: list[Message] = [user("Go.")]
    for output in outputs:
        messages += [called(), result(output)]
    # A window so small that only the last three outputs are protected.
    view = pruned(messages, window=10)
    assert contents(view) == [marker(5_009), marker(5_009), *outputs[2:]]
    assert view[0] == messages[0] and len(view) == len(messages)
    assert pruned(messages, window=1_000_000) == messages  # all in the protected share


def test_outputs_in_the_windows_last_fifth_are_kept_and_older_ones_pruned() -> None:
    outputs = [f"o{n}" + "x" * 998 for n in range(6)]  # 1,000 characters each
    messages: list[Message] = []
    for output in outputs:
        messages += [called(), result(output)]
    # 20% of a 10,000-token window is 8,000 characters: the last six outputs are in it...
    assert contents(pruned(messages, window=10_000)) == outputs
    # ...and of 6,250 tokens, 5,000 characters: counted from the end (each output 1,009 with
    # its tool's name, each call 11), the fourth-last output is in it, the ones before not.
    assert contents(pruned(messages, window=6_250)) == [marker(1_000)] * 2 + outputs[2:]


def test_an_output_shorter_than_its_marker_is_left_as_it_is() -> None:
    messages: list[Message] = [result("short") for _ in range(6)]
    assert pruned(messages, window=1) == messages


def test_a_summary_cuts_at_the_earliest_user_message_whose_tail_fits() -> None:
    history: list[Message] = []
    for n in range(6):
        history += [user(f"q{n}" + "x" * 398), AssistantMessage("a" * 400)]  # 800 per turn
    # 30% of 3,000 tokens is 3,600 characters: the last four turns (3,200) fit, five do not.
    assert summary_cut(history, 0, window=3_000) == 4
    assert summary_cut(history, 0, window=10_000) == 2  # never the first message after start
    assert summary_cut(history, 6, window=10_000) == 8
    assert summary_cut(history, 0, window=1) == 10  # nothing fits: the last user message
    assert summary_cut(history, 10, window=1) is None  # no user message after `start`
    assert summary_cut([AssistantMessage("a"), result("r")], 0, window=10) is None


def test_the_view_is_the_summary_in_the_first_recent_user_message_then_the_rest() -> None:
    history: list[Message] = [
        user("old"),
        AssistantMessage("old answer"),
        user("new"),
        AssistantMessage("ok"),
    ]
    view = compacted_view(history, Compaction(2, "They talked."))
    assert view == [
        UserMessage((TextBlock(SUMMARY_HEADER + "They talked."), TextBlock("new"))),
        AssistantMessage("ok"),
    ]
    assert compacted_view(history, None) == history
    assert compacted_view(history, Compaction(0, "nothing covered")) == history
    assert compacted_view(history, Compaction(4, "covers everything")) == history
    assert compacted_view(history, Compaction(1, "cut at an answer")) == history


def test_the_summary_call_shows_the_transcript_and_asks_for_a_bounded_summary() -> None:
    older: list[Message] = [
        user("Fix the bug."),
        called("read_file", path="a.py"),
        result("x" * 2_500),
        result("boom", name="run", error=True),
        AssistantMessage("Fixed."),
    ]
    request = summary_request("gpt", "Earlier: setup.", older, window=100_000)
    assert request.model == "gpt" and request.system == SUMMARY_SYSTEM and not request.tools
    assert request.max_tokens == 4_096
    prompt = request.messages[0].as_text()  # type: ignore[union-attr]
    assert prompt == (
        "Summarise this conversation so far (the transcript below), for continuing it.\n\n"
        "<transcript>\nSummary so far:\nEarlier: setup.\n\n"
        "User: Fix the bug.\n"
        'Agent: \n[called read_file {"path": "a.py"}]\n'
        f"[read_file returned]: {'x' * 2_000}\n[… 500 more]\n"
        "[run failed]: boom\n"
        "Agent: Fixed.\n</transcript>"
    )
    assert summary_request("gpt", None, older[:1], window=8_000).max_tokens == 1_000
    assert summary_request("gpt", None, older[:1], window=800).max_tokens == 256
    first = summary_request("gpt", None, older[:1], window=100_000).messages[0].as_text()  # type: ignore[union-attr]
    assert "Summary so far" not in first


def test_a_long_transcript_keeps_its_start_and_its_end() -> None:
    older: list[Message] = [user("FIRST" + "a" * 5_000), user("b" * 5_000 + "LAST")]
    # 60% of 1,000 tokens is 2,400 characters: a quarter from the start, the rest the end.
    prompt = summary_request("gpt", None, older, window=1_000).messages[0].as_text()  # type: ignore[union-attr]
    transcript = prompt.split("<transcript>\n", 1)[1].removesuffix("\n</transcript>")
    assert transcript == ("User: FIRST" + "a" * 589) + "\n[…]\n" + ("b" * 1_796 + "LAST")


def test_a_transcript_at_the_limit_is_sent_whole() -> None:
    text = "c" * (2_400 - len("User: "))
    prompt = summary_request("gpt", None, [user(text)], window=1_000).messages[0].as_text()  # type: ignore[union-attr]
    assert f"User: {text}\n</transcript>" in prompt and "[…]" not in prompt


def test_a_request_is_estimated_from_everything_it_sends() -> None:
    spec = ToolSpec("t", "d", {})  # 1 + 1 + 2 characters
    thought = AssistantMessage(
        "abcd", thinking=(ThinkingBlock("efgh"),), tool_calls=(ToolCall("c", "n", {"k": 1}, "w"),)
    )
    image = UserMessage((TextBlock("look"), ImageBlock("image/png", "AAAA")))
    request = ModelRequest(
        model="m",
        system="s" * 40,
        messages=(user("u" * 12), thought, image, result("r" * 20, name="nm")),
        tools=(spec,),
    )
    # 40 + 4 + (12 + 8) + (4 + 4 + 1 + 8 + 8) + (4 + 1000 + 8) + (20 + 2 + 8) = 1131 chars
    assert request_tokens(request) == 283


def test_summarise_replaces_the_older_turns_and_keeps_the_current_one() -> None:
    history: list[Message] = [
        user("one"),
        AssistantMessage("a"),
        user("two"),
        AssistantMessage("b"),
        user("three"),
    ]
    sent: list[ModelRequest] = []

    async def complete(request: ModelRequest) -> Completion:
        sent.append(request)
        return Completion("  The user asked twice.  ", (), (), "end_turn", None)

    compaction, _ = asyncio.run(summarise(history, Compaction(2, "Before."), "gpt", 1, complete))  # type: ignore[misc]
    assert compaction == Compaction(4, "The user asked twice.")
    shown = sent[0].messages[0].as_text()  # type: ignore[union-attr]
    assert "Summary so far:\nBefore." in shown and "User: two" in shown
    assert "User: one" not in shown and "User: three" not in shown

    async def blank(request: ModelRequest) -> Completion:
        return Completion("   ", (), (), "end_turn", None)

    again, _ = asyncio.run(summarise(history, None, "gpt", 1, blank))  # type: ignore[misc]
    assert again == Compaction(4, "(The earlier conversation could not be summarised.)")
    assert asyncio.run(summarise(history, Compaction(4, "All."), "gpt", 1, blank)) is None


def test_only_a_context_length_refusal_asks_for_compaction() -> None:
    assert is_context_exceeded(
        ProviderError(
            "too long", provider="openai", type="invalid_request", status=400, context_exceeded=True
        )
    )
    assert not is_context_exceeded(
        ProviderError("bad request", provider="openai", type="invalid_request", status=400)
    )
    assert not is_context_exceeded(ValueError("context"))


def test_a_calls_arguments_are_shown_to_the_summary_cut_at_500_characters() -> None:
    long_call = called("write_file", path="a.py", content="z" * 2_000)
    prompt = summary_request("gpt", None, [long_call], window=100_000).messages[0].as_text()  # type: ignore[union-attr]
    arguments = '{"path": "a.py", "content": "' + "z" * 2_000 + '"}'
    assert f"Agent: \n[called write_file {arguments[:500]}]\n</transcript>" in prompt


def test_an_output_as_long_as_its_marker_is_left_as_it_is() -> None:
    assert len(marker(84)) == 84
    messages: list[Message] = [result("y" * 84) for _ in range(6)]
    assert pruned(messages, window=1) == messages
    longer: list[Message] = [result("y" * 85) for _ in range(6)]
    assert contents(pruned(longer, window=1)) == [marker(85)] * 3 + ["y" * 85] * 3


def test_a_tail_exactly_the_recent_share_is_left_whole() -> None:
    history: list[Message] = []
    for n in range(6):
        history += [user(f"q{n}" + "x" * 398), AssistantMessage("a" * 400)]  # 800 per turn
    # 30% of 2,667 tokens is 800 tokens, 3,200 characters: exactly the last four turns.
    assert summary_cut(history, 0, window=2_667) == 4
    assert summary_cut(history, 0, window=2_666) == 6


def test_an_image_counts_as_a_thousand_characters_and_a_tool_as_all_it_sends() -> None:
    image = UserMessage((ImageBlock("image/png", "AAAA"),))
    request = ModelRequest(
        model="m", system="s" * 41, messages=(image,), tools=(ToolSpec("t", "d" * 100, {}),)
    )
    # 41 + (1 + 100 + 2) + (1,000 + 8) = 1,152 characters: 288 tokens exactly, so one
    # character more shows; one character less shows with one more in the system prompt.
    assert request_tokens(request) == 288
    assert request_tokens(attrs.evolve(request, system="s" * 42)) == 289


def test_a_tool_output_of_exactly_the_limit_is_shown_whole_to_the_summary() -> None:
    prompt = (
        summary_request("gpt", None, [result("q" * 2_000)], window=100_000).messages[0].as_text()
    )  # type: ignore[union-attr]
    assert f"[read_file returned]: {'q' * 2_000}\n</transcript>" in prompt


def test_an_output_one_character_past_the_protected_share_is_pruned() -> None:
    # 20% of 500 tokens is 400 characters; the last three outputs take 3 * (91 + 9) = 300,
    # the one before them 92 + 9 more: 401 characters, past the share.
    recent: list[Message] = [result("b" * 91) for _ in range(3)]
    assert contents(pruned([result("a" * 92), *recent], window=500))[0] == marker(92)
    assert contents(pruned([result("a" * 91), *recent], window=500))[0] == "a" * 91


def test_a_summary_covering_the_first_message_only_still_stands_in_for_it() -> None:
    history: list[Message] = [user("old"), user("new"), AssistantMessage("ok")]
    assert compacted_view(history, Compaction(1, "S.")) == [
        UserMessage((TextBlock(SUMMARY_HEADER + "S."), TextBlock("new"))),
        AssistantMessage("ok"),
    ]


def test_the_first_summary_is_shown_the_conversation_from_its_first_message() -> None:
    history: list[Message] = [user("one"), AssistantMessage("a"), user("two")]
    sent: list[ModelRequest] = []

    async def complete(request: ModelRequest) -> Completion:
        sent.append(request)
        return Completion("Summary.", (), (), "end_turn", None)

    asyncio.run(summarise(history, None, "gpt", 1, complete))  # type: ignore[misc]
    shown = sent[0].messages[0].as_text()  # type: ignore[union-attr]
    assert "User: one\nAgent: a\n</transcript>" in shown


def test_a_tail_one_character_over_the_recent_share_is_cut() -> None:
    history: list[Message] = [
        AssistantMessage("z"),
        user("x" * 401),
        AssistantMessage("a" * 400),
        user("y" * 100),
        AssistantMessage("b" * 100),
    ]
    # 30% of 834 tokens is 250 tokens, 1,000 characters: from the first user message the
    # tail is 1,001, so the cut is at the second.
    assert summary_cut(history, 0, window=834) == 3
