"""A local fake LLM provider for tests: real HTTP, the OpenAI and Anthropic wire formats.

    from parley.fakellm import FakeLLM, Reply
    with FakeLLM(script=[Reply(text="hi")]) as fake:
        ...  # point an SDK at fake.openai_base_url or fake.anthropic_base_url

`script` says what is answered (replies, pacing, faults), `context_limit` refuses requests
longer than a window as real servers do, `server` serves it, `openai_wire`
and `anthropic_wire` render it, `recordings` replays recorded bodies, `codec` is the JSON
form used by the control endpoints and `python -m parley.fakellm`, `prompt_cache` computes
usage as a provider's prompt cache would.
"""

from parley.fakellm.context_limit import ContextLimit
from parley.fakellm.prompt_cache import PromptCache
from parley.fakellm.script import Fault, Pacing, RecordedRequest, Reply, ScriptedToolCall
from parley.fakellm.server import FakeLLM

__all__ = [
    "ContextLimit",
    "FakeLLM",
    "Fault",
    "Pacing",
    "PromptCache",
    "RecordedRequest",
    "Reply",
    "ScriptedToolCall",
]
