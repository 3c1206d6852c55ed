"""What `protocol/dispatch.py`, the one adapter to pygls (the server's protocol and the
client's `ParleyJsonRPCClient`), relies on in pygls, checked against the installed pygls: an
upgrade that renames, re-signs or stops calling one of these fails here, not in a user's
editor.

The behavioural checks drive a real pygls `JsonRPCServer` with Parley's protocol in-process:
pygls must still route a handler's outcome through `_send_handler_result` (overridden), and
a `$/cancelRequest` through `_handle_cancel_notification` and `_request_futures`; and keep
a handler's request id in its context (`msg_id`, which `after_the_answer` reads).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from importlib.metadata import version
from typing import Any

import cattrs
import pytest
from parley.protocol.dispatch import ParleyProtocol
from pygls.client import JsonRPCClient
from pygls.protocol import JsonRPCProtocol
from pygls.server import JsonRPCServer


def parameters(function: Any) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
KEYWORD = inspect.Parameter.KEYWORD_ONLY


def test_pygls_is_the_pinned_version() -> None:
    assert version("pygls") == "2.1.1"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # overridden by ParleyProtocol: pygls calls them with exactly these arguments
        (
            "_send_handler_result",
            [("self", POSITIONAL), ("future", POSITIONAL), ("msg_id", KEYWORD)],
        ),
        (
            "_send_response",
            [
                ("self", POSITIONAL),
                ("msg_id", POSITIONAL),
                ("result", POSITIONAL),
                ("error", POSITIONAL),
            ],
        ),
        # called by ParleyProtocol
        ("_handle_cancel_notification", [("self", POSITIONAL), ("msg_id", POSITIONAL)]),
        (
            "set_writer",
            [("self", POSITIONAL), ("writer", POSITIONAL), ("include_headers", POSITIONAL)],
        ),
        (
            "send_request_async",
            [
                ("self", POSITIONAL),
                ("method", POSITIONAL),
                ("params", POSITIONAL),
                ("msg_id", POSITIONAL),
            ],
        ),
        ("handle_message", [("self", POSITIONAL), ("message", POSITIONAL)]),
    ],
)
def test_the_protocol_methods_the_adapter_uses_keep_their_signatures(
    name: str, expected: list[tuple[str, inspect._ParameterKind]]
) -> None:
    assert parameters(getattr(JsonRPCProtocol, name)) == expected


def test_the_protocol_attributes_the_adapter_uses_exist() -> None:
    server = JsonRPCServer(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
    protocol = server.protocol
    protocol.set_writer(_Collect(), include_headers=True)

    assert isinstance(protocol._request_futures, dict)
    assert protocol._include_headers is True


def test_the_client_internals_the_adapter_uses_exist() -> None:
    client = JsonRPCClient(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)

    assert client._server is None
    assert isinstance(client._async_tasks, list)
    assert hasattr(client._stop_event, "set")
    assert inspect.iscoroutinefunction(client._server_exit)


# --- pygls still calls what the adapter overrides ------------------------------------------


class _Collect:
    """A writer that keeps what is written, as JSON messages."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.messages.append(json.loads(data))


def serving() -> tuple[JsonRPCServer, _Collect]:
    server = JsonRPCServer(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
    out = _Collect()
    server.protocol.set_writer(out, include_headers=False)
    return server, out


async def answered(out: _Collect, count: int = 1) -> list[dict[str, Any]]:
    for _ in range(200):
        if len(out.messages) >= count:
            break
        await asyncio.sleep(0.01)
    return out.messages


async def test_a_handler_failure_is_answered_by_the_override() -> None:
    server, out = serving()

    @server.feature("fail")
    async def fail(params: Any) -> None:
        raise RuntimeError("it broke")

    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "fail", "params": {}}')

    (answer,) = await answered(out)
    # pygls' own answer would carry a traceback in `data`; Parley's carries none.
    assert answer == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32603, "message": "Internal error: RuntimeError: it broke"},
    }


async def test_a_cancel_reaches_the_running_handler_and_is_answered_once() -> None:
    server, out = serving()
    started = asyncio.Event()

    @server.feature("wait")
    async def wait(params: Any) -> None:
        started.set()
        await asyncio.sleep(30)

    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 7, "method": "wait", "params": {}}')
    await asyncio.wait_for(started.wait(), 5)
    assert 7 in server.protocol._request_futures
    server.protocol.receive(b'{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}}')

    (answer,) = await answered(out)
    assert answer["id"] == 7 and answer["error"]["code"] == -32800
    assert 7 not in server.protocol._request_futures


async def test_a_request_abandoned_by_its_timeout_is_forgotten() -> None:
    server, out = serving()

    with pytest.raises(TimeoutError):
        await server.protocol.request("_parley/editor/callTool", {"name": "x"}, timeout=0.05)

    (sent,) = out.messages
    assert sent["method"] == "_parley/editor/callTool"
    assert sent["id"] not in server.protocol._request_futures


async def test_what_runs_after_the_answer_follows_it_for_plain_and_coroutine_handlers() -> None:
    server, out = serving()

    def announce(name: str) -> None:
        server.protocol.notify_json("after", {"of": name})

    @server.feature("plain")
    def plain(params: Any) -> dict[str, Any]:
        server.protocol.after_the_answer(lambda: announce("plain"))
        return {}

    @server.feature("coroutine")
    async def coroutine(params: Any) -> dict[str, Any]:
        server.protocol.after_the_answer(lambda: announce("coroutine"))
        await asyncio.sleep(0)
        server.protocol.after_the_answer(lambda: announce("coroutine, late"))
        return {}

    @server.feature("failing")
    async def failing(params: Any) -> None:
        server.protocol.after_the_answer(lambda: announce("failing"))
        raise RuntimeError("no")

    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "plain", "params": {}}')
    await answered(out, 2)
    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 2, "method": "coroutine", "params": {}}')
    await answered(out, 5)
    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 3, "method": "failing", "params": {}}')
    messages = await answered(out, 6)
    await asyncio.sleep(0.05)
    assert [m.get("id", m.get("params", {}).get("of")) for m in messages] == [
        1,
        "plain",
        2,
        "coroutine",
        "coroutine, late",
        3,  # an error: what was to follow the answer does not
    ]
