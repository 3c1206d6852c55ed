"""Local models: text tool calls, `<think>` sections and the local presets' wire quirks.

Unit tests of `TextToolProvider` / `ThinkTagProvider` (request rewriting, stream and complete
parsing over a stand-in inner provider), then `parley serve` against the fake LLM posing as
Ollama and llama.cpp (their presets pointed at it through a config file).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient
from parley.config import load_settings
from parley.core.conversation import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from parley.core.usage import Usage
from parley.fakellm import FakeLLM, Pacing, Reply, ScriptedToolCall
from parley.providers.base import (
    CompletedToolCall,
    Completion,
    ModelRequest,
    ModelStream,
    Provider,
)
from parley.providers.events import (
    StreamEvent,
    StreamFinished,
    TextDelta,
    ThoughtDelta,
    ToolCallStarted,
)
from parley.providers.openai_provider import to_openai_messages
from parley.providers.registry import ProviderRegistry
from parley.providers.text_tools import (
    TextToolProvider,
    ThinkTagProvider,
    to_text_protocol_messages,
    to_text_protocol_request,
)
from parley.tools.base import ToolSpec

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a text file in the workspace.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    kind="read",
)


def call_text(arguments: str, name: str = "read_file") -> str:
    return f"<tool><tool_name>{name}</tool_name><arguments>{arguments}</arguments></tool>"


CALL_TEXT = call_text('{"path": "geometry.py"}')
BAD_CALL_TEXT = call_text('{"path": geometry.py}')  # not JSON: the path is not quoted
PACED = Pacing(chunks_per_second=100)
USAGE = Usage(10, 5)


# --- Request rewriting -------------------------------------------------------------------


def tool_round() -> tuple[UserMessage, AssistantMessage, ToolResultMessage, ToolResultMessage]:
    prompt = UserMessage((TextBlock("What does area do?"),))
    assistant = AssistantMessage(
        "Let me look.",
        thinking=(ThinkingBlock("The file will say."),),
        tool_calls=(
            ToolCall("call_text_1", "read_file", {"path": "geometry.py"}, "call_w1"),
            ToolCall("call_text_2", "read_file", {"path": "é.py"}, "call_w2"),
        ),
    )
    first = ToolResultMessage("call_text_1", "read_file", "def area(w, h): ...")
    second = ToolResultMessage("call_text_2", "read_file", "No such file: é.py", is_error=True)
    return prompt, assistant, first, second


def test_calls_become_text_of_the_assistant_message_and_results_one_user_message() -> None:
    prompt, assistant, first, second = tool_round()
    follow_up = UserMessage((TextBlock("And perimeter?"),))

    messages = to_text_protocol_messages((prompt, assistant, first, second, follow_up))

    assert len(messages) == 3
    assert messages[0] == prompt
    rewritten = messages[1]
    assert isinstance(rewritten, AssistantMessage) and rewritten.tool_calls == ()
    assert rewritten.text == ("Let me look." + CALL_TEXT + call_text('{"path": "é.py"}'))
    assert rewritten.thinking == assistant.thinking
    results = messages[2]
    assert isinstance(results, UserMessage)
    # Both results, then the next prompt, in one user message: user and assistant alternate.
    assert results.as_text() == (
        '<tool_result name="read_file">\ndef area(w, h): ...\n</tool_result>\n\n'
        '<tool_result name="read_file" error="true">\nNo such file: é.py\n</tool_result>\n\n'
        "And perimeter?"
    )


def test_a_malformed_call_is_not_rendered_again_its_text_is_already_in_the_message() -> None:
    raw = BAD_CALL_TEXT
    bad = ToolCall("call_text_1", "read_file", {}, "call_w1", arguments_error="not JSON")
    messages = to_text_protocol_messages((AssistantMessage(f"Looking.{raw}", tool_calls=(bad,)),))
    assert messages == (AssistantMessage(f"Looking.{raw}"),)


def test_the_request_describes_the_tools_in_the_system_prompt_and_sends_no_native_tools() -> None:
    prompt, assistant, first, second = tool_round()
    request = ModelRequest(
        model="qwen3",
        system="You are Parley.",
        messages=(prompt, assistant, first, second),
        tools=(READ_FILE,),
    )
    rewritten = to_text_protocol_request(request)
    assert rewritten.tools == ()
    assert rewritten.system.startswith("You are Parley.\n\n# Tools")
    assert "## read_file" in rewritten.system and "<tool><tool_name>NAME" in rewritten.system

    # What the OpenAI provider then sends: plain user/assistant turns, valid Chat Completions.
    wire = to_openai_messages(rewritten.system, rewritten.messages)
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "user"]
    assert all(set(m) == {"role", "content"} for m in wire)
    assert all(isinstance(m["content"], str) and m["content"] for m in wire)


def test_without_tools_the_system_prompt_is_unchanged() -> None:
    request = ModelRequest(model="m", system="Be brief.", messages=())
    assert to_text_protocol_request(request).system == "Be brief."


# --- Reading replies, over a stand-in inner provider -------------------------------------


class ScriptedStream(ModelStream):
    def __init__(self, events: list[StreamEvent], completion: Completion) -> None:
        self._scripted = events
        self._scripted_completion = completion
        self.closed = False

    async def _events(self) -> AsyncIterator[StreamEvent]:
        for event in self._scripted:
            if isinstance(event, StreamFinished):
                self.completion = self._scripted_completion
            yield event

    async def _close_transport(self) -> None:
        self.closed = True


class ScriptedProvider(Provider):
    """Streams `chunks` as text deltas; `complete` answers their concatenation."""

    name = "scripted"

    def __init__(self, chunks: list[str], usage: Usage | None = USAGE) -> None:
        self.chunks = chunks
        self.usage = usage
        self.requests: list[ModelRequest] = []
        self.streams: list[ScriptedStream] = []

    def _completion(self) -> Completion:
        return Completion("".join(self.chunks), (), (), "end_turn", self.usage)

    def stream(self, request: ModelRequest) -> ModelStream:
        self.requests.append(request)
        events: list[StreamEvent] = [TextDelta(chunk) for chunk in self.chunks]
        events.append(StreamFinished("end_turn", self.usage))
        stream = ScriptedStream(events, self._completion())
        self.streams.append(stream)
        return stream

    async def complete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        return self._completion()


def text_request() -> ModelRequest:
    return ModelRequest(
        model="m",
        system="",
        messages=(UserMessage((TextBlock("hi"),)),),
        tools=(READ_FILE,),
    )


def cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_stream_announces_the_name_before_the_arguments_and_completes_the_call() -> None:
    reply = f"<think>The file says.</think>Let me look.{CALL_TEXT}"
    inner = ScriptedProvider(cut(reply, 3))
    provider = TextToolProvider(inner)
    events = []
    async with provider.stream(text_request()) as stream:
        async for event in stream:
            events.append(event)

    kinds = [type(event) for event in events]
    started = kinds.index(ToolCallStarted)
    assert ThoughtDelta in kinds[:started] and TextDelta in kinds[:started]
    assert events[started] == ToolCallStarted(0, "read_file")
    assert events[-1] == StreamFinished("tool_use", Usage(10, 5))
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "The file says."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look."

    completion = stream.completion
    assert completion is not None
    assert completion.text == "Let me look."
    assert completion.thinking == (ThinkingBlock("The file says."),)
    (call,) = completion.tool_calls
    assert call.name == "read_file" and call.arguments == {"path": "geometry.py"}
    assert call.id.startswith("call_text_") and call.arguments_error is None
    assert completion.usage == Usage(10, 5)
    assert inner.requests[0].tools == () and "# Tools" in inner.requests[0].system


async def test_closing_early_closes_the_inner_stream() -> None:
    inner = ScriptedProvider(cut(f"Let me look.{CALL_TEXT} and more text after", 5))
    stream = TextToolProvider(inner).stream(text_request())
    async with stream:
        async for event in stream:
            if isinstance(event, ToolCallStarted):
                break
    assert inner.streams[0].closed


async def test_complete_parses_the_whole_reply_like_the_stream() -> None:
    inner = ScriptedProvider([f"<thinking>Hmm.</thinking>Let me look.{CALL_TEXT}"], Usage(7, 3))
    completion = await TextToolProvider(inner).complete(text_request())
    assert completion.text == "Let me look."
    assert completion.thinking == (ThinkingBlock("Hmm."),)
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("read_file", {"path": "geometry.py"})
    ]
    assert completion.finish_reason == "tool_use" and completion.usage == Usage(7, 3)


async def test_a_malformed_call_keeps_its_text_and_carries_the_parsers_sentence() -> None:
    raw = BAD_CALL_TEXT
    completion = await TextToolProvider(ScriptedProvider([f"Looking.{raw}"])).complete(
        text_request()
    )
    assert completion.text == f"Looking.{raw}"
    (call,) = completion.tool_calls
    assert call.name == "read_file" and call.arguments == {}
    assert call.arguments_error is not None
    assert call.arguments_error.startswith("The arguments of tool call 1 (read_file) are not valid")
    assert completion.finish_reason == "tool_use"


async def test_think_tags_off_leaves_think_sections_as_text() -> None:
    inner = ScriptedProvider(["<think>x</think>Answer."])
    completion = await TextToolProvider(inner, think_tags=False).complete(text_request())
    assert completion.text == "<think>x</think>Answer." and completion.thinking == ()


async def test_think_tag_provider_moves_thoughts_and_keeps_native_calls() -> None:
    native_call = CompletedToolCall("call_1", "read_file", {"path": "a.py"})

    class NativeCalls(ScriptedProvider):
        def _completion(self) -> Completion:
            return Completion("".join(self.chunks), (), (native_call,), "tool_use", self.usage)

    inner = NativeCalls(["<thi", "nk>plan</th", "ink>Reading ", "<b>a.py</b>"])
    provider = ThinkTagProvider(inner)
    request = text_request()
    async with provider.stream(request) as stream:
        events = [event async for event in stream]
    assert inner.requests[0] is request  # nothing rewritten
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "plan"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Reading <b>a.py</b>"
    assert stream.completion is not None
    assert stream.completion.tool_calls == (native_call,)
    assert stream.completion.finish_reason == "tool_use"


def test_registry_wraps_by_tool_format_and_think_tags(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[models."ollama:qwen3"]\ntool_format = "text"\n'
        '[models."ollama:plain"]\nthink_tags = false\n'
    )
    settings = load_settings({"PARLEY_CONFIG": str(config), "OPENAI_API_KEY": "sk-x"})
    registry = ProviderRegistry(settings)
    assert isinstance(registry.resolve("ollama:qwen3").provider, TextToolProvider)
    assert isinstance(registry.resolve("ollama:llama3").provider, ThinkTagProvider)
    assert isinstance(registry.resolve("vllm:any").provider, ThinkTagProvider)
    assert type(registry.resolve("ollama:plain").provider).__name__ == "OpenAIProvider"
    assert type(registry.resolve("openai:gpt-4.1").provider).__name__ == "OpenAIProvider"
    # The session's choice wins over the model's.
    assert isinstance(registry.resolve("openai:gpt-4.1", "text").provider, TextToolProvider)
    assert isinstance(registry.resolve("ollama:qwen3", "native").provider, ThinkTagProvider)


# --- End to end: `parley serve` with the local presets pointed at the fake LLM ------------

LOCAL_MODELS = {"ollama": "ollama:qwen3", "llamacpp": "llamacpp:qwen3"}


@pytest.fixture(params=sorted(LOCAL_MODELS))
def local_model(request: pytest.FixtureRequest) -> str:
    return LOCAL_MODELS[request.param]


def write_config(fake: FakeLLM, directory: Path) -> Path:
    """Both local presets point at the fake; `qwen3` calls tools in text, `native` natively."""
    config = directory / "config.toml"
    config.write_text(
        f'[providers.ollama]\nbase_url = "{fake.openai_base_url}"\n'
        f'[providers.llamacpp]\nbase_url = "{fake.openai_base_url}"\n'
        '[models."ollama:qwen3"]\ntool_format = "text"\n'
        '[models."llamacpp:qwen3"]\ntool_format = "text"\n'
    )
    return config


@pytest.fixture
def start_local(
    start_server: Callable[..., Any], fake: FakeLLM, tmp_path: Path
) -> Callable[[str], Any]:
    async def start(model: str) -> ParleyClient:
        config = write_config(fake, tmp_path)
        client = await start_server(model=model, extra_env={"PARLEY_CONFIG": str(config)})
        await client.initialize()
        return client

    return start


def texts(updates: list[dict[str, Any]]) -> str:
    return "".join(update["content"]["text"] for update in updates)


async def test_think_section_shows_as_thoughts_then_text(
    start_local: Callable[[str], Any], fake: FakeLLM, workspace: Path, local_model: str
) -> None:
    fake.set_script([Reply(text="<think>Width times height.</think>It multiplies.", chunk_size=3)])
    client = await start_local(local_model)
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "What does area do?")

    assert result["stopReason"] == "end_turn"
    updates = client.updates_of(session)
    kinds = [u["sessionUpdate"] for u in updates]
    first_text = kinds.index("agent_message_chunk")
    assert "agent_thought_chunk" in kinds[:first_text]
    assert "agent_thought_chunk" not in kinds[first_text:]
    assert texts(client.updates_of(session, "agent_thought_chunk")) == "Width times height."
    assert client.text_of(session) == "It multiplies."


async def test_native_model_on_a_local_preset_reads_think_tags_too(
    start_local: Callable[[str], Any], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script([Reply(text="<thinking>Easy.</thinking>Yes.", chunk_size=2)])
    client = await start_local("llamacpp:native-model")
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Sure?")
    assert texts(client.updates_of(session, "agent_thought_chunk")) == "Easy."
    assert client.text_of(session) == "Yes."
    assert "tools" in fake.requests[0].body  # native tools still go natively


async def test_text_protocol_tool_round_under_the_hybrid_policy(
    start_local: Callable[[str], Any], fake: FakeLLM, workspace: Path, local_model: str
) -> None:
    fake.set_script(
        [
            Reply(
                text=f"Let me look.{CALL_TEXT}",
                usage=(100, 20),
                pacing=PACED,
                sync=Reply(text=f"Let me look.{CALL_TEXT}", usage=(120, 25)),
            ),
            Reply(text="area multiplies width by height.", usage=(150, 8)),
        ]
    )
    client = await start_local(local_model)
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "What does area do?")

    assert result["stopReason"] == "end_turn"
    stream, sync, final = fake.wait_for_requests(3)
    assert len(fake.requests) == 3
    assert [stream.stream, sync.stream, final.stream] == [True, False, True]
    assert stream.client_hung_up and stream.chunks_sent < stream.chunks_total
    assert sync.body["messages"] == stream.body["messages"]

    # No native tools: the system prompt teaches the protocol and lists the tools.
    for request in (stream, sync, final):
        assert "tools" not in request.body
        system = request.body["messages"][0]
        assert system["role"] == "system" and "## read_file" in system["content"]
        assert "<tool><tool_name>NAME</tool_name>" in system["content"]

    # The call goes back as text, its result as a user message in the protocol.
    roles = [m["role"] for m in final.body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assistant, results = final.body["messages"][2:]
    assert assistant["content"] == f"Let me look.{CALL_TEXT}"
    assert "tool_calls" not in assistant
    assert results["content"].startswith('<tool_result name="read_file">\n')
    assert "def area(width, height):" in results["content"]

    # The early tool_call update came while the stream was still open, with a stable id.
    updates = client.updates_of(session)
    announced = next(u for u in updates if u["sessionUpdate"] == "tool_call")
    assert announced["title"] == "read_file" and announced["status"] == "pending"
    statuses = [
        u.get("status")
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == announced["toolCallId"]
    ]
    assert statuses == [None, "in_progress", "completed"]
    raw_input = next(u["rawInput"] for u in updates if u.get("rawInput"))
    assert raw_input == {"path": "geometry.py"}
    assert client.text_of(session) == "Let me look.area multiplies width by height."

    # Usage: the synchronous call's plus the final stream's, never the discarded stream's.
    assert result["_meta"]["parley"]["usage"]["inputTokens"] == 120 + 150
    assert result["_meta"]["parley"]["usage"]["outputTokens"] == 25 + 8
    stats = result["_meta"]["parley"]["turn"]
    assert stats["syncFallbacks"] == 1 and stats["discardedStreams"] == 1
    assert stats["toolCalls"] == 1 and result["_meta"]["parley"]["usageComplete"] is True


async def test_a_malformed_call_goes_back_to_the_model_as_an_error(
    start_local: Callable[[str], Any], fake: FakeLLM, workspace: Path
) -> None:
    bad_call = BAD_CALL_TEXT
    fake.set_script(
        [
            Reply(text=bad_call, pacing=PACED),
            Reply(text=CALL_TEXT, pacing=PACED),
            Reply(text="Done."),
        ]
    )
    client = await start_local("ollama:qwen3")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Read geometry.py")

    assert result["stopReason"] == "end_turn"
    second_round = next(r for r in fake.requests if r.reply_index == 1)
    assistant, results = second_round.body["messages"][2:]
    assert assistant["content"] == bad_call  # the model sees what it sent
    assert results["content"].startswith('<tool_result name="read_file" error="true">')
    assert "not valid JSON" in results["content"]
    # The model fixed its call, and the fixed call ran.
    final = fake.requests[-1].body["messages"]
    assert "def area(width, height):" in final[-1]["content"]
    failed = [u for u in client.updates_of(session, "tool_call_update") if u.get("status")]
    assert [u["status"] for u in failed] == ["failed", "in_progress", "completed"]


async def test_text_protocol_tool_call_under_the_stream_policy(
    start_local: Callable[[str], Any], fake: FakeLLM, workspace: Path
) -> None:
    fake.set_script(
        [
            Reply(text=f"Reading.{CALL_TEXT}", usage=(30, 12)),
            Reply(text="Done.", usage=(50, 2)),
        ]
    )
    client = await start_local("ollama:qwen3")
    session = await client.new_session(str(workspace), toolPolicy="stream")
    result = await client.prompt(session, "Read it")

    # The call is assembled from the stream: no synchronous call, nothing discarded.
    assert [(r.stream, r.client_hung_up) for r in fake.requests] == [(True, False)] * 2
    assert "def area(width, height):" in fake.requests[-1].body["messages"][-1]["content"]
    assert result["_meta"]["parley"]["usage"]["inputTokens"] == 30 + 50
    assert result["_meta"]["parley"]["turn"]["toolCalls"] == 1


def write_sse(path: Path, chunks: list[dict[str, Any]]) -> Path:
    envelope = {"id": "chatcmpl-209", "object": "chat.completion.chunk", "created": 1}
    lines = [f"data: {json.dumps({**envelope, 'model': 'qwen3', **chunk})}\n\n" for chunk in chunks]
    path.write_text("".join(lines) + "data: [DONE]\n\n")
    return path


def ollama_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """Ollama's shape: the role repeated on every chunk."""
    choice = {"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": finish_reason}
    return {"choices": [choice]}


async def test_ollama_stream_with_role_on_every_chunk_and_no_usage(
    start_local: Callable[[str], Any], fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    sse = write_sse(
        tmp_path / "ollama_text.sse",
        [
            ollama_chunk({"reasoning": "Native reasoning. "}),  # Ollama's field name
            ollama_chunk({"content": "<think>Short"}),
            ollama_chunk({"content": ".</think>The area"}),
            ollama_chunk({"content": " is w*h."}),
            ollama_chunk({"content": ""}, "stop"),
        ],
    )
    fake.set_script([Reply(raw_stream=sse)])
    client = await start_local("ollama:qwen3")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Area?")

    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == "The area is w*h."
    thoughts = texts(client.updates_of(session, "agent_thought_chunk"))
    assert thoughts == "Native reasoning. Short."
    assert fake.requests[0].body["stream_options"] == {"include_usage": True}
    # Nothing was reported, so nothing is invented: the turn says its usage is incomplete.
    assert result["_meta"]["parley"]["usage"]["totalTokens"] == 0
    assert result["_meta"]["parley"]["usageComplete"] is False


@pytest.mark.parametrize("with_index", [True, False], ids=["index", "no-index"])
async def test_native_tool_call_whole_in_one_delta_under_finish_reason_stop(
    start_local: Callable[[str], Any],
    fake: FakeLLM,
    workspace: Path,
    tmp_path: Path,
    with_index: bool,
) -> None:
    call: dict[str, Any] = {
        "id": "call_ollama_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "geometry.py"}'},
    }
    if with_index:
        call["index"] = 0
    sse = write_sse(
        tmp_path / "ollama_tool.sse",
        [
            ollama_chunk({"content": "", "tool_calls": [call]}),
            ollama_chunk({"content": ""}, "stop"),
        ],
    )
    fake.set_script(
        [
            Reply(
                raw_stream=sse,
                sync=Reply(
                    tool_calls=(ScriptedToolCall("read_file", {"path": "geometry.py"}),),
                    finish_reason="stop",
                    usage=(60, 9),
                ),
            ),
            Reply(text="It multiplies.", usage=(80, 4)),
        ]
    )
    client = await start_local("ollama:native-model")
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Area?")

    assert result["stopReason"] == "end_turn"
    assert [r.stream for r in fake.requests] == [True, False, True]
    assert "tools" in fake.requests[0].body
    (announced,) = client.updates_of(session, "tool_call")
    assert announced["title"] == "read_file"
    assert client.text_of(session) == "It multiplies."
    tool_message = next(m for m in fake.requests[-1].body["messages"] if m["role"] == "tool")
    assert "def area(width, height):" in tool_message["content"]
    assert result["_meta"]["parley"]["usage"]["inputTokens"] == 60 + 80
    assert result["_meta"]["parley"]["usageComplete"] is True
