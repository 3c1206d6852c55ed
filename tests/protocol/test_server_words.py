"""The words the server writes for the clients to show (tests/server-words-cases.json): each
case's `text` is what the server composes for that outcome, so the ERT and VS Code tests that
show the cases show the server's words. Here, a restore's (`agent/commands.py`,
`describe_restore`, which `_parley/session/restore` answers with and `/undo` says)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS
from parley.agent.checkpoints import FileRestore, RestoreResult
from parley.agent.commands import describe_restore

CASES = json.loads((TESTS / "server-words-cases.json").read_text(encoding="utf-8"))


def restore_result(case: dict[str, Any], root: Path) -> RestoreResult:
    """The server's outcome a case's answer reports, its files in `root`."""

    def file(name: str, removed: bool = False) -> FileRestore:
        return FileRestore(str(root / name), str(root), None if removed else b"", None, None)

    result = case["result"]
    return RestoreResult(
        case["turn"],
        files=tuple(file(f["path"], f["action"] == "removed") for f in result["files"]),
        rejected=tuple(file(name) for name in case.get("keptByUser", [])),
        failures=tuple((file(f["path"]), f["reason"]) for f in result.get("failed", [])),
        cancelled=result.get("cancelled", False),
    )


@pytest.mark.parametrize("case", CASES["restore"], ids=lambda case: case["name"])
def test_a_restore_answers_the_words_and_files_of_the_case(
    case: dict[str, Any], tmp_path: Path
) -> None:
    result = restore_result(case, tmp_path)
    wire = {**result.to_wire(), "text": describe_restore(result)}
    for listed in (*wire["files"], *wire.get("failed", [])):
        listed["path"] = str(Path(listed["path"]).relative_to(tmp_path))
    assert wire == case["result"]


def test_the_cases_cover_each_outcome_of_a_restore() -> None:
    results = [case["result"] for case in CASES["restore"]]
    assert any(r.get("rejected") for r in results) and any(r.get("cancelled") for r in results)
    assert any(r.get("failed") for r in results) and any(not r["files"] for r in results)
    assert {f["action"] for r in results for f in r["files"]} == {"restored", "removed"}
