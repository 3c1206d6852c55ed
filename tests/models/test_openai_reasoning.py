"""The openai provider reads a chunk's reasoning from where each server puts it: a field the
SDK declares (`reasoning_content`, in newer SDKs) or an extra it keeps undeclared
(`reasoning_content` of DeepSeek, vLLM, llama.cpp in older SDKs; `reasoning` of Ollama and
OpenRouter), and nothing from a chunk without any."""

from __future__ import annotations

from openai.types.chat.chat_completion_chunk import ChoiceDelta
from parley.providers.openai_provider import _reasoning_of


class DeclaringDelta(ChoiceDelta):
    reasoning_content: str | None = None


def test_reasoning_is_read_from_a_declared_field_or_an_extra_and_never_invented() -> None:
    assert _reasoning_of(DeclaringDelta(reasoning_content="Paris is in France.")) == (
        "Paris is in France."
    )
    assert _reasoning_of(ChoiceDelta.model_validate({"reasoning_content": "From extras."})) == (
        "From extras."
    )
    assert _reasoning_of(ChoiceDelta.model_validate({"reasoning": "Ollama's name."})) == (
        "Ollama's name."
    )
    assert _reasoning_of(DeclaringDelta(reasoning_content="", content="text")) is None
    assert _reasoning_of(ChoiceDelta(content="Just text.")) is None
    assert _reasoning_of(ChoiceDelta.model_validate({"reasoning": 3})) is None
