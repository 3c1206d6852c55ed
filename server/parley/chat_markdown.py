"""The answer's Markdown drawn for the terminal (the interactive `parley chat`), with `rich`.

The model's text is made terminal-safe first (`terminal_text` of the source: no escape
sequence or control of its own survives, bidi controls shown escaped), then rendered, and
what `rich` draws passes `terminal_text` again, colours allowed, so only the SGR colours and
emphasis of docs/display.md reach the terminal (a link's OSC 8, a background, reverse video
are left out), each line ending with its attributes reset. The answer streams: a block
(a paragraph, a list, a fenced code block) is drawn once it is complete — at a blank line
outside a fence, or its closing fence — and what is left when the message ends.
"""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Callable

from rich.console import Console
from rich.markdown import Markdown

from parley.terminal_text import RESET, TerminalStream, terminal_text

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# What `rich` pads a line with to the width: spaces, and the SGRs around them.
PADDING = re.compile(r"(?: |\x1b\[[0-9;]*m)+$")
CODE_THEME = "ansi_dark"  # Pygments' theme in the terminal's own 16 colours
FALLBACK_COLUMNS = 80  # a terminal that does not say its size


def terminal_columns() -> int:
    return shutil.get_terminal_size((FALLBACK_COLUMNS, 24)).columns or FALLBACK_COLUMNS


def render_markdown(text: str, width: int, colours: bool) -> str:
    """`text` (Markdown) as lines for a terminal `width` wide: its SGR colours and emphasis
    (`colours`), else plain text laid out (bullets, indentation, rules); nothing but what
    `terminal_text` keeps, whatever `text` holds."""
    safe = terminal_text(text)  # the model's own escapes and controls never reach `rich`
    console = Console(
        file=io.StringIO(),
        width=max(width, 20),
        force_terminal=colours,
        no_color=not colours,
        color_system="256" if colours else None,
        emoji=False,
        highlight=False,
        markup=False,
        legacy_windows=False,
    )
    console.print(Markdown(safe, code_theme=CODE_THEME, hyperlinks=False))
    drawn = console.file.getvalue()  # type: ignore[attr-defined]
    lines = TerminalStream(colours)  # each line its own block: no attribute crosses a line
    shown = lines.feed(drawn) + lines.finish()
    return "\n".join(_unpadded(line) for line in shown.split("\n"))


def _unpadded(line: str) -> str:
    """A drawn line without the spaces that pad it to the width (its attributes reset)."""
    bare = PADDING.sub("", line)
    return bare + RESET if "\x1b[" in bare else bare


def complete_blocks_end(text: str) -> int:
    """Where the complete blocks of `text` end: after its last blank line outside a code
    fence, or after a fence's closing line; 0 when no block is complete yet."""
    fence: str | None = None
    end = 0
    position = 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        if not line.endswith("\n"):
            break  # a line still coming
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence, end = None, position
        elif opening:
            fence = opening.group(1)
        elif not line.strip():
            end = position
    return end


class MarkdownStream:
    """The streamed answer drawn as Markdown, block by block: `feed` returns what the pieces
    so far complete, `finish` the rest (the message ended, or something else is shown next).
    Blocks drawn apart are set apart by a blank line, as `rich` sets them within one."""

    def __init__(self, colours: bool, columns: Callable[[], int] = terminal_columns) -> None:
        self.colours, self.columns = colours, columns
        self._source = TerminalStream()  # an escape cut between two pieces is held, then dropped
        self._pending = ""
        self._drawn = False  # a block was drawn (the next one starts after a blank line)

    def feed(self, text: str) -> str:
        self._pending += self._source.feed(text)
        end = complete_blocks_end(self._pending)
        done, self._pending = self._pending[:end], self._pending[end:]
        return self._draw(done)

    def finish(self) -> str:
        rest, self._pending = self._pending + self._source.finish(), ""
        return self._draw(rest)

    def _draw(self, text: str) -> str:
        if not text.strip():
            return ""
        drawn = render_markdown(text, self.columns(), self.colours).strip("\n")
        gap = "\n" if self._drawn else ""
        self._drawn = True
        return f"{gap}{drawn}\n"
