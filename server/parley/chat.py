"""`parley chat`'s turn: one prompt, the answer streamed.

It starts `parley serve`, opens a session (a new one, or `--session`'s), sends the prompt
(`chat_command.py` made it from the options) and shows the turn: the answer on stdout and
nothing else; the rest on stderr (`chat_view.py`); a permission question on the terminal
(`chat_question.py`). Ctrl-C cancels the turn with one line on stderr and exits 130; a second
Ctrl-C exits at once. When stdout's reader goes away (`| head`), the turn is cancelled and
the command exits 141 (128 + SIGPIPE, like `yes | head`), quietly. With `--no-store` (or
`[chat] store = false`) the session is deleted at the end, however the turn ended (but for a
second Ctrl-C, which leaves at once).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from parley.chat_question import PermissionAsker, allow_all_but_overwrites
from parley.chat_view import TerminalView, shown_path
from parley.display import escape_controls, turn_summary

if TYPE_CHECKING:  # imported when the server is already starting (it takes a second)
    from parley.client import ParleyClient

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE, what `yes | head` reports
CANCEL_GRACE_SECONDS = 10.0  # how long a cancelled turn may take to answer before we leave
FORGET_SECONDS = 10.0  # how long `session/delete` of a --no-store session may take


class OpenSession(NamedTuple):
    """The session a chat talks in, its model, and what the server said it offers."""

    session_id: str
    model: str
    server_info: dict[str, Any]
    kernel: str | None = None  # the user's kernel it is attached to, as the server names it


class TurnStopper:
    """Ends the turn early: on Ctrl-C (one line on stderr, exit 130; a second Ctrl-C exits at
    once) or when stdout's reader has gone (quietly, exit 141). The turn is cancelled over the
    protocol, so the server settles its history as it does for an editor's Stop."""

    def __init__(self, client: ParleyClient, asker: PermissionAsker, view: TerminalView) -> None:
        self.client, self.asker, self.view = client, asker, view
        self.exit_code: int | None = None
        self.session_id: str | None = None  # while a prompt runs
        self._main: asyncio.Task[Any] | None = asyncio.current_task()
        self._grace: asyncio.TimerHandle | None = None
        self._interrupts = 0

    def interrupt(self) -> None:
        self._interrupts += 1
        if self._interrupts > 1:
            self.asker.restore_terminal()  # a question's cbreak mode must not outlive us
            os._exit(EXIT_INTERRUPTED)  # the server sees its stdin close and exits itself
        if not self.view.quiet:
            self.view.line("Cancelled.")
        self._stop(EXIT_INTERRUPTED)

    def output_closed(self) -> None:
        self._stop(EXIT_OUTPUT_CLOSED)

    def finish(self) -> None:
        """The work is done (or abandoned): nothing is left to cancel."""
        self.session_id, self._main = None, None
        if self._grace is not None:
            self._grace.cancel()

    def _stop(self, exit_code: int) -> None:
        first = self.exit_code is None
        self.exit_code = exit_code
        if not first:
            return
        self.view.stopped = True
        self.asker.cancel()
        if self.session_id is not None:
            self.client.cancel(self.session_id)
            # A server that does not answer the cancelled prompt is not waited for forever.
            if self._main is not None:
                self._grace = asyncio.get_running_loop().call_later(
                    CANCEL_GRACE_SECONDS, self._main.cancel
                )
        elif self._main is not None:
            self._main.cancel()  # nothing runs yet: stop setting up


async def _start_server(env: dict[str, str] | None) -> ParleyClient:
    from parley.protocol.framing import MAX_FRAME_BYTES

    # The server starts first, and this process imports the client (pygls, a second of
    # imports) while the server imports its own. In a session of its own: Ctrl-C at the
    # terminal reaches only this process (which cancels the turn over the protocol), and
    # nothing the server runs can open our terminal.
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "parley",
        "serve",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=MAX_FRAME_BYTES,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    from parley.client import ParleyClient

    client = ParleyClient()
    client.attach(server)
    return client


def model_env(env: dict[str, str] | None, model: str | None) -> dict[str, str] | None:
    """The server preloads its default model's SDK (a second of imports) while it starts:
    make that the model this turn will use, not one it won't."""
    return {**(env or {}), "PARLEY_MODEL": model} if model else env


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
    session_model: str | None = None,
    commands: bool = False,
    store: bool = True,
    quiet: bool = False,
    kernel: dict[str, Any] | None = None,
) -> int:
    """`session_model`: the model of the session `session_id` (when the caller knows it);
    `commands`: a prompt that starts with a slash command runs it (else it is plain text);
    `store`: keep the new session afterwards (a continued one is always kept);
    `quiet`: stderr only for what goes wrong."""
    view = TerminalView(sys.stdout, sys.stderr, as_json, cwd, quiet=quiet)
    asker = PermissionAsker(view, cwd)
    client = await _start_server(model_env(env, model or session_model))
    from pygls.exceptions import JsonRpcException

    stopper = TurnStopper(client, asker, view)
    view.on_output_closed = stopper.output_closed
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stopper.interrupt)
    client.permission_handler = allow_all_but_overwrites(view) if allow_all else asker.ask
    forget = not store and session_id is None  # never a session the user asked to continue
    opened: str | None = None
    try:
        found = await open_session(client, view, cwd, model, session_id, tool_policy, kernel)
        if found is None:
            return 2
        opened = found.session_id
        client.on_update = view.show  # after the replay of a loaded session: only the answer
        stopper.session_id = opened
        result = await client.prompt(opened, prompt, literal=not commands)
    except JsonRpcException as error:
        if stopper.exit_code is not None:
            return stopper.exit_code
        view.line(f"parley: {error.message}")
        return 1
    except asyncio.CancelledError:
        if stopper.exit_code is None:
            raise
        return stopper.exit_code
    finally:
        stopper.finish()
        if forget and opened is not None:
            await forget_session(client, view, opened)
        await client.stop()
        loop.remove_signal_handler(signal.SIGINT)  # only now: Ctrl-C while stopping exits at once
    return _finish(view, result, opened, stopper.exit_code, kept=not forget)


async def attached(
    client: ParleyClient,
    view: TerminalView,
    session_id: str,
    options: list[dict[str, Any]],
    kernel: dict[str, Any] | None,
) -> str | None:
    """The session, unless `--kernel` named a kernel it could not attach to (None: the
    server's notice said why, here): the prompt must not run in another kernel."""
    from parley.kernels_command import attach_failure

    failure = await attach_failure(client, session_id, options, kernel)
    if failure is None:
        return session_id
    view.line(f"parley: {failure}")
    return None


async def open_session(
    client: ParleyClient,
    view: TerminalView,
    cwd: Path,
    model: str | None,
    session_id: str | None,
    tool_policy: str | None,
    kernel: dict[str, Any] | None = None,
) -> OpenSession | None:
    """Initialize the server and open the session: a new one with the chosen model (else
    the server's default), or `session_id` loaded. None: the model is not available (said)."""
    info = await client.initialize()
    chosen = model or info["_meta"]["parley"]["defaultModel"]
    known = {m["id"]: m for m in info["_meta"]["parley"]["models"]}
    if chosen in known and not known[chosen]["available"]:
        view.line(f"parley: {known[chosen]['reason']}")
        return None
    from parley.kernels_command import kernel_name

    if session_id is not None:
        loaded = await client.load_session(session_id, str(cwd), kernel=kernel)
        options = loaded["configOptions"]
        ready = await attached(client, view, session_id, options, kernel)
        return OpenSession(ready, chosen, info, kernel_name(options)) if ready else None
    settings: dict[str, Any] = {"model": chosen}
    if tool_policy:
        settings["toolPolicy"] = tool_policy
    if kernel is not None:  # `--kernel`: the Python tools in the user's own kernel
        settings["kernel"] = kernel
    opened = await client.new_session(str(cwd), **settings)
    options = client.options_of(opened)
    ready = await attached(client, view, opened, options, kernel)
    return OpenSession(ready, chosen, info, kernel_name(options)) if ready else None


async def forget_session(client: ParleyClient, view: TerminalView, session_id: str) -> None:
    """Deletes a session that is not to be kept (`--no-store`); says so when it cannot."""
    from pygls.exceptions import JsonRpcException

    try:
        await client.request("session/delete", {"sessionId": session_id}, FORGET_SECONDS)
    except (JsonRpcException, TimeoutError, OSError, RuntimeError) as error:
        why = getattr(error, "message", None) or str(error) or type(error).__name__
        view.line(f"parley: the session {session_id} was kept: deleting it failed ({why}).")


def _finish(
    view: TerminalView,
    result: dict[str, Any],
    session_id: str,
    exit_code: int | None,
    kept: bool = True,
) -> int:
    """After the answer: the result (with --json), else the turn's summary and the files it
    edited on stderr (why it stopped, the notice said); the exit code."""
    if view.as_json:
        view.answer(json.dumps({"sessionId": session_id, "result": result}) + "\n")
    else:
        view.finish()  # what the streams held back (an escape cut short)
    if view.out_mid_line:
        view.answer("\n")
    if exit_code is not None:
        return exit_code
    if not view.as_json and not view.quiet:
        view.line("")
        view.line(_summary(result, session_id if kept else None))
        edited = [shown_path(path, view.cwd) for path in view.edits.paths()]
        edited = [escape_controls(path, one_line=True) for path in edited]
        if edited:
            view.line(f"Edited: {', '.join(edited)}")
    return 0 if result["stopReason"] in ("end_turn", "max_tokens") else 1


def _summary(result: dict[str, Any], session_id: str | None) -> str:
    """The turn in one line (docs/display.md's turn summary), and the session to continue
    (or that it was not kept: None)."""
    parley = result.get("_meta", {}).get("parley", {})
    session = f"session {session_id}" if session_id else "session not kept (--no-store)"
    return f"{turn_summary(parley.get('turn', {}), parley.get('usage', {}))} · {session}"
