"""What comes from outside when a session uses the user's own kernel, and its invariants
(Hypothesis): the `_meta.parley.kernel` object a client sends, a connection file's bytes, and
whatever a kernel sends back (garbage, floods, silence)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.core.kernel_choice import KernelChoice, kernel_choice
from parley.core.session_settings import SessionSettings, from_stored, stored_form
from parley.tools.base import ToolContext
from parley.tools.jupyter_link import (
    PORTS,
    ConnectionRefused,
    Incoming,
    checked_connection_info,
    read_connection_file,
)
from parley.tools.user_kernel import KernelUnavailable, UserKernel, UserKernelSettings
from parley.tools.user_kernel_tools import completed_members, user_kernel_tools

TOKEN = "tok-" + "s3cr3t" * 4
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
kernel_keys = st.sampled_from(["connectionFile", "server", "token", "tokenEnv", "kernelId", "x"])
near_kernels = st.dictionaries(
    kernel_keys,
    st.one_of(
        json_values,
        st.sampled_from(
            [
                "/tmp/k.json",
                "http://h:8888",
                "https://h/",
                "k-1",
                TOKEN,
                "NB_TOKEN",
                "a\0b",
                "x" * 5000,
            ]
        ),
    ),
    max_size=5,
)


@given(st.one_of(json_values, near_kernels))
def test_any_kernel_object_is_a_choice_or_a_sentence_that_never_quotes_the_token(
    value: Any,
) -> None:
    try:
        choice = kernel_choice(value)
    except ValueError as error:
        assert TOKEN not in str(error)
        return
    if choice is None:
        assert value is None or value == "parley"
        return
    assert isinstance(choice, KernelChoice)
    assert TOKEN not in repr(choice) and TOKEN not in repr(choice.address)
    address = choice.address
    assert (address.connection_file is None) != (address.server is None)
    if address.connection_file is not None:
        assert address.connection_file.startswith("/") and "\0" not in address.connection_file
    else:
        assert address.server.startswith(("http://", "https://")) and address.kernel_id


connection_fields = st.fixed_dictionaries(
    {name: st.one_of(st.integers(-5, 70000), json_values) for name in PORTS},
    optional={
        "ip": st.one_of(st.sampled_from(["127.0.0.1", "", "a b", "::1"]), json_values),
        "key": json_values,
        "transport": st.sampled_from(["tcp", "ipc", "udp", 3]),
        "signature_scheme": st.sampled_from(["hmac-sha256", "hmac-md4", "none", 1]),
    },
)


@given(st.one_of(json_values, connection_fields))
def test_any_connection_info_is_checked_field_by_field_or_refused(parsed: Any) -> None:
    try:
        info = checked_connection_info(parsed, "/k.json")
    except ConnectionRefused as error:
        assert str(error).startswith("/k.json")
        return
    assert set(info) == {"transport", "ip", "key", "signature_scheme", *PORTS}
    assert all(type(info[name]) is int and 0 < info[name] < 65536 for name in PORTS)
    assert info["transport"] in ("tcp", "ipc") and isinstance(info["key"], str)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(st.binary(max_size=2000))
def test_any_bytes_in_a_connection_file_are_read_or_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "kernel-x.json"
    path.write_bytes(data)
    try:
        info = read_connection_file(str(path))
    except ConnectionRefused as error:
        assert str(error).startswith(str(path))
    else:
        assert set(info) >= set(PORTS)


def test_a_hostile_connection_file_is_refused_without_blocking_or_reading_it_whole(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # no writer: an open for reading that waits would hang here
    with pytest.raises(ConnectionRefused, match="not a regular file"):
        read_connection_file(str(fifo))
    device = tmp_path / "zero.json"
    device.symlink_to("/dev/zero")
    with pytest.raises(ConnectionRefused, match="not a regular file"):
        read_connection_file(str(device))
    huge = tmp_path / "huge.json"
    with huge.open("wb") as file:
        file.truncate(10**10)  # sparse: 10 GB that cost nothing unless read
    with pytest.raises(ConnectionRefused, match="over 64 KiB"):
        read_connection_file(str(huge))
    with pytest.raises(ConnectionRefused, match="cannot be opened"):
        read_connection_file(str(tmp_path / "missing.json"))


class ScriptedLink:
    """A kernel that answers each request with what the test scripts: any message, right
    parent or not, or nothing at all."""

    where = "a scripted kernel"

    def __init__(self, answers: list[Any], alive: bool) -> None:
        self.answers = answers
        self.alive = alive
        self.queue: asyncio.Queue[Incoming] = asyncio.Queue()
        self.sent = 0

    async def open(self) -> None:
        pass

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        self.sent += 1
        msg_id = f"m{self.sent}"
        for answer in self.answers:
            channel_name, message = answer
            if isinstance(message, dict) and message.get("parent_header") == "PARENT":
                message = {**message, "parent_header": {"msg_id": msg_id}}
            self.queue.put_nowait((channel_name, message))
        return msg_id

    async def messages(self):  # type: ignore[no-untyped-def]
        while True:
            yield await self.queue.get()

    async def interrupt(self) -> None:
        pass

    async def is_alive(self) -> bool:
        return self.alive

    async def close(self) -> None:
        pass


message_parts = st.fixed_dictionaries(
    {},
    optional={
        "header": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {
                    "msg_type": st.sampled_from(
                        [
                            "kernel_info_reply",
                            "inspect_reply",
                            "status",
                            "stream",
                            "error",
                            "execute_input",
                        ]
                    )
                    | json_values,
                    "session": json_values,
                }
            ),
        ),
        "parent_header": st.one_of(json_values, st.just("PARENT")),
        "content": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "execution_state": st.sampled_from(["busy", "idle", "starting", "dead"])
                    | json_values,
                    "status": st.sampled_from(["ok", "error"]) | json_values,
                    "found": json_values,
                    "data": json_values,
                    "traceback": json_values,
                    "text": json_values,
                    "name": json_values,
                    "code": json_values,
                },
            ),
        ),
    },
)
answers = st.lists(
    st.tuples(st.sampled_from(["shell", "iopub", "control", "stdin"]), message_parts), max_size=8
)


@settings(max_examples=80, deadline=None)
@given(answers, st.booleans())
def test_whatever_a_kernel_answers_a_request_ends_in_a_reply_or_a_sentence(
    script: list[Any], alive: bool
) -> None:
    limits = UserKernelSettings(answer_seconds=0.05, busy_wait_seconds=0.1, timeout_seconds=0.2)

    async def ask() -> None:
        kernel = UserKernel(ScriptedLink(script, alive), limits)
        try:
            reply = await asyncio.wait_for(
                kernel.request("inspect_request", {"code": "x", "cursor_pos": 1}), 5
            )
            assert isinstance(reply, dict)
        except KernelUnavailable as error:
            assert "scripted kernel" in str(error)
        try:
            result = await asyncio.wait_for(kernel.execute("x"), 5)
            assert all(isinstance(part, str) for part in result.parts)
        except KernelUnavailable:
            pass
        assert kernel.last_error is None or isinstance(kernel.last_error.traceback, str)
        await kernel.aclose()

    asyncio.run(ask())


def test_a_flood_of_output_is_kept_within_the_limit() -> None:
    flood = [
        (
            "iopub",
            {
                "header": {"msg_type": "status"},
                "parent_header": "PARENT",
                "content": {"execution_state": "busy"},
            },
        )
    ]
    flood += [
        (
            "iopub",
            {
                "header": {"msg_type": "stream"},
                "parent_header": "PARENT",
                "content": {"name": "stdout", "text": "y" * 10_000},
            },
        )
    ] * 200
    flood += [("shell", {"header": {"msg_type": "execute_reply"}, "parent_header": "PARENT",
                         "content": {"status": "ok"}}),
              ("iopub", {"header": {"msg_type": "status"}, "parent_header": "PARENT",
                         "content": {"execution_state": "idle"}}),
              ("shell", {"header": {"msg_type": "kernel_info_reply"}, "parent_header": "PARENT",
                         "content": {"status": "ok"}})]  # fmt: skip

    async def run() -> None:
        kernel = UserKernel(ScriptedLink(flood, True), UserKernelSettings(output_limit=1000))
        result = await kernel.execute("print('y' * 2_000_000)")
        text = "\n".join(result.parts)
        assert len(text) < 1200 and "more characters cut" in text
        await kernel.aclose()

    asyncio.run(run())


def test_the_stored_form_of_a_session_attached_with_a_token_holds_no_token() -> None:
    choice = kernel_choice({"server": "http://h:1", "kernelId": "k", "token": TOKEN})
    assert choice is not None and choice.token == TOKEN
    stored = stored_form(SessionSettings(kernel=choice.address))
    assert TOKEN not in json.dumps(stored)
    assert from_stored(stored).kernel == choice.address


@given(st.one_of(json_values, st.dictionaries(st.sampled_from(
    ["status", "matches", "metadata", "cursor_start", "history", "found", "data"]
), json_values | st.lists(json_values, max_size=5), max_size=6)), st.integers(0, 50))  # fmt: skip
def test_any_completion_reply_gives_member_lines(reply: Any, at: int) -> None:
    members = completed_members(reply if isinstance(reply, dict) else {}, at)
    assert all(isinstance(line, str) and line for line in members)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["status", "found", "data", "matches", "metadata", "cursor_start", "history"]),
    json_values, max_size=6,
))  # fmt: skip
def test_whatever_a_kernel_replies_each_read_tool_answers_in_text(content: dict[str, Any]) -> None:
    """The kernel's reply to each read-only tool's request is `content`, however wrong."""
    reply = ("shell", {"header": {"msg_type": "x_reply"}, "parent_header": "PARENT",
                       "content": {"status": "ok", **content}})  # fmt: skip

    async def run() -> None:
        kernel = UserKernel(ScriptedLink([reply], True), UserKernelSettings(answer_seconds=0.5))
        context = ToolContext(session_id="s", tool_call_id="t", cwd=Path("/"))
        for tool in user_kernel_tools(kernel, {})[1:]:  # all but python_eval
            result = await tool.run({"target": "x"}, context)
            assert isinstance(result.content, str) and result.content
        await kernel.aclose()

    asyncio.run(run())
