"""`parley chat` and `parley demo`: one prompt from the command line, the answer streamed.

The answer goes to stdout as it arrives; thoughts and tool activity go to stderr, so
`parley chat "…" > answer.md` keeps only the answer. `--json` prints every update as one
JSON line instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from pygls.exceptions import JsonRpcException

from parley.client import ParleyClient
from parley.config import Settings

DEMO_MODEL = "demo:scripted"
DEMO_PROMPT = "What does geometry.area compute, and is it right for a 3 by 4 rectangle?"


class TerminalView:
    """Shows a session's updates the way a person reads them in a terminal."""

    def __init__(self, out: TextIO, err: TextIO, as_json: bool) -> None:
        self.out, self.err, self.as_json = out, err, as_json
        self._last_kind = ""
        self._message_id: str | None = None
        self._titles: dict[str, str] = {}

    def show(self, session_id: str, update: dict[str, Any]) -> None:
        if self.as_json:
            print(json.dumps({"sessionId": session_id, "update": update}), file=self.out)
            self.out.flush()
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            if update.get("_meta", {}).get("parley", {}).get("replaces"):
                self._note("(the model revised its text; the revision follows)")
                self.out.write("\n")
            elif self._message_id not in (None, update.get("messageId")):
                self.out.write("\n\n")  # a new message: a new paragraph
            self._message_id = update.get("messageId")
            self.out.write(update["content"]["text"])
            self.out.flush()
        elif kind == "agent_thought_chunk":
            if self._last_kind != kind:
                self.err.write("\n[thinking] ")
            self.err.write(update["content"]["text"])
            self.err.flush()
        elif kind == "tool_call":
            self._titles[update["toolCallId"]] = update["title"]
            self._note(f"→ {update['title']}")
        elif kind == "tool_call_update":
            self._show_tool_update(update)
        self._last_kind = kind or ""

    def _show_tool_update(self, update: dict[str, Any]) -> None:
        title = update.get("title") or self._titles.get(update["toolCallId"], "tool")
        self._titles[update["toolCallId"]] = title
        if "rawInput" in update:
            self._note(f"  {title} {json.dumps(update['rawInput'])[:200]}")
        status = update.get("status")
        if status in ("completed", "failed"):
            text = ""
            if update.get("content"):
                text = update["content"][0]["content"]["text"]
            first_line = text.strip().splitlines()[0][:120] if text.strip() else ""
            mark = "✓" if status == "completed" else "✗"
            self._note(f"{mark} {title}: {first_line}")

    def _note(self, text: str) -> None:
        self.err.write(f"\n{text}\n")
        self.err.flush()


def _ask_permission(params: dict[str, Any]) -> dict[str, Any]:
    call = params["toolCall"]
    if not sys.stdin.isatty():
        print(
            f"\nparley: not running {call['title']}: no terminal to ask (use --yes to allow).",
            file=sys.stderr,
        )
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}
    print(f"\nAllow {call['title']} {json.dumps(call.get('rawInput'))[:300]}?", file=sys.stderr)
    answer = input("[y]es once, [a]lways, [N]o: ").strip().lower()
    option = {"y": "allow_once", "yes": "allow_once", "a": "allow_always"}.get(answer)
    return {"outcome": {"outcome": "selected", "optionId": option or "reject_once"}}


async def chat(
    prompt: str,
    *,
    model: str | None,
    cwd: Path,
    session_id: str | None = None,
    as_json: bool = False,
    allow_all: bool = False,
    tool_policy: str | None = None,
    env: dict[str, str] | None = None,
) -> int:
    client = await ParleyClient.spawn(env=env)
    view = TerminalView(sys.stdout, sys.stderr, as_json)
    if allow_all:
        client.permission_handler = lambda params: {
            "outcome": {"outcome": "selected", "optionId": "allow_once"}
        }
    else:
        client.permission_handler = lambda params: asyncio.to_thread(_ask_permission, params)
    try:
        info = await client.initialize()
        chosen = model or info["_meta"]["parley"]["defaultModel"]
        known = {m["id"]: m for m in info["_meta"]["parley"]["models"]}
        if chosen in known and not known[chosen]["available"]:
            print(f"parley: {known[chosen]['reason']}", file=sys.stderr)
            return 2
        if session_id is None:
            settings: dict[str, Any] = {"model": chosen}
            if tool_policy:
                settings["toolPolicy"] = tool_policy
            session_id = await client.new_session(str(cwd), **settings)
        else:
            await client.request(
                "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
            )
        client.on_update = view.show  # after the replay of a loaded session: only the answer
        result = await client.prompt(session_id, prompt)
    except JsonRpcException as error:
        print(f"\nparley: {error.message}", file=sys.stderr)
        return 1
    finally:
        await client.stop()
    if as_json:
        print(json.dumps({"sessionId": session_id, "result": result}))
    else:
        print()
        _print_summary(result, session_id)
    return 0 if result["stopReason"] in ("end_turn", "max_tokens") else 1


def _print_summary(result: dict[str, Any], session_id: str) -> None:
    usage, stats = result["usage"], result["_meta"]["parley"]
    cost = stats["cost"]
    price = f"${cost['amount']:.4f}" if cost else "cost unknown"
    print(
        f"\n[{result['stopReason']}] {stats['model']} · {stats['rounds']} round(s), "
        f"{stats['toolCalls']} tool call(s), {stats['discardedStreams']} stream(s) closed early "
        f"· {usage['inputTokens']} in / {usage['outputTokens']} out · {price} · "
        f"session {session_id}",
        file=sys.stderr,
    )


def run_chat(args: argparse.Namespace, settings: Settings) -> int:
    cwd = Path(args.cwd or os.getcwd()).resolve()
    if args.model == "demo":
        return run_demo(prompt=args.prompt, as_json=args.json)
    return asyncio.run(
        chat(
            args.prompt,
            model=args.model,
            cwd=cwd,
            session_id=args.session,
            as_json=args.json,
            allow_all=args.yes,
            tool_policy=args.tool_policy,
        )
    )


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
