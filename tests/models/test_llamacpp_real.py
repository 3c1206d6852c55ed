"""Parley against a real llama.cpp server (llama.cpp's own server code, the `xllamacpp`
wheel) running `parley.scriptllm`'s script model: what the user and the model see.

The model plays a script chosen by a trigger word in the prompt (parley/scriptllm/scripts.py):
none: a plain answer; " dog": `Let me look.` then a Qwen `<tool_call>` reading hello.py;
" movie": the same as a text-protocol call; " camera": a `<think>` section, then an answer;
" song": ` tick tock` forever. After a tool result (hello.py holds " paint") it answers
`The file says hello.`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from llamacpp_fixtures import LlamaServers, server_metrics, slots, start_parley_on
from parley.scriptllm import scripts
from pygls.exceptions import JsonRpcException

PLAIN = scripts.PLAIN_ANSWER


async def test_a_plain_answer_and_its_usage_as_the_server_counted_it(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get()
    client = await start_parley_on(start_server, server, tmp_path / "home")
    session = await client.new_session(str(hello_workspace))
    before = server_metrics(server)
    result = await client.prompt(session, "Say hello.")
    after = server_metrics(server)

    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == chunks_text(client, session) == PLAIN
    usage = result["_meta"]["parley"]["usage"]
    prompt_tokens = sum(
        after[name] - before[name] for name in ("prompt_tokens_total", "prompt_tokens_cached_total")
    )
    assert usage["inputTokens"] == prompt_tokens
    assert (
        usage["outputTokens"] == after["tokens_predicted_total"] - before["tokens_predicted_total"]
    )
    assert result["_meta"]["parley"]["usageComplete"] is True


def chunks_text(client: Any, session: str, kind: str = "agent_message_chunk") -> str:
    """Every chunk of `kind` the editor got, joined as they came (revisions not applied)."""
    return "".join(u["content"]["text"] for u in client.updates_of(session, kind))


async def replayed_text(start_server: Any, server: Any, home: Path, session: str, cwd: Path) -> str:
    """The session's stored conversation, as a restarted Parley replays it."""
    reloaded = await start_parley_on(start_server, server, home)
    await reloaded.load_session(session, str(cwd))
    return reloaded.text_of(session)


def completed_tool_results(client: Any, session: str) -> list[str]:
    return [
        block["content"]["text"]
        for update in client.updates_of(session, "tool_call_update")
        if update.get("status") == "completed"
        for block in update.get("content") or []
        if block.get("type") == "content"
    ]


# provider lines, the server's template, its prefill of a trailing assistant message
TOOL_ROUND_CASES = {
    "prefill form": ('continue_streamed = "prefill"', "qwen2.5", True),
    "vllm form": ('continue_streamed = "vllm"', "qwen2.5", True),
    "no continuation": ("continue_streamed = false", "qwen2.5", True),
    "server without prefill": ("", "qwen2.5", False),  # the preset's default form
    # Qwen3's template puts an empty think block before the continued text.
    "qwen3 template": ("", "qwen3", True),
}


@pytest.mark.parametrize("case", sorted(TOOL_ROUND_CASES))
async def test_a_hybrid_tool_round_shows_and_stores_the_streamed_text_once(
    start_server: Any,
    llama_servers: LlamaServers,
    recording_proxy: Any,
    hello_workspace: Path,
    tmp_path: Path,
    case: str,
) -> None:
    provider_lines, template, prefill_assistant = TOOL_ROUND_CASES[case]
    server = recording_proxy(llama_servers.get(template, prefill_assistant=prefill_assistant))
    home = tmp_path / "home"
    client = await start_parley_on(start_server, server, home, provider_lines)
    session = await client.new_session(str(hello_workspace))
    result = await client.prompt(session, "Read it, good dog.")

    assert result["stopReason"] == "end_turn", result
    expected = scripts.STREAMED_TEXT + scripts.AFTER_TOOL_ANSWER
    # What the editor shows, and every chunk it got: the streamed text exactly once.
    assert client.text_of(session) == expected
    assert chunks_text(client, session) == expected
    # The tool ran on the real file, and the round after its result answered.
    assert any("hello" in text for text in completed_tool_results(client, session))
    assert result["_meta"]["parley"]["turn"]["toolCalls"] == 1
    # llama.cpp read the synchronous call's prompt from its own cache: at most the streamed
    # text (3 tokens, estimated) was paid again, not the whole prompt.
    assert result["_meta"]["parley"]["turn"]["wastedTokensEstimate"] <= 3
    # The round after the tool sent the model its own message once; the store holds it once.
    final = server.chat_calls()[-1]["request"]["messages"]
    assert [m["content"] for m in final if m["role"] == "assistant"] == [scripts.STREAMED_TEXT]
    assert await replayed_text(start_server, server, home, session, hello_workspace) == expected


async def test_a_text_protocol_tool_call_runs_and_its_text_is_not_shown(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get()
    client = await start_parley_on(
        start_server, server, tmp_path / "home", model_lines='tool_format = "text"'
    )
    session = await client.new_session(str(hello_workspace))
    result = await client.prompt(session, "Read it, like in the movie.")

    assert result["stopReason"] == "end_turn", result
    expected = scripts.STREAMED_TEXT + scripts.AFTER_TOOL_ANSWER
    assert client.text_of(session) == expected
    assert "<tool" not in chunks_text(client, session)
    assert any("hello" in text for text in completed_tool_results(client, session))


async def test_qwen3_thinking_is_shown_as_thoughts_not_answer_text(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get(template="qwen3")
    client = await start_parley_on(start_server, server, tmp_path / "home")
    session = await client.new_session(str(hello_workspace))
    result = await client.prompt(session, "Greet the camera.")

    assert result["stopReason"] == "end_turn", result
    assert client.text_of(session) == scripts.THINKING_ANSWER
    assert chunks_text(client, session, "agent_thought_chunk").strip() == scripts.THINKING
    assert "think>" not in chunks_text(client, session)
    # llama.cpp counts the thinking inside completion_tokens and never apart: unknown.
    usage = result["_meta"]["parley"]["usage"]
    assert "thoughtTokens" not in usage and usage["outputTokens"] > 0


async def test_max_tokens_ends_the_turn_with_max_tokens(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get()
    client = await start_parley_on(
        start_server, server, tmp_path / "home", model_lines="max_tokens = 6"
    )
    session = await client.new_session(str(hello_workspace))
    result = await client.prompt(session, "Sing a song.")

    assert result["stopReason"] == "max_tokens", result
    # " tick tock" is three tokens. llama.cpp itself drops the content's leading space when
    # the request has tools (its tool-call parser trims it; without tools it sends " tick").
    assert client.text_of(session) == (scripts.ENDLESS_UNIT * 2).lstrip()
    assert result["_meta"]["parley"]["usage"]["outputTokens"] == 6


async def test_cancel_stops_the_servers_task_and_the_round_usage_is_not_claimed_complete(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get(fresh=True)  # its log holds only this test's tasks
    client = await start_parley_on(start_server, server, tmp_path / "home")
    session = await client.new_session(str(hello_workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Sing a song."))
    await client.wait_for_update(session, lambda _: len(chunks_text(client, session)) > 40)
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 10)

    assert result["stopReason"] == "cancelled"
    assert client.text_of(session).lstrip().startswith((scripts.ENDLESS_UNIT * 3).lstrip())
    await wait_until(lambda: "cancel task" in server.log_text())
    assert not any(slot["is_processing"] for slot in slots(server))
    # The server processed the prompt and generated tokens, but never said how many.
    assert result["_meta"]["parley"]["usageComplete"] is False, result["_meta"]["parley"]


async def test_a_server_killed_mid_stream_is_a_clear_error_and_the_session_goes_on(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get(fresh=True)
    home = tmp_path / "home"
    client = await start_parley_on(start_server, server, home)
    session = await client.new_session(str(hello_workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Sing a song."))
    await client.wait_for_update(session, lambda _: len(chunks_text(client, session)) > 40)
    server.kill()
    with pytest.raises(JsonRpcException) as failure:
        await asyncio.wait_for(prompt, 30)
    assert "connection to llamacpp broke off mid-reply" in str(failure.value)

    restarted = llama_servers.get(fresh=True, port=server.port)
    # The song's trigger may still be in the context: a stronger one picks the answer.
    result = await client.prompt(session, "Now paint.")
    assert result["stopReason"] == "end_turn", result
    assert client.text_of(session).endswith(scripts.AFTER_TOOL_ANSWER)
    assert restarted.url == server.url


async def wait_until(condition: Any, timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


# Parley's system prompt and its 14 tools are ~2,550 tokens of this vocabulary: the first
# prompt's filler fits, the second's does not.
OVERFLOW_CTX = 3584
FILLER = " word" * 600


async def test_context_overflow_is_compacted_and_answered(
    start_server: Any, llama_servers: LlamaServers, hello_workspace: Path, tmp_path: Path
) -> None:
    server = llama_servers.get(ctx=OVERFLOW_CTX)
    client = await start_parley_on(start_server, server, tmp_path / "home")
    session = await client.new_session(str(hello_workspace))
    first = await client.prompt(session, "Remember:" + FILLER)
    assert first["stopReason"] == "end_turn", first

    second = await client.prompt(session, "And:" + FILLER)  # the whole would not fit

    assert second["stopReason"] == "end_turn", second
    assert client.text_of(session) == PLAIN + PLAIN
    assert f"exceeds the available context size ({OVERFLOW_CTX} tokens)" in server.log_text()
    # The window learned from the refusal is the editor's context meter from then on.
    assert client.updates_of(session, "usage_update")[-1]["size"] == OVERFLOW_CTX


async def test_a_tool_rounds_usage_is_what_the_server_reported_for_the_calls_it_counts(
    start_server: Any,
    llama_servers: LlamaServers,
    recording_proxy: Any,
    hello_workspace: Path,
    tmp_path: Path,
) -> None:
    proxy = recording_proxy(llama_servers.get())
    client = await start_parley_on(start_server, proxy, tmp_path / "home")
    session = await client.new_session(str(hello_workspace))
    result = await client.prompt(session, "Read it, good dog.")
    assert result["stopReason"] == "end_turn", result

    stream, sync, final = proxy.chat_calls()
    assert [stream["request"]["stream"], sync["request"].get("stream", False)] == [True, False]
    # The stream was closed at the tool call; whether the server got to report its usage
    # first depends on timing (a loaded machine reads slower than the model writes), and
    # either way it is never counted: only the synchronous call and the final round are.
    reported = [sync["usage"], final["usage"]]
    usage = result["_meta"]["parley"]["usage"]
    assert usage["inputTokens"] == sum(u["prompt_tokens"] for u in reported)
    assert usage["outputTokens"] == sum(u["completion_tokens"] for u in reported)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in reported)
    assert usage["cachedReadTokens"] == cached > 0  # llama.cpp's own prompt cache
