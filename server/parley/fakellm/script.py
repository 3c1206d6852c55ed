"""What the fake LLM answers: scripted replies, pacing and faults.

A `Script` is a list of `Reply`s. A request is answered by the reply whose index is the
number of assistant messages in the request's conversation (OpenAI: messages with role
"assistant"; Anthropic: the same), so the streamed call and the synchronous call of one
hybrid round — which send the same messages — get the same reply, and a second round (which
carries the first round's assistant message) gets the next one. Past the end of the list the
last reply is served again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class ScriptedToolCall:
    """A tool call the model makes. `id` defaults to a provider-shaped id (call_…/toolu_…)."""

    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    id: str | None = None


@attrs.frozen
class Pacing:
    """How fast the fake streams: a delay before the first chunk, then chunks per second."""

    first_token_delay: float = 0.0
    chunks_per_second: float | None = None  # None: as fast as the socket takes them


@attrs.frozen
class Fault:
    """Something that goes wrong with a request, for the first `times` requests it applies to.

    kind:
      - "http": answer `status` with the provider's error body (429 with `retry_after`
        seconds in a retry-after header, 500, 529 ...);
      - "drop": stream `after_chunks` chunks, then close the connection without ending it;
      - "error_event": stream `after_chunks` chunks, then an error inside the 200 stream
        (OpenAI: a `data: {"error": ...}` chunk; Anthropic: `event: error`);
      - "stall": stream `after_chunks` chunks, then send nothing for `stall_seconds`;
      - "hold": stream `after_chunks` chunks, then send nothing until the test calls
        `FakeLLM.release()` (in-process only): a turn kept running for exactly as long as a
        test needs it, instead of a stream paced to outlast it;
      - "echo_headers": answer `status` with an error body that quotes the request's headers,
        API key included, as a misconfigured gateway does.
    `message`: the error body's message for "http" (None: the provider's usual one).
    `streaming_only`: the fault applies only to streaming requests (a synchronous call of
    the same round then succeeds).
    """

    kind: str
    status: int = 500
    retry_after: float | None = None
    after_chunks: int = 0
    stall_seconds: float = 30.0
    times: int = 1
    streaming_only: bool = False
    message: str | None = None


@attrs.frozen
class Reply:
    """One model response, rendered in whichever wire format the request asked for.

    - `text`: the answer text, streamed in `chunk_size`-character deltas (or split on
      `chunks`, when given, exactly).
    - `thinking`: reasoning, streamed first (OpenAI: `reasoning_content` deltas; Anthropic:
      a thinking block with `thinking_delta`s and a `signature_delta`).
    - `tool_calls`: after the text (OpenAI: `delta.tool_calls`, the first delta carrying
      id and name, arguments in pieces; Anthropic: `tool_use` blocks with `input_json_delta`).
    - `finish_reason`: None means the natural one (OpenAI `tool_calls`/`stop`, Anthropic
      `tool_use`/`end_turn`); set it to send e.g. `stop` with a tool call.
    - `usage`: (input_tokens, output_tokens) reported for this reply; None reports none.
      `input_tokens` is every prompt token, cached or not.
    - `cache`: (read, written) prompt tokens, parts of `usage`'s input, reported in each
      provider's real shape: Anthropic's `cache_read_input_tokens` and
      `cache_creation_input_tokens` (its `input_tokens` is then the rest); OpenAI's
      `prompt_tokens_details.cached_tokens` (reads only: OpenAI reports no writes).
    - `redacted_thinking`: Anthropic only, `redacted_thinking` blocks (their opaque `data`)
      after the thinking; OpenAI has no such thing and sends nothing for them.
    - `byte_cuts`: offsets in the streamed bytes where they are cut into separate writes
      (one HTTP chunk each) instead of one per event, so a reader gets events split
      anywhere, mid-line or mid-character; a fault's `after_chunks` then counts these pieces
      (a drop can cut an event in two).
    - `sync`: a different reply served to non-streaming requests (to test revisions).
    - `raw_stream` / `raw_json`: a recorded body (an `.sse` file, or a `.json` file whose `#`
      lines are stripped) served verbatim instead of rendering the fields above.
    """

    text: str = ""
    thinking: str = ""
    redacted_thinking: tuple[str, ...] = ()
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    finish_reason: str | None = None
    usage: tuple[int, int] | None = (10, 5)
    cache: tuple[int, int] | None = None
    chunk_size: int = 4
    chunks: tuple[str, ...] | None = None
    pacing: Pacing = Pacing()
    byte_cuts: tuple[int, ...] | None = None
    fault: Fault | None = None
    sync: Reply | None = None
    raw_stream: Path | None = None
    raw_json: Path | None = None


@attrs.frozen
class RecordedRequest:
    """One request the fake received, for tests to assert on."""

    path: str  # "/v1/chat/completions" or "/v1/messages"
    api: str  # "openai" or "anthropic"
    stream: bool
    body: dict[str, Any]
    reply_index: int
    chunks_total: int  # chunks the reply had to send (0 for a JSON answer or an HTTP fault)
    chunks_sent: int  # chunks written before the end or the hang-up
    client_hung_up: bool  # the client closed the connection before the reply was complete
    status: int
    started_at: float  # time.monotonic()
    ended_at: float
    # time.monotonic() when each sent chunk was written, for benchmarks that time a chunk's
    # way to a client in the same process (a tuple, also when rebuilt from JSON lists).
    chunk_write_times: tuple[float, ...] = attrs.field(default=(), converter=tuple)
