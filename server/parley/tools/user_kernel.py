"""The user's own kernel, spoken to in the Jupyter messaging protocol (docs/tools.md, "The
user's own kernel").

`UserKernel` sends Parley's requests over a `KernelLink` (local: `jupyter_link.py`; a
Jupyter Server's: `jupyter_remote.py`) and keeps out of the user's way:

- an evaluation is `execute_request` with `store_history: false` (no `In[]`/`Out[]`, no
  execution count of the user's taken) and no stdin;
- before it, the kernel must answer a `kernel_info_request` on the shell channel, which it
  does only between cells: a cell of the user's still running is waited for
  (`busy_wait_seconds`), then the call is refused, and Parley's code was never sent;
- a call past its limit, or stopped by the user, gets `interrupt_request` (never a kill:
  the kernel is the user's);
- a kernel that stops answering its heartbeat is said to be gone, and one that restarted
  (another session id in its replies, or `starting`/`restarting` on iopub) is said to have
  lost its namespace; the session goes on either way.

Every message the kernel sends is input Parley does not trust: a field of the wrong type,
a reply that never comes, a flood of output, all end in a sentence for the model, never in a
traceback or a hang, and output is kept within `output_limit` characters per part.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import attrs

from parley.tools.command_output import strip_ansi
from parley.tools.jupyter_link import ConnectionRefused, KernelLink
from parley.tools.kernel_images import shown_images

logger = logging.getLogger(__name__)

MAX_OUTPUT_PARTS = 1000  # iopub outputs kept per request; the rest are counted
OUTPUTS = frozenset({"stream", "execute_result", "display_data", "error"})
RESTART_STATES = frozenset({"starting", "restarting", "autorestarting"})


@attrs.frozen
class UserKernelSettings:
    timeout_seconds: float = 30.0  # an evaluation's limit
    answer_seconds: float = 5.0  # an introspection's reply; a heartbeat's period while waiting
    busy_wait_seconds: float = 10.0  # how long a call waits for the user's own cell
    interrupt_grace_seconds: float = 2.0  # after the interrupt, for the interrupted reply
    output_limit: int = 20_000  # characters kept of each part of the output


class KernelUnavailable(Exception):
    """The kernel cannot take the call now (busy, gone, unreachable): the sentence says why
    and what the user can do."""


@attrs.define
class Exchange:
    """One request of Parley's and what came back for it."""

    msg_id: str
    reply: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = attrs.field(factory=list)
    dropped: int = 0  # outputs over MAX_OUTPUT_PARTS
    started: bool = False  # the kernel said it is busy with this request
    idle: bool = False  # ... and then idle again
    wants_idle: bool = False  # done only once idle (an execution's outputs come before it)
    done: asyncio.Event = attrs.field(factory=asyncio.Event)

    def settle(self) -> None:
        if self.reply is not None and (self.idle or not self.wants_idle):
            self.done.set()


@attrs.frozen
class SeenError:
    """An exception the kernel reported on iopub: the user's cell's or Parley's eval's."""

    name: str
    value: str
    traceback: str
    code: str | None  # the cell that raised, when its execute_input was seen
    by_parley: bool
    at: str  # local time, HH:MM:SS


def _text(value: Any, limit: int = 100_000) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _field(message: dict[str, Any], part: str, key: str) -> Any:
    section = message.get(part)
    return section.get(key) if isinstance(section, dict) else None


class UserKernel:
    """A session's link to the user's kernel, opened on first use and kept."""

    def __init__(self, link: KernelLink, settings: UserKernelSettings | None = None) -> None:
        self.link = link
        self.settings = settings or UserKernelSettings()
        self.where = link.where
        self.last_error: SeenError | None = None
        self._exchanges: dict[str, Exchange] = {}
        self._inputs: dict[str, str] = {}  # msg_id → the code of a cell seen executing
        self._notes: list[str] = []  # what happened to the kernel, for the next answer
        self._kernel_session: str | None = None
        self._reader: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        self._calls = asyncio.Lock()  # one request of Parley's at a time
        self._closed = False

    # --- opening and reading -----------------------------------------------------------

    async def _ensure_open(self) -> None:
        async with self._opening:
            if self._closed:
                raise KernelUnavailable("The session is closed.")
            if self._reader is not None and not self._reader.done():
                return
            if self._reader is not None:  # the link ended: connect again
                with contextlib.suppress(Exception):
                    await self.link.close()
            try:
                await self.link.open()
            except ConnectionRefused as error:
                raise KernelUnavailable(f"Parley cannot use {self.where}: {error}") from None
            except OSError as error:
                raise KernelUnavailable(f"Parley cannot reach {self.where}: {error}") from None
            self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for channel, message in self.link.messages():
                try:
                    self._take(channel, message)
                except (TypeError, ValueError, AttributeError, KeyError) as error:
                    logger.warning("A message from %s was dropped: %s", self.where, error)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.info("The link to %s ended: %s", self.where, error)

    def _take(self, channel: str, message: dict[str, Any]) -> None:
        msg_type = _field(message, "header", "msg_type")
        parent = _field(message, "parent_header", "msg_id")
        content = message.get("content")
        if not isinstance(msg_type, str) or not isinstance(content, dict):
            return
        if channel == "iopub":
            self._take_broadcast(msg_type, parent, content)
        exchange = self._exchanges.get(parent) if isinstance(parent, str) else None
        if exchange is None:
            return
        if channel in ("shell", "control") and msg_type.endswith("_reply"):
            self._check_session(_field(message, "header", "session"))
            exchange.reply = content
        elif channel == "iopub" and msg_type == "status":
            state = content.get("execution_state")
            exchange.started = exchange.started or state == "busy"
            exchange.idle = exchange.started and state == "idle"
        elif channel == "iopub" and msg_type in OUTPUTS:
            if len(exchange.outputs) < MAX_OUTPUT_PARTS:
                exchange.outputs.append({"msg_type": msg_type, **content})
            else:
                exchange.dropped += 1
        exchange.settle()

    def _take_broadcast(self, msg_type: str, parent: Any, content: dict[str, Any]) -> None:
        """What every frontend of the kernel is told: its state, the cells it runs, the
        errors they raise (the user's too: `python_last_error` reads the last one)."""
        if msg_type == "status":
            state = content.get("execution_state")
            if state in RESTART_STATES:
                self._note_restart()
            elif state == "dead":
                self._notes.append(f"Your kernel ({self.where}) died.")
        elif msg_type == "execute_input" and isinstance(parent, str):
            self._inputs[parent] = _text(content.get("code"), self.settings.output_limit)
            while len(self._inputs) > 50:
                self._inputs.pop(next(iter(self._inputs)))
        elif msg_type == "error":
            lines = content.get("traceback")
            traceback = "\n".join(_text(line) for line in lines) if isinstance(lines, list) else ""
            self.last_error = SeenError(
                name=_text(content.get("ename"), 200) or "Exception",
                value=_text(content.get("evalue"), self.settings.output_limit),
                traceback=bounded(strip_ansi(traceback), self.settings.output_limit),
                code=self._inputs.get(parent) if isinstance(parent, str) else None,
                by_parley=isinstance(parent, str) and parent in self._exchanges,
                at=time.strftime("%H:%M:%S"),
            )

    def _check_session(self, session: Any) -> None:
        if not isinstance(session, str):
            return
        if self._kernel_session is not None and session != self._kernel_session:
            self._note_restart()
        self._kernel_session = session

    def _note_restart(self) -> None:
        note = f"Your kernel ({self.where}) restarted: its namespace is new."
        if note not in self._notes:
            self._notes.append(note)

    def take_notes(self) -> list[str]:
        """What happened to the kernel since the last answer (said once)."""
        notes, self._notes = self._notes, []
        return notes

    async def check(self) -> None:
        """Connect and hear the kernel's heartbeat; `KernelUnavailable` saying why not."""
        await self._ensure_open()
        if not await self.link.is_alive():
            raise KernelUnavailable(gone(self.where))

    # --- requests ----------------------------------------------------------------------

    async def _ask(
        self, channel: str, msg_type: str, content: dict[str, Any], *, wants_idle: bool = False
    ) -> Exchange:
        """Send a request; the caller awaits `exchange.done` and then calls `_forget`."""
        exchange = Exchange(msg_id="", wants_idle=wants_idle)
        msg_id = self.link.send(channel, msg_type, content)
        exchange.msg_id = msg_id
        self._exchanges[msg_id] = exchange
        return exchange

    def _forget(self, exchange: Exchange) -> None:
        self._exchanges.pop(exchange.msg_id, None)

    async def _wait_for_idle(self) -> None:
        """Return once the kernel answers on its shell channel (between cells); raise
        `KernelUnavailable` when it is busy past `busy_wait_seconds` or not beating."""
        probe = await self._ask("shell", "kernel_info_request", {})
        deadline = time.monotonic() + self.settings.busy_wait_seconds
        try:
            while True:
                remaining = deadline - time.monotonic()
                wait = max(0.05, min(self.settings.answer_seconds, remaining))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(probe.done.wait(), wait)
                    return
                if not await self.link.is_alive():
                    raise KernelUnavailable(gone(self.where))
                if time.monotonic() >= deadline:
                    raise KernelUnavailable(busy(self.where, self.settings.busy_wait_seconds))
        finally:
            self._forget(probe)

    async def request(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        """One shell request answered by its reply (inspect, complete, history): the reply's
        content; `KernelUnavailable` when the kernel is busy or gone."""
        async with self._calls:
            await self._ensure_open()
            await self._wait_for_idle()
            exchange = await self._ask("shell", msg_type, content)
            try:
                await asyncio.wait_for(exchange.done.wait(), self.settings.answer_seconds)
            except TimeoutError:
                raise KernelUnavailable(no_answer(self.where, msg_type)) from None
            finally:
                self._forget(exchange)
            assert exchange.reply is not None
            return exchange.reply

    async def execute(self, code: str) -> Evaluation:
        """Run `code` in the user's kernel, outside their history."""
        async with self._calls:
            await self._ensure_open()
            await self._wait_for_idle()
            content = {
                "code": code,
                "silent": False,
                "store_history": False,  # not in the user's In[]/Out[]
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": False,
            }
            exchange = await self._ask("shell", "execute_request", content, wants_idle=True)
            try:
                return await self._finished(exchange)
            finally:
                self._forget(exchange)

    async def _finished(self, exchange: Exchange) -> Evaluation:
        limit = self.settings.timeout_seconds
        try:
            await asyncio.wait_for(exchange.done.wait(), limit)
        except TimeoutError:
            return await self._interrupted(exchange, limit)
        except asyncio.CancelledError:  # Stop: interrupt what runs, never kill it
            if exchange.started:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.link.interrupt())
            raise
        return Evaluation(exchange, self.settings.output_limit)

    async def _interrupted(self, exchange: Exchange, limit: float) -> Evaluation:
        if not exchange.started:
            return Evaluation(exchange, self.settings.output_limit, note=queued(self.where, limit))
        await self.link.interrupt()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exchange.done.wait(), self.settings.interrupt_grace_seconds)
            return Evaluation(exchange, self.settings.output_limit, note=interrupted(limit))
        if not await self.link.is_alive():
            return Evaluation(exchange, self.settings.output_limit, note=gone(self.where))
        grace = self.settings.interrupt_grace_seconds
        return Evaluation(exchange, self.settings.output_limit, note=still_running(limit, grace))

    async def aclose(self) -> None:
        """Disconnect (idempotent); the kernel runs on: it is the user's."""
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        with contextlib.suppress(Exception):
            await self.link.close()


class Evaluation:
    """What an execution gave: its output, its value, its error, a note on how it ended, and
    the images it displayed (shown to the user: `kernel_images.py`)."""

    def __init__(self, exchange: Exchange, limit: int, note: str | None = None) -> None:
        self.note = note
        self.images = shown_images(exchange.outputs)
        reply = exchange.reply
        self.ok = note is None and isinstance(reply, dict) and reply.get("status") == "ok"
        self.parts: list[str] = []
        streams: dict[str, str] = {}
        for output in exchange.outputs:
            kind = output.get("msg_type")
            if kind == "stream":
                name = "stderr" if output.get("name") == "stderr" else "stdout"
                streams[name] = streams.get(name, "") + _text(output.get("text"), limit + 1)
            elif kind in ("execute_result", "display_data"):
                self.parts.append(shown_data(output.get("data"), kind, limit))
            elif kind == "error":
                lines = output.get("traceback")
                joined = "\n".join(_text(x) for x in lines) if isinstance(lines, list) else ""
                self.parts.append(bounded(strip_ansi(joined) or _text(output.get("evalue")), limit))
        for name in ("stderr", "stdout"):
            if streams.get(name):
                self.parts.insert(0, f"{name}:\n{bounded(strip_ansi(streams[name]), limit)}")
        if exchange.dropped:
            self.parts.append(f"[… {exchange.dropped:,} more outputs not shown]")


def shown_data(data: Any, kind: str, limit: int) -> str:
    """A result or display as text: its `text/plain` (a DataFrame's table too); an image or
    other rich output is named with its size, not sent."""
    if not isinstance(data, dict):
        return "(an output without data)"
    plain = _text(data.get("text/plain"), limit + 1)
    others = [f"{k}, {len(v) if isinstance(v, str) else 0:,} characters" for k, v in data.items()]
    others = [o for o in others if not o.startswith("text/plain")]
    rich = f"[also {'; '.join(others[:5])}: not shown]" if others else ""
    label = "value" if kind == "execute_result" else "display"
    body = bounded(strip_ansi(plain), limit) if plain else ""
    text = f"{label}: {body}" if "\n" not in body else f"{label}:\n{body}"
    return "\n".join(filter(None, [text if body else "", rich])) or f"{label}: (empty)"


def bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters cut]"


# --- what the model is told, word for word (docs/tools.md) -------------------------------


def gone(where: str) -> str:
    return (
        f"Your kernel ({where}) does not answer its heartbeat: it has died or cannot be "
        "reached. Parley never starts or restarts your kernel; restart it in Jupyter, or "
        "attach the session to another kernel or to Parley's own."
    )


def busy(where: str, seconds: float) -> str:
    return (
        f"Your kernel ({where}) is busy: it did not take a request within {seconds:g} s, as "
        "when a cell of yours is running. Parley's request was not run; try again once the "
        "cell has finished."
    )


def no_answer(where: str, msg_type: str) -> str:
    return f"Your kernel ({where}) did not answer Parley's {msg_type} in time."


def queued(where: str, limit: float) -> str:
    return (
        f"Your kernel ({where}) had not started Parley's code after {limit:g} s (a cell of "
        "yours started first): it is queued and runs when that cell ends. Parley did not "
        "interrupt, which would have stopped your cell."
    )


def interrupted(limit: float) -> str:
    return (
        f"Interrupted at the {limit:g} s time limit (interrupt_request); your kernel and its "
        "namespace are intact."
    )


def still_running(limit: float, grace: float) -> str:
    return (
        f"The code was still running {grace:g} s after it was interrupted at the {limit:g} s "
        "time limit. Parley stopped waiting; it never kills your kernel (interrupt or restart "
        "it yourself)."
    )
