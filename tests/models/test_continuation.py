"""Hybrid rounds that continue the streamed text (`continue_streamed`, on for the presets
whose servers can), each server in its own form: `parley serve` as a subprocess, the fake LLM
over HTTP as that server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, WEATHER_TOOL
from parley.client import ParleyClient
from parley.config import ConfigError, load_settings
from parley.fakellm import FakeLLM, Fault, Pacing, Reply, ScriptedToolCall

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})
STREAMED = "Let me check"
REST = " the weather."
VLLM_FIELDS = ("continue_final_message", "add_generation_prompt")


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"Sunny in {params['arguments']['city']}"}


def script(fake: FakeLLM, sync_text: str, sync_fault: Fault | None = None) -> None:
    fake.set_script(
        [
            Reply(
                text=STREAMED,
                tool_calls=(WEATHER,),
                pacing=Pacing(chunks_per_second=100),
                sync=Reply(text=sync_text, tool_calls=(WEATHER,), fault=sync_fault),
            ),
            Reply(text=" Sunny."),
        ]
    )


async def start(
    start_server: Any, fake: FakeLLM, home: Path, model: str, provider_lines: str = ""
) -> ParleyClient:
    """`parley serve` with the model's provider pointed at the fake (its base URL as the
    real server's: DeepSeek's under `/beta`)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    name = model.partition(":")[0]
    base_url = f"{fake.url}/beta" if name == "deepseek" else fake.openai_base_url
    if name not in ("openai", "anthropic"):
        config.write_text(f'[providers.{name}]\nbase_url = "{base_url}"\n{provider_lines}')
    env = {"PARLEY_CONFIG": str(config), "DEEPSEEK_API_KEY": "sk-test-deepseek-0123456789"}
    client = await start_server(model=model, home=home, extra_env=env)
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = answer_weather
    return client


def sent_form(request: Any) -> dict[str, Any]:
    """The continuation fields a request carries: its last message's, and vLLM's."""
    last = request.body["messages"][-1]
    return {
        "last": last,
        **{field: request.body[field] for field in VLLM_FIELDS if field in request.body},
    }


# Each preset's form: the trailing assistant message, and any fields besides.
FORMS = {
    "vllm:qwen3": {
        "last": {"role": "assistant", "content": STREAMED},
        "continue_final_message": True,
        "add_generation_prompt": False,
    },
    "llamacpp:qwen3": {"last": {"role": "assistant", "content": STREAMED}},
    "ollama:qwen3": {"last": {"role": "assistant", "content": STREAMED}},
    "deepseek:deepseek-chat": {"last": {"role": "assistant", "content": STREAMED, "prefix": True}},
}


@pytest.mark.parametrize("model", sorted(FORMS))
async def test_each_preset_continues_the_streamed_text_in_its_servers_form(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path, model: str
) -> None:
    home = tmp_path / "home"
    script(fake, REST)  # the server generates only the rest
    client = await start(start_server, fake, home, model)
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn", result

    stream, sync, final = fake.wait_for_requests(3)
    assert [stream.stream, sync.stream] == [True, False]
    expected_path = "/beta/chat/completions" if model.startswith("deepseek") else None
    assert {stream.path, sync.path} == {expected_path or "/v1/chat/completions"}
    assert sync.body["messages"][:-1] == stream.body["messages"]
    assert sent_form(sync) == FORMS[model]
    # Only the synchronous call continues: the stream and the next round are plain.
    for plain in (stream, final):
        assert not set(VLLM_FIELDS) & set(plain.body)
        assert all("prefix" not in message for message in plain.body["messages"])

    # The rest is appended to what was streamed, with the same messageId: no revision.
    chunks = client.updates_of(session, "agent_message_chunk")
    assert not [c for c in chunks if c.get("_meta")]
    assert {c["messageId"] for c in chunks[:2]} == {chunks[0]["messageId"]}
    assert client.text_of(session) == STREAMED + REST + " Sunny."
    # The history holds streamed text + rest: the next round sees it, and so does a replay.
    assistant = [m for m in final.body["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == STREAMED + REST

    reloaded = await start(start_server, fake, home, model)
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


async def test_a_preset_turned_off_makes_the_full_call(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    script(fake, STREAMED + REST)  # the whole reply again
    client = await start(
        start_server, fake, tmp_path / "home", "vllm:qwen3", "continue_streamed = false\n"
    )
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")

    stream, sync, final = fake.wait_for_requests(3)
    assert sync.body["messages"] == stream.body["messages"]
    assert not set(VLLM_FIELDS) & set(sync.body)
    assert client.text_of(session) == STREAMED + REST + " Sunny."
    assistant = [m for m in final.body["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == STREAMED + REST


async def test_a_server_that_refuses_the_continuation_gets_the_full_call(
    start_server: Any, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    # llama.cpp refuses a prefill while thinking is on (400): the turn still completes.
    refused = Fault("http", status=400, message="Assistant response prefill is incompatible")
    script(fake, STREAMED + REST, sync_fault=refused)
    client = await start(start_server, fake, tmp_path / "home", "llamacpp:qwen3")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn", result

    stream, continued, full, _ = fake.wait_for_requests(4)
    assert continued.status == 400
    assert continued.body["messages"][-1] == {"role": "assistant", "content": STREAMED}
    assert full.body["messages"] == stream.body["messages"]
    assert client.text_of(session) == STREAMED + REST + " Sunny."


def test_forms_by_preset_true_false_and_a_named_form(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[providers.vllm]\ncontinue_streamed = false\n"
        "[providers.ollama]\ncontinue_streamed = true\n"
        '[providers.lmstudio]\nkind = "openai"\n'
        "[providers.mine]\ncontinue_streamed = true\n"
        '[providers.llama-box]\ncontinue_streamed = "prefill"\n'
    )
    providers = load_settings({"PARLEY_CONFIG": str(config)}).providers
    forms = {name: p.continue_streamed for name, p in providers.items() if p.continue_streamed}
    # `true` is the preset's form; on a provider of one's own, vLLM's (what it always sent).
    assert forms == {
        "ollama": "prefill",
        "llamacpp": "prefill",
        "deepseek": "deepseek",
        "mine": "vllm",
        "llama-box": "prefill",
    }
    assert providers["deepseek"].base_url == "https://api.deepseek.com/beta"


def test_an_unknown_form_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.vllm]\ncontinue_streamed = "yes"\n')
    with pytest.raises(
        ConfigError, match='continue_streamed: expected one of "vllm", "prefill", "deepseek"'
    ):
        load_settings({"PARLEY_CONFIG": str(config)})
