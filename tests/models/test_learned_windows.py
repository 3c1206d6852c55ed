"""A model whose window Parley doesn't know outgrows it: never stuck.

The server runs as a subprocess against the fake LLM, which refuses every request longer
than 15,000 tokens exactly as a real server does (OpenAI, vLLM, llama.cpp, Anthropic, or
llama.cpp's older wording that names no window, answered by llama.cpp's `/props` or Ollama's
`/api/show`, or by nothing). The model's name is one no table knows. The prompt that
overflows succeeds after compaction and one retry; the window is learned, shown in
`usage_update.size`, and used from then on, after a restart too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import WEATHER_TOOL
from parley.client import ParleyClient
from parley.fakellm import ContextLimit, FakeLLM, RecordedRequest, Reply, ScriptedToolCall
from parley.fakellm.context_limit import request_tokens
from pygls.exceptions import JsonRpcException

WINDOW = 15_000
WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})
# Even replies call the tool (their text is also what a summary call gets), odd ones answer.
SCRIPT = [
    Reply(text="The story so far: weather was asked for.", tool_calls=(WEATHER,))
    if index % 2 == 0
    else Reply(text="Sunny.")
    for index in range(40)
]
OUTPUT_CHARS = 36_000  # about 9,000 tokens a tool output: the second turn overflows

# form: (fake's context limit, the window Parley should learn; None: half the refused
# request's estimate)
FORMS: dict[str, tuple[ContextLimit, int | None]] = {
    "openai": (ContextLimit(WINDOW, form="openai"), WINDOW),
    "vllm": (ContextLimit(WINDOW, form="vllm"), WINDOW),
    "llamacpp": (ContextLimit(WINDOW, form="llamacpp"), WINDOW),
    "anthropic": (ContextLimit(WINDOW, form="anthropic"), WINDOW),
    "llamacpp /props": (ContextLimit(WINDOW, form="unstated", props=True), WINDOW),
    "ollama /api/show": (ContextLimit(WINDOW, form="unstated", ollama_show="num_ctx"), WINDOW),
    "nothing says": (ContextLimit(WINDOW, form="unstated"), None),
}
# The store keeps what a refusal and an estimate taught: checked after a restart.
RESTARTED = {"llamacpp", "nothing says"}


def fake_tokens(request: RecordedRequest) -> int:
    return sum(request_tokens(request.body, with_completion=False))


def sizes(client: ParleyClient, session: str) -> list[int]:
    return [update["size"] for update in client.updates_of(session, "usage_update")]


async def started(
    start_server: Callable[..., Any], home: Path, model: str, output: list[int]
) -> ParleyClient:
    client = await start_server(model=model, home=home)
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = lambda params: {"content": "x" * output[0]}
    return client


@pytest.mark.parametrize("form", list(FORMS))
async def test_an_unknown_window_is_learned_compacted_to_and_kept(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path, form: str
) -> None:
    limit, expected = FORMS[form]
    model = "anthropic:my-local-model" if limit.form == "anthropic" else "openai:my-local-model"
    fake.context_limit = limit
    fake.set_script(SCRIPT)
    home = tmp_path / "home"
    output = [OUTPUT_CHARS]
    client = await started(start_server, home, model, output)
    session = await client.new_session(str(workspace), toolPolicy="sync")
    await client.prompt(session, "Question 1: weather in Paris?")
    assert all(request.status == 200 for request in fake.requests)
    assert sizes(client, session) == []  # the window is unknown: no usage_update says one

    # The second turn's second request passes the window: refused, learned, compacted, retried.
    sent = len(fake.requests)
    result = await client.prompt(session, "Question 2: weather in Paris?")
    assert result["stopReason"] == "end_turn"
    assert client.text_of(session).endswith("Sunny.")
    turn = fake.requests[sent:]
    refused = [request for request in turn if request.status == 400]
    assert len(refused) == 1 and fake_tokens(refused[0]) > WINDOW
    retried = turn[-1]
    assert retried.status == 200 and fake_tokens(retried) < WINDOW
    assert "Question 2" in json.dumps(retried.body) and "Question 1" not in json.dumps(retried.body)
    learned = sizes(client, session)[-1]
    if expected is not None:
        assert learned == expected
    else:  # half the refused request, as Parley estimates it (about as the fake counts)
        assert 0.4 * fake_tokens(refused[0]) <= learned <= 0.5 * fake_tokens(refused[0])
    assert set(sizes(client, session)) == {learned}
    asked = {"llamacpp /props": ["props"], "ollama /api/show": ["ollama_show"]}
    assert fake.window_questions == asked.get(form, [])

    # A later prompt is compacted to the learned window before the provider sees it.
    sent = len(fake.requests)
    await client.prompt(session, "Question 3: weather in Paris?")
    assert all(request.status == 200 for request in fake.requests[sent:])

    if form not in RESTARTED:
        return
    # A restarted server on the same PARLEY_HOME knows the window from its first request.
    await client.stop()
    fake.set_script(SCRIPT)
    again = await started(start_server, home, model, output)
    await again.load_session(session, str(workspace))
    await again.prompt(session, "Question 4: weather in Paris?")
    assert all(request.status == 200 for request in fake.requests)
    assert set(sizes(again, session)) == {learned}
    assert fake.window_questions == asked.get(form, [])  # not asked again


async def test_a_turn_too_long_even_compacted_ends_clearly_and_the_next_prompt_works(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    fake.context_limit = ContextLimit(WINDOW, form="llamacpp")
    fake.set_script(SCRIPT)
    output = [80_000]  # one tool output longer than the window: the current turn can't shrink
    client = await started(start_server, tmp_path / "home", "openai:my-local-model", output)
    session = await client.new_session(str(workspace), toolPolicy="hybrid")

    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Question 1: weather in Paris?")
    error = raised.value
    assert error.code == -32001
    assert "context window of 15,000 tokens" in error.message
    assert "even compacted" in error.message and "available context size" in error.message
    assert [request.status for request in fake.requests[-2:]] == [400, 400]

    # Not stuck: the next prompt's request is compacted (the long turn summarised) and works.
    output[0] = 100
    sent = len(fake.requests)
    result = await client.prompt(session, "Question 2: weather in Paris?")
    assert result["stopReason"] == "end_turn"
    assert all(request.status == 200 for request in fake.requests[sent:])
    assert all(fake_tokens(request) < WINDOW for request in fake.requests[sent:])
    assert client.text_of(session).endswith("Sunny.")


async def test_a_learned_window_wins_over_the_built_in_one_of_the_models_name(
    start_server: Callable[..., Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    # A local server's model under a well-known name: Parley's table says 128,000 tokens.
    fake.context_limit = ContextLimit(WINDOW, form="llamacpp")
    fake.set_script(SCRIPT)
    client = await started(start_server, tmp_path / "home", "openai:gpt-4o", [OUTPUT_CHARS])
    session = await client.new_session(str(workspace), toolPolicy="sync")
    await client.prompt(session, "Question 1: weather in Paris?")
    assert set(sizes(client, session)) == {128_000}

    result = await client.prompt(session, "Question 2: weather in Paris?")
    assert result["stopReason"] == "end_turn"
    assert [request.status for request in fake.requests].count(400) == 1
    assert sizes(client, session)[-1] == WINDOW

    shown = len(sizes(client, session))
    await client.prompt(session, "Question 3: weather in Paris?")
    assert [request.status for request in fake.requests].count(400) == 1
    assert set(sizes(client, session)[shown:]) == {WINDOW}
