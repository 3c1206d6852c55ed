"""The streaming parsers for local models' text: thinking sections and text tool calls."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.providers.text_parsers import (
    Event,
    LocalModelStreamParser,
    ParsedReply,
    TextPiece,
    TextToolCallParser,
    ThinkTagParser,
    ThoughtPiece,
    ToolCallComplete,
    ToolCallMalformed,
    ToolCallNamed,
    ToolCallOpened,
    coalesce,
    parse_complete,
    render_tool_protocol_instructions,
    render_tool_result,
)
from parley.tools.base import ToolSpec

Parser = ThinkTagParser | TextToolCallParser | LocalModelStreamParser
PARSER_CLASSES = [ThinkTagParser, TextToolCallParser, LocalModelStreamParser]


def run(parser: Parser, chunks: list[str]) -> list[Event]:
    """Feed the chunks, then finish; all events, coalesced."""
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    events += parser.finish()
    return coalesce(events)


def run_per_feed(parser: Parser, chunks: list[str]) -> list[list[Event]]:
    """The events of each feed, then those of finish(), uncoalesced."""
    return [list(parser.feed(chunk)) for chunk in chunks] + [list(parser.finish())]


def every_split_in_two(text: str) -> list[list[str]]:
    return [[text[:i], text[i:]] for i in range(len(text) + 1)]


def call_text(name: str, arguments: str) -> str:
    return f"<tool><tool_name>{name}</tool_name><arguments>{arguments}</arguments></tool>"


# --- coalesce -------------------------------------------------------------------------------


def test_coalesce_merges_consecutive_pieces_of_the_same_kind_only() -> None:
    events: list[Event] = [
        TextPiece("a"),
        TextPiece("b"),
        ThoughtPiece("c"),
        ThoughtPiece(""),
        ThoughtPiece("d"),
        ToolCallOpened(0),
        TextPiece(""),
        TextPiece("e"),
    ]
    assert coalesce(events) == [
        TextPiece("ab"),
        ThoughtPiece("cd"),
        ToolCallOpened(0),
        TextPiece("e"),
    ]


# --- ThinkTagParser -------------------------------------------------------------------------


def test_think_parser_empty_input_gives_nothing() -> None:
    parser = ThinkTagParser()
    assert parser.feed("") == []
    assert parser.finish() == []


def test_think_parser_plain_prose_is_emitted_at_once() -> None:
    parser = ThinkTagParser()
    assert parser.feed("Hello, world.") == [TextPiece("Hello, world.")]
    assert parser.finish() == []


def test_think_parser_splits_thoughts_from_text() -> None:
    text = "Before <think>pondering</think>after"
    assert run(ThinkTagParser(), [text]) == [
        TextPiece("Before "),
        ThoughtPiece("pondering"),
        TextPiece("after"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "a<think>b</think>c",
        "a<thinking>b</thinking>c",
        "a<think>b</thinking>c",
        "a<thinking>b</think>c",
    ],
)
def test_think_parser_any_split_of_either_tag_pair(text: str) -> None:
    expected = [TextPiece("a"), ThoughtPiece("b"), TextPiece("c")]
    for chunks in every_split_in_two(text):
        assert run(ThinkTagParser(), chunks) == expected, chunks
    assert run(ThinkTagParser(), list(text)) == expected


def test_think_parser_tag_split_over_several_chunks() -> None:
    chunks = ["x <", "th", "i", "nk", ">deep", "</", "thi", "nk", "> y"]
    assert run(ThinkTagParser(), chunks) == [
        TextPiece("x "),
        ThoughtPiece("deep"),
        TextPiece(" y"),
    ]


def test_think_parser_unclosed_section_is_flushed_as_thought_by_finish() -> None:
    parser = ThinkTagParser()
    assert parser.feed("ok <think>still thinking") == [
        TextPiece("ok "),
        ThoughtPiece("still thinking"),
    ]
    assert parser.feed(" and </thi") == [ThoughtPiece(" and ")]
    assert parser.finish() == [ThoughtPiece("</thi")]


def test_think_parser_holds_back_only_a_possible_tag_prefix() -> None:
    parser = ThinkTagParser()
    assert parser.feed("x <th") == [TextPiece("x ")]
    assert parser.feed("e answer> is") == [TextPiece("<the answer> is")]


def test_think_parser_lookalikes_stay_text() -> None:
    parser = ThinkTagParser()
    assert parser.feed("a < b") == [TextPiece("a < b")]
    assert parser.feed("<thin") == []
    assert parser.feed("g>") == [TextPiece("<thing>")]
    assert parser.feed("<the answer>") == [TextPiece("<the answer>")]
    assert parser.feed("<THINK>, <think >, <br/>") == [TextPiece("<THINK>, <think >, <br/>")]
    assert parser.finish() == []


def test_think_parser_a_lone_less_than_at_the_end_is_held_then_flushed() -> None:
    parser = ThinkTagParser()
    assert parser.feed("a <") == [TextPiece("a ")]
    assert parser.finish() == [TextPiece("<")]


def test_think_parser_stray_closing_tag_is_text_and_sections_do_not_nest() -> None:
    text = "</think>a<think>b<think>c</think>d"
    assert run(ThinkTagParser(), [text]) == [
        TextPiece("</think>a"),
        ThoughtPiece("b<think>c"),
        TextPiece("d"),
    ]


def test_think_parser_can_start_inside_a_thought() -> None:
    parser = ThinkTagParser(starts_in_thought=True)
    assert run(parser, ["reasoning", "</think>", "answer"]) == [
        ThoughtPiece("reasoning"),
        TextPiece("answer"),
    ]


def test_think_parser_is_reusable_after_finish() -> None:
    parser = ThinkTagParser()
    assert run(parser, ["<think>open"]) == [ThoughtPiece("open")]
    assert run(parser, ["plain"]) == [TextPiece("plain")]


# --- TextToolCallParser ---------------------------------------------------------------------


READ = call_text("read_file", '{"path": "a.py"}')


def test_tool_parser_one_call_gives_opened_named_complete() -> None:
    text = f"Let me look.{READ}"
    assert run(TextToolCallParser(), [text]) == [
        TextPiece("Let me look."),
        ToolCallOpened(0),
        ToolCallNamed(0, "read_file"),
        ToolCallComplete(0, "read_file", {"path": "a.py"}),
    ]


def test_tool_parser_any_split_in_two_gives_the_same_events() -> None:
    text = f"say <to {READ} done"
    expected = run(TextToolCallParser(), [text])
    assert expected[0] == TextPiece("say <to ")
    for chunks in every_split_in_two(text):
        assert run(TextToolCallParser(), chunks) == expected, chunks
    assert run(TextToolCallParser(), list(text)) == expected


@pytest.mark.parametrize("cut", range(1, len("<tool>")))
def test_tool_parser_open_tag_split_at_every_position(cut: int) -> None:
    parser = TextToolCallParser()
    assert parser.feed("x" + "<tool>"[:cut]) == [TextPiece("x")]
    assert parser.feed("<tool>"[cut:]) == [ToolCallOpened(0)]


def test_tool_parser_opened_and_named_come_as_soon_as_their_tags_close() -> None:
    parser = TextToolCallParser()
    assert parser.feed("<tool") == []
    assert parser.feed(">") == [ToolCallOpened(0)]
    assert parser.feed("<tool_name>python_eval</tool_name") == []
    assert parser.feed(">") == [ToolCallNamed(0, "python_eval")]
    assert parser.feed('<arguments>{"code": "1+1"}') == []
    assert parser.feed("</arguments>") == []
    assert parser.feed("</tool>") == [ToolCallComplete(0, "python_eval", {"code": "1+1"})]
    assert parser.finish() == []


def test_tool_parser_tolerates_whitespace_between_tags() -> None:
    text = (
        "<tool>\n  <tool_name> read_file </tool_name>\n"
        '  <arguments>\n{\n  "path": "a.py"\n}\n</arguments>\n</tool>'
    )
    assert run(TextToolCallParser(), [text])[-1] == ToolCallComplete(
        0, "read_file", {"path": "a.py"}
    )


def test_tool_parser_call_first_and_last_and_two_in_a_row() -> None:
    second = call_text("list_directory", "{}")
    assert run(TextToolCallParser(), [READ + second]) == [
        ToolCallOpened(0),
        ToolCallNamed(0, "read_file"),
        ToolCallComplete(0, "read_file", {"path": "a.py"}),
        ToolCallOpened(1),
        ToolCallNamed(1, "list_directory"),
        ToolCallComplete(1, "list_directory", {}),
    ]


def test_tool_parser_text_around_and_between_calls() -> None:
    events = run(TextToolCallParser(), [f"a{READ}\nb\n{READ}c"])
    assert [e for e in events if isinstance(e, TextPiece)] == [
        TextPiece("a"),
        TextPiece("\nb\n"),
        TextPiece("c"),
    ]


def test_tool_parser_missing_or_empty_arguments_mean_an_empty_object() -> None:
    for text in [
        "<tool><tool_name>python_last_error</tool_name></tool>",
        "<tool><tool_name>python_last_error</tool_name><arguments> </arguments></tool>",
    ]:
        assert run(TextToolCallParser(), [text])[-1] == ToolCallComplete(0, "python_last_error", {})


def test_tool_parser_does_not_check_tool_names() -> None:
    assert run(TextToolCallParser(), [call_text("no_such_tool", "{}")])[-1] == (
        ToolCallComplete(0, "no_such_tool", {})
    )


def test_tool_parser_closing_tag_inside_a_json_string_is_part_of_the_arguments() -> None:
    arguments = {"code": 'print("</tool>")', "html": "<tool><tool_name>x</tool_name>"}
    text = call_text("python_eval", json.dumps(arguments)) + " after"
    for chunks in [[text], list(text)]:
        assert run(TextToolCallParser(), chunks)[-2:] == [
            ToolCallComplete(0, "python_eval", arguments),
            TextPiece(" after"),
        ]


def test_tool_parser_tag_lookalikes_in_prose_stay_text() -> None:
    text = "a < b, <tool_name>x</tool_name>, <tools>, <Tool>, </tool>, <to"
    assert run(TextToolCallParser(), [text]) == [TextPiece(text)]


def test_tool_parser_think_tags_are_text_to_it() -> None:
    assert run(TextToolCallParser(), ["<think>x</think>"]) == [TextPiece("<think>x</think>")]


def malformed(text: str) -> ToolCallMalformed:
    events = run(TextToolCallParser(), [text])
    [error] = [e for e in events if isinstance(e, ToolCallMalformed)]
    assert not [e for e in events if isinstance(e, ToolCallComplete)]
    return error


def test_malformed_bad_json_says_where_and_what_to_do() -> None:
    text = call_text("read_file", '{"path" "a.py"}')
    error = malformed(text)
    assert error == ToolCallMalformed(
        0,
        text,
        "The arguments of tool call 1 (read_file) are not valid JSON: Expecting ':' "
        "delimiter at line 1 column 9. Send the call again with a JSON object.",
    )


def test_malformed_arguments_that_are_not_an_object() -> None:
    error = malformed(call_text("read_file", '["a.py"]'))
    assert "tool call 1 (read_file) are an array, not a JSON object" in error.error
    assert "not a JSON object" in malformed(call_text("x", '"a.py"')).error
    assert "are null" in malformed(call_text("x", "null")).error


def test_malformed_missing_name() -> None:
    text = '<tool><arguments>{"a": 1}</arguments></tool>'
    error = malformed(text)
    assert error.raw == text
    assert "Tool call 1 has no name" in error.error


def test_malformed_empty_name_and_text_before_the_name() -> None:
    assert "empty <tool_name>" in malformed(call_text(" ", "{}")).error
    error = malformed("<tool>read_file<tool_name>x</tool_name></tool>")
    assert "must start with <tool_name>, but it starts with 'read_file<tool_name>x'" in (
        error.error
    )


def test_malformed_stray_text_between_tags() -> None:
    error = malformed("<tool><tool_name>x</tool_name> oops <arguments>{}</arguments></tool>")
    assert "unexpected text 'oops' between </tool_name> and <arguments>" in error.error
    error = malformed("<tool><tool_name>x</tool_name><arguments>{}</arguments>!</tool>")
    assert "between </arguments> and </tool>" in error.error
    error = malformed('<tool><tool_name>x</tool_name>{"a": 1}</tool>')
    assert "between </tool_name> and </tool>" in error.error


def test_malformed_missing_closing_arguments_tag_does_not_swallow_the_rest() -> None:
    text = '<tool><tool_name>x</tool_name><arguments>{"a": 1}</tool>'
    events = run(TextToolCallParser(), [text + " then prose", READ])
    assert events[2] == ToolCallMalformed(
        0,
        text,
        "The arguments of tool call 1 (x) are not closed with </arguments>. Send the call "
        'again as <tool><tool_name>NAME</tool_name><arguments>{"argument": "value"}'
        "</arguments></tool>",
    )
    assert events[3] == TextPiece(" then prose")
    assert events[-1] == ToolCallComplete(1, "read_file", {"path": "a.py"})


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("<tool>", "</tool_name>"),
        ("<tool><tool_name>x", "</tool_name>"),
        ("<tool><tool_name>x</tool_name><argu", "<arguments>"),
        ('<tool><tool_name>x</tool_name><arguments>{"a": 1', "</arguments>"),
        ("<tool><tool_name>x</tool_name><arguments>{}</arguments> </tooo", "</tool>"),
    ],
)
def test_malformed_reply_ended_inside_a_call(text: str, missing: str) -> None:
    parser = TextToolCallParser()
    events = parser.feed(text)
    assert not [e for e in events if isinstance(e, ToolCallMalformed | ToolCallComplete)]
    [error] = parser.finish()
    assert isinstance(error, ToolCallMalformed)
    assert error.raw == text
    assert "The reply ended inside tool call 1" in error.error
    assert f"before {missing}." in error.error


@pytest.mark.parametrize("ending", ["</arguments>", "</arguments>\n", "</arguments></to", ""])
def test_reply_ending_where_the_closing_tool_tag_would_come_completes_the_call(
    ending: str,
) -> None:
    # E.g. a "</tool>" stop sequence cut the reply there.
    text = "<tool><tool_name>x</tool_name>" + ("<arguments>{}" + ending if ending else "")
    assert run(TextToolCallParser(), [text])[-1] == ToolCallComplete(0, "x", {})


def test_named_then_malformed_for_bad_arguments() -> None:
    events = run(TextToolCallParser(), [call_text("x", "{")])
    assert [type(e) for e in events] == [ToolCallOpened, ToolCallNamed, ToolCallMalformed]


# --- LocalModelStreamParser and parse_complete ----------------------------------------------


def test_combined_thought_before_a_tool_call() -> None:
    text = f"<think>I should read it.</think>\nReading.\n{READ}"
    expected = [
        ThoughtPiece("I should read it."),
        TextPiece("\nReading.\n"),
        ToolCallOpened(0),
        ToolCallNamed(0, "read_file"),
        ToolCallComplete(0, "read_file", {"path": "a.py"}),
    ]
    for chunks in [[text], list(text), *every_split_in_two(text)]:
        assert run(LocalModelStreamParser(), chunks) == expected


def test_combined_each_section_hides_the_other_kind_of_tag() -> None:
    arguments = {"code": "parser.feed('<think>hi</think>')"}
    text = f"<think>maybe {READ}?</think>" + call_text("python_eval", json.dumps(arguments))
    assert run(LocalModelStreamParser(), [text]) == [
        ThoughtPiece(f"maybe {READ}?"),
        ToolCallOpened(0),
        ToolCallNamed(0, "python_eval"),
        ToolCallComplete(0, "python_eval", arguments),
    ]


def test_combined_a_thought_between_tag_fragments_does_not_make_a_tag() -> None:
    assert parse_complete("<to<think></think>ol>").text == "<tool>"


def test_parse_complete_collects_everything() -> None:
    text = (
        f"<thinking>first</thinking>Answer: <think>second</think> done.{READ}{call_text('x', '[]')}"
    )
    reply = parse_complete(text)
    assert reply == ParsedReply(
        thoughts="firstsecond",
        text="Answer:  done.",
        tool_calls=[ToolCallComplete(0, "read_file", {"path": "a.py"})],
        errors=[reply.errors[0]],
    )
    assert reply.errors[0].index == 1


def test_parse_complete_of_nothing_and_of_an_unclosed_thought() -> None:
    assert parse_complete("") == ParsedReply("", "", [], [])
    assert parse_complete("<think>hmm") == ParsedReply("hmm", "", [], [])
    assert parse_complete("hmm</think>yes", starts_in_thought=True) == ParsedReply(
        "hmm", "yes", [], []
    )


# --- The prompt side ------------------------------------------------------------------------


SPECS = [
    ToolSpec(
        name="read_file",
        description="Read a file of the workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    ),
    ToolSpec(name="python_last_error", description="The last exception.", input_schema={}),
]


def test_instructions_list_every_tool_with_its_schema_and_the_format() -> None:
    instructions = render_tool_protocol_instructions(SPECS)
    for spec in SPECS:
        assert f"## {spec.name}\n{spec.description}" in instructions
        assert json.dumps(spec.input_schema) in instructions
    assert "<tool><tool_name>NAME</tool_name><arguments>" in instructions
    assert '<tool_result name="NAME">' in instructions
    # The example the model is shown is itself a well-formed call.
    example = next(line for line in instructions.splitlines() if line.startswith("<tool>"))
    assert parse_complete(example).tool_calls == [
        ToolCallComplete(0, "NAME", {"argument": "value"})
    ]


def test_instructions_for_no_tools_are_empty() -> None:
    assert render_tool_protocol_instructions([]) == ""


def test_render_tool_result() -> None:
    assert render_tool_result("read_file", "hello") == (
        '<tool_result name="read_file">\nhello\n</tool_result>'
    )
    assert render_tool_result("x", "boom", is_error=True) == (
        '<tool_result name="x" error="true">\nboom\n</tool_result>'
    )


# --- Properties -----------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)

# Fragments that make tags, parts of tags and lookalikes likely.
TAG_SOUP = [
    "<think>", "<thinking>", "</think>", "</thinking>", "<tool>", "</tool>", "<tool_name>",
    "</tool_name>", "<arguments>", "</arguments>", "<", ">", "/", "<th", "<thin", "think", "ing",
    "tool", "_name", "<to", "</", "a", " ", "\n", '{"a": 1}', "{", "}", '"', "é",
]  # fmt: skip


def chunkings(text: str) -> st.SearchStrategy[list[str]]:
    """Every way of cutting `text` into chunks (empty chunks included)."""
    cuts = st.lists(st.integers(0, len(text)), max_size=max(1, len(text)))
    return cuts.map(lambda points: cut(text, points))


def cut(text: str, points: list[int]) -> list[str]:
    bounds = [0, *sorted(points), len(text)]
    return [text[start:end] for start, end in itertools.pairwise(bounds)]


@PROPERTY_SETTINGS
@given(text=st.lists(st.sampled_from(TAG_SOUP), max_size=40).map("".join), data=st.data())
def test_property_any_chunking_of_tag_soup_gives_the_same_events(
    text: str, data: st.DataObject
) -> None:
    chunks = data.draw(chunkings(text))
    for parser_class in PARSER_CLASSES:
        whole = run(parser_class(), [text])
        assert run(parser_class(), chunks) == whole
        assert run(parser_class(), list(text)) == whole
    events = run(LocalModelStreamParser(), [text])
    reply = parse_complete(text)
    assert reply.text == "".join(e.text for e in events if isinstance(e, TextPiece))
    assert reply.thoughts == "".join(e.text for e in events if isinstance(e, ThoughtPiece))


@PROPERTY_SETTINGS
@given(text=st.lists(st.sampled_from(TAG_SOUP), max_size=40).map("".join), data=st.data())
def test_property_pieces_are_never_empty_and_only_a_tag_prefix_is_held_back(
    text: str, data: st.DataObject
) -> None:
    parser = ThinkTagParser()
    fed = ""
    for chunk in data.draw(chunkings(text)):
        assert all(piece.text for piece in parser.feed(chunk))
        fed += chunk
        held = "".join(p.text for p in copy.deepcopy(parser).finish())
        last_tag_start = fed[fed.rfind("<") :] if "<" in fed else ""
        could_be_a_tag = any(
            tag.startswith(last_tag_start) and tag != last_tag_start
            for tag in ("<think>", "<thinking>", "</think>", "</thinking>")
        )
        if could_be_a_tag:
            assert held in ("", last_tag_start)
        else:
            assert held == ""


# Structured replies whose meaning is known: prose, thoughts and calls, in any order.

PROSE_FRAGMENTS = [
    "Hello", " ", "\n", "a < b", "x>y", "<", ">", "<thin", "<thinkin", "<too", "<tool_",
    "<tool_name>", "</think>", "</tool>", "<the answer>", "<br/>", "<tool >", "<Think>", "é",
    "{", "}", "</",
]  # fmt: skip
THOUGHT_FRAGMENTS = [
    "hmm", " ", "\n", "<", ">", "<think>", "<tool>", "</thin", "</think", "</", "a<b", "</tool>",
    call_text("fake", "{}"),
]  # fmt: skip
OPENING_TAGS = ("<think>", "<thinking>", "<tool>")
CLOSING_THINK_TAGS = ("</think>", "</thinking>")
WHITESPACE = st.sampled_from(["", " ", "\n", "\n  ", "\t"])

prose = (
    st.lists(st.sampled_from(PROSE_FRAGMENTS), max_size=6)
    .map("".join)
    .filter(lambda text: not any(tag in text for tag in OPENING_TAGS))
)
thought_content = (
    st.lists(st.sampled_from(THOUGHT_FRAGMENTS), max_size=6)
    .map("".join)
    .filter(lambda text: not any(tag in text for tag in CLOSING_THINK_TAGS))
)
json_strings = st.lists(
    st.sampled_from(["a", " ", "<", ">", "/", '"', "\\", "\n", "é", "</tool>", "<think>"]),
    max_size=8,
).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | json_strings,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(json_strings, children, max_size=3)
    ),
    max_leaves=8,
)
tool_names = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)


@st.composite
def thought_sections(draw: st.DrawFn) -> dict[str, Any]:
    content = draw(thought_content)
    opening = draw(st.sampled_from(["<think>", "<thinking>"]))
    closing = draw(st.sampled_from(CLOSING_THINK_TAGS))
    return {"kind": "thought", "content": content, "text": opening + content + closing}


@st.composite
def tool_calls(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(tool_names)
    arguments = draw(st.dictionaries(json_strings, json_values, max_size=4))
    arguments_text = json.dumps(arguments, indent=draw(st.sampled_from([None, 2])))
    broken = draw(st.booleans())
    if broken:
        arguments_text = arguments_text[:-1]  # drop the closing brace
    gaps = [draw(WHITESPACE) for _ in range(5)]
    head = f"<tool>{gaps[0]}<tool_name>{gaps[1]}{name}{gaps[1]}</tool_name>"
    body = f"{gaps[2]}<arguments>{arguments_text}</arguments>{gaps[3]}</tool>"
    return {
        "kind": "call",
        "name": name,
        "arguments": arguments,
        "broken": broken,
        "text": head + body,
        "name_known_at": len(head),  # offset just after </tool_name>
        "arguments_closed_at": len(head) + body.rindex("</arguments>") + len("</arguments>"),
    }


@st.composite
def replies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A reply and what it means: prose, then (section, prose) pairs, maybe an open thought.

    Prose only ever touches complete tags, so it cannot accidentally form a new one.
    """
    sections = draw(st.lists(thought_sections() | tool_calls(), max_size=4))
    proses = [draw(prose) for _ in range(len(sections) + 1)]
    text = proses[0]
    expected: dict[str, Any] = {"thoughts": "", "text": proses[0], "calls": []}
    for section, after in zip(sections, proses[1:], strict=True):
        if section["kind"] == "thought":
            expected["thoughts"] += section["content"]
        else:
            expected["calls"].append(
                {
                    **section,
                    "name_known_at": len(text) + section["name_known_at"],
                    "arguments_closed_at": len(text) + section["arguments_closed_at"],
                }
            )
        text += section["text"] + after
        expected["text"] += after
    if draw(st.booleans()):
        unclosed = draw(thought_content)
        text += "<think>" + unclosed
        expected["thoughts"] += unclosed
    return text, expected


@PROPERTY_SETTINGS
@given(reply=replies(), data=st.data())
def test_property_structured_replies_parse_to_their_meaning_whatever_the_chunks(
    reply: tuple[str, dict[str, Any]], data: st.DataObject
) -> None:
    text, expected = reply
    parsed = parse_complete(text)
    assert parsed.thoughts == expected["thoughts"]
    assert parsed.text == expected["text"]
    good_calls = [c for c in expected["calls"] if not c["broken"]]
    broken_calls = [c for c in expected["calls"] if c["broken"]]
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        (c["name"], c["arguments"]) for c in good_calls
    ]
    assert [e.index for e in parsed.errors] == [
        i for i, c in enumerate(expected["calls"]) if c["broken"]
    ]
    assert all("not valid JSON" in e.error for e in parsed.errors)
    assert len(parsed.errors) == len(broken_calls)

    chunks = data.draw(chunkings(text))
    per_feed = run_per_feed(LocalModelStreamParser(), chunks)
    assert coalesce(e for events in per_feed for e in events) == run(
        LocalModelStreamParser(), [text]
    )

    # Early detection: each call's name comes out of the very feed that completes its
    # </tool_name>, so before the feed that completes its </arguments> when that is later.
    chunk_ends = [sum(len(c) for c in chunks[: i + 1]) for i in range(len(chunks))]

    def chunk_completing(offset: int) -> int:
        return next(i for i, end in enumerate(chunk_ends) if end >= offset)

    named_in_feed = {
        event.index: feed
        for feed, events in enumerate(per_feed)
        for event in events
        if isinstance(event, ToolCallNamed)
    }
    assert sorted(named_in_feed) == list(range(len(expected["calls"])))
    for index, call in enumerate(expected["calls"]):
        assert named_in_feed[index] == chunk_completing(call["name_known_at"])
        assert named_in_feed[index] <= chunk_completing(call["arguments_closed_at"])


def test_bench_parsers_runs_and_reports_chunks_per_second() -> None:
    from parley.providers.text_parsers_bench import bench_parsers

    figures = bench_parsers(n_chunks=500)
    assert set(figures) == {"ThinkTagParser", "TextToolCallParser", "LocalModelStreamParser"}
    assert all(value > 0 for value in figures.values())
