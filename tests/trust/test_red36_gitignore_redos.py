"""Red team 36: a hostile repository's `.gitignore` freezes the whole server.

`search_files` (never asked about) lists the workspace's files through `workspace_files`,
which matches every path against the repository's `.gitignore` rules with pathspec, whose
patterns are compiled by the standard `re` module: `*a*a*a…*b` backtracks exponentially on a
long name of `a`s (8 stars: ~1 min; 16: forever). The search runs in a thread so that the
server "keeps answering other sessions" (workspace.py says the `regex` module lets go of the
GIL) — but the `.gitignore` matching is `re`, which holds the GIL throughout: every session
of the server, and its event loop, stopped. Held now: such patterns are left out
(`workspace.matchable`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from test_trust_attacks import allowing_client


@pytest.fixture(autouse=True)
def loop_watchdog() -> Iterator[None]:
    """The suite's watchdog would report the frozen loop at teardown (an error, not the
    test's failure): here the test's own timeout says it."""
    yield


async def test_a_hostile_gitignore_does_not_freeze_the_server(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    (workspace / ".git").mkdir()  # a repository: its .gitignore applies
    (workspace / ".gitignore").write_text("*a" * 16 + "*b\n")
    (workspace / ("a" * 60)).write_text("x\n")
    other = tmp_path / "other"
    other.mkdir()
    client = await allowing_client(start_server)
    session = await client.new_session(str(workspace))
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("search_files", {"pattern": "x"}),)), Reply("Done.")]
    )
    turn = asyncio.create_task(client.prompt(session, "Search.", timeout=600))
    try:
        await asyncio.sleep(2)
        # Another session of the same server (another editor window): answered at once?
        await asyncio.wait_for(client.new_session(str(other)), 15)
    finally:
        turn.cancel()
