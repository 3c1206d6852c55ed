"""Recorded bodies served verbatim: `.sse` streams and `.json` responses (fixtures/wire/)."""

from __future__ import annotations

import re
from pathlib import Path

_BLANK_LINES = re.compile(rb"(?:\r?\n){2,}")


def _is_comment_block(block: bytes) -> bool:
    return all(line.startswith(b":") for line in block.splitlines())


def sse_file_events(path: Path) -> list[bytes]:
    """The events of a recorded SSE body, each ending with its blank line.

    The bytes are the file's, except that every event, the last included, ends with exactly
    one blank line (some recordings lack the final one, and an SSE parser only dispatches an
    event at a blank line). Leading `:` comment lines go out with the first event, so that
    counting and pacing see real events only.
    """
    blocks = [block for block in _BLANK_LINES.split(path.read_bytes()) if block.strip()]
    events: list[bytes] = []
    pending_comments = b""
    for block in blocks:
        if _is_comment_block(block):
            pending_comments += block + b"\n\n"
            continue
        events.append(pending_comments + block + b"\n\n")
        pending_comments = b""
    if pending_comments:
        events.append(pending_comments)
    return events


def json_file_body(path: Path) -> bytes:
    """A recorded JSON body without its leading `#` note lines."""
    lines = path.read_bytes().splitlines(keepends=True)
    while lines and lines[0].startswith(b"#"):
        lines.pop(0)
    return b"".join(lines)
