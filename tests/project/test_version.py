"""One version across the wheel, the VS Code extension and the Emacs package, and
`scripts/set-version X.Y.Z`, which writes it everywhere (tried on copies, never the repository).

The versions are read here on their own (JSON, the Emacs headers by their own patterns), not
with the script's code, so the script is checked by what it wrote."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import parley
import pytest
from conftest import REPO
from hypothesis import example, given, settings
from hypothesis import strategies as st

SCRIPT = REPO / "scripts" / "set-version"
FILES = (
    "server/parley/__init__.py",
    "vscode-extension/package.json",
    "vscode-extension/package-lock.json",
    "elisp/parley.el",
    "elisp/parley-connection.el",
)


def versions_in(repo: Path) -> dict[str, str | None]:
    """Each place's version, as the tool that reads it would find it."""

    def search(relative: str, pattern: str) -> str | None:
        found = re.findall(pattern, (repo / relative).read_text(), re.MULTILINE)
        return found[0] if len(found) == 1 else None

    package = json.loads((repo / "vscode-extension/package.json").read_text())
    lock = json.loads((repo / "vscode-extension/package-lock.json").read_text())
    return {
        "parley.__version__": search(FILES[0], r'^__version__ = "([^"]*)"$'),
        "package.json": package["version"],
        "package-lock.json": lock["version"],
        "package-lock.json packages['']": lock["packages"][""]["version"],
        "parley.el ;; Version:": search(FILES[3], r"^;; Version: (\S+)$"),
        "parley-version": search(FILES[4], r'^\(defconst parley-version "([^"]*)"'),
    }


def copy_of_the_repository(into: Path) -> Path:
    """The files that carry the version, and the script, where the script finds them."""
    for relative in (*FILES, "scripts/set-version"):
        (into / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, into / relative)
    return into


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("set_version", str(SCRIPT))
    spec = importlib.util.spec_from_loader("set_version", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_wheel_the_extension_and_the_emacs_package_have_one_version() -> None:
    versions = versions_in(REPO)
    assert set(versions.values()) == {parley.__version__}, versions


def test_a_place_that_differs_is_found(tmp_path: Path) -> None:
    """The check above can fail: one header changed by hand is seen."""
    copy = copy_of_the_repository(tmp_path)
    header = copy / "elisp/parley.el"
    header.write_text(
        header.read_text().replace(f";; Version: {parley.__version__}", ";; Version: 9.9.9")
    )
    assert versions_in(copy)["parley.el ;; Version:"] == "9.9.9"


def test_set_version_writes_every_place_and_nothing_else(tmp_path: Path) -> None:
    copy = copy_of_the_repository(tmp_path)
    before = {relative: (copy / relative).read_text() for relative in FILES}
    done = subprocess.run(
        [sys.executable, str(copy / "scripts/set-version"), "12.0.3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == list(FILES)  # each file it changed, by name
    assert set(versions_in(copy).values()) == {"12.0.3"}
    for relative in FILES:  # only the version's own characters changed, on their lines
        old_lines, new_lines = (
            before[relative].splitlines(),
            (copy / relative).read_text().splitlines(),
        )
        assert len(old_lines) == len(new_lines), relative
        changed = [(old, new) for old, new in zip(old_lines, new_lines, strict=True) if old != new]
        assert changed and all(
            old.replace(parley.__version__, "12.0.3") == new for old, new in changed
        )
    assert versions_in(REPO)["package.json"] == parley.__version__  # the repository untouched


def test_set_version_to_the_current_version_changes_no_byte(tmp_path: Path) -> None:
    """npm's JSON is written back exactly as npm writes it: no reformatting."""
    copy = copy_of_the_repository(tmp_path)
    before = {relative: (copy / relative).read_bytes() for relative in FILES}
    assert load_script().set_version(copy, parley.__version__) == []
    assert {relative: (copy / relative).read_bytes() for relative in FILES} == before


def test_a_file_without_its_version_line_changes_nothing_and_is_named(tmp_path: Path) -> None:
    copy = copy_of_the_repository(tmp_path)
    connection = copy / "elisp/parley-connection.el"
    connection.write_text(connection.read_text().replace("(defconst parley-version", "(defvar x"))
    before = {relative: (copy / relative).read_text() for relative in FILES}
    done = subprocess.run(
        [sys.executable, str(copy / "scripts/set-version"), "0.2.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "elisp/parley-connection.el" in done.stderr and "nothing was written" in done.stderr
    assert {relative: (copy / relative).read_text() for relative in FILES} == before


RELEASE = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
NUMBER = st.integers(min_value=0, max_value=10**6).map(str)


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script()


@settings(max_examples=60)
@given(
    version=st.one_of(
        st.builds(lambda *parts: ".".join(parts), NUMBER, NUMBER, NUMBER),
        st.text(alphabet=st.sampled_from('0123456789.-+rcab"\\\n ;)v'), max_size=12),
        st.text(max_size=12),
    )
)
@example(version="01.2.3")
@example(version="1.2.3\n")
@example(version='1.2.3" (evil')
@example(version="1.2.3-rc.1")
@example(version="")
def test_any_version_argument_is_written_everywhere_or_refused_with_nothing_written(
    script: ModuleType, tmp_path_factory: pytest.TempPathFactory, version: str
) -> None:
    """A release X.Y.Z (numbers, no leading zeros) ends up in every place, read back as
    itself; anything else (a pre-release, a quote, a newline, a leading zero) is refused and
    every file keeps its bytes."""
    copy = copy_of_the_repository(tmp_path_factory.mktemp("copy"))
    before = {relative: (copy / relative).read_bytes() for relative in FILES}
    if RELEASE.fullmatch(version):
        script.set_version(copy, version)
        assert set(versions_in(copy).values()) == {version}
    else:
        with pytest.raises(script.VersionError):
            script.set_version(copy, version)
        assert {relative: (copy / relative).read_bytes() for relative in FILES} == before
