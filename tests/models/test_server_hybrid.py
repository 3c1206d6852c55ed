"""The hybrid policy end to end: `parley serve` as a subprocess, the fake LLM over HTTP,
both providers' wire formats."""

from __future__ import annotations

import json
import time
from typing import Any

from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})
PACED = Pacing(chunks_per_second=100)


def answer_weather(params: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"Sunny, 21 °C in {params['arguments']['city']}"}


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [update["sessionUpdate"] for update in updates]


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["messages"]


async def test_text_streams_as_notifications_before_the_result(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    text = "The area is width times height, computed in geometry.area."
    fake.set_script([Reply(text=text, chunk_size=3, pacing=Pacing(chunks_per_second=60))])
    session = await client.new_session(str(workspace))
    arrivals: list[float] = []
    client.on_update = lambda _, update: arrivals.append(time.monotonic())

    result = await client.prompt(session, "What does area do?")
    answered = time.monotonic()

    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == text
    chunks = client.updates_of(session, "agent_message_chunk")
    assert len(chunks) == len(range(0, len(text), 3))  # one notification per delta
    assert all(arrival <= answered for arrival in arrivals)
    # The first words were on screen long before the answer was complete.
    assert answered - arrivals[0] > 0.15
    (request,) = fake.requests
    assert request.stream and not request.client_hung_up


async def test_tool_round_one_early_closed_stream_one_sync_call(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [
            # The stream is paced so the hang-up can be seen before its last chunk.
            Reply(
                text="Let me check the weather.",
                tool_calls=(WEATHER,),
                usage=(100, 20),
                pacing=PACED,
                sync=Reply(
                    text="Let me check the weather.", tool_calls=(WEATHER,), usage=(120, 25)
                ),
            ),
            Reply(text="It is sunny in Paris.", usage=(150, 8)),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather in Paris?")

    stream, sync, final = fake.wait_for_requests(3)
    assert [stream.stream, sync.stream, final.stream] == [True, False, True]
    assert stream.client_hung_up and stream.chunks_sent < stream.chunks_total
    assert messages_of(sync.body) == messages_of(stream.body)  # the same request
    assert "Sunny, 21 °C in Paris" in json.dumps(messages_of(final.body), ensure_ascii=False)
    assert len(fake.requests) == 3

    # The editor ran the tool with the complete arguments of the synchronous call.
    (call,) = client.editor_calls
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Paris"}

    # Usage: the synchronous call's plus the final stream's, never the discarded stream's.
    assert result["_meta"]["parley"]["usage"]["inputTokens"] == 120 + 150
    assert result["_meta"]["parley"]["usage"]["outputTokens"] == 25 + 8
    assert result["_meta"]["parley"]["usage"]["totalTokens"] == 303
    stats = result["_meta"]["parley"]["turn"]
    assert stats["rounds"] == 2 and stats["streamedRounds"] == 2
    assert stats["syncFallbacks"] == 1 and stats["discardedStreams"] == 1
    assert stats["toolCalls"] == 1 and result["_meta"]["parley"]["usageComplete"] is True
    usage_updates = client.updates_of(session, "usage_update")
    assert [u["_meta"]["parley"]["call"]["inputTokens"] for u in usage_updates] == [120, 150]

    # The editor saw the tool announced early, then completed, with one stable id.
    updates = client.updates_of(session)
    announced = next(u for u in updates if u["sessionUpdate"] == "tool_call")
    assert announced["title"] == "get_weather" and announced["status"] == "pending"
    tool_id = announced["toolCallId"]
    statuses = [
        u.get("status")
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == tool_id
    ]
    assert statuses == [None, "in_progress", "completed"]  # rawInput, started, finished
    finished = [u for u in updates if u.get("status") == "completed"][-1]
    assert finished["content"][0]["content"]["text"] == "Sunny, 21 °C in Paris"
    assert client.text_of(session) == "Let me check the weather.It is sunny in Paris."


async def test_tool_call_under_finish_reason_stop_is_still_handled(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [
            Reply(tool_calls=(WEATHER,), finish_reason="stop", pacing=PACED),
            Reply(text="Sunny.", usage=(40, 2)),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn"
    assert len(client.editor_calls) == 1
    assert [r.stream for r in fake.requests] == [True, False, True]


async def test_revision_when_the_sync_call_says_something_else(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [
            Reply(
                text="I will look it up",
                tool_calls=(WEATHER,),
                pacing=PACED,
                sync=Reply(text="Checking the forecast.", tool_calls=(WEATHER,)),
            ),
            Reply(text=" Done."),
        ]
    )
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")

    chunks = client.updates_of(session, "agent_message_chunk")
    streamed_id = chunks[0]["messageId"]
    revision = next(c for c in chunks if c.get("_meta"))
    assert revision["_meta"]["parley"]["replaces"] == streamed_id
    assert revision["content"]["text"] == "Checking the forecast."
    assert client.text_of(session) == "Checking the forecast. Done."
    # The history holds the synchronous call's text: it is what the model sees next time.
    assert "Checking the forecast." in json.dumps(fake.requests[-1].body)
    assert "I will look it up" not in json.dumps(fake.requests[-1].body)


async def test_sync_text_that_continues_the_stream_is_appended_not_revised(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [
            Reply(
                text="Let me check",
                tool_calls=(WEATHER,),
                pacing=PACED,
                sync=Reply(text="Let me check the weather.", tool_calls=(WEATHER,)),
            ),
            Reply(text=" Sunny."),
        ]
    )
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")
    chunks = client.updates_of(session, "agent_message_chunk")
    assert not [c for c in chunks if c.get("_meta")]
    assert "".join(c["content"]["text"] for c in chunks) == "Let me check the weather. Sunny."


async def test_correction_when_the_sync_call_picks_other_tools(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [
            Reply(
                tool_calls=(ScriptedToolCall("get_wether", {"city": "Paris"}),),
                pacing=PACED,
                sync=Reply(tool_calls=(WEATHER,)),
            ),
            Reply(text="Sunny."),
        ]
    )
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")
    updates = client.updates_of(session)
    announced = next(u for u in updates if u["sessionUpdate"] == "tool_call")
    assert announced["title"] == "get_wether"
    correction = next(
        u for u in updates if u["sessionUpdate"] == "tool_call_update" and "title" in u
    )
    assert correction["toolCallId"] == announced["toolCallId"]
    assert correction["title"] == "get_weather"
    assert client.editor_calls[0]["toolCallId"] == announced["toolCallId"]


async def test_announced_call_the_sync_call_dropped_is_superseded(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    fake.set_script(
        [Reply(tool_calls=(WEATHER,), pacing=PACED, sync=Reply(text="Actually, it is sunny."))]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn"
    assert client.editor_calls == []
    superseded = [
        u for u in client.updates_of(session, "tool_call_update") if u.get("status") == "failed"
    ]
    assert superseded and superseded[0]["_meta"]["parley"]["superseded"] is True
    said = superseded[0]["content"][0]["content"]["text"]
    assert said == "The model did not make this call after all."
    assert client.text_of(session) == "Actually, it is sunny."


async def test_stream_policy_assembles_tool_calls_from_the_stream(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [Reply(tool_calls=(WEATHER,), usage=(30, 9)), Reply(text="Sunny.", usage=(50, 2))]
    )
    session = await client.new_session(str(workspace), toolPolicy="stream")
    result = await client.prompt(session, "Weather?")
    assert [r.stream for r in fake.requests] == [True, True]
    assert not fake.requests[0].client_hung_up
    assert client.editor_calls[0]["arguments"] == {"city": "Paris"}
    assert result["_meta"]["parley"]["usage"]["inputTokens"] == 80
    assert result["_meta"]["parley"]["turn"]["discardedStreams"] == 0


async def test_sync_policy_never_streams(client: ParleyClient, fake: FakeLLM, workspace) -> None:
    client.editor_tool_handler = answer_weather
    fake.set_script(
        [Reply(tool_calls=(WEATHER,), usage=(30, 9)), Reply(text="Sunny.", usage=(50, 2))]
    )
    session = await client.new_session(str(workspace), toolPolicy="sync")
    result = await client.prompt(session, "Weather?")
    assert [r.stream for r in fake.requests] == [False, False]
    assert client.text_of(session) == "Sunny."
    assert result["_meta"]["parley"]["usage"]["inputTokens"] == 80
    assert result["_meta"]["parley"]["turn"]["streamedRounds"] == 0


async def test_thoughts_stream_apart_from_the_answer(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    fake.set_script([Reply(thinking="The user wants the area.", text="Width times height.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "area?")
    thoughts = "".join(
        u["content"]["text"] for u in client.updates_of(session, "agent_thought_chunk")
    )
    assert thoughts == "The user wants the area."
    assert client.text_of(session) == "Width times height."
    first_thought = kinds(client.updates_of(session)).index("agent_thought_chunk")
    assert first_thought < kinds(client.updates_of(session)).index("agent_message_chunk")


async def test_permission_asked_and_allowed_always_is_remembered(
    start_server, fake: FakeLLM, workspace
) -> None:
    client = await start_server()
    tool = {
        "name": "elisp_eval",
        "description": "Evaluate Emacs Lisp.",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}},
        "kind": "execute",
        "needsPermission": True,
    }
    await client.initialize(tools=[tool])
    client.editor_tool_handler = lambda params: {"content": "3"}
    client.permission_handler = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "allow_always"}
    }
    call = ScriptedToolCall("elisp_eval", {"code": "(+ 1 2)"})
    fake.set_script(
        [
            Reply(tool_calls=(call,)),
            Reply(text="3."),
            Reply(tool_calls=(call,)),
            Reply(text="3 again."),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Add.")
    assert result["_meta"]["parley"]["turn"]["toolCalls"] == 1
    (asked,) = client.permission_requests
    assert asked["toolCall"]["title"] == "elisp_eval"
    assert asked["toolCall"]["rawInput"] == {"code": "(+ 1 2)"}
    assert {option["kind"] for option in asked["options"]} == {
        "allow_once",
        "allow_always",
        "reject_once",
    }
    await client.prompt(session, "Again.")
    assert len(client.permission_requests) == 1  # allowed always: not asked again
    assert len(client.editor_calls) == 2


async def test_rejected_call_does_not_run_and_the_model_is_told(
    start_server, fake: FakeLLM, workspace
) -> None:
    client = await start_server()
    marker = workspace / "written.txt"
    fake.set_script(
        [
            Reply(
                tool_calls=(
                    ScriptedToolCall(
                        "python_eval", {"code": f"open({str(marker)!r}, 'w').write('x')"}
                    ),
                )
            ),
            Reply(text="Understood."),
        ]
    )
    await client.initialize()
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Write the file.")
    assert result["stopReason"] == "end_turn"
    assert len(client.permission_requests) == 1
    assert not marker.exists()
    assert "rejected" in json.dumps(fake.requests[-1].body)
    failed = [
        u for u in client.updates_of(session, "tool_call_update") if u.get("status") == "failed"
    ]
    assert failed, "the rejected call is shown as failed"


async def test_auto_approve_runs_eval_without_asking(
    start_server, fake: FakeLLM, workspace
) -> None:
    client = await start_server()
    client.permission_handler = allow_all
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "6 * 7"}),)), Reply(text="42.")]
    )
    await client.initialize()
    session = await client.new_session(str(workspace), autoApprove=["python_eval"])
    await client.prompt(session, "Compute.")
    assert client.permission_requests == []
    assert "42" in json.dumps(fake.requests[-1].body)


async def test_session_tool_format_text_uses_the_text_protocol(
    client: ParleyClient, fake: FakeLLM, workspace
) -> None:
    client.editor_tool_handler = answer_weather
    call = '<tool><tool_name>get_weather</tool_name><arguments>{"city": "Paris"}</arguments></tool>'
    fake.set_script([Reply(text="Checking." + call, pacing=PACED), Reply(text="Sunny.")])
    session = await client.new_session(str(workspace), toolFormat="text")
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn"
    assert client.editor_calls[0]["arguments"] == {"city": "Paris"}
    stream, sync, final = fake.requests
    assert stream.client_hung_up and not sync.stream
    assert "tools" not in stream.body  # no native tools: they are described in the prompt
    assert "get_weather" in json.dumps(stream.body)
    assert "Sunny, 21 °C in Paris" in json.dumps(final.body, ensure_ascii=False)

    # Switching back to native tools applies from the next round.
    await client.request(
        "_parley/session/configure", {"sessionId": session, "toolFormat": "native"}
    )
    fake.set_script([Reply(text="ok")])
    await client.prompt(session, "Again?")
    tools = fake.requests[-1].body["tools"]
    assert "get_weather" in [tool.get("name") or tool["function"]["name"] for tool in tools]


async def test_a_finish_reason_only_round_counts_the_synchronous_call_not_the_full_stream(
    client: ParleyClient, fake: FakeLLM, workspace, provider: str
) -> None:
    """The stream ran to its end and reported usage, but showed no call, only the finish
    reason; the synchronous call gave the calls. Only that call is counted (the mission's
    rule on the one path where the discarded stream has usage to count)."""
    client.editor_tool_handler = answer_weather
    tool_use = {"openai": "tool_calls", "anthropic": "tool_use"}[provider]
    fake.set_script(
        [
            Reply(
                text="Let me check the weather.",
                finish_reason=tool_use,
                usage=(100, 20),
                sync=Reply(
                    text="Let me check the weather.", tool_calls=(WEATHER,), usage=(120, 25)
                ),
            ),
            Reply(text="It is sunny in Paris.", usage=(150, 8)),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather in Paris?")

    stream, sync, final = fake.wait_for_requests(3)
    assert [stream.stream, sync.stream, final.stream] == [True, False, True]
    assert not stream.client_hung_up  # the stream ran to its end, usage included
    assert len(client.editor_calls) == 1
    usage = result["_meta"]["parley"]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == (120 + 150, 25 + 8)
    usage_updates = client.updates_of(session, "usage_update")
    assert [u["_meta"]["parley"]["call"]["inputTokens"] for u in usage_updates] == [120, 150]
