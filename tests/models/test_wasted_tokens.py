"""The waste a discarded stream is estimated at (`_meta.parley.turn.wastedTokensEstimate`): the
prompt it was sent plus what it streamed before the round turned to tool use, about four
characters a token. Never counted in usage (test_caching.py); shown so a user can see what
hybrid rounds cost them."""

from __future__ import annotations

from typing import Any

from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"Sunny in {params['arguments']['city']}"}


async def wasted_after_streaming(client: ParleyClient, fake: FakeLLM, workspace, text: str) -> int:
    """The waste of one tool round whose stream showed `text`, then a call."""
    fake.set_script(
        [
            Reply(text=text, tool_calls=(WEATHER,), sync=Reply(text=text, tool_calls=(WEATHER,))),
            Reply(text="It is sunny in Paris."),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather in Paris?")
    turn = result["_meta"]["parley"]["turn"]
    assert turn["discardedStreams"] == 1
    return turn["wastedTokensEstimate"]


async def test_the_waste_grows_with_what_the_discarded_stream_showed(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    short = await wasted_after_streaming(client, fake, workspace, "Let me see.")  # 3 tokens
    long = await wasted_after_streaming(client, fake, workspace, "Let me see." + "x" * 400)
    # The same prompt both times: the difference is the 400 more characters streamed.
    assert long - short == 100
    assert short > 3  # and the prompt it was sent counts too
