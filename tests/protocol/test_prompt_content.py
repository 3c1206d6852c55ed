"""What a prompt may hold besides text: images, binary blobs, linked workspace files; and
`read_file` through the editor's `fs/read_text_file`. `parley serve` as a subprocess, both
providers' wire formats through the fake LLM over HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS
from parley.agent.export import export_markdown
from parley.client import ParleyClient
from parley.config import ConfigError, load_settings
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.store import Store
from parley.tools import workspace as workspace_tools
from parley.tools.base import ToolContext
from pygls.exceptions import JsonRpcException, JsonRpcInternalError

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
PNG_B64 = base64.b64encode(PNG).decode()
GIF_B64 = base64.b64encode(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").decode()
PDF_B64 = base64.b64encode(b"%PDF-1.7\n" + bytes(range(256)) * 4).decode()
NO_VISION = "openai:gpt-3.5-turbo"
INVALID_PARAMS = -32602


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(data: str = PNG_B64, mime_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "mimeType": mime_type, "data": data}


def blob(uri: str, data: str, mime_type: str | None) -> dict[str, Any]:
    resource = {"uri": uri, "blob": data}
    if mime_type:
        resource["mimeType"] = mime_type
    return {"type": "resource", "resource": resource}


def link(path: Path | str, name: str = "a file") -> dict[str, Any]:
    uri = path.as_uri() if isinstance(path, Path) else path
    return {"type": "resource_link", "uri": uri, "name": name}


async def prompt(client: ParleyClient, session: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return await client.request(
        "session/prompt", {"sessionId": session, "prompt": list(blocks)}, 30
    )


def user_content(body: dict[str, Any]) -> Any:
    """The content of the last user message the model was sent (either wire format)."""
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


async def started(start_server, model: str = MODELS["openai"], **kwargs: Any) -> ParleyClient:
    client = await start_server(model=model, **kwargs)
    await client.initialize()
    return client


# --- images ------------------------------------------------------------------------------


async def test_initialize_says_prompts_may_hold_images_and_which_models_see_them(
    start_server,
) -> None:
    client = await start_server()
    result = await client.initialize()
    assert result["agentCapabilities"]["promptCapabilities"]["image"] is True
    vision = {m["id"]: m["vision"] for m in result["_meta"]["parley"]["models"]}
    assert vision["openai:gpt-4.1-mini"] and vision["anthropic:claude-sonnet-4-5"]
    models = await client.request("_parley/models", {})
    assert all(isinstance(m["vision"], bool) for m in models["models"])


async def test_an_image_reaches_the_model_in_its_providers_format(
    start_server, fake: FakeLLM, workspace: Path, provider: str
) -> None:
    client = await started(start_server, MODELS[provider])
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="A single pixel.")])
    result = await prompt(client, session, text("What is this?"), image())
    assert result["stopReason"] == "end_turn"
    content = user_content(fake.requests[-1].body)
    if provider == "openai":
        assert content == [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        ]
    else:
        assert content == [
            {"type": "text", "text": "What is this?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                # The latest message's last block is a prompt-cache breakpoint (docs/protocol.md).
                "cache_control": {"type": "ephemeral"},
            },
        ]


async def test_an_image_blob_is_an_image_and_a_bare_image_needs_no_text(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await started(start_server, MODELS["anthropic"])
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="A GIF.")])
    await prompt(client, session, blob("file:///tmp/dot.gif", GIF_B64, None))  # type sniffed
    (only,) = user_content(fake.requests[-1].body)
    assert only["type"] == "image" and only["source"]["media_type"] == "image/gif"


async def test_a_model_without_vision_is_refused_before_any_call(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await started(start_server, NO_VISION)
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await prompt(client, session, text("What is this?"), image())
    assert raised.value.code == INVALID_PARAMS
    assert NO_VISION in raised.value.message and "images" in raised.value.message
    assert fake.requests == []
    # Nothing was stored: the session goes on with a prompt the model can take.
    fake.set_script([Reply(text="Hello.")])
    await prompt(client, session, text("Hello?"))
    assert [m["role"] for m in fake.requests[-1].body["messages"]] == ["system", "user"]


@pytest.mark.parametrize(
    ("block", "complaint"),
    [
        (image("not base64!"), "not valid base64"),
        (image(mime_type="image/jpeg"), "its bytes are a PNG image"),
        (image(base64.b64encode(b"plain text").decode()), "its bytes are no image"),
        (image(mime_type="image/tiff"), "images can be png, jpeg, gif, webp"),
        (blob("file:///tmp/photo.png", "@@@", "image/png"), "not valid base64"),
        ({"type": "image", "data": PNG_B64}, "needs 'data' and 'mimeType'"),
        ({"type": "audio", "data": "", "mimeType": "audio/wav"}, "'audio' blocks"),
    ],
    ids=["base64", "magic", "not-an-image", "type", "blob-base64", "no-type", "audio"],
)
async def test_a_bad_image_is_refused_saying_why(
    start_server, fake: FakeLLM, workspace: Path, block: dict[str, Any], complaint: str
) -> None:
    client = await started(start_server)
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await prompt(client, session, text("Look."), block)
    assert raised.value.code == INVALID_PARAMS
    assert complaint in raised.value.message and "prompt[1]" in raised.value.message
    assert fake.requests == []


async def test_an_image_over_20_mb_is_refused(start_server, fake: FakeLLM, workspace: Path) -> None:
    client = await started(start_server)
    session = await client.new_session(str(workspace))
    huge = base64.b64encode(PNG + bytes(20 * 1024 * 1024)).decode()
    with pytest.raises(JsonRpcException) as raised:
        await prompt(client, session, text("Look."), image(huge))
    assert raised.value.code == INVALID_PARAMS and "at most 20 MB" in raised.value.message
    assert fake.requests == []


async def test_a_reloaded_session_replays_its_image_and_still_sends_it(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    first = await started(start_server)
    session = await first.new_session(str(workspace))
    fake.set_script([Reply(text="A single pixel.")])
    await prompt(first, session, text("What is this?"), image())
    await first.stop()

    second = await started(start_server)
    await second.load_session(session, str(workspace))
    replayed = [u["content"] for u in second.updates_of(session, "user_message_chunk")]
    assert replayed == [text("What is this?"), image()]
    fake.set_script([Reply(text="Still a pixel.")])
    await prompt(second, session, text("And now?"))
    assert f"data:image/png;base64,{PNG_B64}" in json.dumps(fake.requests[-1].body)

    store = Store.open_in(tmp_path / "home")
    try:
        transcript = export_markdown(store, store.session(session))
    finally:
        store.close()
    assert f"An image (image/png, {len(PNG)} bytes) was attached" in transcript
    assert PNG_B64 not in transcript


async def test_a_model_switched_to_one_without_vision_gets_a_note_for_earlier_images(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await started(start_server)
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="A single pixel."), Reply(text="Noted.")])
    await prompt(client, session, text("What is this?"), image())
    await client.request("_parley/session/configure", {"sessionId": session, "model": NO_VISION})
    await prompt(client, session, text("Summarise."))
    sent = json.dumps(fake.requests[-1].body)
    assert PNG_B64 not in sent and "this model cannot see images" in sent


# --- other attachments -------------------------------------------------------------------


async def test_a_binary_blob_becomes_a_note_naming_the_file(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await started(start_server)
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="A PDF.")])
    pdf = blob("file:///home/me/report.pdf", PDF_B64, "application/pdf")
    await prompt(client, session, text("Summarise this."), pdf)
    sent = user_content(fake.requests[-1].body)
    assert isinstance(sent, str)  # no image: the plain text form
    size = len(base64.b64decode(PDF_B64))
    assert f"[Attached file file:///home/me/report.pdf (application/pdf, {size:,} bytes)" in sent
    assert PDF_B64 not in sent


async def test_a_linked_workspace_file_is_read_and_attached(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await started(start_server)
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="It multiplies.")])
    await prompt(client, session, text("Explain"), link(workspace / "geometry.py", "geometry.py"))
    sent = user_content(fake.requests[-1].body)
    uri = (workspace / "geometry.py").as_uri()
    assert f'<resource uri="{uri}">' in sent and "return width * height" in sent
    # The replay shows the attached file as an embedded resource.
    replayed = await started(start_server)
    await replayed.load_session(session, str(workspace))
    shown = [u["content"] for u in replayed.updates_of(session, "user_message_chunk")]
    assert shown[1]["type"] == "resource" and "return width" in shown[1]["resource"]["text"]


async def test_a_link_outside_the_workspace_or_missing_becomes_a_note(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    (workspace / "escape.txt").symlink_to(secret)
    client = await started(start_server)
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(text="ok")])
    await prompt(
        client,
        session,
        text("Read these."),
        link(secret),
        link(workspace / "escape.txt"),
        link(workspace / "missing.py"),
        link("https://example.com/page", "a page"),
    )
    sent = user_content(fake.requests[-1].body)
    assert "TOP SECRET" not in sent
    assert sent.count("outside the workspace") == 2
    assert f"[Attached file {(workspace / 'missing.py').as_uri()}: not attached: no such" in sent
    assert "[a page](https://example.com/page)" in sent


# --- read_file through the editor --------------------------------------------------------


READ = ScriptedToolCall("read_file", {"path": "geometry.py"})


async def editor_reading(start_server, answer) -> ParleyClient:
    """A client that offers fs/read_text_file and answers it with `answer(params)`."""
    client = await start_server()
    client.file_reads = []

    @client.feature("fs/read_text_file")
    async def read_text_file(params: dict[str, Any]) -> dict[str, Any]:
        client.file_reads.append(params)
        return answer(params)

    await client.request(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}},
    )
    return client


async def test_read_file_shows_the_editors_unsaved_buffer(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await editor_reading(start_server, lambda _: {"content": "UNSAVED = 1\n"})
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(tool_calls=(READ,)), Reply(text="Done.")])
    await prompt(client, session, text("Read geometry.py."))
    (asked,) = client.file_reads
    assert asked == {"sessionId": session, "path": str((workspace / "geometry.py").resolve())}
    sent = json.dumps(fake.requests[-1].body)
    assert "geometry.py (lines 1-1 of 1)" in sent and "UNSAVED = 1" in sent
    assert "width * height" not in sent


async def test_read_file_falls_back_to_the_disk_when_the_editor_errs(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    def fail(params: dict[str, Any]) -> dict[str, Any]:
        raise JsonRpcInternalError("no buffer for that file")

    client = await editor_reading(start_server, fail)
    session = await client.new_session(str(workspace))
    fake.set_script([Reply(tool_calls=(READ,)), Reply(text="Done.")])
    await prompt(client, session, text("Read geometry.py."))
    assert len(client.file_reads) == 1
    assert "return width * height" in json.dumps(fake.requests[-1].body)
    (finished,) = [u for u in client.updates_of(session, "tool_call_update") if u.get("status")][
        -1:
    ]
    assert finished["status"] == "completed"


async def test_read_file_never_asks_the_editor_about_a_path_outside_the_workspace(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    client = await editor_reading(start_server, lambda _: {"content": "TOP SECRET\n"})
    session = await client.new_session(str(workspace))
    outside = ScriptedToolCall("read_file", {"path": str(tmp_path / "secret.txt")})
    fake.set_script([Reply(tool_calls=(outside,)), Reply(text="Refused.")])
    await prompt(client, session, text("Read the secret."))
    assert client.file_reads == []
    sent = json.dumps(fake.requests[-1].body)
    assert "outside the workspace" in sent and "TOP SECRET" not in sent


async def test_read_file_falls_back_to_the_disk_when_the_editor_is_silent(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace_tools, "EDITOR_READ_SECONDS", 0.2)
    asked: list[str] = []

    class SilentEditor:
        async def read_text_file(self, session_id: str, path: str) -> str:
            asked.append(path)
            await asyncio.sleep(3600)
            return ""

    context = ToolContext("sess_1", "call_1", workspace, SilentEditor())
    result = await workspace_tools.ReadFileTool(workspace).run({"path": "geometry.py"}, context)
    assert asked == [str(workspace.resolve() / "geometry.py")]
    assert not result.is_error and "return width * height" in result.content


# --- which models take images ------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "vision"),
    [
        ("openai:gpt-4o", True),
        ("openai:gpt-4o-mini", True),
        ("openai:gpt-4.1-nano", True),
        ("openai:gpt-5-mini", True),
        ("openai:o1", True),
        ("openai:o3", True),
        ("openai:o4-mini", True),
        ("openai:o1-mini", False),
        ("openai:o3-mini", False),
        ("openai:gpt-3.5-turbo", False),
        ("anthropic:claude-3-5-haiku-latest", True),
        ("anthropic:claude-sonnet-4-5", True),
        ("anthropic:claude-opus-4-1", True),
        ("anthropic:claude-2.1", False),
        ("openrouter:openai/gpt-4o", True),
        ("ollama:qwen3", False),
    ],
)
def test_the_built_in_rule_knows_the_well_known_vision_models(model: str, vision: bool) -> None:
    assert load_settings({"PARLEY_CONFIG": "/nonexistent.toml"}).takes_images(model) is vision


def test_a_models_vision_setting_overrides_the_rule(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[models."ollama:llava"]\nvision = true\n[models."openai:gpt-4o"]\nvision = false\n'
    )
    settings = load_settings({"PARLEY_CONFIG": str(config)})
    assert settings.takes_images("ollama:llava") and not settings.takes_images("openai:gpt-4o")
    config.write_text('[models."ollama:llava"]\nvision = "yes"\n')
    with pytest.raises(ConfigError, match=r"vision: expected true or false, got \"yes\""):
        load_settings({"PARLEY_CONFIG": str(config)})
