"""Parley against a real llama.cpp server (llama.cpp's own server code, the `xllamacpp`
wheel) running `parley.scriptllm`'s script model: what the user and the model see.

The model plays a script chosen by a trigger word in the prompt (parley/scriptllm/scripts.py):
none: a plain answer; " dog": `Let me look.` then a Qwen `<tool_call>` reading hello.py;
" movie": the same as a text-protocol call; " camera": a `<think>` section, then an answer;
" song": ` tick tock` forever. After a tool result (hello.py holds " paint") it answers
`The file says hello.`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llamacpp_fixtures import LlamaServers, server_metrics, start_parley_on
from parley.scriptllm import scripts

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
    assert client.text_of(session) == PLAIN
    usage = result["_meta"]["parley"]["usage"]
    prompt_tokens = sum(
        after[name] - before[name] for name in ("prompt_tokens_total", "prompt_tokens_cached_total")
    )
    assert usage["inputTokens"] == prompt_tokens
    assert usage["outputTokens"] == after["tokens_predicted_total"] - before["tokens_predicted_total"]
    assert result["_meta"]["parley"]["usageComplete"] is True
    print(result["_meta"]["parley"])
