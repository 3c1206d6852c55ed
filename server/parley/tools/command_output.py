"""A command's output as the model and the editor get it: ANSI escapes stripped (kept for
the editor's own rendering), and bounded for the model — its head and its tail, with how
many lines and bytes were cut between them — in memory that does not grow with the output.

`CommandOutput.add(raw bytes)` takes the output as it comes (any split: a UTF-8 character
or an escape sequence cut in two is joined again) and answers the new text with its escapes
(the editor's `append` delta); `bounded()` is `bound_output` of everything stripped so far,
computed from the kept head and tail alone.
"""

from __future__ import annotations

import codecs
import re

import attrs

HEAD_BYTES = 8 * 1024  # the model gets the output's first 8 KB …
TAIL_BYTES = 8 * 1024  # … and its last 8 KB
SHOWN_BYTES = 32 * 1024  # the editor's `content` shows the last 32 KB while it runs
# An escape sequence not finished within this many characters is not one: its ESC is
# dropped and the rest is text (an OSC sequence is at most a hyperlink's length).
PENDING_ESCAPE_CHARS = 4096

# ECMA-48: CSI (colours, cursor moves), OSC (titles, hyperlinks) ended by BEL or ST,
# DCS/SOS/PM/APC strings ended by ST, and the other two-character escapes.
ANSI_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[PX^_][^\x1b]*\x1b\\"
    r"|\x1b[ -/]*[0-OQ-WYZ\\`-~]"
)


def strip_ansi(text: str) -> str:
    """`text` without escape sequences; an ESC that starts none is dropped too."""
    return ANSI_ESCAPE.sub("", text).replace("\x1b", "")


class AnsiStripper:
    """`strip_ansi` of a text that comes in pieces: an escape sequence cut at a piece's end
    is held until the next piece (or `finish`), so any split strips as the whole would."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> str:
        text = self._pending + text
        cut = unfinished_escape(text)
        text, self._pending = (text, "") if cut is None else (text[:cut], text[cut:])
        return strip_ansi(text)

    def finish(self) -> str:
        pending, self._pending = self._pending, ""
        return strip_ansi(pending)


# What may still become an escape sequence when more text comes (it reaches the end).
_UNFINISHED = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[PX^_][^\x1b]*\x1b?|[ -/]*)\Z")


def unfinished_escape(text: str) -> int | None:
    """Where an escape sequence that `text` ends in the middle of starts; None: there is none.
    ESCs are taken left to right as `strip_ansi` takes them."""
    position = text.find("\x1b")
    while position != -1:
        finished = ANSI_ESCAPE.match(text, position)
        if finished is not None:
            position = text.find("\x1b", finished.end())
            continue
        if len(text) - position < PENDING_ESCAPE_CHARS and _UNFINISHED.match(text, position):
            return position
        position = text.find("\x1b", position + 1)
    return None


@attrs.frozen
class Bounded:
    """The output as the model gets it, and what was cut of it."""

    text: str
    cut_lines: int = 0
    cut_bytes: int = 0

    @property
    def cut(self) -> bool:
        return self.cut_bytes > 0


def cut_marker(lines: int, size: int) -> str:
    return f"[… {lines:,} lines ({size:,} bytes) cut …]"


def _head_end(data: bytes, limit: int) -> int:
    """Where the head of `data` ends: at most `limit` bytes, on a character boundary, after
    the last newline within them when there is one."""
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:  # inside a character: back to its start
        end -= 1
    newline = data.rfind(b"\n", 0, end)
    return newline + 1 if newline != -1 else end


def _tail_start(data: bytes, limit: int) -> int:
    """Where the tail of `data` starts: at most `limit` bytes from its end, on a character
    boundary, after the first newline within them (not its last byte) when there is one."""
    start = len(data) - limit
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    newline = data.find(b"\n", start, len(data) - 1)
    return newline + 1 if newline != -1 else start


def bound_output(text: str, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> Bounded:
    """`text` whole when its UTF-8 holds at most `head + tail` bytes; else its head and its
    tail (cut at line ends where the lines allow) with the marker that counts what is between."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= head + tail:
        return Bounded(text)
    head_end, tail_start = _head_end(data, head), _tail_start(data, tail)
    middle = data[head_end:tail_start]
    return _joined(data[:head_end], data[tail_start:], middle.count(b"\n"), len(middle))


def _joined(head: bytes, tail: bytes, lines: int, size: int) -> Bounded:
    shown_head = head.decode("utf-8", "surrogatepass")
    if shown_head and not shown_head.endswith("\n"):
        shown_head += "\n"
    text = f"{shown_head}{cut_marker(lines, size)}\n{tail.decode('utf-8', 'surrogatepass')}"
    return Bounded(text, lines, size)


class CommandOutput:
    """A running command's output: the raw bytes in, the editor's deltas out, and the
    stripped text's head and tail kept (never more than HEAD_BYTES + SHOWN_BYTES of it)."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_limit, self.tail_limit = head, tail
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stripper = AnsiStripper()
        self._head = bytearray()  # the first head + 1 bytes of the stripped text
        self._tail = bytearray()  # its last max(head + tail, SHOWN_BYTES) bytes
        self._keep_tail = max(head + tail, SHOWN_BYTES)
        self.raw_bytes = 0  # what the command wrote
        self.size = 0  # bytes of the stripped text
        self.newlines = 0  # in the stripped text

    def add(self, raw: bytes) -> str:
        """Take `raw` output; answers it decoded, escapes kept (the editor's delta)."""
        self.raw_bytes += len(raw)
        text = self._decoder.decode(raw)
        self._keep(self._stripper.feed(text))
        return text

    def finish(self) -> str:
        """The end of the output: what a cut character or escape left, as `add` answers."""
        text = self._decoder.decode(b"", final=True)
        self._keep(self._stripper.feed(text) + self._stripper.finish())
        return text

    def _keep(self, stripped: str) -> None:
        if not stripped:
            return
        data = stripped.encode("utf-8", "surrogatepass")
        self.size += len(data)
        self.newlines += data.count(b"\n")
        room = self.head_limit + 1 - len(self._head)
        if room > 0:
            self._head += data[:room]
        self._tail += data
        del self._tail[: max(0, len(self._tail) - self._keep_tail)]

    def shown(self) -> str:
        """The stripped output's last SHOWN_BYTES (from a character's start)."""
        data = bytes(self._tail[-SHOWN_BYTES:])
        start = 0
        while start < len(data) and data[start] & 0xC0 == 0x80:
            start += 1
        return data[start:].decode("utf-8", "surrogatepass")

    def bounded(self) -> Bounded:
        """`bound_output` of the whole stripped output, from the head and tail kept."""
        if self.size <= self.head_limit + self.tail_limit:
            return Bounded(bytes(self._tail).decode("utf-8", "surrogatepass"))
        head = bytes(self._head)
        tail = bytes(self._tail)
        head_end = _head_end(head, self.head_limit)
        # The tail's offsets within the kept tail, which ends where the output ends.
        tail_start = _tail_start(tail, self.tail_limit)
        kept_head, kept_tail = head[:head_end], tail[tail_start:]
        size = self.size - len(kept_head) - len(kept_tail)
        lines = self.newlines - kept_head.count(b"\n") - kept_tail.count(b"\n")
        return _joined(kept_head, kept_tail, lines, size)


def fenced(text: str, language: str) -> str:
    """`text` in a Markdown code block whose fence no line of it closes."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    return (
        f"{fence}{language}\n{text}{'' if text.endswith(chr(10)) or not text else chr(10)}{fence}"
    )
