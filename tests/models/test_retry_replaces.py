"""Retry of a cut-off turn replaces it: after Stop or a provider failure, a prompt sent with
`_meta.parley.retry` takes the cut-off turn's place. The model is sent one prompt and no
cut-off answer, and a reopened session, its export and its turn count show one prompt and
one answer. The cut-off attempt's cost stays counted: the provider billed it. A retry after
a finished turn, or after anything else happened, is an ordinary prompt."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import MODELS
from parley.client import ParleyClient, allow_all
from parley.fakellm import FakeLLM, Fault, Pacing, Reply, ScriptedToolCall
from pygls.exceptions import JsonRpcException

LONG = "word " * 600  # streamed slowly enough to be stopped halfway
PROMPT = "Explain the build."


def user_texts(body: dict) -> list[str]:
    """The user messages' text of a recorded OpenAI request."""
    return [str(m["content"]) for m in body["messages"] if m["role"] == "user"]


def assistant_texts(body: dict) -> list[str]:
    return [str(m.get("content") or "") for m in body["messages"] if m["role"] == "assistant"]


# The editor's context sent with the prompt (a selection): a retry sends it again too.
CONTEXT = ({"uri": "file:///project/build.log", "text": "error: missing header\n"},)


async def stopped_turn(client: ParleyClient, session: str, text: str = PROMPT) -> dict:
    """A turn the user stops once some of its answer has streamed."""
    prompt = asyncio.ensure_future(client.prompt(session, text, CONTEXT))
    await client.wait_for_update(session, lambda _: len(client.text_of(session)) >= 50, 60)
    client.cancel(session)
    return await asyncio.wait_for(prompt, 10)


async def replayed_prompts(client: ParleyClient, session: str, workspace: Path) -> list[str]:
    """The user's prompts a reopened session shows, in order."""
    await client.load_session(session, str(workspace))
    chunks = client.updates_of(session, "user_message_chunk")
    return [u["content"]["text"] for u in chunks if u["content"]["type"] == "text"]


async def test_retry_after_stop_replaces_the_cut_off_turn(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    client: ParleyClient = await start_server(home=home)
    await client.initialize()
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text=LONG, chunk_size=5, pacing=Pacing(chunks_per_second=200))])
    stopped = await stopped_turn(client, session)
    assert stopped["stopReason"] == "cancelled"
    cut_off_cost = stopped["_meta"]["parley"]["turn"]["cost"]["amount"]
    assert cut_off_cost > 0

    # The fake answers by the number of assistant messages sent: with the cut-off answer
    # still in the conversation this would be the second reply.
    fake.set_script([Reply(text="The whole answer."), Reply(text="Stacked.")])
    retried = await client.prompt(session, PROMPT, CONTEXT, retry=True)
    assert retried["stopReason"] == "end_turn"
    assert retried["_meta"]["parley"]["replaced"] is True
    sent = fake.requests[-1].body
    assert len(user_texts(sent)) == 1 and PROMPT in user_texts(sent)[0]  # once, not twice
    assert "missing header" in user_texts(sent)[0]  # with its context
    assert not any("word word" in text for text in assistant_texts(sent))  # no cut-off answer
    session_totals = retried["_meta"]["parley"]["session"]
    assert session_totals["turns"] == 1
    turn_cost = retried["_meta"]["parley"]["turn"]["cost"]["amount"]
    assert session_totals["cost"]["amount"] > turn_cost  # the stopped attempt was billed

    other: ParleyClient = await start_server(home=home)  # reopened in a new window
    await other.initialize()
    assert await replayed_prompts(other, session, workspace) == [PROMPT]
    assert other.text_of(session) == "The whole answer."
    assert not any("stopped" in text.lower() for _, text in other.notices_of(session))
    exported = (await other.request("_parley/session/export", {"sessionId": session}))["text"]
    assert exported.count("\n## You\n") == 1 and "word word" not in exported
    listed = await other.request("session/list", {})
    assert [s["_meta"]["parley"]["turns"] for s in listed["sessions"]] == [1]


async def test_retry_after_a_provider_failure_replaces_it_and_keeps_what_came_before(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The failed turn had taken Parley's restore note to the model: its replacement gives
    it again. A `/cost` asked after the failure stays in the transcript."""
    client: ParleyClient = await start_server(home=tmp_path / "home")
    await client.initialize()
    client.permission_handler = allow_all
    session = await client.new_session(str(workspace))
    edit = {"path": "notes.txt", "content": "new words\n"}
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("write_file", edit),)), Reply(text="Written.")]
    )
    await client.prompt(session, "Write the notes.")
    await client.prompt(session, "/undo")
    failing = Fault("http", status=500, times=10)  # every retry the SDK makes fails too
    fake.set_script([Reply(text="unused"), Reply(text="unused"), Reply(fault=failing)])
    try:
        await client.prompt(session, PROMPT)
    except JsonRpcException as error:
        assert error.code == -32001  # the provider's failure
    else:
        raise AssertionError("the failing provider's prompt was answered without an error")
    assert "[Parley: the user restored files" in str(fake.requests[-1].body)
    await client.prompt(session, "/cost")

    fake.set_script([Reply(text="unused"), Reply(text="unused"), Reply(text="Now it works.")])
    retried = await client.prompt(session, PROMPT, retry=True)
    assert retried["_meta"]["parley"]["replaced"] is True
    sent = fake.requests[-1].body
    assert sum(PROMPT in text for text in user_texts(sent)) == 1
    assert "[Parley: the user restored files" in str(sent["messages"][-1])  # said again
    assert client.text_of(session).endswith("Now it works.")
    assert retried["_meta"]["parley"]["session"]["turns"] == 2

    await client.load_session(session, str(workspace))
    replayed = [
        u["content"]["text"]
        for u in client.updates_of(session, "user_message_chunk")
        if u["content"]["type"] == "text"
    ]
    assert replayed[-3:] == ["/undo", "/cost", PROMPT]  # the failed attempt is gone


async def test_retry_after_a_finished_turn_or_anything_after_the_stop_is_a_new_prompt(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    client: ParleyClient = await start_server(home=tmp_path / "home")
    await client.initialize()
    session = await client.new_session(str(workspace))
    slow = Reply(text=LONG, chunk_size=5, pacing=Pacing(chunks_per_second=200))
    fake.set_script([Reply(text="Done."), Reply(text="Again."), slow, Reply(text="Other.")])
    await client.prompt(session, PROMPT)
    finished = await client.prompt(session, PROMPT, retry=True)
    assert finished["_meta"]["parley"]["replaced"] is False
    assert user_texts(fake.requests[-1].body) == [PROMPT, PROMPT]  # stacked, as asked

    await stopped_turn(client, session)
    await client.prompt(session, "Something else.")  # the stop is no longer the last thing
    fake.set_script([Reply(text="Retried late.")])
    late = await client.prompt(session, PROMPT, retry=True)
    assert late["_meta"]["parley"]["replaced"] is False
    firsts = [text.split("\n")[0] for text in user_texts(fake.requests[-1].body)]
    assert firsts[-3:] == [PROMPT, "Something else.", PROMPT]
    assert "replaced" not in (await client.prompt(session, "Plain."))["_meta"]["parley"]


async def test_a_window_that_shows_the_replaced_turn_reads_the_session_again(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    this: ParleyClient = await start_server(home=home)
    await this.initialize()
    session = await this.new_session(str(workspace))
    fake.set_script(
        [Reply(text="First."), Reply(text=LONG, chunk_size=5, pacing=Pacing(chunks_per_second=200))]
    )
    await this.prompt(session, "Hello.")
    await stopped_turn(this, session)
    other: ParleyClient = await start_server(home=home)
    await other.initialize()
    await other.load_session(session, str(workspace))
    fake.set_script([Reply(text="First."), Reply(text="Retried there."), Reply(text="Here.")])
    assert (await other.prompt(session, PROMPT, CONTEXT, retry=True))["_meta"]["parley"]["replaced"]

    await this.prompt(session, "And here.")
    sent = fake.requests[-1].body
    assert [text.split("\n")[0] for text in user_texts(sent)] == ["Hello.", PROMPT, "And here."]
    assert "Retried there." in assistant_texts(sent) and not any(
        "word word" in text for text in assistant_texts(sent)
    )
    said = [text for _, text in this.notices_of(session)]
    assert any(
        text.startswith("This session changed in another window: a turn was retried")
        for text in said
    )


async def test_a_retry_flag_that_is_not_a_boolean_is_refused(
    start_server, workspace: Path, tmp_path: Path
) -> None:
    client: ParleyClient = await start_server(model=MODELS["openai"], home=tmp_path / "home")
    await client.initialize()
    session = await client.new_session(str(workspace))
    params = {
        "sessionId": session,
        "prompt": [{"type": "text", "text": "hi"}],
        "_meta": {"parley": {"retry": "yes"}},
    }
    try:
        await client.request("session/prompt", params)
    except JsonRpcException as error:
        assert error.code == -32602
        assert "_meta.parley.retry: expected a boolean, got a string" in error.message
    else:
        raise AssertionError("a non-boolean retry flag was taken")


async def test_undoing_the_retried_turn_restores_the_files_as_before_the_cut_off_attempt(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """The cut-off attempt wrote a file and was stopped in its next round. The retry's
    model has not seen that file (the attempt is gone from its conversation): its edit is
    refused until it reads it. Undo then puts every file back as it was before the first
    attempt."""
    client: ParleyClient = await start_server(home=tmp_path / "home")
    await client.initialize()
    client.permission_handler = allow_all
    session = await client.new_session(str(workspace))
    first = {"path": "notes.txt", "content": "first attempt\n"}
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("write_file", first),)),
            Reply(text=LONG, chunk_size=5, pacing=Pacing(chunks_per_second=200)),
        ]
    )
    await stopped_turn(client, session)
    assert (workspace / "notes.txt").read_text() == "first attempt\n"

    second = {"path": "notes.txt", "content": "second attempt\n"}
    extra = {"path": "extra.txt", "content": "new\n"}
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("write_file", second),)),
            Reply(tool_calls=(ScriptedToolCall("read_file", {"path": "notes.txt"}),)),
            Reply(
                tool_calls=(
                    ScriptedToolCall("write_file", second),
                    ScriptedToolCall("write_file", extra),
                )
            ),
            Reply(text="Written."),
        ]
    )
    retried = await client.prompt(session, PROMPT, CONTEXT, retry=True)
    assert retried["_meta"]["parley"]["replaced"] is True
    refused = [m for m in fake.requests[-3].body["messages"] if m["role"] == "tool"]
    assert "has not been read in this session" in refused[0]["content"]
    assert (workspace / "notes.txt").read_text() == "second attempt\n"
    cost = await client.prompt(session, "/cost", retry=True)  # a command replaces nothing
    assert cost["_meta"]["parley"]["replaced"] is False

    await client.prompt(session, "/undo")
    assert not (workspace / "notes.txt").exists()  # as before the cut-off attempt
    assert not (workspace / "extra.txt").exists()


async def test_a_retry_of_another_prompt_than_the_cut_off_one_replaces_nothing(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    """A client that took a later prompt, refused before its turn began, for the cut-off
    turn sends that prompt with `retry`: the cut-off turn is not its to replace."""
    client: ParleyClient = await start_server(home=tmp_path / "home")
    await client.initialize()
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text=LONG, chunk_size=5, pacing=Pacing(chunks_per_second=200))])
    await stopped_turn(client, session)
    fake.set_script([Reply(text="unused"), Reply(text="Another answer.")])
    other = await client.prompt(session, "Something else.", retry=True)
    assert other["_meta"]["parley"]["replaced"] is False
    sent = user_texts(fake.requests[-1].body)
    assert len(sent) == 2 and PROMPT in sent[0] and sent[1] == "Something else."
    assert any("word word" in text for text in assistant_texts(fake.requests[-1].body))
