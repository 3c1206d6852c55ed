"""Thousands of malformed frames and messages against one long-running server per framing.

Hypothesis throws random bytes, truncated JSON, messages with wrong types for every field,
responses with odd error shapes, deep nesting, lone surrogates and (LSP) broken headers,
interleaved with valid requests. Each valid request gets exactly one answer with its id; the
server never dies, still serves afterwards, and its memory stays flat.

`PARLEY_FUZZ_EXAMPLES` sets the examples per framing (default 400: some 3,000 frames in all).
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import server_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.fakellm import FakeLLM
from test_server_robustness import RawServer

settings.register_profile(
    "wire-fuzz",
    max_examples=int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "400")),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

# Memory the server may gain over the run, after a warm-up of the same kinds of input.
RSS_GROWTH_LIMIT_MIB = 32

_valid_ids = (f"ok-{n}" for n in itertools.count())

# --- messages ----------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=16)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Never an id of the valid requests (they are "ok-N").
fuzz_ids = (
    st.integers(min_value=-3, max_value=50)
    | st.text(max_size=8).filter(lambda text: not text.startswith("ok-"))
    | json_values
)
methods = (
    st.sampled_from(
        [
            "initialize",
            "session/new",
            "session/load",
            "session/list",
            "session/cancel",
            "session/delete",
            "session/set_mode",
            "_parley/usage",
            "_parley/models",
            "_parley/session/configure",
            "session/prompt",
            "$/cancelRequest",
            "$/cancel_request",
            "no/such/method",
        ]
    )
    | st.text(max_size=12)
    | json_values
)
error_shapes = json_values | st.fixed_dictionaries(
    {},
    optional={
        "code": st.integers() | json_values,
        "message": st.text(max_size=20) | json_values,
        "data": json_values,
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0"]) | json_values,
        "id": fuzz_ids,
        "method": methods,
        "params": json_values,
        "result": json_values,
        "error": error_shapes,
    },
)
# Well-formed requests and notifications to real methods, with params of any shape.
requests = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": methods, "params": json_values},
    optional={
        "id": st.integers(0, 50) | st.text(max_size=8).filter(lambda t: not t.startswith("ok-"))
    },
)
message_texts = (messages | requests).map(json.dumps) | st.builds(
    lambda m: m.replace('"', '"\\ud800', 1), messages.map(json.dumps)
)  # a lone surrogate escape somewhere (or a broken string)


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    text = draw(message_texts).encode()
    return text[: draw(st.integers(0, max(0, len(text) - 1)))]


@st.composite
def deep(draw: st.DrawFn) -> bytes:
    depth = draw(st.sampled_from([500, 990, 1_100, 5_000, 100_000]))
    nest = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
    inner = nest[0] * depth + b"1" + nest[1] * depth
    where = draw(st.sampled_from(["top", "params", "id", "error", "unclosed"]))
    if where == "top":
        return inner
    if where == "unclosed":
        return b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":' + nest[0] * depth
    if where == "error":
        return b'{"jsonrpc":"2.0","id":7,"error":' + inner + b"}"
    return b'{"jsonrpc":"2.0","id":%s,"method":"initialize","params":%s}' % (
        inner if where == "id" else b"3",
        inner if where == "params" else b"{}",
    )


bodies = (
    st.binary(max_size=300)
    | truncated()
    | message_texts.map(str.encode)
    | deep()
    | st.sampled_from([b"", b"null", b"[]", b"{}", b"1", b'"x"', b"NaN", b"\xff\xfe\x00"])
)


def _no_header(data: bytes) -> bool:
    # Garbage that holds a Content-Length header would frame the next message itself.
    return b"content-length" not in data.lower()


@st.composite
def lsp_chunks(draw: st.DrawFn) -> bytes:
    body = draw(bodies)
    kind = draw(
        st.sampled_from(
            [
                "framed",
                "framed",
                "framed",
                "garbage",
                "bad length",
                "no blank line",
                "oversized",
                "huge header",
                "many headers",
                "no length",
            ]
        )
    )
    if kind == "framed":
        extra = draw(st.sampled_from([b"", b"Content-Type: application/vscode-jsonrpc\r\n"]))
        return b"Content-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)
    body = body if _no_header(body) else b"x"
    if kind == "garbage":
        return body
    if kind == "bad length":
        value = draw(st.sampled_from([b"abc", b"-1", b"", b"1e3", b"0x10", b"5 5", b"+3"]))
        return b"Content-Length: " + value + b"\r\n\r\n" + body
    if kind == "no blank line":
        text = draw(message_texts).encode()  # JSON: no raw newline in it
        text = text if _no_header(text) else b"{}"
        return b"Content-Length: %d\r\n" % len(text) + text
    if kind == "oversized":
        return b"Content-Length: %d\r\n\r\n" % draw(st.integers(2**26 + 1, 10**14)) + body
    if kind == "huge header":
        return b"X-Junk: " + b"j" * draw(st.integers(1_000, 100_000)) + b"\r\n"
    if kind == "many headers":
        return b"X-A: b\r\n" * draw(st.integers(1, 60))
    return b"Content-Type: x\r\n\r\n" + body


@st.composite
def ndjson_chunks(draw: st.DrawFn) -> bytes:
    return draw(bodies) + b"\n"


def framed(body: bytes, framing: str) -> bytes:
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def valid_request(msg_id: str, framing: str) -> bytes:
    body = {"jsonrpc": "2.0", "id": msg_id, "method": "_parley/models", "params": {}}
    return framed(json.dumps(body).encode(), framing)


# --- the servers -------------------------------------------------------------------------


class Fuzzed:
    """One server and what it answered: every response's id counted."""

    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.answers: Counter[str] = Counter()
        self.sent: list[str] = []
        self.baseline_kib: int | None = None  # RSS after the warm-up

    def send_valid(self) -> str:
        msg_id = next(_valid_ids)
        self.sent.append(msg_id)
        self.server.send_raw(valid_request(msg_id, self.server.framing))
        return msg_id

    def wait_for(self, msg_id: str) -> None:
        """Read answers up to the one for `msg_id` (answers come in order of the requests
        here: `_parley/models` is answered as soon as it is read)."""
        while True:
            message = self.server.receive(timeout=30)
            if "method" in message:
                continue
            answer_id = message.get("id")
            if isinstance(answer_id, str) and answer_id.startswith("ok-"):
                self.answers[answer_id] += 1
                assert "result" in message and "models" in message["result"], message
                if answer_id == msg_id:
                    return


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module", params=["lsp", "ndjson"])
def fuzzed(request, fake_llm: FakeLLM, tmp_path_factory) -> Iterator[Fuzzed]:
    home: Path = tmp_path_factory.mktemp("home")
    server = RawServer(server_env(fake_llm, home), framing=request.param)
    fuzzed = Fuzzed(server)
    yield fuzzed
    if server.process.poll() is None:
        server.process.kill()


WARM_UP = [
    b"[" * 100_000,
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":' + b"{" * 50_000,
    b"\xff" * 300,
    b'{"jsonrpc":"2.0","id":"\\udc00","method":"no/such"}',
]


@settings(settings.get_profile("wire-fuzz"))
@given(data=st.data())
def test_no_frame_kills_or_deafens_the_server(fuzzed: Fuzzed, data: st.DataObject) -> None:
    server = fuzzed.server
    if fuzzed.baseline_kib is None:  # first example: warm up, then take the memory baseline
        for body in WARM_UP:
            server.send_raw(framed(body, server.framing))
        fuzzed.wait_for(fuzzed.send_valid())
        fuzzed.baseline_kib = server.rss_kib()

    chunks = ndjson_chunks() if server.framing == "ndjson" else lsp_chunks()
    items = data.draw(st.lists(chunks | st.just(None), min_size=1, max_size=8))
    for item in items:
        if item is None:  # a valid request, between the malformed ones
            fuzzed.send_valid()
        else:
            server.send_raw(item)
    fuzzed.wait_for(fuzzed.send_valid())  # every example ends with one
    assert server.process.poll() is None, server.stderr()[-2000:]


def test_afterwards_every_valid_request_was_answered_once_and_memory_is_flat(
    fuzzed: Fuzzed,
) -> None:
    if not fuzzed.sent:  # pytest-xdist ran the fuzz test on another worker: fuzz this server
        test_no_frame_kills_or_deafens_the_server(fuzzed)
    assert fuzzed.sent, "the fuzz test ran first"
    fuzzed.wait_for(fuzzed.send_valid())  # the server still serves; earlier answers are in
    assert {msg_id: fuzzed.answers[msg_id] for msg_id in fuzzed.sent} == dict.fromkeys(
        fuzzed.sent, 1
    )
    assert fuzzed.baseline_kib is not None
    grown_mib = (fuzzed.server.rss_kib() - fuzzed.baseline_kib) / 1024
    assert grown_mib < RSS_GROWTH_LIMIT_MIB, f"RSS grew {grown_mib:.1f} MiB"
    assert fuzzed.server.close() == 0
