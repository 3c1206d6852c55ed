"""What `parley chat` may send a terminal (docs/display.md, "What reaches the terminal").

Everything it prints passes `terminal_text`: printable text, `\\n`, `\\t`, and SGR sequences
of colours and emphasis only (`ALLOWED_SGR`); every other escape sequence (CSI of another
final, OSC, DCS, APC, PM, SOS, two-character escapes), every other C0 control and every C1
control (U+0080-U+009F) is dropped; a bidi control is shown escaped (`\\u202e`), so text
cannot reorder what the user reads. `TerminalStream` does the same to a text that comes in
pieces, each line of each piece a block that leaves the terminal's attributes as it found
them.
What the user must judge (a command, a title, a path, a diff) is shown by
`parley.display.escape_controls` instead: every control and format character escaped,
visible, nothing dropped (the rule every client follows).
"""

from __future__ import annotations

import re

from parley.tools.command_output import ANSI_ESCAPE, unfinished_escape

RESET = "\x1b[0m"
# The SGR codes a terminal may be sent: reset, bold, dim, italic, underline and their ends,
# the 8 + 8 foreground colours and the default one. Not blink (5, 6: louder than the real
# question), reverse video (7: the question's own mark), conceal (8: hides text), strike,
# fonts, nor any background (a background under text imitates reverse video).
ALLOWED_SGR = frozenset(
    {"0", "1", "2", "3", "4", "22", "23", "24", "39"}
    | {str(code) for code in range(30, 38)}
    | {str(code) for code in range(90, 98)}
)
EXTENDED_FOREGROUND = "38"  # 38;5;N (256 colours), 38;2;R;G;B (true colour)
EXTENDED_ARGUMENTS = {"5": 1, "2": 3}  # how many numbers each form takes
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
MAX_OPEN_GROUPS = 16  # what a stream re-opens at a piece's start (older ones are dropped)
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# C0 but tab and newline, DEL, C1: never sent (a lone ESC is one of them).
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SURROGATES = re.compile("[\ud800-\udfff]")  # no character; written as raw bytes they could be C1


def painted(text: str, code: str) -> str:
    """`text` in the SGR `code` (Parley's own colours), line by line: no attribute is left set
    at a line's end."""
    return "\n".join(f"\x1b[{code}m{line}{RESET}" if line else "" for line in text.split("\n"))


def sgr_groups(parameters: str) -> list[str]:
    """An SGR's parameters as the groups that may reach a terminal, each as a terminal
    reads it (`1`, `38;5;208`); the others left out. An empty parameter is a reset; an
    extended colour that is not well formed ends the sequence (what follows it is ambiguous)."""
    codes = parameters.split(";")
    groups: list[str] = []
    index = 0
    while index < len(codes):
        code = _number(codes[index]) if codes[index] else "0"
        index += 1
        if code in ALLOWED_SGR:
            groups.append(code)
        elif code == EXTENDED_FOREGROUND:
            extended = _extended_colour(codes[index:])
            if extended is None:
                break
            groups.append(f"{code};{extended}")
            index += 1 + EXTENDED_ARGUMENTS[extended.split(";")[0]]
    return groups


def _number(code: str) -> str:
    """A parameter as a terminal reads it: its digits without leading zeros (never `int()`:
    a hostile one can have more digits than Python converts)."""
    return (code.lstrip("0") or "0") if code.isdigit() else code


def _extended_colour(codes: list[str]) -> str | None:
    """`5;N` or `2;R;G;B` from the codes after a 38, each number 0-255; None if not one."""
    form = codes[0] if codes else ""
    count = EXTENDED_ARGUMENTS.get(form)
    numbers = [_number(n) for n in codes[1 : 1 + count]] if count else []
    if count is None or len(numbers) < count:
        return None
    if not all(n.isdigit() and len(n) <= 3 and int(n) <= 255 for n in numbers):
        return None
    return ";".join([form, *numbers])


def _allowed_sgr(sequence: str) -> str:
    """An escape sequence as it may reach a terminal: an SGR with its allowed groups, else
    nothing."""
    sgr = SGR.fullmatch(sequence)
    groups = sgr_groups(sgr.group(1)) if sgr else []
    return f"\x1b[{';'.join(groups)}m" if groups else ""


def _printable(text: str) -> str:
    """Text outside escape sequences: controls dropped, bidi controls shown escaped, a lone
    surrogate replaced (as an undecodable byte is)."""
    text = CONTROLS.sub("", SURROGATES.sub("\ufffd", text))
    return BIDI_CONTROLS.sub(lambda ch: ch.group().encode("unicode_escape").decode(), text)


def terminal_text(text: str, colours: bool = False) -> str:
    """`text` as a terminal may be sent it: printable text, `\\n`, `\\t`, bidi controls shown
    escaped, and (with `colours`) its SGR colours and emphasis; nothing else."""
    kept: list[str] = []
    position = 0
    for match in ANSI_ESCAPE.finditer(text):
        kept.append(_printable(text[position : match.start()]))
        if colours:
            kept.append(_allowed_sgr(match.group()))
        position = match.end()
    kept.append(_printable(text[position:]))
    return "".join(kept)


class TerminalStream:
    """`terminal_text` of a text that comes in pieces (a streamed answer, a command's output):
    an escape sequence cut at a piece's end is held for the next piece (or `finish`), so any
    cut shows what the whole would. Each line of each piece answered is a block: it starts by
    setting again the attributes still open at the last one's end, and ends by resetting them."""

    def __init__(self, colours: bool = False) -> None:
        self.colours = colours
        self._pending = ""
        self._open: list[str] = []  # the SGR groups set since the last reset

    def feed(self, text: str) -> str:
        text = self._pending + text
        cut = unfinished_escape(text)
        text, self._pending = (text, "") if cut is None else (text[:cut], text[cut:])
        return self._block(terminal_text(text, self.colours))

    def finish(self) -> str:
        """What an unfinished escape held back, as text (its ESC dropped)."""
        pending, self._pending = self._pending, ""
        return self._block(terminal_text(pending, self.colours))

    def _block(self, shown: str) -> str:
        """Each line of `shown` a block of its own: attributes never cross a line's end, so
        what starts a line (a gutter, Parley's own words) is drawn as the terminal's default."""
        return "\n".join(self._line_block(line) for line in shown.split("\n"))

    def _line_block(self, line: str) -> str:
        if not line:
            return ""
        reopened = f"\x1b[{';'.join(self._open)}m" if self._open else ""
        for sgr in SGR.finditer(line):
            groups = sgr_groups(sgr.group(1))
            after_reset = len(groups) - groups[::-1].index("0") if "0" in groups else None
            self._open = groups[after_reset:] if after_reset is not None else self._open + groups
            self._open = self._open[-MAX_OPEN_GROUPS:]
        closes = reopened or SGR.search(line)
        return reopened + line + (RESET if closes else "")
