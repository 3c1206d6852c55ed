"""A turn stopped mid-stream counts what the provider read and generated: the provider's own
figures where it sent any (Anthropic's input, at the stream's start), else Parley's estimate,
marked as one in the turn's stats, the session's totals and `/cost`; never 0."""

from __future__ import annotations

import asyncio

import pytest
from conftest import MODELS
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Pacing, Reply
from parley.store import Store

WORDS = "word " * 665  # 665 chunks of 5 characters


async def stop_after(client: ParleyClient, session: str, chunks: int) -> dict:
    prompt = asyncio.ensure_future(client.prompt(session, "Talk for a long time."))
    await client.wait_for_update(
        session, lambda _: len(client.text_of(session)) >= 5 * chunks, timeout=60
    )
    client.cancel(session)
    return await asyncio.wait_for(prompt, 10)


async def test_a_stopped_stream_counts_its_estimate(
    start_server, fake: FakeLLM, workspace, tmp_path
) -> None:
    home = tmp_path / "home"
    client: ParleyClient = await start_server(home=home, model=MODELS["openai"])
    await client.initialize()
    fake.set_script(
        [Reply(text=WORDS, chunk_size=5, pacing=Pacing(chunks_per_second=200)), Reply(text="ok")]
    )
    session = await client.new_session(str(workspace))
    result = await stop_after(client, session, 100)
    parley = result["_meta"]["parley"]
    streamed = len(client.text_of(session))
    assert result["stopReason"] == "cancelled"
    assert parley["usageComplete"] is False  # the provider never reported it
    assert parley["turn"]["estimatedCalls"] == 1
    usage = parley["usage"]
    assert usage["outputTokens"] == (streamed + 3) // 4  # what was streamed, ~4 characters each
    assert usage["inputTokens"] > 0  # the request it read, estimated
    assert parley["session"]["outputTokens"] == usage["outputTokens"]
    assert parley["turn"]["cost"]["amount"] > 0  # gpt-4.1-mini has a price

    shown = len(client.text_of(session))
    await client.prompt(session, "/cost")
    told = client.text_of(session)[shown:]
    assert "of which 1 call cut off, estimated" in told

    store = Store.open_in(home)
    try:
        totals = store.usage_totals(session)
    finally:
        store.close()
    assert totals.estimated_calls == 1 and totals.usage.output_tokens == usage["outputTokens"]


async def test_anthropic_input_is_the_providers_own_count(
    start_server, fake: FakeLLM, workspace, tmp_path
) -> None:
    client: ParleyClient = await start_server(home=tmp_path / "home", model=MODELS["anthropic"])
    await client.initialize()
    fake.set_script(
        [
            Reply(
                text=WORDS,
                chunk_size=5,
                usage=(1234, 665),
                pacing=Pacing(chunks_per_second=200),
            )
        ]
    )
    session = await client.new_session(str(workspace))
    result = await stop_after(client, session, 50)
    usage = result["_meta"]["parley"]["usage"]
    assert usage["inputTokens"] == 1234  # message_start said so before the stop
    assert 0 < usage["outputTokens"] < 665
    assert result["_meta"]["parley"]["turn"]["estimatedCalls"] == 1


async def test_a_provider_error_before_any_output_counts_nothing(
    start_server, fake: FakeLLM, workspace, tmp_path
) -> None:
    from parley.fakellm import Fault
    from pygls.exceptions import JsonRpcException

    client: ParleyClient = await start_server(home=tmp_path / "home")
    await client.initialize()
    fake.set_script([Reply(text="never", fault=Fault("http", status=400))])
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException):
        await client.prompt(session, "Fail.")
    totals = await client.request("_parley/usage", {"sessionId": session})
    assert totals["session"]["outputTokens"] == 0 and "estimatedCalls" not in totals["session"]
