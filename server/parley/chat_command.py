"""`parley chat`'s options: the prompt (`chat_prompt.py`), whether the session is kept,
whether a slash command runs; then the turn (`chat.py`), or the demo's (`--model demo`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from parley.chat import chat
from parley.chat_prompt import NotACommand, is_slash_command, read_prompt, runs_commands
from parley.config import Settings


class BadOptions(ValueError):
    """Options that do not go together."""


def keeps_session(args: argparse.Namespace, settings: Settings) -> bool:
    """Whether the chat's session is kept: `--store`/`--no-store`, else config.toml's
    `[chat] store`. A continued session (`--session`) was kept already and stays."""
    asked = getattr(args, "store", None)
    if args.session is not None:
        return True  # (`parley chat` refuses --no-store with --session)
    return settings.chat.store if asked is None else asked


def interactive_refusal(args: argparse.Namespace) -> str | None:
    """Why `parley chat` with no prompt cannot chat here, or None: it needs a terminal to
    read from and write to, and options that make sense in a conversation."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return "give a prompt (or - to read it from stdin): with no prompt it chats on a terminal"
    clashing = [
        flag
        for flag, given in (
            ("--json", args.json),
            ("--quiet", getattr(args, "quiet", False)),
            ("--command", getattr(args, "slash_command", False)),
            ("--model demo", args.model == "demo"),
        )
        if given
    ]
    if clashing:
        return f"{', '.join(clashing)} needs a prompt: the interactive chat takes none"
    return None


def run_interactive(args: argparse.Namespace, settings: Settings) -> int:
    """`parley chat` with no prompt, on a terminal: the chat loop (`chat_loop.py`)."""
    why_not = interactive_refusal(args)
    if why_not is not None:
        print(f"parley: {why_not}", file=sys.stderr)
        return 2
    kernel = kernel_wire(args)
    if isinstance(kernel, str):
        print(f"parley: --kernel: {kernel}", file=sys.stderr)
        return 2
    from parley.chat_loop import chat_loop

    return asyncio.run(
        chat_loop(
            home=settings.home,
            model=args.model,
            cwd=Path(args.cwd or os.getcwd()).resolve(),
            session_id=args.session,
            session_model=getattr(args, "session_model", None),
            session_title=getattr(args, "session_title", None),
            allow_all=args.yes,
            tool_policy=args.tool_policy,
            store=keeps_session(args, settings),
            kernel=kernel,
        )
    )


def kernel_wire(args: argparse.Namespace) -> dict[str, Any] | str | None:
    """`--kernel` as `_meta.parley.kernel` (None: not given), or why it cannot be used."""
    if not getattr(args, "kernel", None):
        return None
    from parley.kernels_command import BadKernel, kernel_argument

    try:
        return kernel_argument(args.kernel, args.kernel_token_env)
    except BadKernel as error:
        return str(error)


def run_chat(args: argparse.Namespace, settings: Settings) -> int:
    if args.prompt is None:
        return run_interactive(args, settings)
    cwd = Path(args.cwd or os.getcwd()).resolve()
    quiet = getattr(args, "quiet", False)
    explicit = getattr(args, "slash_command", False)
    try:
        store = keeps_session(args, settings)
        prompt = read_prompt(args.prompt, explicit_command=explicit)
        if prompt is None:
            raise BadOptions("the prompt on stdin is empty")
        commands = runs_commands(prompt, explicit, sys.stdin.isatty())
    except (BadOptions, NotACommand) as error:
        print(f"parley: {error}", file=sys.stderr)
        return 2
    if not commands and not quiet and is_slash_command(prompt):
        print(
            "parley: the prompt is sent to the model as text: slash commands run only from a "
            "terminal, or with --command.",
            file=sys.stderr,
        )
    kernel = kernel_wire(args)
    if isinstance(kernel, str):
        print(f"parley: --kernel: {kernel}", file=sys.stderr)
        return 2
    if args.model == "demo":
        from parley.demo import run_demo

        return run_demo(settings.home, prompt=prompt, as_json=args.json)
    return asyncio.run(
        chat(
            prompt,
            model=args.model,
            cwd=cwd,
            session_id=args.session,
            as_json=args.json,
            allow_all=args.yes,
            tool_policy=args.tool_policy,
            session_model=getattr(args, "session_model", None),
            commands=commands,
            store=store,
            quiet=quiet,
            kernel=kernel,
        )
    )
