"""What `tools/griffe_adapter.py`, the one adapter to griffe, relies on in griffe, checked
against the installed griffelib: loading a package runs no `git` (a fake `git` first on PATH
records every call), because griffe's loader still asks `griffe.GitInfo.from_package`, the
hook the adapter replaces. An upgrade that runs git another way, or stops calling the hook,
fails here, not in a hostile repository.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

import pytest
from parley.tools import griffe_adapter
from parley.tools.griffe_adapter import griffe


@pytest.fixture
def recorded_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that records its arguments (and fails, as outside a repo)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "git-calls"
    fake = bin_dir / "git"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return calls


def loaded_package(root: Path) -> griffe.Module:
    package = root / "src" / "shapes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Shapes."""\n\ndef area(w, h):\n    return w * h\n')
    loader = griffe.GriffeLoader(search_paths=[root / "src"], allow_inspection=False)
    module = loader.load("shapes")
    assert isinstance(module, griffe.Module) and "area" in module.members
    return module


def test_griffelib_is_the_pinned_version() -> None:
    assert version("griffelib") == "2.4.1"


def test_loading_a_package_runs_no_git(tmp_path: Path, recorded_git: Path) -> None:
    module = loaded_package(tmp_path)
    assert module.git_info is None
    assert not recorded_git.exists()  # no call at all
    # The fake is found and recorded: griffe's own lookup, the adapter's hook undone, runs it.
    griffe_adapter.GRIFFE_GIT_INFO(module)
    assert "rev-parse" in recorded_git.read_text()


def test_the_loader_still_asks_the_hook_the_adapter_replaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(
        griffe.GitInfo, "from_package", classmethod(lambda cls, package: asked.append(package.path))
    )
    loaded_package(tmp_path)
    assert asked == ["shapes"]
