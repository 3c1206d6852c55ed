"""A command's output for the model: ANSI stripped, bounded to its head and tail with what
was cut counted (tools/command_output.py), whatever the bytes and however they are split."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from parley.tools.command_output import (
    PENDING_ESCAPE_CHARS,
    AnsiStripper,
    CommandOutput,
    bound_output,
    cut_marker,
    fenced,
    strip_ansi,
)

MARKER = re.compile(r"\[… ([\d,]+) lines \(([\d,]+) bytes\) cut …\]\n")

ESCAPES = st.sampled_from(
    [
        "\x1b[31m", "\x1b[0m", "\x1b[1;32;48;5;200m", "\x1b[2K", "\x1b[?25l", "\x1b]0;title\x07",
        "\x1b]8;;https://example.com\x1b\\", "\x1bPq#0\x1b\\", "\x1b(B", "\x1b=", "\x1b", "\x1b[",
        "\x1b]", "\r", "\n", "\t", "`", "```",
    ]
)  # fmt: skip
TEXT_PIECES = st.one_of(ESCAPES, st.text(max_size=40), st.text("ab\n", max_size=200))
OUTPUT = st.lists(TEXT_PIECES, max_size=40).map("".join)


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def check_bounded(whole: str, shown: str, lines: int, size: int, head: int, tail: int) -> None:
    """The property itself: whole output when it fits; else a head that starts it, a tail
    that ends it, the marker between counting exactly what is neither, within the bound."""
    data = whole.encode("utf-8", "surrogatepass")
    if len(data) <= head + tail:
        assert (shown, lines, size) == (whole, 0, 0)
        return
    found = MARKER.search(shown)
    assert found is not None, shown
    head_text, tail_text = shown[: found.start()], shown[found.end() :]
    head_bytes = head_text.encode("utf-8", "surrogatepass")
    tail_bytes = tail_text.encode("utf-8", "surrogatepass")
    assert data.endswith(tail_bytes)
    # The head is what is left of the output before the cut; a newline ends it if it had none.
    real_head = data[: len(data) - size - len(tail_bytes)]
    assert head_bytes == real_head + (b"" if real_head.endswith(b"\n") or not real_head else b"\n")
    assert len(real_head) <= head and len(tail_bytes) <= tail
    middle = data[len(real_head) : len(data) - len(tail_bytes)]
    assert size == len(middle) > 0 and lines == middle.count(b"\n")
    assert found.group(1).replace(",", "") == str(lines)
    assert found.group(2).replace(",", "") == str(size)
    marker = cut_marker(lines, size).encode()
    assert len(shown.encode("utf-8", "surrogatepass")) <= head + tail + len(marker) + 2


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(OUTPUT, st.text(), st.text("x\né", min_size=50, max_size=400)),
    head=st.integers(0, 120),
    tail=st.integers(0, 120),
)
def test_bound_output_keeps_head_and_tail_exactly_and_counts_the_cut(
    text: str, head: int, tail: int
) -> None:
    bounded = bound_output(text, head, tail)
    check_bounded(text, bounded.text, bounded.cut_lines, bounded.cut_bytes, head, tail)
    assert bounded.cut == (bounded.cut_bytes > 0)


@settings(max_examples=200, deadline=None)
@given(
    data=st.one_of(
        OUTPUT.map(lambda text: text.encode("utf-8", "surrogatepass")),
        st.binary(max_size=600),
    ),
    cuts=st.lists(st.integers(0, 700), max_size=12),
    head=st.integers(0, 100),
    tail=st.integers(0, 100),
)
def test_streamed_output_is_bounded_as_the_whole_stripped_text(
    data: bytes, cuts: list[int], head: int, tail: int
) -> None:
    """Any bytes, split anywhere (inside a character, inside an escape): the deltas are the
    whole decoded text, and the model's copy is the whole stripped text, bounded, from the
    head and tail kept alone."""
    output = CommandOutput(head, tail)
    deltas = "".join(output.add(piece) for piece in split_at(data, cuts)) + output.finish()
    decoded = data.decode("utf-8", "replace")
    assert deltas == decoded
    stripped = strip_ansi(decoded)
    assert "\x1b" not in stripped
    assert output.bounded() == bound_output(stripped, head, tail)
    assert output.raw_bytes == len(data)
    assert output.shown() == stripped[-len(output.shown()) :] if output.shown() else True


@settings(max_examples=200, deadline=None)
@given(text=OUTPUT, cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_stripping_in_pieces_is_stripping_the_whole(text: str, cuts: list[int]) -> None:
    stripper = AnsiStripper()
    points = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    stripped = "".join(stripper.feed(piece) for piece in pieces) + stripper.finish()
    assert stripped == strip_ansi(text)
    assert "\x1b" not in stripped


def test_what_each_kind_of_escape_leaves() -> None:
    coloured = "\x1b[1;31mFAILED\x1b[0m \x1b]8;;https://x.org\x1b\\link\x1b]8;;\x1b\\ \x1b[2Kdone"
    assert strip_ansi(coloured) == "FAILED link done"


def test_an_unfinished_escape_is_held_only_so_long() -> None:
    stripper = AnsiStripper()
    assert stripper.feed("a\x1b]0;") == "a"
    assert stripper.feed("x" * PENDING_ESCAPE_CHARS) == "]0;" + "x" * PENDING_ESCAPE_CHARS


def test_a_flood_keeps_only_the_head_and_tail() -> None:
    output = CommandOutput()
    output.add(b"first line\n")
    for _ in range(2000):
        output.add(b"\x1b[32m" + b"y" * 999 + b"\x1b[0m\n")
    output.add(b"last line\n")
    bounded = output.bounded()
    assert bounded.text.startswith("first line\n") and bounded.text.endswith("last line\n")
    assert bounded.cut_lines > 1900 and bounded.cut_bytes > 1_900_000
    assert len(bounded.text) < 17_000
    assert len(output._head) + len(output._tail) < 50_000  # memory stays bounded


def test_a_fence_no_line_of_the_text_closes() -> None:
    assert fenced("ls\n", "console") == "```console\nls\n```"
    assert fenced("a ``` b", "console") == "````console\na ``` b\n````"
