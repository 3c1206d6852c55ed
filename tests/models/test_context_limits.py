"""Reading a window out of what a provider says: a new input surface, under property tests.

A refusal's text and body, llama.cpp's `/props` and Ollama's `/api/show` are whatever the
server (or anything answering at its address) sends. Whatever they hold, reading them never
raises and never yields a nonsense window (0, negative, above 10^8); the real phrasings
yield exactly the window they name.
"""

from __future__ import annotations

import http.server
import threading
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from parley.fakellm import ContextLimit
from parley.fakellm.context_limit import ollama_show_body, props_body
from parley.providers.context_limits import (
    MAX_WINDOW,
    MIN_WINDOW,
    server_root,
    window_from_server,
    window_in_message,
    window_in_ollama_show,
    window_in_props,
    window_in_refusal,
)
from parley.providers.errors import SDKErrors, provider_error

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)

# Each provider's wording, with the window and the request's size to fill in.
PHRASINGS = [
    "This model's maximum context length is {window} tokens. However, your messages resulted "
    "in {size} tokens. Please reduce the length of the messages.",  # OpenAI
    "This model's maximum context length is {window} tokens. However, you requested {size} "
    "tokens ({size} in the messages, 0 in the completion). Please reduce the length of the "
    "messages or completion.",  # vLLM
    "request ({size} tokens) exceeds the available context size ({window} tokens), try "
    "increasing it",  # llama.cpp
    "input ({size} tokens) is larger than the max context size ({window} tokens). skipping",
    "prompt is too long: {size} tokens > {window} maximum",  # Anthropic
    "input length and `max_tokens` exceed context limit: {size} + 4096 > {window}, decrease "
    "input length or `max_tokens` and try again",  # Anthropic, with max_tokens
    "The decoder prompt (length {size}) is longer than the maximum model length of {window}. "
    "Make sure that `max_model_len` is no smaller than the number of text tokens.",  # vLLM V1
    # Ollama (since ollama/ollama#16712): llama.cpp's error body, quoted as its message
    '{{"error":{{"code":400,"message":"request ({size} tokens) exceeds the available context '
    'size ({window} tokens), try increasing it","type":"exceed_context_size_error",'
    '"n_prompt_tokens":{size},"n_ctx":{window}}}}}',
]

windows = st.integers(MIN_WINDOW, MAX_WINDOW)
# Text that names no window itself: no ASCII digit (so no figure joins the phrasing's).
plain_text = st.text(st.characters(blacklist_characters="0123456789"), max_size=200)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=30), inner),
    max_leaves=20,
)


def is_sane(window: int | None) -> bool:
    return window is None or (type(window) is int and MIN_WINDOW <= window <= MAX_WINDOW)


@PROPERTY_SETTINGS
@given(st.text(max_size=400))
@example("maximum context length is 0 tokens")
@example("maximum context length is 99999999999999999999999 tokens")
@example("maximum context length is 1,000,000,000 tokens")
@example("available context size (-5 tokens)")
@example("prompt is too long: 5 tokens > 10 maximum")
@example("prompt is too long: 300000 tokens > " + "9" * 5000 + " maximum")
def test_any_text_gives_no_window_or_a_sane_one(text: str) -> None:
    assert is_sane(window_in_message(text))


@PROPERTY_SETTINGS
@given(st.sampled_from(PHRASINGS), windows, st.integers(0, 10**12), plain_text, plain_text)
def test_each_real_phrasing_gives_its_window_whatever_surrounds_it(
    phrasing: str, window: int, size: int, before: str, after: str
) -> None:
    message = before + phrasing.format(window=window, size=size) + after
    assert window_in_message(message) == window


@PROPERTY_SETTINGS
@given(st.sampled_from(PHRASINGS), st.integers(MAX_WINDOW + 1, 10**30) | st.integers(-5, 255))
def test_a_figure_out_of_range_is_no_window(phrasing: str, figure: int) -> None:
    assert window_in_message(phrasing.format(window=figure, size=figure)) is None


@PROPERTY_SETTINGS
@given(
    st.sampled_from(PHRASINGS),
    st.text(st.characters(whitelist_categories=["Nd"]), min_size=1, max_size=12),
)
def test_digits_of_other_scripts_are_never_read_as_a_window(phrasing: str, digits: str) -> None:
    assume(not digits.isascii())
    # Python's int() reads Arabic-Indic "15000" as 15000: such digits are not taken at all.
    assert window_in_message(phrasing.format(window=digits, size=digits)) is None


@PROPERTY_SETTINGS
@given(json_values, st.text(max_size=200))
@example({"error": {"n_ctx": True}}, "")
@example({"error": {"n_ctx": 10**40}}, "")
@example({"error": {"n_ctx": 15000.0}}, "")
@example({"error": {"n_ctx": "15000"}}, "")
@example({"error": {"code": [], "type": {}}}, "")
def test_any_refusal_body_gives_no_window_or_a_sane_one(body: Any, text: str) -> None:
    assert is_sane(window_in_refusal(body, text))


def test_llamacpp_n_ctx_in_the_body_is_the_window() -> None:
    body = {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 9, "n_ctx": 4096}}
    assert window_in_refusal(body, "the request exceeds the available context size") == 4096


@PROPERTY_SETTINGS
@given(json_values)
@example({"default_generation_settings": {"n_ctx": 0}})
@example({"default_generation_settings": {"n_ctx": 2**63}})
@example({"parameters": "num_ctx " + "9" * 5000})
@example({"parameters": "num_ctx \u0661\u0665\u0660\u0660\u0660"})
@example({"model_info": {"general.architecture": "x", "x.context_length": -1}})
@example({"model_info": {"general.architecture": ["x"]}})
def test_any_server_answer_gives_no_window_or_a_sane_one(answer: Any) -> None:
    assert is_sane(window_in_props(answer))
    assert is_sane(window_in_ollama_show(answer))


@pytest.mark.parametrize("show", ["num_ctx", "model_info"])
def test_the_servers_answers_as_they_are_sent(show: str) -> None:
    limit = ContextLimit(15_000, form="unstated", props=True, ollama_show=show)
    assert window_in_props(props_body(limit)) == 15_000
    # num_ctx, the window the model runs with, wins over the (larger) trained length.
    assert window_in_ollama_show(ollama_show_body(limit)) == 15_000


@PROPERTY_SETTINGS
@given(st.text(max_size=100))
@example("http://[::1")
@example("http://localhost:11434/v1")
def test_any_base_url_gives_a_root_or_none(base_url: str) -> None:
    root = server_root(base_url)
    assert root is None or (root.startswith(("http://", "https://")) and not root.endswith("/v1"))


def test_the_root_drops_only_a_final_v1() -> None:
    assert server_root("http://localhost:11434/v1") == "http://localhost:11434"
    assert server_root("http://gpu-box:8080/v1/") == "http://gpu-box:8080"
    assert server_root("https://proxy.example/llm/v1") == "https://proxy.example/llm"
    assert server_root("file:///etc/passwd") is None


def test_each_local_servers_overflow_is_a_context_refusal_naming_its_window() -> None:
    """vLLM's (V0 and V1), llama.cpp's and Ollama's words for a prompt over the window, as
    their OpenAI-compatible endpoints answer them: each is a context refusal (compaction is
    tried) with the window it names."""
    request = httpx2.Request("POST", "http://localhost:8000/v1/chat/completions")
    for phrasing in PHRASINGS:
        text = phrasing.format(window=4096, size=5000)
        body = {"error": {"message": text, "type": "BadRequestError", "code": 400}}
        error = openai.BadRequestError(
            text, response=httpx2.Response(400, request=request), body=body
        )
        translated = provider_error("vllm", error, SDKErrors.of(openai, openai.OpenAIError))
        assert translated.context_exceeded, phrasing
        assert translated.window == 4096, phrasing


@settings(max_examples=150, deadline=None)
@given(json_values, st.text(max_size=200))
@example({"error": {"code": ["context_length_exceeded"]}}, "")
@example({"error": {"message": "x", "code": {"a": 1}}}, "context length")
def test_any_400_body_becomes_a_provider_error_with_a_sane_window(body: Any, text: str) -> None:
    request = httpx2.Request("POST", "https://api.example/v1/chat/completions")
    response = httpx2.Response(400, request=request)
    error = openai.BadRequestError(text, response=response, body=body)
    translated = provider_error("openai", error, SDKErrors.of(openai, openai.OpenAIError))
    assert translated.status == 400
    assert is_sane(translated.window)
    assert translated.window is None or translated.context_exceeded


class _HostileServer(http.server.BaseHTTPRequestHandler):
    """`/props`: a body past the size cap; `/api/show`: not JSON."""

    def do_GET(self) -> None:
        body = b'{"default_generation_settings": {"n_ctx": 4096}, "pad": "' + b"x" * 5_000_000
        self._answer(body + b'"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(b'{"parameters": "num_ctx 4096"')  # cut short

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_a_server_answering_too_much_or_badly_or_nothing_gives_no_window() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert await window_from_server(base_url, "m", "sk-test") is None
    finally:
        server.shutdown()
        server.server_close()
    assert await window_from_server(base_url, "m", None) is None  # nobody listens now
