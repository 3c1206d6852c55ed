"""What the model is told an edited file now reads: an excerpt that says which lines of how
many it shows, numbered as the file is."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from parley.tools.edits import change_between, changed_lines

LINE = st.text(alphabet="ab \t", max_size=6)


def test_an_excerpt_names_its_lines_and_the_files_length() -> None:
    before = "".join(f"line {n}\n" for n in range(1, 9))
    after = before.replace("line 5\n", "line five\nand more\n")
    told = changed_lines(after, change_between(before, after))
    assert told.startswith("Lines 3-8 of 9 now read:\n")
    assert "     5\tline five\n" in told and "     6\tand more\n" in told


def test_a_whole_short_file_says_it_is_whole() -> None:
    before, after = "a\nb\n", "a\nc\n"
    assert changed_lines(after, change_between(before, after)).startswith(
        "It now reads (all 2 lines):\n"
    )


@given(st.lists(LINE, min_size=1, max_size=60), st.lists(LINE, max_size=60))
def test_the_heading_matches_the_numbered_lines_shown(old: list[str], new: list[str]) -> None:
    before, after = "\n".join(old) + "\n", "\n".join(new) + "\n"
    told = changed_lines(after, change_between(before, after))
    if not told:
        return
    numbers = [int(n) for n in re.findall(r"^ *(\d+)\t", told, flags=re.M)]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))
    lines = after.splitlines()
    heading = told.split("\n", 1)[0]
    whole = re.fullmatch(r"It now reads \(all (\d+) lines\):", heading)
    if whole:
        assert numbers == list(range(1, len(lines) + 1)) and int(whole.group(1)) == len(lines)
    else:
        first, last, total = map(
            int, re.fullmatch(r"Lines (\d+)-(\d+) of (\d+) now read:", heading).groups()
        )  # type: ignore[union-attr]
        assert (first, last, total) == (numbers[0], numbers[-1], len(lines))
    for number in numbers:
        assert f"{number:>6}\t{lines[number - 1]}\n" in told
