"""The interactive chat's two new inputs, whatever they hold: the model's Markdown drawn for
the terminal (`chat_markdown.py`) and the slash commands the server advertises, completed
as the user types (`chat_input.py`)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from parley.chat_input import HISTORY_FILE, SlashCommands, line_editor
from parley.chat_markdown import MarkdownStream, complete_blocks_end, render_markdown
from parley.terminal_text import ALLOWED_SGR, sgr_groups
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

SGR_SEQUENCE = re.compile(r"\x1b\[([0-9;]*)m")
HOSTILE_PIECES = [
    "\x1b",
    "[",
    "]",
    "\x1b[2J",
    "\x1b]52;c;AAAA\x07",
    "\x1b]8;;http://x\x1b\\",
    "\x9b",
    "\r",
    "\x07",
    "\u202e",
    "\u2066",
    "\ud800",
    "\n",
    "\n\n",
    "```",
    "~~~",
    "# ",
    "- ",
    "1. ",
    "**",
    "`",
    "[a](b)",
    "> ",
    "|a|b|\n|-|-|\n",
    "word",
    " ",
]
MARKDOWN_TEXT = st.lists(st.sampled_from(HOSTILE_PIECES), max_size=40).map("".join) | st.text(
    max_size=80
)


def assert_terminal_safe(drawn: str) -> None:
    """Only SGR sequences of colours and emphasis, and no other control character but
    newline (tab aside); bidi controls never raw."""
    for match in SGR_SEQUENCE.finditer(drawn):
        groups = sgr_groups(match.group(1))
        assert groups and all(g in ALLOWED_SGR or g.startswith("38;") for g in groups), match
    bare = SGR_SEQUENCE.sub("", drawn)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", bare), repr(bare)
    assert not re.search("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", bare)


@given(text=MARKDOWN_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_the_drawn_answer_is_terminal_safe_however_it_streams(text: str, cuts: list[int]) -> None:
    for colours in (True, False):
        stream = MarkdownStream(colours, columns=lambda: 60)
        points = sorted({min(cut, len(text)) for cut in cuts})
        pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
        drawn = "".join(stream.feed(piece) for piece in pieces) + stream.finish()
        assert_terminal_safe(drawn)
        assert_terminal_safe(render_markdown(text, 60, colours))
        # No line keeps an attribute set past its end.
        for line in drawn.split("\n"):
            opened = SGR_SEQUENCE.findall(line)
            assert not opened or line.endswith("\x1b[0m"), repr(line)


@given(text=MARKDOWN_TEXT)
def test_a_block_is_drawn_only_once_it_is_complete(text: str) -> None:
    """What is drawn before the message ends never stops inside a code fence or a line."""
    end = complete_blocks_end(text)
    done = text[:end]
    assert end == 0 or done.endswith("\n")
    fence: str | None = None
    for line in done.split("\n"):
        opening = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence is None and opening:
            fence = opening.group(1)
        elif (
            fence is not None
            and opening
            and opening.group(1)[0] == fence[0]
            and len(opening.group(1)) >= len(fence)
        ):
            fence = None
    assert fence is None


COMMAND = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=10), "description": st.text(max_size=20)},
    optional={"input": st.fixed_dictionaries({"hint": st.text(max_size=20)})},
)


@given(
    commands=st.lists(COMMAND, max_size=6) | st.none() | st.integers(),
    typed=st.text(max_size=20).map(lambda t: "/" + t) | st.text(max_size=20),
)
def test_completions_are_advertised_commands_shown_without_controls(
    commands: object, typed: str
) -> None:
    completer = SlashCommands(models=["openai:gpt-4.1-mini", "demo"])
    completer.advertised(commands)
    names = {c["name"] for c in commands} if isinstance(commands, list) else set()
    found = list(
        completer.get_completions(Document(typed), CompleteEvent(completion_requested=True))
    )
    if not typed.startswith("/"):
        assert found == []
    for completion in found:
        completed = typed[: len(typed) + completion.start_position] + completion.text
        assert completed.startswith(typed[: len(typed) + completion.start_position])
        if " " not in typed:  # a command's name: one the server advertised, then a space
            assert completed[1:-1] in names and completed.endswith(" ")
            assert completed.startswith(typed)
        shown = completion.display_text + completion.display_meta_text
        # (a tab is kept, as every client keeps it: docs/display.md, escapeControls)
        assert not re.search("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)


def test_mode_and_model_arguments_are_completed() -> None:
    completer = SlashCommands(models=["openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5"])
    completer.advertised(
        [
            {"name": "mode", "description": "Switch", "input": {"hint": "ask|accept_edits|plan"}},
            {"name": "model", "description": "Switch", "input": {"hint": "provider:model"}},
        ]
    )

    def complete(typed: str) -> list[str]:
        event = CompleteEvent(completion_requested=True)
        return [c.text for c in completer.get_completions(Document(typed), event)]

    assert complete("/mo") == ["/mode ", "/model "]
    assert complete("/mode pl") == ["plan"]
    assert complete("/mode a") == ["ask", "accept_edits"]
    assert complete("/model an") == ["anthropic:claude-sonnet-4-5"]


TYPED_LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\x1b"),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(TYPED_LINE, min_size=1, max_size=4), dropped=TYPED_LINE)
def test_what_is_typed_is_what_is_sent(lines: list[str], dropped: str) -> None:
    """Whatever the user types, with Alt-Enter between lines, is the prompt sent, as typed;
    a line dropped with Ctrl-C first leaves nothing of itself; the history keeps it whole."""
    with (
        tempfile.TemporaryDirectory() as home,
        create_pipe_input() as keys,
        create_app_session(input=keys, output=DummyOutput()),
    ):
        editor = line_editor(Path(home), SlashCommands())
        if dropped:
            keys.send_text(dropped + "\x03")
        keys.send_text("\x1b\r".join(lines) + "\r")
        typed = "\n".join(lines)
        assert editor.prompt() == typed
        if typed:  # kept in the history, as typed (the next chat's Up finds it)
            kept = FileHistory(str(Path(home) / HISTORY_FILE)).load_history_strings()
            assert next(iter(kept)) == typed
