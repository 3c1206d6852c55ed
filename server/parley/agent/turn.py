"""One turn of the agent: the user's prompt, model rounds and tool calls, until a round ends
in text, the user cancels, or the round limit is reached.

The hybrid policy (the default): each round starts as a stream, whose text and reasoning
go to the editor at once. The moment the stream shows a tool call, the editor is told the
tool's name, the stream is closed, and one synchronous call with the same request fetches
the complete tool calls. Only that call's tokens are counted for the round; a round that
ends in text counts its stream's. Policy `stream` assembles tool calls from the stream;
`sync` never streams.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Protocol

import attrs

from parley.agent import budgets, modes, notices
from parley.agent.call_usage import count_call
from parley.agent.checkpoints import TurnCheckpoints
from parley.agent.compaction import compacted_view, is_context_exceeded
from parley.agent.compactor import Compactor
from parley.agent.continued_call import continued_completion, resent_tokens
from parley.agent.learned_windows import LearnedWindows
from parley.agent.session import Session, new_id, now_iso, title_from_prompt
from parley.agent.tool_permission import (
    PermissionPorts,
    StoppedAtQuestion,
    ToolPermission,
    precheck,
)
from parley.config import Settings
from parley.core import updates
from parley.core.call_view import CallView
from parley.core.conversation import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    without_images,
)
from parley.core.errors import ProviderError
from parley.core.off_loop import off_loop
from parley.core.thought_levels import Thinking
from parley.core.usage import (
    CostBreakdown,
    Usage,
    UsageSum,
    UsageTotals,
    cost_to_wire,
    estimate_tokens,
)
from parley.providers.base import (
    CompletedToolCall,
    Completion,
    ModelRequest,
    ModelStream,
)
from parley.providers.events import (
    StreamFinished,
    TextDelta,
    ThoughtDelta,
    ToolCallStarted,
)
from parley.providers.registry import ProviderRegistry, ResolvedModel
from parley.tools.base import ClientFiles, ClientTerminals, ClientWrites, ToolContext, ToolResult
from parley.tools.kernel_images import images_shown

logger = logging.getLogger(__name__)

# Identical consecutive tool errors that end the turn: the model is going round in circles.
CIRCUIT_BREAKER_ERRORS = 5
# What a tool result may send the model at most; the rest is cut with a note.
TOOL_RESULT_LIMIT = 100_000

_STOP_REASONS = {"max_tokens": "max_tokens", "refusal": "refusal"}


class TurnPorts(PermissionPorts, Protocol):
    """What a turn needs from the connection to the editor (and asking: `PermissionPorts`)."""

    # The editor's files, when it offers to read them (its unsaved buffers); None otherwise.
    client_files: ClientFiles | None

    # The editor writes files (into its buffers), when it offers to; None otherwise.
    client_writes: ClientWrites | None

    # The client asked for hybrid revisions (`_meta.parley.revisions` in `initialize`).
    wants_revisions: bool

    # The editor runs commands in its terminals (`terminal/*`), when it offers to.
    client_terminals: ClientTerminals | None

    def send_update(self, session_id: str, update: dict[str, Any]) -> None: ...

    async def drained(self) -> None:
        """Wait while the editor is behind with the updates sent (it reads them slowly)."""


@attrs.define
class TurnStats:
    model: str
    rounds: int = 0
    streamed_rounds: int = 0
    sync_fallbacks: int = 0
    discarded_streams: int = 0
    tool_calls: int = 0
    # The counted calls' usage and cost (`cost` null once one had no known price; its split
    # by kind of token: the priced calls').
    spent: UsageSum = attrs.field(factory=UsageSum)
    usage_complete: bool = True  # False once a counted call reported no usage
    # Tokens the discarded streams cost (their prompt and what they streamed), estimated
    # from characters: waste to show, never counted in `usage` or `cost`.
    wasted_tokens_estimate: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "streamedRounds": self.streamed_rounds,
            "syncFallbacks": self.sync_fallbacks,
            "discardedStreams": self.discarded_streams,
            "toolCalls": self.tool_calls,
            "cost": cost_to_wire(self.spent.known_cost),
            "costBreakdown": (self.spent.cost_breakdown or CostBreakdown()).to_wire(),
            "wastedTokensEstimate": self.wasted_tokens_estimate,
            "model": self.model,
            # Calls cut off (Stop, a broken stream): their usage is Parley's estimate.
            **(
                {"estimatedCalls": self.spent.estimated_calls} if self.spent.estimated_calls else {}
            ),
        }

    @property
    def usage(self) -> Usage:
        return self.spent.usage


@attrs.frozen
class TurnResult:
    stop_reason: str
    stats: TurnStats
    session_totals: UsageTotals  # the session's, this turn included
    # Why the turn stopped, or was refused (agent/notices.py): said before the prompt's
    # answer (agent/sessions.py), never on the wire of the answer itself.
    notice: notices.Notice | None = None
    # For a prompt that asked to retry: whether it replaced the cut-off last turn.
    replaced: bool | None = None
    # False for a command whose input was refused (`/mode pl`): said, not kept.
    kept: bool | None = None

    def to_wire(self) -> dict[str, Any]:
        """The prompt's result: `stopReason`; the turn's `usage` (the end-turn-token-usage
        RFD, in ACP's unstable schema: the tokens of the turn's counted calls, left out when
        a provider reported none for one of them, so never an undercount); the rest under
        `_meta` (Parley's clients read the same usage there)."""
        usage = self.stats.usage.to_wire()
        wire: dict[str, Any] = {
            "stopReason": self.stop_reason,
            **({"usage": usage} if self.stats.usage_complete else {}),
            "_meta": {
                "parley": {
                    "usage": usage,
                    "turn": self.stats.to_wire(),
                    "session": self.session_totals.to_wire(),
                    "usageComplete": self.stats.usage_complete,
                }
                | ({} if self.replaced is None else {"replaced": self.replaced})
                | ({} if self.kept is None else {"kept": self.kept})
            },
        }
        return wire


class Turn:
    def __init__(
        self,
        session: Session,
        prompt: UserMessage,
        ports: TurnPorts,
        providers: ProviderRegistry,
        settings: Settings,
        windows: LearnedWindows | None = None,
    ) -> None:
        self.session = session
        self.prompt = prompt
        self.ports = ports
        self.providers = providers
        self.settings = settings
        self.windows = windows or LearnedWindows(session.store)
        self._window: int | None = None  # the model's window in the latest request
        self.stats = TurnStats(model=session.settings.model)
        # What is in flight, so a cancel or an error can leave a history the provider accepts.
        self._streamed_text: list[str] | None = None  # the current round's streamed text
        self._message_id = ""
        self._announced: list[tuple[str, str]] = []  # (toolCallId, name) the stream showed
        self._unanswered: list[ToolCall] = []  # calls of the last assistant message
        self._error_streak: tuple[str, int] = ("", 0)
        self._checkpoints: TurnCheckpoints | None = None  # once the turn has its number
        # Anthropic takes one thinking setting per tool loop (a turn): a budget, once sent,
        # holds for the turn; a change of the level applies from the next turn.
        self._turn_budgets: dict[str, Thinking] = {}
        self._compactor = Compactor(session, settings.compaction_threshold, self._send)
        self._permission = ToolPermission(session, settings, ports)
        self._overrun: budgets.Overrun | None = None  # the budget that stopped the turn
        self._tripped: notices.Notice | None = None  # the circuit breaker's, when it tripped
        self._summarised = False  # a summary call was made since the last budget check
        # How each call was shown (its title and files), stored with its result so that a
        # replay shows it again without computing its view (an edit's: a whole-file diff).
        self._shown: dict[str, dict[str, Any]] = {}
        # A model call was made and not counted yet: interrupted now, it is counted as an
        # estimate (the server read the prompt and may have generated), never as zero.
        self._uncounted_call = False
        self._stream: ModelStream | None = None  # the round's stream, while it is read
        self._streamed_thought_chars = 0  # what the round's stream thought, in characters
        # The view the round's first call was announced with: its permission question shows
        # it again, unless a tool ran since (and may have changed what the call would do).
        self._reusable_view: tuple[str, CallView] | None = None

    # --- the turn, top to bottom --------------------------------------------------------

    async def run(self) -> TurnResult:
        refused = refused_by_budget(self.session, self.settings)
        if refused is not None:
            return refused
        self._set_title_from_prompt()
        self.session.add_message(self.prompt)
        self.session.count_turn()
        self._checkpoints = TurnCheckpoints(
            self.session.store,
            self.session.id,
            self.session.totals.turns,
            self.session.roots,
            self.settings,
        )
        try:
            return await self._run_rounds()
        finally:  # the snapshot after its last writing call: a restore finds its record whole
            if left := await self._checkpoints.settled():
                notices.say(self.session, self.ports.send_update, notices.runs_later_left(left))

    async def _run_rounds(self) -> TurnResult:
        try:
            if (starting := self.session.mcp_starting) is not None:
                # Its MCP servers' tools, if they start, are the first request's too. Shielded:
                # a Stop ends this turn, not the servers' start.
                await asyncio.shield(asyncio.gather(starting, return_exceptions=True))
            stop_reason = await self._rounds()
        except (asyncio.CancelledError, StoppedAtQuestion):
            self._settle_interrupted(
                "The user cancelled this call before it finished.", stopped="cancelled"
            )
            return self._result("cancelled")
        except Exception as error:
            # Whatever ended the turn (a provider failure, or a bug anywhere below), the next
            # prompt must send the provider a conversation it accepts.
            self._settle_interrupted(
                "An error with the model provider interrupted this call."
                if isinstance(error, ProviderError)
                else "An internal error in Parley interrupted this call.",
                stopped="failed",
            )
            # Answered by an error, not a notice; a replay shows the failure where it was.
            failed = notices.turn_failed(error)
            self.session.add_notice(failed.level, failed.text)
            raise
        return self._result(stop_reason)

    def _result(self, stop_reason: str) -> TurnResult:
        """The turn's result, with its notice: why it stopped, if it did."""
        notice = self._tripped or notices.turn_stopped(
            stop_reason,
            request_limit=self._request_limit,
            token_limit=self.settings.model_config(self.stats.model).max_tokens,
            overrun=self._overrun,
        )
        return TurnResult(stop_reason, self.stats, attrs.evolve(self.session.totals), notice)

    @property
    def _request_limit(self) -> int:
        return self.session.settings.max_turn_requests or self.settings.max_turn_requests

    async def _rounds(self) -> str:
        for _ in range(self._request_limit):
            # The model is read each round: `_parley/session/configure` applies from the next.
            resolved = await self.providers.resolved(
                self.session.settings.model, self.session.settings.tool_format
            )
            self.stats.model = resolved.id
            self.stats.rounds += 1
            self.session.count_round()
            request = await self._prepared_request(resolved)
            if self._summary_spent_budget():
                return "max_turn_requests"
            try:
                completion, call_ids = await self._model_round(resolved, request)
            except ProviderError as error:
                if not is_context_exceeded(error) or self._streamed_text:
                    raise
                retried = await self._retried_shorter(resolved, error)
                if retried is None:
                    return "max_turn_requests"
                completion, call_ids = retried
            calls = tuple(
                ToolCall(call.id, call.name, call.arguments, wire_id, call.arguments_error)
                for call, wire_id in zip(completion.tool_calls, call_ids, strict=True)
            )
            self._commit_assistant(
                AssistantMessage(completion.text, completion.thinking, calls, self._message_id)
            )
            if not calls:
                return _STOP_REASONS.get(completion.finish_reason, "end_turn")
            if self._stopped_by_budget():
                return "max_turn_requests"
            if await self._run_tools(calls):
                return "end_turn"  # the circuit breaker tripped
        return "max_turn_requests"

    async def _retried_shorter(
        self, resolved: ResolvedModel, refusal: ProviderError
    ) -> tuple[Completion, list[str]] | None:
        """The provider refused the round's request as longer than the model's window: learn
        the window (the refusal's, the server's, or half the request), compact the
        conversation to it and send the round once more. Its calls' `usage_update`s carry
        the window learned. None: the summary spent the budget, so the round is not sent."""
        refused_tokens = self._compactor.tokens_after
        learned = await self.windows.learn(resolved, refusal, refused_tokens, now_iso())
        logger.info("Context length exceeded; compacting to %d tokens: %s", learned.tokens, refusal)
        request = await self._prepared_request(resolved, force=True, window=learned.tokens)
        if self._summary_spent_budget():
            return None
        try:
            return await self._model_round(resolved, request)
        except ProviderError as error:
            if not is_context_exceeded(error) or self._streamed_text:
                raise
            sizes = (refused_tokens, self._compactor.tokens_after)
            raise still_too_long(error, learned.tokens, *sizes) from error

    async def _prepared_request(
        self, resolved: ResolvedModel, force: bool = False, window: int | None = None
    ) -> ModelRequest:
        """The round's request, compacted when it would pass the threshold (or, `force`d,
        in any case). `window`: the size to compact to (a window just learned), else the
        model's."""
        window = self._window = window or self.windows.window(resolved, self.settings)
        return await self._compactor.compacted(
            lambda: self._request(resolved),
            window,
            lambda summary: self._summary_call(resolved, summary),
            resolved.model,
            force=force,
        )

    async def _summary_call(self, resolved: ResolvedModel, request: ModelRequest) -> Completion:
        """The summary's one call: the session's model, synchronous, counted as any call."""
        self._summarised = True
        self._uncounted_call = True
        completion = await resolved.provider.complete(request)
        self._count(completion.usage, "sync")
        return completion

    def _summary_spent_budget(self) -> bool:
        """After a summary made for the round (a billed call the budget check before it
        did not see): past a budget, the round's own call is not made."""
        summarised, self._summarised = self._summarised, False
        return summarised and self._stopped_by_budget()

    def _request(self, resolved: ResolvedModel) -> ModelRequest:
        thinking = self.settings.thinking(resolved.id, self.session.settings.thought_level)
        if self.settings.thinking_style(resolved.id) == "budget":
            thinking = self._turn_budgets.setdefault(resolved.id, thinking)
        return session_request(self.session, self.settings, resolved, thinking)

    # --- one model round, by policy -----------------------------------------------------

    async def _model_round(
        self, resolved: ResolvedModel, request: ModelRequest
    ) -> tuple[Completion, list[str]]:
        self._message_id = new_id("msg")
        self._uncounted_call = True  # until `_count`: the stream's, then the call's
        if self.session.settings.tool_policy == "sync":
            completion = await resolved.provider.complete(request)
            self._count(completion.usage, "sync")
            self._show_complete_reply(completion)
            return completion, await self._announce_calls(completion.tool_calls)
        return await self._streamed_round(resolved, request)

    async def _streamed_round(
        self, resolved: ResolvedModel, request: ModelRequest
    ) -> tuple[Completion, list[str]]:
        hybrid = self.session.settings.tool_policy == "hybrid"
        self.stats.streamed_rounds += 1
        thought_id = new_id("thought")
        self._streamed_text = []
        self._streamed_thought_chars = 0
        self._announced = []
        finished: StreamFinished | None = None
        stream = self._stream = resolved.provider.stream(request)
        async with stream:  # leaving it closes the stream: the provider sees the hang-up
            async for event in stream:
                if isinstance(event, TextDelta):
                    self._streamed_text.append(event.text)
                    self._send(updates.message_chunk(self._message_id, event.text))
                elif isinstance(event, ThoughtDelta):
                    self._streamed_thought_chars += len(event.text)
                    self._send(updates.thought_chunk(thought_id, event.text))
                elif isinstance(event, ToolCallStarted):
                    call_id = new_id("call")
                    self._announced.append((call_id, event.name))
                    kind = self.session.tools.kind_of(event.name)
                    self._send(updates.tool_call(call_id, event.name, kind))
                    if hybrid:
                        break  # the round turned to tool use: stop reading now
                elif isinstance(event, StreamFinished):
                    finished = event
        streamed_text = "".join(self._streamed_text)
        self._stream = None

        ended_in_text = finished is not None and finished.reason != "tool_use"
        if not hybrid or (ended_in_text and not self._announced):
            completion = stream.completion
            assert completion is not None  # set when the stream ran to its end
            self._count(completion.usage, "stream")
            return completion, await self._announce_calls(completion.tool_calls)

        # Tool use: the stream is discarded, its usage never counted. The synchronous call
        # with the same request gives the complete calls, and is what this round counts.
        self.stats.discarded_streams += 1
        self.stats.sync_fallbacks += 1
        continued = False
        if streamed_text and resolved.provider.continues_streamed_text:
            completion, continued = await continued_completion(
                resolved.provider, request, streamed_text
            )
        else:
            completion = await resolved.provider.complete(request)
        self._count(completion.usage, "sync")
        self.stats.wasted_tokens_estimate += resent_tokens(
            self._compactor.tokens_after, completion.usage, "" if continued else streamed_text
        )
        self._show_sync_text(streamed_text, completion.text)
        return completion, await self._announce_calls(completion.tool_calls)

    def _show_sync_text(self, streamed: str, text: str) -> None:
        """Show the synchronous call's text where it differs from what was streamed: what
        continues the streamed text is appended; other text replaces it, for the clients
        that asked for revisions. The others keep what they were shown (ACP clients append
        every chunk: a revision would show both texts); the history holds `text`."""
        if text.startswith(streamed):
            if text != streamed:
                self._send(updates.message_chunk(self._message_id, text[len(streamed) :]))
        elif self.ports.wants_revisions:
            self._send(updates.message_chunk(self._message_id, text, replaces=self._message_id))

    def _show_complete_reply(self, completion: Completion) -> None:
        for thought in completion.thinking:
            if thought.text:
                self._send(updates.thought_chunk(new_id("thought"), thought.text))
        if completion.text:
            self._send(updates.message_chunk(self._message_id, completion.text))

    async def _announce_calls(self, calls: tuple[CompletedToolCall, ...]) -> list[str]:
        """The toolCallIds of the complete calls: those the stream announced keep their id
        (corrected if the name changed); announced calls that did not happen are superseded.
        Each call's arguments come with how to show it (title, locations, content)."""
        call_ids = []
        for position, call in enumerate(calls):
            kind = self.session.tools.kind_of(call.name)
            changed_kind = None
            if position < len(self._announced):
                call_id, announced_name = self._announced[position]
                if call.name != announced_name:
                    changed_kind = kind
            else:
                call_id = new_id("call")
                self._send(updates.tool_call(call_id, call.name, kind))
                self._announced.append((call_id, call.name))  # settled if the turn ends here
            view = await self._view_of(call_id, call.name, call.arguments)
            if position == 0:
                self._reusable_view = (call_id, view)
            self._send(
                updates.tool_call_update(
                    call_id,
                    kind=changed_kind,
                    raw_input=call.arguments,
                    **updates.call_view(view),
                )
            )
            call_ids.append(call_id)
        for call_id, _ in self._announced[len(calls) :]:
            self._send(
                updates.tool_call_update(
                    call_id,
                    status="failed",
                    text="The model did not make this call after all.",
                    meta={"parley": {"superseded": True}},
                )
            )
        self._announced = []
        return call_ids

    async def _view_of(self, call_id: str, name: str, arguments: Any) -> CallView:
        """How the call is shown: computed off the event loop (an edit's view reads and
        diffs the whole file), and remembered (title, files) for its stored result."""
        view = await off_loop(self.session.tools.view_of, name, arguments)
        shown = updates.call_view(view)
        shown.pop("content", None)
        self._shown[call_id] = shown
        return view

    def _commit_assistant(self, message: AssistantMessage) -> None:
        self._streamed_text = None
        # Owed results first: if storing the message fails, it is in the history already.
        self._unanswered = list(message.tool_calls)
        if message.text or message.thinking or message.tool_calls:
            self.session.add_message(message)

    def _stopped_by_budget(self) -> bool:
        """After a round that calls tools: past a budget, no further model call. Its calls
        are not run (the model would never see their results); the user is told why."""
        spent = budgets.overrun(self.session, self.settings)
        if spent is None:
            return False
        self._overrun = spent  # the turn's notice says so (`_result`)
        self._settle_interrupted("Not run: the turn stopped at its budget.")
        return True

    # --- tools --------------------------------------------------------------------------

    async def _run_tools(self, calls: tuple[ToolCall, ...]) -> bool:
        """Run the calls in order; True when the circuit breaker ends the turn."""
        for call in calls:
            started_at = now_iso()
            result = await self._run_tool(call)
            self._unanswered.remove(call)
            self.session.add_message(
                ToolResultMessage(
                    call.id,
                    call.name,
                    result.content,
                    result.is_error,
                    wire_id=call.wire_id,
                    raw_output=updates.raw_output(
                        result.raw_output, result.content, result.is_error
                    ),
                    shown=_with_images(self._shown.pop(call.wire_id, None), result),
                    started_at=started_at,
                    ended_at=now_iso(),
                )
            )
            if self._trips_circuit_breaker(call, result):
                self._tripped = notices.circuit_breaker(
                    call.name, CIRCUIT_BREAKER_ERRORS, result.content
                )
                self._settle_interrupted("Not run: the turn was stopped after repeated errors.")
                return True
        return False

    async def _run_tool(self, call: ToolCall) -> ToolResult:
        self.stats.tool_calls += 1
        if call.arguments_error:  # the model's call could not be read: say exactly why
            return self._finish_call(call, ToolResult(call.arguments_error, is_error=True))
        tool = self.session.tools.get(call.name)
        if tool is None:
            available = ", ".join(self.session.tools.names()) or "none"
            return self._finish_call(
                call, ToolResult(f"There is no tool named {call.name!r}. Tools: {available}.", True)
            )
        not_offered = modes.refusal(tool.spec, self.session.settings.mode)  # Plan mode's: not run
        if not_offered is not None:
            return self._finish_call(call, ToolResult(not_offered, is_error=True))
        context = ToolContext(
            self.session.id,
            call.wire_id,
            self.session.root,
            self.ports.client_files,
            client_writes=self.ports.client_writes,
            edit_journal=self._checkpoints,
            send_update=self._send,
            terminals=self.ports.client_terminals,
            roots=self.session.roots.all,
        )
        if not await self._permission.runs_unasked(tool, call, lambda: self._current_view(call)):
            failure = await precheck(tool, call, context)
            if failure is not None:
                return self._finish_call(call, failure)
            refusal = await self._permission.ask(
                call, tool.spec.kind, lambda: self._current_view(call)
            )
            if refusal is not None:
                return self._finish_call(call, ToolResult(refusal, is_error=True))
        self._send(updates.tool_call_update(call.wire_id, status="in_progress"))
        self._reusable_view = None  # the call may change what the next ones would do
        try:
            if self._checkpoints is not None:  # every root, when the tool's kind can write
                await self._checkpoints.before_call(tool.spec.kind, call.name)
            result = await tool.run(call.arguments, context)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.exception("Tool %s raised", call.name)
            result = ToolResult(f"{call.name} failed: {type(error).__name__}: {error}", True)
        finally:
            if self._checkpoints is not None:
                await self._checkpoints.after_call()  # what a restore expects to find
        return self._finish_call(call, result)

    async def _current_view(self, call: ToolCall) -> CallView:
        """The call's view as it would run now: the one it was announced with when no tool
        ran since, else computed again."""
        reusable, self._reusable_view = self._reusable_view, None
        if reusable is not None and reusable[0] == call.wire_id:
            return reusable[1]
        return await self._view_of(call.wire_id, call.name, call.arguments)

    def _finish_call(self, call: ToolCall, result: ToolResult) -> ToolResult:
        if len(result.content) > TOOL_RESULT_LIMIT:
            cut = len(result.content) - TOOL_RESULT_LIMIT
            result = attrs.evolve(
                result,
                content=f"{result.content[:TOOL_RESULT_LIMIT]}\n[… {cut:,} more characters cut]",
            )
        self._send(
            updates.tool_call_update(
                call.wire_id,
                status="failed" if result.is_error else "completed",
                raw_output=updates.raw_output(result.raw_output, result.content, result.is_error),
                text=result.content,
                diffs=result.diffs,
                first=result.shown_first,
            )
        )
        return result

    def _trips_circuit_breaker(self, call: ToolCall, result: ToolResult) -> bool:
        if not result.is_error:
            self._error_streak = ("", 0)
            return False
        signature = json.dumps([call.name, call.arguments, result.content], sort_keys=True)
        previous, count = self._error_streak
        count = count + 1 if signature == previous else 1
        self._error_streak = (signature, count)
        return count >= CIRCUIT_BREAKER_ERRORS

    # --- accounting and bookkeeping -----------------------------------------------------

    def _count(self, usage: Usage | None, call: str) -> None:
        """Count one model call (`call`: "stream" or "sync"): the only place tokens are added."""
        self._uncounted_call = False
        if usage is None:
            self.stats.usage_complete = False
        counted = count_call(
            self.session, self.settings, self._send, self.stats.model, usage, call, self._window
        )
        self.stats.spent.add_call(counted.usage, counted.cost, counted.breakdown)

    def _count_cut_off(self, cancelled: bool) -> None:
        """Count a model call cut off before its usage came: what the provider reported of it
        (Anthropic's input, at the stream's start), else Parley's estimate (the request, and
        the characters streamed back), stored as an `estimate`. A call stopped by the user
        was read by the provider; a failed one is counted only if it streamed anything (an
        error answered at once generated nothing)."""
        stream = self._stream  # None: the call cut off was a synchronous one
        streamed_chars = 0
        if stream is not None:  # (a discarded stream's text is not the sync call's output)
            streamed_chars = sum(map(len, self._streamed_text or ())) + self._streamed_thought_chars
        if not cancelled and not streamed_chars:
            return
        reported = stream.usage_so_far() if stream is not None else None
        input_tokens = (reported.input_tokens if reported else 0) or self._compactor.tokens_after
        output_tokens = max(
            reported.output_tokens if reported else 0, estimate_tokens(streamed_chars)
        )
        usage = Usage(input_tokens, output_tokens, thought_tokens=None)
        counted = count_call(
            self.session,
            self.settings,
            self._send,
            self.stats.model,
            usage,
            "estimate",
            self._window,
        )
        self.stats.spent.add_call(counted.usage, counted.cost, counted.breakdown, estimated=True)
        self._uncounted_call = False

    def _settle_interrupted(self, reason: str, stopped: str | None = None) -> None:
        """Leave a history the provider accepts: keep the text streamed so far (marked
        `stopped`, why the turn ended there), and answer every call of the last assistant
        message that has no result yet. A model call cut off is counted as an estimate
        (`_count_cut_off`), and leaves the turn's usage incomplete: the provider never
        reported it."""
        if self._uncounted_call:
            self.stats.usage_complete = False
            self._count_cut_off(cancelled=stopped == "cancelled")
        if self._streamed_text:
            self.session.add_message(
                AssistantMessage(
                    "".join(self._streamed_text), message_id=self._message_id, stopped=stopped
                )
            )
        self._streamed_text = None
        for call_id, _ in self._announced:
            self._send(updates.tool_call_update(call_id, status="failed", text=reason))
        self._announced = []
        for call in self._unanswered:
            self._send(updates.tool_call_update(call.wire_id, status="failed", text=reason))
            shown = self._shown.pop(call.wire_id, None)
            self.session.add_message(
                ToolResultMessage(call.id, call.name, reason, True, call.wire_id, shown=shown)
            )
        self._unanswered = []

    def _set_title_from_prompt(self) -> None:
        if self.session.title is None:
            self.session.title = title_from_prompt(self.prompt.as_text())
            self.session.save()
            self._send(updates.session_info(title=self.session.title, updated_at=now_iso()))

    def _send(self, update: dict[str, Any]) -> None:
        self.ports.send_update(self.session.id, update)


def session_request(
    session: Session, settings: Settings, resolved: ResolvedModel, thinking: Thinking
) -> ModelRequest:
    """The request a round of the session sends the model now (`/compact` measures it too)."""
    model_config = settings.model_config(resolved.id)
    messages = tuple(compacted_view(session.history, session.compaction))
    if not settings.takes_images(resolved.id):  # images of earlier prompts, as notes
        messages = without_images(messages)
    return ModelRequest(
        model=resolved.model,
        system=modes.system_text(session.system_text(), session.settings.mode),
        messages=messages,
        tools=modes.offered_specs(session.tools.specs(), session.settings.mode),
        max_tokens=model_config.max_tokens,
        thinking_budget=thinking.budget_tokens,
        reasoning_effort=thinking.reasoning_effort,
        cache_key=session.id,
    )


def still_too_long(
    refusal: ProviderError, window: int, refused_tokens: int, retried_tokens: int
) -> ProviderError:
    """The error a turn ends with when the compacted request is refused as well."""
    return ProviderError(
        f"The conversation is too long for this model's context window of {window:,} tokens, "
        f"even compacted ({refused_tokens:,} → {retried_tokens:,} tokens, estimated). The next "
        f"prompt compacts what this turn added; a shorter prompt or fewer files attached may "
        f"be needed. ({refusal.message})",
        provider=refusal.provider,
        type="context_exceeded",
        status=refusal.status,
        context_exceeded=True,
        window=window,
    )


def refused_by_budget(session: Session, settings: Settings) -> TurnResult | None:
    """A turn past its session's or the day's budget does not start: no model call, the
    prompt not kept (ACP's `refusal`), and its notice tells the user why. None: it may
    start."""
    spent = budgets.overrun(session, settings)
    if spent is None:
        return None
    return TurnResult(
        "refusal",
        TurnStats(model=session.settings.model),
        attrs.evolve(session.totals),
        notices.budget_spent(spent, starting=True),
    )


def _with_images(shown: dict[str, Any] | None, result: ToolResult) -> dict[str, Any] | None:
    """How the call was shown, with the images its result showed (an evaluation's plots):
    stored with the result, so a replay shows them again."""
    images = images_shown(result.shown_first)
    return {**(shown or {}), "images": images} if images else shown
