"""`parley demo` (and `parley chat --model demo`): a full hybrid turn, offline.

The fake LLM plays a scripted model in a sample project; everything else is real: the
server, the hybrid streaming policy, the tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

from parley.chat import chat

DEMO_MODEL = "demo:scripted"
DEMO_PROMPT = "What does geometry.area compute, and is it right for a 3 by 4 rectangle?"


def run_demo(prompt: str = DEMO_PROMPT, as_json: bool = False) -> int:
    """A full hybrid turn, offline: the fake LLM plays a scripted model in a sample project."""
    from parley.fakellm import FakeLLM
    from parley.fakellm.demo import demo_script, write_demo_workspace

    print(
        "parley demo: the model here is SCRIPTED (Parley's built-in fake LLM, no network).\n"
        "Everything else is real: the server, the hybrid streaming policy, the tools.\n",
        file=sys.stderr,
    )
    with (
        tempfile.TemporaryDirectory(prefix="parley-demo-") as home,
        FakeLLM(script=demo_script()) as fake,
    ):
        workspace = write_demo_workspace(Path(home) / "project")
        env = {
            "PARLEY_DEMO_BASE_URL": fake.openai_base_url,
            "PARLEY_HOME": str(Path(home) / "data"),
        }
        print(f"> {prompt}\n", file=sys.stderr)
        print(
            "(The demo allows the scripted model's tool calls without asking.)\n", file=sys.stderr
        )
        code = asyncio.run(
            chat(prompt, model=DEMO_MODEL, cwd=workspace, as_json=as_json, allow_all=True, env=env)
        )
        with contextlib.suppress(Exception):
            requests = fake.requests
            kinds = ", ".join(
                f"{'stream' if r.stream else 'sync'}"
                + (" (closed early)" if r.client_hung_up else "")
                for r in requests
            )
            print(f"What the scripted model was asked: {kinds}.", file=sys.stderr)
        return code
