"""`parley bench --profile`: where a cold start's time goes.

One `parley serve` is started as `python -X importtime -m parley serve` and driven as an editor
drives it: `initialize`, `session/new`, a prompt whose reply streams from the fake. The client
notes when each answer, and each line Python's import timer writes to stderr, arrived (one
clock, from the spawn). Printed:

- the start's phases: the interpreter up (its import timer's first line), Parley's imports
  done (the last import line before the `initialize` answer), `initialize` answered,
  `session/new` answered, the first `agent_message_chunk`;
- the import tree up to `initialize`: the imports that took longest, by cumulative time, each
  with the imports inside it that took longest.

The times of one run; `parley bench`'s rows 3 and 8 are the medians to compare against.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from parley.bench.harness import server_environment
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply

# An import timer's line: "import time: <self µs> | <cumulative µs> | <indent><module>".
_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")
TOP_IMPORTS = 12  # at the top level of the tree
INNER_IMPORTS = 4  # inside each import shown
TREE_DEPTH = 3
# An inner import shown only if it took at least this share of its parent.
INNER_SHARE = 0.1
SHOWN_US = 1000  # an import under a millisecond is not shown


@attrs.define
class ImportNode:
    module: str
    self_us: int
    cumulative_us: int
    children: list[ImportNode] = attrs.field(factory=list)


def import_tree(lines: list[str]) -> list[ImportNode]:
    """The top-level imports of `python -X importtime` output, each with what it imported.
    The timer prints an import after those inside it, indented one step (two spaces) more."""
    waiting: dict[int, list[ImportNode]] = {}  # by depth: imports whose parent is not yet read
    for line in lines:
        match = _IMPORT_LINE.match(line)
        if match is None:
            continue
        self_us, cumulative_us, indent, module = match.groups()
        depth = len(indent) // 2
        node = ImportNode(module, int(self_us), int(cumulative_us), waiting.pop(depth + 1, []))
        waiting.setdefault(depth, []).append(node)
    return waiting.get(0, [])


def tree_lines(nodes: list[ImportNode], limit: int = TOP_IMPORTS, depth: int = 0) -> Iterator[str]:
    """The tree as a Markdown list: the slowest `limit` at each level, by cumulative time."""
    shown = [node for node in nodes if node.cumulative_us >= SHOWN_US]
    slowest = sorted(shown, key=lambda node: node.cumulative_us, reverse=True)[:limit]
    for node in slowest:
        yield (
            f"{'  ' * depth}- `{node.module}`: {node.cumulative_us / 1000:,.1f} ms "
            f"(itself {node.self_us / 1000:,.1f} ms)"
        )
        if depth + 1 < TREE_DEPTH:
            floor = max(SHOWN_US, INNER_SHARE * node.cumulative_us)
            inner = [child for child in node.children if child.cumulative_us >= floor]
            yield from tree_lines(inner, INNER_IMPORTS, depth + 1)


class TimedClient(ParleyClient):
    """A client that notes when each of the server's stderr lines arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.monotonic()
        self.timed_stderr: list[tuple[float, str]] = []

    async def _collect_stderr(self, server: asyncio.subprocess.Process) -> None:
        assert server.stderr is not None
        while line := await server.stderr.readline():
            self.timed_stderr.append((time.monotonic(), line.decode(errors="replace").rstrip()))

    def since_start(self, moment: float) -> float:
        return moment - self.started


@attrs.frozen
class StartProfile:
    phases: list[tuple[str, float]]  # (what, seconds from the spawn)
    imports: list[ImportNode]
    total_import_us: int


async def profile_start(fake: FakeLLM, home: Path) -> StartProfile:
    workspace = home / "workspace"
    workspace.mkdir(exist_ok=True)
    fake.set_script([Reply(text="The first answer.")])
    command = [sys.executable, "-X", "importtime", "-m", "parley", "serve"]
    client = TimedClient()
    await client.spawn_server(command, env={**os.environ, **server_environment(fake, home)})
    try:
        await client.initialize()
        initialized = time.monotonic()
        await asyncio.sleep(0.05)  # the stderr lines written before the answer, read
        # The timer's header, then a line per import, each as it ends.
        to_initialize = [
            (at, line)
            for at, line in client.timed_stderr
            if at <= initialized and line.startswith("import time:")
        ]
        session = await client.new_session(str(workspace))
        session_answered = time.monotonic()
        first_chunk: list[float] = []

        def on_update(_session: str, update: dict[str, Any]) -> None:
            if update.get("sessionUpdate") == "agent_message_chunk" and not first_chunk:
                first_chunk.append(time.monotonic())

        client.on_update = on_update
        await client.prompt(session, "Hello.", timeout=60)
    finally:
        await client.stop()
    imports = import_tree([line for _at, line in to_initialize])
    phases = [
        ("process start: the interpreter up (its import timer's first line)", to_initialize[0][0]),
        ("imports done (the last one before `initialize` is answered)", to_initialize[-1][0]),
        ("`initialize` answered", initialized),
        ("`session/new` answered", session_answered),
        ("the first `agent_message_chunk`", first_chunk[0]),
    ]
    return StartProfile(
        phases=[(what, client.since_start(at)) for what, at in phases],
        imports=imports,
        total_import_us=sum(node.cumulative_us for node in imports),
    )


def profile_report(profile: StartProfile) -> str:
    lines = [
        "## The start's phases",
        "",
        "`parley serve` spawned, then `initialize`, `session/new` and a prompt sent each as soon "
        "as the one before was answered; times from the spawn.",
        "",
        "| Phase | At | Since the phase before |",
        "|---|---:|---:|",
    ]
    before = 0.0
    for what, at in profile.phases:
        lines.append(f"| {what} | {at * 1000:,.1f} ms | {(at - before) * 1000:+,.1f} ms |")
        before = at
    lines += [
        "",
        "## The import tree to `initialize`",
        "",
        f"`python -X importtime -m parley serve`, the imports done before `initialize` was "
        f"answered: {profile.total_import_us / 1000:,.1f} ms in all (the timer's own cost "
        f"included). The {TOP_IMPORTS} slowest at the top level, by cumulative time, and in "
        f"each the slowest it imported:",
        "",
        *tree_lines(profile.imports),
    ]
    return "\n".join(lines)


def run_profile() -> int:
    async def collect(home: Path) -> StartProfile:
        with FakeLLM() as fake:
            return await profile_start(fake, home)

    with tempfile.TemporaryDirectory(prefix="parley-bench-") as home:
        profile = asyncio.run(collect(Path(home)))
    print(profile_report(profile))
    return 0
