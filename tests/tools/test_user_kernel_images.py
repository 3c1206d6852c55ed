"""An evaluation's images in the user's own kernel (issue 41, point 2): shown to the user as
ACP image blocks in the tool call's content, bounded (`tools/kernel_images.py`); the model
gets the text. A real ipykernel, `parley serve` as a subprocess, the fake LLM scripting."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from acp_schema import acp_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.client import ParleyClient
from parley.core.images import sniff_image_type
from parley.fakellm import FakeLLM
from parley.tools.kernel_images import (
    MAX_SHOWN_IMAGE_BYTES,
    MAX_SHOWN_IMAGES,
    shown_images,
    stored_images,
)
from test_user_kernel import allow_once, call, run_calls
from user_kernel_fixtures import UsersKernel


def png(width: int, height: int, shade: int = 0) -> bytes:
    """A real PNG of `width` x `height` pixels of one grey."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    rows = b"".join(b"\x00" + bytes([shade]) * 3 * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
async def client(start_server) -> ParleyClient:
    started = await start_server()
    await started.initialize()
    started.permission_handler = allow_once
    return started


def shown_in(parley: ParleyClient, session: str) -> list[dict[str, Any]]:
    """The image blocks of the tool calls' content, as the editor got them."""
    return [
        item["content"]
        for update in parley.updates_of(session, "tool_call_update")
        for item in update.get("content") or []
        if item.get("content", {}).get("type") == "image"
    ]


async def test_an_evals_images_are_shown_to_the_user_bounded(
    client: ParleyClient,
    fake: FakeLLM,
    users_kernel: UsersKernel,
    tmp_path: Path,
) -> None:
    """Five displays: a plot, one not a PNG, one too large, then three plots: the first four
    that are images within the limit are shown; the model gets each named in text."""
    plots = [b64(png(4, 3, shade)) for shade in (10, 20, 30, 40)]
    too_large = b64(b"\x89PNG\r\n\x1a\n" + b"\0" * (MAX_SHOWN_IMAGE_BYTES + 1))
    displays = [plots[0], b64(b"not a picture"), too_large, *plots[1:]]
    await users_kernel.run_cell(f"DISPLAYS = {displays!r}")
    code = (
        "from IPython.display import display\n"
        "for d in DISPLAYS:\n"
        "    display({'image/png': d, 'text/plain': 'a plot'}, raw=True)"
    )
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    (evaluated,) = await run_calls(client, fake, session, [call("python_eval", code=code)])
    assert shown_in(client, session) == [
        {"type": "image", "mimeType": "image/png", "data": plot} for plot in plots
    ]
    for update in client.updates_of(session, "tool_call_update"):  # ACP's own schema's shape
        notification = {"sessionId": session, "update": update}
        assert list(acp_schema().violations("SessionNotification", notification, "params")) == []
    assert evaluated.count("display: a plot") == 6
    assert "image/png" in evaluated and plots[0] not in evaluated  # named, not sent


OUTPUT_KINDS = st.sampled_from(["display_data", "execute_result", "stream", "error", "other"])
MEDIA = st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"])
PAYLOADS = st.one_of(
    st.builds(lambda w, h: b64(png(w, h)), st.integers(1, 8), st.integers(1, 8)),
    st.binary(max_size=64).map(b64),
    st.binary(max_size=64).map(lambda raw: b64(b"\x89PNG\r\n\x1a\n" + raw)),
    st.text(max_size=40),  # not base64 at all
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=4), max_size=3),
)
OUTPUTS = st.lists(
    st.fixed_dictionaries(
        {"msg_type": OUTPUT_KINDS},
        optional={
            "data": st.one_of(st.dictionaries(MEDIA, PAYLOADS, max_size=3), st.text(), st.none())
        },
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(OUTPUTS)
def test_shown_images_are_checked_images_and_never_too_many(outputs: list[dict[str, Any]]) -> None:
    """Whatever a kernel sends: never an error; at most MAX_SHOWN_IMAGES, each one whose bytes
    are of its type and within the size limit, one per output, in their order."""
    images = shown_images(outputs)
    assert len(images) <= MAX_SHOWN_IMAGES
    for image in images:
        raw = base64.b64decode(image.data, validate=True)
        assert sniff_image_type(raw) == image.media_type
        assert len(raw) <= MAX_SHOWN_IMAGE_BYTES
    pictured = [
        o
        for o in outputs
        if o["msg_type"] in ("display_data", "execute_result") and isinstance(o.get("data"), dict)
    ]
    assert len(images) <= len(pictured)


async def test_a_reloaded_session_shows_an_evals_images_again(
    start_server: Any,
    client: ParleyClient,
    fake: FakeLLM,
    users_kernel: UsersKernel,
    tmp_path: Path,
) -> None:
    """A session is shown again exactly: the plots an evaluation displayed come back with
    its call when the session is loaded in another window (images first, as live)."""
    plot = b64(png(5, 2, 77))
    code = (
        "from IPython.display import display\n"
        f"display({{'image/png': {plot!r}, 'text/plain': 'a plot'}}, raw=True)"
    )
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await run_calls(client, fake, session, [call("python_eval", code=code)])
    live = [u for u in client.updates_of(session, "tool_call_update") if u.get("content")][-1]
    await client.request("session/close", {"sessionId": session})
    again: ParleyClient = await start_server()
    await again.initialize()
    await again.load_session(session, str(tmp_path))
    (replayed,) = [u for u in again.updates_of(session, "tool_call") if u.get("content")]
    assert replayed["content"][0] == {
        "type": "content",
        "content": {"type": "image", "mimeType": "image/png", "data": plot},
    }
    assert replayed["content"] == live["content"][:1] + replayed["content"][1:]
    assert "display: a plot" in replayed["content"][1]["content"]["text"]
    notification = {"sessionId": session, "update": replayed}
    assert list(acp_schema().violations("SessionNotification", notification, "params")) == []


STORED_ITEMS = st.recursive(
    st.none() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
STORED_IMAGES = st.lists(
    st.one_of(
        STORED_ITEMS,
        st.fixed_dictionaries(
            {
                "type": st.just("content"),
                "content": st.fixed_dictionaries(
                    {"type": st.just("image"), "mimeType": MEDIA | st.integers(), "data": PAYLOADS}
                ),
            }
        ),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(STORED_IMAGES | STORED_ITEMS)
def test_a_stored_rows_images_are_checked_again_before_a_replay_shows_them(items: Any) -> None:
    """Whatever a stored row holds (changed outside Parley): never an error, and only
    images that pass a kernel's checks, at most MAX_SHOWN_IMAGES, as content items."""
    shown = stored_images(items)
    assert len(shown) <= MAX_SHOWN_IMAGES
    for item in shown:
        assert item["type"] == "content" and item["content"]["type"] == "image"
        raw = base64.b64decode(item["content"]["data"], validate=True)
        assert sniff_image_type(raw) == item["content"]["mimeType"]
        assert len(raw) <= MAX_SHOWN_IMAGE_BYTES
    plot = {"type": "content", "content": {"type": "image", "mimeType": "image/png"}}
    plot["content"]["data"] = b64(png(2, 2))
    assert stored_images([plot]) == [plot]
