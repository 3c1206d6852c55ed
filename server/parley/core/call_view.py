"""How an editor shows a tool call: its title, the files it touches, what matters of its
arguments and the changes it would make. Built by the tools (tools/base.py's `view`), sent by
core/updates.py and protocol/permission.py, shown by every client."""

from __future__ import annotations

import attrs


@attrs.frozen
class Location:
    """A file a call touches: an absolute path, and a 1-based line where one is known."""

    path: str
    line: int | None = None


@attrs.frozen
class Diff:
    """A change to one file: its absolute path, its whole text before (None: the file is
    new) and after."""

    path: str
    old_text: str | None
    new_text: str


@attrs.frozen
class CallView:
    """How an editor shows a call: a title a person reads ("Read app.py:10-40", "Run
    Python"), the files it touches, and what matters of its arguments (the code, the
    pattern) as text, and the changes it would make (an edit's diff), to see before
    approving."""

    title: str
    locations: tuple[Location, ...] = ()
    content: tuple[str, ...] = ()
    diffs: tuple[Diff, ...] = ()
