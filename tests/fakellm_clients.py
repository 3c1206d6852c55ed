"""Clients of the fake LLM (`parley.fakellm`) through the real OpenAI and Anthropic SDKs, over
real HTTP, for its tests (tests/models/test_fakellm_wire.py, test_fakellm_script.py): the
SDKs' async clients as fixtures on conftest's `fake`, and what a client of a stream does.

Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest
from parley.fakellm import FakeLLM

USER_TURN = [{"role": "user", "content": "What is the weather in Paris?"}]

# The fake speaks plain HTTP: `verify=False` saves loading the CA bundle for every client
# (~0.1 s each, most of these tests' run time otherwise).


@pytest.fixture
async def openai_client(fake: FakeLLM) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=fake.openai_base_url,
        api_key="test-key",
        http_client=openai.DefaultAsyncHttpxClient(verify=False),
    ) as client:
        yield client


@pytest.fixture
async def anthropic_client(fake: FakeLLM) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        base_url=fake.anthropic_base_url,
        api_key="test-key",
        http_client=anthropic.DefaultAsyncHttpxClient(verify=False),
    ) as client:
        yield client


def sync_openai_client(fake_url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=fake_url + "/v1",
        api_key="test-key",
        http_client=openai.DefaultHttpxClient(verify=False),
    )


async def openai_stream_chunks(client: openai.AsyncOpenAI, **request: Any) -> list[Any]:
    stream = await client.chat.completions.create(
        model="gpt-test", messages=request.pop("messages", USER_TURN), stream=True, **request
    )
    return [chunk async for chunk in stream]


def assembled_openai_tool_calls(chunks: list[Any]) -> list[dict[str, str]]:
    """Tool calls put together from stream deltas, as a client of the SDK does."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    return [calls[index] for index in sorted(calls)]
