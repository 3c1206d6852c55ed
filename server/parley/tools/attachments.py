"""Files a prompt links to (ACP `resource_link`): a workspace file is read and attached.

A link is read exactly as `read_file` reads a file (through `confined`: nothing outside the
workspace, no symlink out, regular files only), so a link cannot show the model more than
its tools could. A link that cannot be read (outside the workspace, missing, binary, not a
file URI) becomes a short note saying why: the prompt still goes to the model. Blocking
I/O: call it off the event loop.
"""

from __future__ import annotations

import mimetypes
import os
import posixpath
from pathlib import Path
from urllib.parse import unquote, urlparse

from parley.core.conversation import ContentBlock, ResourceBlock, TextBlock, file_note
from parley.tools.confined import Refused, Roots, open_confined, printable_name, resolved_roots

# What one attached file may put in the prompt; the rest is left to read_file.
ATTACH_MAX_CHARS = 100_000
BINARY_SNIFF_BYTES = 8192


def attach_link(
    workspace: Roots | Path,
    uri: str,
    name: str | None = None,
    mime_type: str | None = None,
    *,
    given: Path | None = None,
) -> ContentBlock:
    """The linked file's text as a resource, or a note saying why it is not attached.
    `workspace` is the session's roots (resolved); `given`, the cwd as the client names it
    (maybe through a symlink), which its links may start with."""
    path = _path_of(uri)
    if path is None:
        return TextBlock(f"[{name or uri}]({uri}) (a link, not a workspace file: not read)")
    guessed = mime_type or mimetypes.guess_type(path)[0]
    if given is not None and os.path.isabs(path):
        relative = os.path.relpath(posixpath.normpath(path), given)
        if relative != ".." and not relative.startswith("../"):
            path = relative  # lexically only: the gate walks it from the root
    try:
        with open_confined(resolved_roots(workspace), path) as file:
            size = os.fstat(file.fileno()).st_size
            head = file.read(BINARY_SNIFF_BYTES)
            if b"\0" in head:
                return file_note(uri, guessed, size, "a binary file, not shown to the model")
            raw = head + file.read(ATTACH_MAX_CHARS * 4 - len(head))
    except Refused as refused:  # outside the workspace, a FIFO, a hard link ...
        return file_note(uri, None, None, f"not attached: {refused}")
    except IsADirectoryError:
        return file_note(uri, None, None, "not attached: it is a directory")
    except (FileNotFoundError, NotADirectoryError):
        return file_note(uri, None, None, "not attached: no such file in the workspace")
    except (OSError, ValueError) as error:  # ValueError: a name no file system can hold
        reason = getattr(error, "strerror", None) or str(error)
        return file_note(uri, None, None, f"not attached: {reason}")
    text = raw.decode("utf-8", "replace")
    if len(text) > ATTACH_MAX_CHARS or size > len(raw):
        text = text[:ATTACH_MAX_CHARS] + (
            f"\n[… cut: the file has {size:,} bytes; read_file shows the rest of "
            f"{printable_name(file.name)}]"
        )
    return ResourceBlock(uri, text, guessed)


def _path_of(uri: str) -> str | None:
    """The file path a link names: a `file:` URI's path, or a bare path; None for other
    schemes (https: ...)."""
    try:
        parsed = urlparse(uri)
    except ValueError:  # "Invalid IPv6 URL" ('//[')
        return None
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            return None
        return unquote(parsed.path) or None
    if parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
        return None
    return uri or None
