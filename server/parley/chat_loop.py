"""`parley chat` with no prompt, on a terminal: a conversation in one session.

One `parley serve` and one session (a new one, or `--session`'s, loaded) for the whole
conversation. Each line typed (`chat_input.py`: editing, history, multi-line input, slash
commands completed with Tab) is a turn, shown as `parley chat PROMPT` shows one
(`chat_view.py`), but for the answer: its Markdown is drawn for the terminal
(`chat_markdown.py`). A slash command typed here runs. Ctrl-C cancels the turn that runs
(one line, `Cancelled.`, and the prompt comes back; a second Ctrl-C before the turn has
stopped exits at once); at the prompt it drops the line typed, and at an empty prompt a
second Ctrl-C quits, as Ctrl-D does. The session is kept (unless `--no-store`): the last
line names it, for `parley chat --session last`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parley.chat import TurnStopper, _start_server, forget_session, model_env, open_session
from parley.chat_input import PROMPT, QuitAsked, SlashCommands, line_editor
from parley.chat_markdown import MarkdownStream
from parley.chat_question import PermissionAsker, allow_all_but_overwrites
from parley.chat_view import TerminalView, colours
from parley.display import escape_controls, turn_summary
from parley.terminal_text import painted

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from parley.client import ParleyClient

QUIT_HINT = "(Ctrl-C again, or Ctrl-D, quits)"
HOW_TO_TYPE = "Enter sends · Alt-Enter: a new line · Tab completes /commands · Ctrl-D quits"


class ChatLoop:
    """The conversation: the prompt, then each turn, until the user quits."""

    def __init__(self, client: ParleyClient, session_id: str, cwd: Path, allow_all: bool) -> None:
        self.client, self.session_id, self.cwd, self.allow_all = client, session_id, cwd, allow_all
        self.err = TerminalView(sys.stdout, sys.stderr, False, cwd)  # Parley's own lines
        self._view: TerminalView | None = None  # the turn's, while one runs
        self._editor: PromptSession[str]  # (made by `run`)
        self._early_interrupts = 0  # Ctrl-C before the prompt could read it as a key

    async def run(self, home: Path, models: list[str]) -> None:
        commands = SlashCommands(models)
        self._follow_commands(commands)
        self._editor = line_editor(home, commands)
        # Ctrl-C is ours all along: a key at the prompt (raw mode), a signal otherwise (a
        # turn's stopper while one runs; between a turn and the next prompt, this).
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._interrupted_between)
        try:
            await self._converse()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    async def _converse(self) -> None:
        quitting = False
        while True:
            try:
                typed = await self._next_line()
            except EOFError:
                return
            except QuitAsked:
                if quitting:
                    return
                self.err.line(QUIT_HINT)
                quitting = True
                continue
            quitting = False
            if typed.strip():
                await asyncio.create_task(self.turn(typed))

    async def _next_line(self) -> str:
        """The next line typed; `QuitAsked` for a Ctrl-C, typed at the prompt or before it
        could read keys."""
        return await self._editor.prompt_async(
            PROMPT, handle_sigint=False, pre_run=self._answer_early_interrupt
        )

    def _interrupted_between(self) -> None:
        """Ctrl-C as a signal outside a turn: the terminal was not the prompt's yet (a turn's
        last lines, the hint) or no more; it counts as one at an empty prompt."""
        if not self._quit_at_prompt():
            self._early_interrupts += 1  # for the next prompt, once it runs

    def _answer_early_interrupt(self) -> None:
        """As the prompt starts: a Ctrl-C that came before it is its answer."""
        if self._early_interrupts and self._quit_at_prompt():
            self._early_interrupts -= 1

    def _quit_at_prompt(self) -> bool:
        """Ends the running prompt with `QuitAsked`; False when none is waiting for a line."""
        waiting = self._editor.app.future
        if waiting is None or waiting.done():
            return False
        self._editor.app.exit(exception=QuitAsked())
        return True

    def _follow_commands(self, commands: SlashCommands) -> None:
        """The completer's commands: those the server advertised, and any it advertises
        later (`available_commands_update`)."""
        for update in self.client.updates_of(self.session_id, "available_commands_update"):
            commands.advertised(update.get("availableCommands"))

        def on_update(session_id: str, update: dict[str, Any]) -> None:
            if update.get("sessionUpdate") == "available_commands_update":
                commands.advertised(update.get("availableCommands"))
            if self._view is not None:
                self._view.show(session_id, update)

        self.client.on_update = on_update

    async def turn(self, text: str) -> None:
        """One turn (or slash command), shown as it comes; Ctrl-C cancels it."""
        from pygls.exceptions import JsonRpcException

        drawn = MarkdownStream(colours(sys.stderr) and sys.stdout.isatty())
        view = TerminalView(sys.stdout, sys.stderr, False, self.cwd, answer_stream=drawn)
        asker = PermissionAsker(view, self.cwd)
        self.client.permission_handler = (
            allow_all_but_overwrites(view) if self.allow_all else asker.ask
        )
        stopper = TurnStopper(self.client, asker, view)
        stopper.session_id = self.session_id
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stopper.interrupt)
        self._view = view
        result: dict[str, Any] | None = None
        try:
            result = await self.client.prompt(self.session_id, text)
        except JsonRpcException as error:
            if stopper.exit_code is None:
                view.line(f"parley: {escape_controls(error.message)}")
        except asyncio.CancelledError:  # the server did not answer the cancel in time
            if stopper.exit_code is None:
                raise
        finally:
            stopper.finish()
            loop.add_signal_handler(signal.SIGINT, self._interrupted_between)
            self._view = None
            self.client.updates.pop(self.session_id, None)  # shown: not kept all chat long
        view.finish()
        if view.out_mid_line:
            view.answer("\n")
        if result is not None and stopper.exit_code is None:
            self._summary(view, result)

    def _summary(self, view: TerminalView, result: dict[str, Any]) -> None:
        """The turn in one line, dimmed (a slash command, which no model answered: none)."""
        parley = result.get("_meta", {}).get("parley", {})
        turn = parley.get("turn", {})
        if turn.get("rounds"):
            summary = turn_summary(turn, parley.get("usage", {}))
            view.line(painted(summary, "2") if view.colour else summary)


async def chat_loop(
    *,
    home: Path,
    model: str | None,
    cwd: Path,
    session_id: str | None,
    session_model: str | None,
    session_title: str | None = None,
    allow_all: bool,
    tool_policy: str | None,
    store: bool,
    kernel: dict[str, Any] | None = None,
) -> int:
    """The interactive chat; its exit code (0 when the user quit, 2: no model to talk to,
    or `kernel`, `--kernel`'s, could not be attached: the server's notice says why)."""
    view = TerminalView(sys.stdout, sys.stderr, False, cwd)
    client = await _start_server(model_env(None, model or session_model))
    forget = not store and session_id is None
    opened: str | None = None
    try:
        found = await open_session(client, view, cwd, model, session_id, tool_policy, kernel)
        if found is None:
            return 2
        opened = found.session_id
        offered = found.server_info["_meta"]["parley"]["models"]
        models = [m["id"] for m in offered if m.get("available")]
        resumed = f"{opened} ({session_title or 'Untitled'})" if session_id else None
        view.line(_opening(found.model, resumed, found.kernel))
        await ChatLoop(client, opened, cwd, allow_all).run(home, models)
    finally:
        if forget and opened is not None:
            await forget_session(client, view, opened)
        await client.stop()
    if opened is not None:
        view.line(_closing(opened, kept=not forget))
    return 0


def _opening(model: str, resumed: str | None, kernel: str | None) -> str:
    """The first lines: the model, the session (`resumed`: the one continued, its title),
    the user's kernel it is attached to (the server's name for it), how to type."""
    where = f"continuing {resumed}" if resumed else "a new session"
    attached = f" · {kernel}" if kernel else ""
    return escape_controls(f"{model} · {where}{attached}\n{HOW_TO_TYPE}")


def _closing(session_id: str, kept: bool) -> str:
    if not kept:
        return "The session was not kept (--no-store)."
    return f"Session {session_id} kept: `parley chat --session last` continues it."
