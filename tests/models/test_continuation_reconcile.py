"""A continued answer reconciled with the streamed text (`parley.providers.continuation`):
the stored reply is the streamed text once, then the new part — whatever the server
repeated — or the answer alone when it is no continuation (never both).

The real servers' behaviours these stand for are exercised in tests/models/test_llamacpp_real.py."""

from __future__ import annotations

import http.server
import json
import string
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import attrs
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from parley.providers.continuation import (
    PROBE_PREFIX,
    ServerContinuation,
    continued_prompt_form,
    looks_regenerated,
    new_part,
    probe_continuation,
    served_by_vllm,
)

TEXT = st.text(alphabet=string.printable + "é€😀<>/", max_size=40)
WORDS = st.text(alphabet=string.ascii_letters + string.punctuation + " ", min_size=1, max_size=40)
ECHOES = st.sampled_from([None, True, False])


def stored(streamed: str, answer: str, echoes: bool | None) -> str:
    rest = new_part(streamed, answer, echoes)
    return answer if rest is None else streamed + rest


@given(streamed=TEXT, answer=TEXT, echoes=ECHOES)
def test_the_new_part_is_always_the_end_of_the_answer(
    streamed: str, answer: str, echoes: bool | None
) -> None:
    rest = new_part(streamed, answer, echoes)
    assert rest is None or answer.endswith(rest)


@given(streamed=TEXT, rest=TEXT, echoes=ECHOES)
@example(streamed="Let me look.", rest="", echoes=None)  # llama.cpp b11549, the case
@example(streamed="ab", rest="ab", echoes=True)  # a rest that starts like the prefix
def test_an_answer_that_repeats_the_streamed_text_is_not_stored_twice(
    streamed: str, rest: str, echoes: bool | None
) -> None:
    assume(streamed.strip())
    assert stored(streamed, streamed + rest, echoes) == streamed + rest


@given(streamed=WORDS, rest=TEXT, think=st.sampled_from(["think", "thinking"]))
def test_an_empty_think_block_before_the_repeated_text_is_dropped(
    streamed: str, rest: str, think: str
) -> None:
    """Qwen3's template puts `<think>\\n\\n</think>\\n\\n` before a prefill, and llama.cpp
    echoes it with the prefix."""
    assume(streamed.strip() and not streamed.lstrip().startswith("<"))
    answer = f"<{think}>\n\n</{think}>\n\n{streamed}{rest}"
    assert stored(streamed, answer, None) == streamed + rest


@given(
    core=WORDS,
    before=st.text(" \n\t", max_size=3),
    after=st.text(" \n\t", max_size=3),
    rest=st.text(alphabet=string.ascii_letters + "<>{}", max_size=20),
)
def test_a_repetition_without_the_outer_whitespace_keeps_the_streamed_whitespace(
    core: str, before: str, after: str, rest: str
) -> None:
    """A server that strips the prefill echoes `core`; the user saw `before+core+after`."""
    core = core.strip()
    assume(core)
    streamed = before + core + after
    assert stored(streamed, core + rest, None) == streamed + rest
    assert stored(streamed, core + after + rest, None) == streamed + rest


@given(streamed=WORDS, rest=TEXT)
def test_a_server_that_sends_only_the_new_part_gets_it_appended(streamed: str, rest: str) -> None:
    assume(streamed.strip() and not rest.lstrip().startswith(streamed.strip()[:1]))
    assert stored(streamed, rest, False) == streamed + rest
    assert stored(streamed, rest, None) == streamed + rest


def test_a_server_known_to_repeat_the_prefix_that_did_not_wrote_a_new_reply() -> None:
    """--no-prefill-assistant: the server regenerated; the reply is the answer alone."""
    assert new_part("Let me look.", "I will read it.", echoes=True) is None
    assert stored("Let me look.", "I will read it.", True) == "I will read it."


HEAD = st.text(alphabet=string.ascii_letters + " .,", min_size=16, max_size=40)


@given(head=HEAD, left=WORDS, right=WORDS)
def test_an_answer_that_starts_like_the_streamed_text_but_differs_is_a_new_reply(
    head: str, left: str, right: str
) -> None:
    """A regenerated reply (sampling took another path) is not appended to the first. (A
    streamed text that differs only by whitespace at its end is the tolerated case of a
    server that strips the prefill's: `echoed_length`.)"""
    head = "I" + head.strip()
    assume(len(head) >= 16 and left[:1] != right[:1] and left.strip())
    streamed, answer = head + left, head + right
    assert stored(streamed, answer, None) == answer


def test_streamed_whitespace_alone_is_not_doubled() -> None:
    assert stored("  ", "  more", None) == "  more"
    assert stored("\n", "\nx", None) == "\nx"
    assert stored("\n\n", "x", None) == "\n\nx"


def test_what_a_server_showed_is_learned_and_kept() -> None:
    known = ServerContinuation("prefill")
    assert known.echoes is None
    known.learn(True)
    known.learn(None)  # an answer that showed nothing changes nothing
    assert known.echoes is True


@given(
    answer=st.recursive(
        st.none() | st.booleans() | st.integers() | TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
        max_leaves=8,
    )
)
def test_probe_answers_of_any_shape_are_read_without_error(answer: object) -> None:
    assert continued_prompt_form(answer) in (True, False)
    assert served_by_vllm(answer) in (True, False)


def test_a_prompt_that_ends_with_the_prefill_continues_it() -> None:
    prefilled = f"<|im_start|>assistant\n<think>\n\n</think>\n\n{PROBE_PREFIX}"
    closed = f"<|im_start|>assistant\n{PROBE_PREFIX}<|im_end|>\n<|im_start|>assistant\n"
    assert continued_prompt_form({"prompt": prefilled})
    assert not continued_prompt_form({"prompt": closed})
    assert served_by_vllm({"data": [{"id": "m", "owned_by": "vllm"}]})
    assert not served_by_vllm({"data": [{"id": "m", "owned_by": "llamacpp"}]})


# --- the probe: what a server says it does with a continued request ------------------------


class _ProbedServer(http.server.BaseHTTPRequestHandler):
    """Answers the probe's three questions as `answers` says (path -> JSON, absent: 404),
    recording each request's path, body and authorization."""

    answers: ClassVar[dict[str, Any]] = {}
    asked: ClassVar[list[tuple[str, Any, str | None]]] = []

    def do_GET(self) -> None:
        self._answer(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._answer(json.loads(self.rfile.read(length)))

    def _answer(self, body: Any) -> None:
        answer = self.answers.get(self.path)
        if callable(answer):
            answer = answer(body)
        self.asked.append((self.path, body, self.headers.get("Authorization")))
        data = json.dumps(answer).encode()
        self.send_response(404 if answer is None else 200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def probed() -> Iterator[tuple[str, type[_ProbedServer]]]:
    handler = type("Handler", (_ProbedServer,), {"answers": {}, "asked": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    server.shutdown()
    server.server_close()


def prompt_of(continued: bool) -> Any:
    """llama.cpp's /apply-template answer: the prompt ends with the prefill, or not."""

    def answer(body: dict[str, Any]) -> dict[str, str]:
        prefix = body["messages"][-1]["content"]
        tail = prefix if continued else f"{prefix}<|im_end|>\n<|im_start|>assistant\n"
        return {"prompt": f"<|im_start|>assistant\n{tail}"}

    return answer


async def test_a_llamacpp_server_that_prefills_continues_with_the_prefill_form(probed) -> None:
    base_url, server = probed
    server.answers["/apply-template"] = prompt_of(True)
    known = await probe_continuation(base_url, "tiny", "key-1", "vllm")
    assert (known.form, known.echoes) == ("prefill", None)
    ((path, body, authorization),) = server.asked
    assert (path, authorization) == ("/apply-template", "Bearer key-1")
    assert body["messages"][-1] == {"role": "assistant", "content": PROBE_PREFIX}


async def test_a_llamacpp_server_without_prefill_is_asked_in_vllms_form(probed) -> None:
    """`--no-prefill-assistant` closes the message; an explicit `continue_final_message`
    (and no generation prompt) still continues it."""
    base_url, server = probed

    def explicit_only(body: dict[str, Any]) -> dict[str, str]:
        asked = body.get("continue_final_message") is True
        return prompt_of(asked and body.get("add_generation_prompt") is False)(body)

    server.answers["/apply-template"] = explicit_only
    known = await probe_continuation(base_url, "tiny", None, "prefill")
    assert known.form == "vllm"
    assert [authorization for _, _, authorization in server.asked] == [None, None]
    server.answers["/apply-template"] = prompt_of(False)
    assert (await probe_continuation(base_url, "tiny", None, "prefill")).form is None


async def test_ollama_and_vllm_are_known_by_their_own_endpoints(probed) -> None:
    base_url, server = probed
    server.answers["/api/show"] = {"template": "{{ .Messages }}"}
    assert attrs.astuple(await probe_continuation(base_url, "m", None, "vllm")) == (
        "prefill",
        False,
    )
    server.answers["/api/show"] = {"parameters": "num_ctx 4096"}  # no template: not Ollama's
    server.answers["/v1/models"] = {"data": [{"id": "m", "owned_by": "vllm"}]}
    assert attrs.astuple(await probe_continuation(base_url, "m", None, "prefill")) == (
        "vllm",
        False,
    )
    del server.answers["/v1/models"]
    assert attrs.astuple(await probe_continuation(base_url, "m", None, "prefill")) == (
        "prefill",
        None,
    )


async def test_a_hosted_form_or_an_address_that_is_no_server_is_not_probed(probed) -> None:
    base_url, server = probed
    assert (await probe_continuation(base_url, "m", None, "deepseek")).form == "deepseek"
    assert (await probe_continuation("ftp://example/v1", "m", None, "vllm")).form == "vllm"
    assert server.asked == []


def test_the_regeneration_rule_needs_sixteen_equal_leading_characters() -> None:
    """Up to 15 equal leading characters can be chance; 16 are a reply written again."""
    same = "I will read the "  # 16 characters
    assert looks_regenerated(same + "file.", same + "code.")
    assert not looks_regenerated(same[:15] + "X file.", same[:15] + "Y code.")
    assert not looks_regenerated("", "anything")
    assert not looks_regenerated("anything", "")
