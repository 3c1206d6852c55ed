"""Prompt caching on by default (issue 14, item 1): `parley serve` as a subprocess, the fake
LLM over HTTP with the real SDKs. Anthropic requests carry cache breakpoints, OpenAI requests
a per-session `prompt_cache_key` (not for other OpenAI-compatible servers); cache usage in
each provider's real shape is counted and priced exactly; a discarded stream's tokens are
estimated as waste, never counted."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from conftest import MODELS, WEATHER_TOOL
from parley.agent.commands import describe_totals
from parley.client import ParleyClient
from parley.config import load_settings
from parley.core.conversation import TextBlock, UserMessage
from parley.core.usage import DEFAULT_PRICES, Usage, find_price
from parley.fakellm import FakeLLM, Pacing, PromptCache, Reply, ScriptedToolCall
from parley.providers.anthropic_provider import AnthropicProvider
from parley.providers.base import ModelRequest
from parley.providers.openai_provider import prompt_cache_key_of
from parley.store import MIGRATIONS, Store

EPHEMERAL = {"type": "ephemeral"}
WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"Sunny in {params['arguments']['city']}"}


def parley_meta(result: dict[str, Any]) -> dict[str, Any]:
    return result["_meta"]["parley"]


def breakpoints_in(body: Any) -> int:
    if isinstance(body, dict):
        own = 1 if body.get("cache_control") == EPHEMERAL else 0
        return own + sum(breakpoints_in(value) for value in body.values())
    if isinstance(body, list):
        return sum(breakpoints_in(value) for value in body)
    return 0


async def start(start_server: Callable[..., Any], model: str, **kwargs: Any) -> ParleyClient:
    client = await start_server(model=model, **kwargs)
    await client.initialize(tools=[WEATHER_TOOL])
    return client


# --- Anthropic: cache breakpoints -----------------------------------------------------


async def test_anthropic_requests_mark_the_tools_and_the_latest_message(
    start_server: Callable[..., Any], fake: FakeLLM, workspace
) -> None:
    client = await start(start_server, MODELS["anthropic"])
    client.editor_tool_handler = answer_weather
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="Sunny.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather in Paris?")

    requests = fake.wait_for_requests(3)
    for request in requests:  # the stream, its synchronous fallback, the next round
        body = request.body
        assert body["tools"][-1]["cache_control"] == EPHEMERAL
        assert all("cache_control" not in tool for tool in body["tools"][:-1])
        assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
        assert breakpoints_in(body) == 2  # within the API's limit of four
    stream, sync, next_round = requests
    assert sync.body["messages"] == stream.body["messages"]  # the fallback reads the cache
    last_block = next_round.body["messages"][-1]["content"][-1]
    assert last_block["type"] == "tool_result"


def test_anthropic_without_tools_marks_the_system_prompt() -> None:
    provider = AnthropicProvider(name="anthropic", api_key="sk-ant-x", base_url=None)
    arguments = provider._arguments(
        ModelRequest(
            model="claude-sonnet-4-5",
            system="Be brief.",
            messages=(UserMessage((TextBlock("hi"),)),),
        )
    )
    assert arguments["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}
    ]
    assert arguments["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert breakpoints_in(arguments) == 2


# --- OpenAI: prompt_cache_key ---------------------------------------------------------


async def test_openai_requests_carry_the_sessions_cache_key(
    start_server: Callable[..., Any], fake: FakeLLM, workspace
) -> None:
    client = await start(start_server, MODELS["openai"])
    client.editor_tool_handler = answer_weather
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="Sunny.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather in Paris?")
    other = await client.new_session(str(workspace))
    await client.prompt(other, "And now?")

    requests = fake.wait_for_requests(4)
    keys = [request.body.get("prompt_cache_key") for request in requests]
    assert keys[:3] == [prompt_cache_key_of(session)] * 3
    assert keys[3] == prompt_cache_key_of(other) != keys[0]
    assert session not in str(keys)  # a digest: the provider never sees the session's id


async def test_an_ollama_style_provider_gets_no_cache_key(
    start_server: Callable[..., Any], fake: FakeLLM, workspace
) -> None:
    ollama_host = fake.openai_base_url.removesuffix("/v1")
    client = await start(start_server, "ollama:qwen3", extra_env={"OLLAMA_HOST": ollama_host})
    fake.set_script([Reply(text="Hello.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Hi")

    (request,) = fake.wait_for_requests(1)
    assert "prompt_cache_key" not in request.body


# --- usage and cost of cache reads and writes ------------------------------------------


async def test_anthropic_cache_usage_is_counted_and_priced(
    start_server: Callable[..., Any], fake: FakeLLM, workspace
) -> None:
    client = await start(start_server, MODELS["anthropic"])
    # 1000 prompt tokens: 600 read from the cache, 300 written to it, 100 uncached.
    fake.set_script([Reply(text="Cached answer.", usage=(1000, 100), cache=(600, 300))])
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Hi")

    (request,) = fake.wait_for_requests(1)
    assert request.body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    meta = parley_meta(result)
    usage = meta["usage"]
    assert usage["inputTokens"] == 1000  # Anthropic's input_tokens (100) + reads + writes
    assert usage["cachedReadTokens"] == 600
    assert usage["cachedWriteTokens"] == 300
    assert usage["outputTokens"] == 100
    # claude-sonnet-4-5: input 3, cache reads 0.3, cache writes 3.75, output 15 ($/M).
    assert meta["turn"]["costBreakdown"] == {
        "uncachedInput": 0.0003,
        "cacheReads": 0.00018,
        "cacheWrites": 0.001125,
        "output": 0.0015,
        "currency": "USD",
    }
    assert meta["turn"]["cost"] == {"amount": 0.003105, "currency": "USD"}
    assert meta["session"]["cost"] == {"amount": 0.003105, "currency": "USD"}


async def test_openai_cached_tokens_are_counted_and_priced(
    start_server: Callable[..., Any], fake: FakeLLM, workspace
) -> None:
    client = await start(start_server, MODELS["openai"])
    # 1000 prompt tokens, of which 600 cached (OpenAI's prompt_tokens includes them).
    fake.set_script([Reply(text="Cached answer.", usage=(1000, 100), cache=(600, 0))])
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Hi")

    meta = parley_meta(result)
    usage = meta["usage"]
    assert usage["inputTokens"] == 1000
    assert usage["cachedReadTokens"] == 600
    assert usage["cachedWriteTokens"] == 0
    # gpt-4.1-mini: input 0.4, cached input 0.1, output 1.6 ($/M).
    assert meta["turn"]["costBreakdown"] == {
        "uncachedInput": 0.00016,
        "cacheReads": 0.00006,
        "cacheWrites": 0.0,
        "output": 0.00016,
        "currency": "USD",
    }
    assert meta["turn"]["cost"] == {"amount": 0.00038, "currency": "USD"}


async def test_openai_synchronous_call_cache_usage_is_counted(
    start_server: Callable[..., Any], fake: FakeLLM, workspace
) -> None:
    """The hybrid round's synchronous call (a JSON answer) reports cached tokens too."""
    client = await start(start_server, MODELS["openai"])
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [
            Reply(
                tool_calls=(WEATHER,),
                usage=(500, 10),
                sync=Reply(tool_calls=(WEATHER,), usage=(500, 10), cache=(400, 0)),
            ),
            Reply(text="Sunny.", usage=(600, 5), cache=(500, 0)),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather in Paris?")

    usage = parley_meta(result)["usage"]
    assert usage["inputTokens"] == 1100  # the synchronous call and the next round
    assert usage["cachedReadTokens"] == 900


# --- the session's cost split ------------------------------------------------------------

# claude-sonnet-4-5 ($/M): input 3, cache reads 0.3, cache writes 3.75, output 15. Two turns
# of (input, output, cache read, cache written): the second reads what the first wrote.
SPLIT_TURNS = ((1000, 100, 0, 900), (1220, 60, 900, 250))


def expected_split(turns: tuple[tuple[int, int, int, int], ...]) -> dict[str, Any]:
    """Each call priced on its own, in exact fractions, then summed: what the session's
    `costBreakdown` must say."""
    uncached = reads = writes = output = Fraction(0)
    for input_tokens, output_tokens, read, written in turns:
        uncached += Fraction(3 * (input_tokens - read - written), 10**6)
        reads += Fraction(3 * read, 10**7)
        writes += Fraction(375 * written, 10**8)
        output += Fraction(15 * output_tokens, 10**6)
    return {
        "uncachedInput": round(float(uncached), 8),
        "cacheReads": round(float(reads), 8),
        "cacheWrites": round(float(writes), 8),
        "output": round(float(output), 8),
        "currency": "USD",
    }


async def test_the_sessions_cost_split_sums_its_calls_and_survives_a_reload(
    start_server: Callable[..., Any], fake: FakeLLM, workspace, tmp_path
) -> None:
    home = tmp_path / "home"
    fake.set_script(
        [
            Reply(text=f"Answer {n}.", usage=(i, o), cache=(read, written))
            for n, (i, o, read, written) in enumerate(SPLIT_TURNS)
        ]
    )
    client = await start(start_server, MODELS["anthropic"], home=home)
    session = await client.new_session(str(workspace))
    first = await client.prompt(session, "One")
    second = await client.prompt(session, "Two")

    one, both = expected_split(SPLIT_TURNS[:1]), expected_split(SPLIT_TURNS)
    assert both == {  # by hand: 100 + 70 uncached, 900 read, 900 + 250 written, 160 out
        "uncachedInput": 0.00051,
        "cacheReads": 0.00027,
        "cacheWrites": 0.0043125,
        "output": 0.0024,
        "currency": "USD",
    }
    assert parley_meta(first)["session"]["costBreakdown"] == one
    assert parley_meta(second)["session"]["costBreakdown"] == both
    # Each usage_update carries the running split, as the prompt result does.
    running = [
        u["_meta"]["parley"]["session"]["costBreakdown"]
        for u in client.updates_of(session, "usage_update")
    ]
    assert running == [one, both]
    total = parley_meta(second)["session"]["cost"]["amount"]
    assert total == round(sum(v for k, v in both.items() if k != "currency"), 8)
    shown = len(client.text_of(session))
    await client.prompt(session, "/cost")
    told = client.text_of(session)[shown:]
    assert (
        "cost $0.00749 (uncached input $0.00051, cache reads $0.00027, cache writes $0.00431, "
        "output $0.00240)" in told  # two significant digits of the smallest part: they add up
    )

    # A fresh server reads the split back from the store, summed the same.
    reloaded = await start(start_server, MODELS["anthropic"], home=home)
    loaded = await reloaded.load_session(session, str(workspace))
    assert loaded["_meta"]["parley"]["usage"]["costBreakdown"] == both
    usage = await reloaded.request("_parley/usage", {"sessionId": session})
    assert usage["session"]["costBreakdown"] == both


def test_calls_stored_before_the_split_count_in_the_cost_alone(tmp_path) -> None:
    """A database from before migration 8: its calls keep their cost, in no part of the
    split; calls counted since are split; `/cost` says so."""
    path = tmp_path / "parley.sqlite3"
    old = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:7], start=1):
        old.executescript(script)
        old.execute(f"PRAGMA user_version = {number}")
    old.execute(
        "INSERT INTO sessions (id, cwd, model, tool_policy, created_at, updated_at, rounds) "
        "VALUES ('s', '/w', 'anthropic:claude-sonnet-4-5', 'hybrid', 't', 't', 2)"
    )
    old.execute(
        "INSERT INTO usage (session_id, call, model, input_tokens, output_tokens, "
        "thought_tokens, cached_read_tokens, cached_write_tokens, cost, created_at) "
        "VALUES ('s', 'stream', 'anthropic:claude-sonnet-4-5', 1000, 100, 0, 0, 0, 0.0045, 't')"
    )
    old.commit()
    old.close()

    store = Store(path)
    price = find_price("anthropic:claude-sonnet-4-5", DEFAULT_PRICES)
    assert price is not None
    usage = Usage(1000, 100, cached_read_tokens=800)
    split = price.breakdown(usage)
    store.record_usage("s", "stream", "anthropic:claude-sonnet-4-5", usage, split.total, "u", split)
    totals = store.usage_totals("s")
    store.close()

    assert totals.cost == 0.0045 + split.total
    assert totals.cost_breakdown == split  # only the call counted since
    assert totals.to_wire()["costBreakdown"] == split.to_wire()
    assert "earlier calls not split $0.0045" in describe_totals(totals)


# --- waste: the discarded stream ------------------------------------------------------


async def test_a_discarded_stream_is_estimated_as_waste_not_counted(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    streamed = "Let me check the weather for you."
    fake.set_script(
        [
            Reply(
                text=streamed,
                tool_calls=(WEATHER,),
                usage=(100, 20),
                pacing=Pacing(chunks_per_second=100),
                sync=Reply(text=streamed, tool_calls=(WEATHER,), usage=(120, 25)),
            ),
            Reply(text="It is sunny in Paris.", usage=(150, 8)),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather in Paris?")

    stream, _sync, _final = fake.wait_for_requests(3)
    assert stream.client_hung_up
    meta = parley_meta(result)
    turn = meta["turn"]
    assert turn["discardedStreams"] == 1
    # The streamed text (33 characters: 9 tokens) and the prompt it was sent with.
    assert turn["wastedTokensEstimate"] > 9
    # Usage counts the synchronous call and the final round only: the accounting rule.
    assert meta["usage"]["inputTokens"] == 120 + 150
    assert meta["usage"]["outputTokens"] == 25 + 8
    assert meta["session"]["inputTokens"] == 270


async def test_a_prompt_the_provider_had_cached_is_not_counted_as_re_sent(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    """The synchronous call reads the prompt from the provider's cache (llama.cpp: 1687 of
    1688 tokens): only the uncached part of it, and the text generated again, were paid
    again. The same round without the cache says the whole prompt."""
    client.editor_tool_handler = answer_weather
    streamed = "Let me check the weather for you."

    def script(cached: int) -> list[Reply]:
        sync = Reply(text=streamed, tool_calls=(WEATHER,), usage=(5000, 25), cache=(cached, 0))
        stream = Reply(text=streamed, tool_calls=(WEATHER,), usage=(5000, 20), sync=sync)
        return [stream, Reply(text="Sunny.", usage=(5100, 3))]

    wasted = {}
    for cached in (0, 5000):
        fake.set_script(script(cached))
        session = await client.new_session(str(workspace))
        result = await client.prompt(session, "Weather in Paris?")
        wasted[cached] = parley_meta(result)["turn"]["wastedTokensEstimate"]
    # All cached: only the streamed text generated again (33 characters, about 9 tokens).
    assert wasted[5000] == 9
    assert wasted[0] > 9 + 100  # the system prompt and the tools alone are far more


async def test_a_round_without_discarded_stream_wastes_nothing(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    fake.set_script([Reply(text="Hello.")])
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Hi")
    assert parley_meta(result)["turn"]["wastedTokensEstimate"] == 0


# --- configuration ---------------------------------------------------------------------


def test_the_cache_key_setting_and_cache_prices_come_from_config(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[providers.lmstudio]\n"
        'base_url = "http://localhost:1234/v1"\n'
        "prompt_cache_key = true\n"
        "[providers.openai]\n"
        "prompt_cache_key = false\n"
        '[prices."lmstudio:qwen"]\n'
        "input = 1.0\noutput = 2.0\ncached_read = 0.1\ncached_write = 1.25\n"
    )
    settings = load_settings({"PARLEY_CONFIG": str(config), "PARLEY_HOME": str(tmp_path / "home")})
    assert settings.providers["lmstudio"].prompt_cache_key
    assert not settings.providers["openai"].prompt_cache_key  # turned off
    assert not settings.providers["ollama"].prompt_cache_key
    defaults = load_settings({"PARLEY_CONFIG": str(tmp_path / "none.toml")})
    assert defaults.providers["openai"].prompt_cache_key
    price = find_price("lmstudio:qwen", settings.prices)
    assert price is not None
    breakdown = price.breakdown(Usage(1000, 100, cached_read_tokens=500, cached_write_tokens=200))
    assert breakdown.to_wire() == {
        "uncachedInput": 0.0003,
        "cacheReads": 0.00005,
        "cacheWrites": 0.00025,
        "output": 0.0002,
        "currency": "USD",
    }
    assert price.cost(Usage(1000, 100, cached_read_tokens=500, cached_write_tokens=200)) == 0.0008


# --- a fake that caches like the real APIs -----------------------------------------------


async def test_the_fallback_reads_its_whole_prompt_from_the_cache(
    client: ParleyClient, fake: FakeLLM, provider: str, workspace
) -> None:
    """With breakpoints (Anthropic) or the cache key (OpenAI), the synchronous call of a
    hybrid round reads the prompt its closed stream just sent from the cache, and the next
    round reads it too."""
    fake.prompt_cache = PromptCache(min_tokens=1)
    client.editor_tool_handler = answer_weather
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="Sunny.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather in Paris?")

    calls = [u["_meta"]["parley"]["call"] for u in client.updates_of(session, "usage_update")]
    sync, next_round = calls
    assert sync["inputTokens"] > 0
    assert sync["cachedReadTokens"] == sync["inputTokens"]  # the fallback's whole input
    assert sync["cachedWriteTokens"] == 0
    assert 0 < next_round["cachedReadTokens"] < next_round["inputTokens"]
    if provider == "anthropic":  # the new part is written for the next round
        assert next_round["cachedWriteTokens"] > 0


async def test_thinking_the_server_gave_no_count_of_is_unknown_not_zero(
    start_server: Callable[..., Any], fake: FakeLLM, workspace, tmp_path
) -> None:
    """llama.cpp (like this fake) sends `reasoning_content` but no `reasoning_tokens`: the
    turn's and the session's `thoughtTokens` are absent (unknown), not 0, before and after
    a reload; a turn without thinking still says 0."""
    home = tmp_path / "home"
    fake.set_script([Reply(text="Plain."), Reply(thinking="Hmm, let me see.", text="Done.")])
    client = await start(start_server, MODELS["openai"], home=home)
    session = await client.new_session(str(workspace))
    plain = parley_meta(await client.prompt(session, "One"))
    assert plain["usage"]["thoughtTokens"] == 0
    assert plain["session"]["thoughtTokens"] == 0
    thought = parley_meta(await client.prompt(session, "Two"))
    assert "thoughtTokens" not in thought["usage"]
    assert "thoughtTokens" not in thought["session"]
    assert thought["session"]["outputTokens"] == 10  # the total is known: (10, 5) twice

    reloaded = await start(start_server, MODELS["openai"], home=home)
    usage = await reloaded.request("_parley/usage", {"sessionId": session})
    assert "thoughtTokens" not in usage["session"]
    assert usage["session"]["outputTokens"] == 10
