"""No file of the project's own code is over 800 lines (the server's, the Emacs package's, the
VS Code extension's, their tests', the scripts').

Code is every file git tracks whose name ends in one of `CODE_SUFFIXES`, and the extension-less
scripts under `scripts/` and `.ci/`. Data is not code: the lock files, the ACP JSON Schema the
conformance tests read (from npm, not tracked), the recorded provider bodies, the display cases
are `.json`, `.sse`, `.md`, ... The browser builds of markdown-it and highlight.js the chat
view loads are copied from node_modules at build time (vscode-extension/scripts/copy-vendor.js),
never tracked. A generated or vendored code file that must be tracked goes in `EXCEPTIONS`, with
why. The Emacs package's own test (elisp/test/parley-structure-test.el) and the extension's
eslint `max-lines` hold the same limit where those suites run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

from conftest import REPO

MAX_LINES = 800
CODE_SUFFIXES = {".py", ".el", ".ts", ".js", ".mjs", ".css", ".sh"}
# Folders whose extension-less files are scripts (`scripts/test`, `.ci/run`, ...).
SCRIPT_FOLDERS = ("scripts/", ".ci/")
# Tracked code files allowed over the limit, each with why. None today: keep it that way.
EXCEPTIONS: dict[str, str] = {}


def line_count(data: bytes) -> int:
    """Lines as `wc -l` and an editor count them: a last line without its newline counts too."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def is_code(path: str) -> bool:
    suffix = PurePosixPath(path).suffix
    return suffix in CODE_SUFFIXES or (suffix == "" and path.startswith(SCRIPT_FOLDERS))


def tracked_code_files() -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    paths = [p for p in listing.decode("utf-8").split("\0") if p]
    # A file deleted in the working tree but not yet committed is gone: nothing to count.
    return [p for p in paths if is_code(p) and (REPO / p).is_file()]


def test_no_code_file_is_over_800_lines() -> None:
    files = tracked_code_files()
    # The listing saw the code of every part (a filter that lets nothing through would pass).
    for expected in ("server/parley/server.py", "elisp/parley.el", "scripts/test", ".ci/run"):
        assert expected in files, expected
    assert any(p.startswith("vscode-extension/src/") and p.endswith(".ts") for p in files)
    assert any(p.startswith("vscode-extension/media/") and p.endswith(".css") for p in files)

    counts = {p: line_count(Path(REPO, p).read_bytes()) for p in files}
    over = {p: n for p, n in counts.items() if n > MAX_LINES and p not in EXCEPTIONS}
    assert not over, f"{len(over)} code file(s) over {MAX_LINES} lines: " + ", ".join(
        f"{p} ({n} lines)" for p, n in sorted(over.items())
    )
    # An exception that is gone or back under the limit is stale: drop it from the list.
    stale = sorted(p for p in EXCEPTIONS if counts.get(p, 0) <= MAX_LINES)
    assert not stale, f"no longer needed in EXCEPTIONS: {stale}"


def test_lines_are_counted_as_wc_does() -> None:
    assert [line_count(b""), line_count(b"a\n"), line_count(b"a\nb"), line_count(b"\n\n")] == [
        0,
        1,
        2,
        2,
    ]
    assert is_code("scripts/test-vscode") and is_code(".ci/run") and is_code("a/b.mjs")
    assert not is_code("README") and not is_code("vscode-extension/package-lock.json")
