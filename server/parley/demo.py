"""`parley demo` (and `parley chat --model demo`): a full agent turn, offline.

The fake LLM plays a scripted model in a sample project whose tests fail: it runs the
tests, reads the code, fixes it with an edit and runs the tests again. Everything but the
model is real: the server, the hybrid streaming policy, the tools, the sandboxed commands,
the session kept in the store (`parley sessions`, `parley export last` show it afterwards).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from parley.chat import chat

DEMO_MODEL = "demo:scripted"


def demo_project(home: Path) -> Path:
    """Where the demo's sample project lives: beside Parley's data folder (`parley-demo`),
    written afresh (with its failing test) each time the demo runs. Not inside it: no
    workspace may be, since no tool or child may reach Parley's own data."""
    return home.parent / "parley-demo" / "project"


def run_demo(home: Path, prompt: str | None = None, as_json: bool = False) -> int:
    """A full agent turn, offline, in the sample project beside `home` (Parley's data)."""
    from parley.fakellm import FakeLLM
    from parley.fakellm.demo import DEMO_PROMPT, demo_script, write_demo_workspace

    prompt = prompt or DEMO_PROMPT
    print(
        "parley demo: the model here is SCRIPTED (Parley's built-in fake LLM, no network).\n"
        "Everything else is real: the server, the tools, the commands it runs.\n",
        file=sys.stderr,
    )
    with FakeLLM(script=demo_script()) as fake:
        workspace = write_demo_workspace(demo_project(home))
        print(f"> {prompt}\n", file=sys.stderr)
        print(
            "(The demo allows the scripted model's tool calls without asking.)\n", file=sys.stderr
        )
        code = asyncio.run(
            chat(
                prompt,
                model=DEMO_MODEL,
                cwd=workspace,
                as_json=as_json,
                allow_all=True,
                env={"PARLEY_DEMO_BASE_URL": fake.openai_base_url},
            )
        )
    print(
        f"\nThat was the demo. The project is in {workspace}; the session is kept, like any:\n"
        "`parley sessions` lists it, `parley export last` prints it.",
        file=sys.stderr,
    )
    return code
