"""Hybrid rounds that continue the streamed text (`continue_streamed`, on for the local
presets): `parley serve` as a subprocess, the fake LLM over HTTP as a vLLM server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import MODELS, WEATHER_TOOL
from parley.client import ParleyClient
from parley.config import load_settings
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})
STREAMED = "Let me check"
REST = " the weather."


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"Sunny in {params['arguments']['city']}"}


def script(fake: FakeLLM, sync_text: str) -> None:
    fake.set_script(
        [
            Reply(
                text=STREAMED,
                tool_calls=(WEATHER,),
                pacing=Pacing(chunks_per_second=100),
                sync=Reply(text=sync_text, tool_calls=(WEATHER,)),
            ),
            Reply(text=" Sunny."),
        ]
    )


async def start(start_server: Any, fake: FakeLLM, home: Path, model: str) -> ParleyClient:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(f'[providers.vllm]\nbase_url = "{fake.openai_base_url}"\n')
    client = await start_server(model=model, home=home, extra_env={"PARLEY_CONFIG": str(config)})
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = answer_weather
    return client


async def test_vllm_sync_call_continues_the_streamed_text(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    script(fake, REST)  # the server generates only the rest
    client = await start(start_server, fake, home, "vllm:qwen3")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn", result

    stream, sync, final = fake.wait_for_requests(3)
    assert [stream.stream, sync.stream] == [True, False]
    assert sync.body["messages"][:-1] == stream.body["messages"]
    assert sync.body["messages"][-1] == {"role": "assistant", "content": STREAMED}
    assert sync.body["continue_final_message"] is True
    assert sync.body["add_generation_prompt"] is False
    assert "continue_final_message" not in final.body

    # The rest is appended to what was streamed, with the same messageId: no revision.
    chunks = client.updates_of(session, "agent_message_chunk")
    assert not [c for c in chunks if c.get("_meta")]
    assert {c["messageId"] for c in chunks[:2]} == {chunks[0]["messageId"]}
    assert client.text_of(session) == STREAMED + REST + " Sunny."
    # The history holds streamed text + rest: the next round sees it, and so does a replay.
    assistant = [m for m in final.body["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == STREAMED + REST

    reloaded = await start(start_server, fake, home, "vllm:qwen3")
    await reloaded.load_session(session, str(workspace))
    assert reloaded.text_of(session).startswith(STREAMED + REST)


async def test_openai_sync_call_is_unchanged(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    script(fake, STREAMED + REST)  # OpenAI generates the whole reply again
    client = await start(start_server, fake, tmp_path / "home", MODELS["openai"])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")

    stream, sync, _ = fake.wait_for_requests(3)
    assert sync.body["messages"] == stream.body["messages"]
    assert "continue_final_message" not in sync.body
    assert client.text_of(session) == STREAMED + REST + " Sunny."


def test_on_for_the_local_presets_off_elsewhere_and_overridable(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.vllm]\ncontinue_streamed = false\n[providers.lmstudio]\nkind = "openai"\n'
        "[providers.mine]\ncontinue_streamed = true\n"
    )
    providers = load_settings({"PARLEY_CONFIG": str(config)}).providers
    on = {name for name, provider in providers.items() if provider.continue_streamed}
    assert on == {"ollama", "llamacpp", "mine"}
