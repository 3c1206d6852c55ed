"""Rows 9 and 10: what the model is sent: the hybrid fallback's input read from the prompt
cache, and compacting a long history."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from parley.bench.harness import (
    BENCH_MODEL,
    WEATHER_CALL,
    WEATHER_TOOL,
    BenchSizes,
    Row,
    answer_weather,
    ms,
    server_environment,
    verdict,
)
from parley.bench.sessions import TOOL_OUTPUT_LINE, write_long_session
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, PromptCache, Reply

# --- 9. prompt caching: the hybrid fallback's input ------------------------------------------

CACHE_MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": f"openai:{BENCH_MODEL}"}


async def fallback_cache_usage(fake: FakeLLM, home: Path, model: str) -> list[dict[str, Any]]:
    """The counted calls' usage of one hybrid tool round and the round after it, against a
    fake that caches like the real APIs (`PromptCache`, their 1,024-token minimum)."""
    env = {
        **server_environment(fake, home),
        "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
        "ANTHROPIC_API_KEY": "sk-ant-bench-parley",
        "PARLEY_MODEL": model,
    }
    client = await ParleyClient.spawn(env=env)
    fake.prompt_cache = PromptCache()
    try:
        client.editor_tool_handler = answer_weather
        await client.initialize(tools=[WEATHER_TOOL])
        workspace = home / "workspace"
        workspace.mkdir(exist_ok=True)
        fake.set_script([Reply(text="Let me look.", tool_calls=(WEATHER_CALL,)), Reply("Sunny.")])
        session = await client.new_session(str(workspace))
        await client.prompt(session, "Weather in Paris?", timeout=120)
        return [u["_meta"]["parley"]["call"] for u in client.updates_of(session, "usage_update")]
    finally:
        fake.prompt_cache = None
        await client.stop()


async def cache_rows(fake: FakeLLM, home: Path) -> list[Row]:
    rows = []
    for letter, (provider, model) in zip("ab", CACHE_MODELS.items(), strict=True):
        sync, _next_round = await fallback_cache_usage(fake, home, model)
        share = sync["cachedReadTokens"] / max(sync["inputTokens"], 1)
        how = "cache breakpoints" if provider == "anthropic" else "`prompt_cache_key`"
        rows.append(
            Row(
                measure=f"9{letter}. Hybrid fallback ({model}, {how}): share of the synchronous "
                f"call's {sync['inputTokens']:,} input tokens billed as cache reads, against a "
                "fake that caches like the real API",
                parley=f"{share:.0%}",
                baseline="0% (no caching asked for)" if provider == "anthropic" else "by luck",
                target=verdict("≥ 90%", share >= 0.9),
            )
        )
    return rows


# --- 10. compacting a long history ---------------------------------------------------------

# The window configured for row 10: the 150k-token history does not fit, so it must compact.
COMPACTION_WINDOW = 128_000
COMPACTION_MESSAGES = 200  # 50 rounds; the tool outputs make up the tokens


async def compaction_row(fake: FakeLLM, home: Path, sizes: BenchSizes) -> Row:
    """`_parley/session/compact` on a stored session of about `compaction_tokens` estimated
    tokens; the fake answers the summary call."""
    from parley.agent.compaction import CHARS_PER_TOKEN

    workspace = home / "workspace"
    workspace.mkdir(exist_ok=True)
    rounds = COMPACTION_MESSAGES // 4
    lines = sizes.compaction_tokens * CHARS_PER_TOKEN // (rounds * len(TOOL_OUTPUT_LINE))
    session_id = write_long_session(
        home / "compaction-data", workspace, COMPACTION_MESSAGES, tool_output_lines=lines
    )
    config = home / "compaction-config.toml"
    config.write_text(f'[models."openai:{BENCH_MODEL}"]\ncontext_window = {COMPACTION_WINDOW}\n')
    env = {
        **server_environment(fake, home),
        "PARLEY_HOME": str(home / "compaction-data"),
        "PARLEY_CONFIG": str(config),
    }
    fake.set_script([Reply(text="The user asked about `area` in geometry.py many times. " * 8)])
    client = await ParleyClient.spawn(env=env)
    try:
        await client.initialize()
        await client.request(
            "session/resume", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
        )
        started = time.monotonic()
        counts = await client.request(
            "_parley/session/compact", {"sessionId": session_id}, timeout=120
        )
        elapsed = time.monotonic() - started
    finally:
        await client.stop()
    before, after = counts["tokensBefore"], counts["tokensAfter"]
    return Row(
        measure=f"10. Compacting a history of {before:,} estimated tokens "
        f"({COMPACTION_MESSAGES} messages, window {COMPACTION_WINDOW:,}): "
        "`_parley/session/compact`, the summary call answered by the fake (baseline: the "
        "tokens before)",
        parley=f"{ms(elapsed)}, {after:,} tokens after",
        baseline=f"{before:,} tokens",
        compared=f"{after / max(before, 1):.1%} of the tokens",
        target=verdict("under the window", after < COMPACTION_WINDOW),
    )
