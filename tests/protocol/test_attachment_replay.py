"""A file the user attached that the model is not shown (a binary blob, a binary or
unreadable link) is replayed on `session/load` as what the user sent, not as Parley's note
to the model (issue 37). Over the wire with the official ACP SDK client, schema-checked; the
load in a new server, from the store."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from acp.helpers import embedded_blob_resource, resource_block, resource_link_block, text_block
from acp_client import acp_server
from conftest import server_env
from parley.fakellm import FakeLLM, Reply

PDF = b"%PDF-1.7\n" + bytes(range(256))


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


async def test_a_binary_attachment_replays_as_the_resource_the_user_sent(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path
) -> None:
    (workspace / "logo.bin").write_bytes(b"\0\1\2binary")
    blob = base64.b64encode(PDF).decode()
    pdf_uri = "file:///home/me/report.pdf"
    bin_uri = (workspace / "logo.bin").as_uri()
    sent = [
        text_block("Summarise these."),
        resource_block(embedded_blob_resource(pdf_uri, blob, mime_type="application/pdf")),
        resource_link_block("logo.bin", bin_uri),
        resource_link_block("site", "https://example.com/"),
    ]
    fake.set_script([Reply(text="Two files and a link.")])
    async with acp_server(acp_env) as run:
        await run.initialize()
        session_id = (await run.conn.new_session(cwd=str(workspace))).session_id
        await run.conn.prompt(session_id=session_id, prompt=sent)
    told = json.dumps(fake.requests[-1].body)
    assert "binary content, not shown to the model" in told  # the model's note is unchanged
    assert "a binary file, not shown to the model" in told

    async with acp_server(acp_env) as run:
        await run.initialize()
        await run.conn.load_session(cwd=str(workspace), session_id=session_id)
        replayed = [
            u["content"]
            for u in run.recording.raw_updates(session_id)
            if u["sessionUpdate"] == "user_message_chunk"
        ]
        run.recording.assert_conformant()
    assert replayed == [
        {"type": "text", "text": "Summarise these."},
        {
            "type": "resource",
            "resource": {"uri": pdf_uri, "blob": blob, "mimeType": "application/pdf"},
        },
        {"type": "resource_link", "uri": bin_uri, "name": "logo.bin"},
        {"type": "resource_link", "uri": "https://example.com/", "name": "site"},
    ]
    assert "Attached file" not in json.dumps(replayed)
