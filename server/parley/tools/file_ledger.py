"""What the model knows of each file in a session: the text it last read (`read_file`) or
Parley last wrote for it. An edit is made only to a file whose current text is still that
text, so the model never edits a file that changed since it looked (on disk or in the
editor) from a stale picture of it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import attrs

from parley.tools.confined import printable_name

# The texts kept for a session, all files together; past it the oldest are forgotten (the
# model is then asked to read such a file again before editing it).
LEDGER_MAX_CHARS = 32 * 1024 * 1024


def fingerprint(text: str) -> str:
    """The text's identity for the stale check. Line endings are left out: the editor may
    hold a CRLF file with LF, and an edit keeps the file's own endings anyway."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8", "surrogatepass")).hexdigest()


@attrs.frozen
class Known:
    """One file as the model last saw it: its text's fingerprint, and the text itself (for
    showing an edit's diff against it)."""

    fingerprint: str
    text: str


class FileLedger:
    """Absolute path → the text the model last read, or Parley last wrote, in this session.
    Paths are kept as `printable_name` shows them, so a name that is not UTF-8 is one key
    whether it was opened as written (`bad\\xff.py`) or by its bytes."""

    def __init__(self, max_chars: int = LEDGER_MAX_CHARS) -> None:
        self._known: OrderedDict[str, Known] = OrderedDict()
        self._chars = 0
        self.max_chars = max_chars

    def record(self, path: str, text: str) -> None:
        """The model has read `text` as the file at `path`, or Parley wrote it there."""
        self.forget(path)
        self._known[printable_name(path)] = Known(fingerprint(text), text)
        self._chars += len(text)
        while self._chars > self.max_chars and len(self._known) > 1:
            _, oldest = self._known.popitem(last=False)
            self._chars -= len(oldest.text)

    def forget(self, path: str) -> None:
        known = self._known.pop(printable_name(path), None)
        if known is not None:
            self._chars -= len(known.text)

    def clear(self) -> None:
        """Forget every file: each must be read again before an edit."""
        self._known.clear()
        self._chars = 0

    def get(self, path: str) -> Known | None:
        return self._known.get(printable_name(path))

    def is_current(self, path: str, text: str) -> bool:
        """`text` (the file's text now) is what the model last saw of `path`."""
        known = self.get(path)
        return known is not None and known.fingerprint == fingerprint(text)
