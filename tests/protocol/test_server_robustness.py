"""Bad input and bad luck: malformed messages, provider faults, cancel, runaway tools.

Every request gets exactly one response, the server keeps serving, and the session stays
usable afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import cattrs
import pytest
from conftest import MODELS, WEATHER_TOOL, server_env
from parley.client import ParleyClient
from parley.fakellm import Fault, Pacing, Reply, ScriptedToolCall
from parley.protocol.dispatch import ParleyProtocol
from parley.protocol.framing import MAX_FRAME_BYTES
from pygls.exceptions import JsonRpcException
from pygls.server import JsonRPCServer

WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"})

# --- malformed JSON-RPC, on the raw byte stream ------------------------------------------


class RawServer:
    """`parley serve` spoken to byte by byte, to send what no well-behaved client would.

    A thread reads its output, so `receive` can time out instead of hanging a test; its
    stderr goes to a file (a pipe nobody reads would block the server once full).
    """

    def __init__(self, env: dict[str, str], framing: str = "lsp") -> None:
        self.framing = framing
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [sys.executable, "-m", "parley", "serve", "--framing", framing],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, **env},
        )
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read_output, daemon=True).start()

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        stdout = self.process.stdout
        while True:
            if self.framing == "ndjson":
                line = stdout.readline()
                if not line:
                    break
                self._messages.put(json.loads(line))
                continue
            length = None
            while line := stdout.readline():
                if not line.strip():
                    break
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            if length is None:
                break
            self._messages.put(json.loads(stdout.read(length)))
        self._messages.put(None)

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are, unframed."""
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send_bytes(self, body: bytes) -> None:
        if self.framing == "lsp":
            self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        else:
            self.send_raw(body + b"\n")

    def send(self, message: Any) -> None:
        self.send_bytes(json.dumps(message).encode())

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        """The next message from the server."""
        message = self._messages.get(timeout=timeout)
        assert message is not None, f"the server closed its output; stderr:\n{self.stderr()}"
        return message

    def answer(self, timeout: float = 30) -> dict[str, Any]:
        """The next response, past notifications and the server's own requests."""
        while "method" in (message := self.receive(timeout)):
            pass
        return message

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1])

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=10)


@pytest.fixture(params=["lsp", "ndjson"])
def raw_server(request, fake, tmp_path):
    server = RawServer(server_env(fake, tmp_path / "home"), framing=request.param)
    yield server
    if server.process.poll() is None:
        server.process.kill()


def test_every_malformed_request_gets_its_error_and_the_server_keeps_serving(
    raw_server: RawServer, workspace: Path
) -> None:
    raw_server.send_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", ')
    answer = raw_server.receive()
    assert answer["id"] == 1 and answer["error"]["code"] == -32700
    raw_server.send_bytes(b"this is not json and has no id")  # logged and skipped
    raw_server.send({"jsonrpc": "2.0", "id": 2, "method": "no/such/method", "params": {}})
    assert raw_server.receive()["error"]["code"] == -32601
    raw_server.send({"jsonrpc": "2.0", "id": 3, "method": "session/new"})  # no params
    error = raw_server.receive()["error"]
    assert error["code"] == -32602
    raw_server.send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"x": 1}})
    error = raw_server.receive()["error"]
    assert error["code"] == -32602 and "sessionId: required field missing" in error["message"]
    raw_server.send({"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": 7}})
    assert raw_server.receive()["error"]["code"] == -32602
    raw_server.send({"id": 6, "method": "initialize", "params": {}})  # no "jsonrpc"
    assert raw_server.receive()["error"]["code"] == -32600
    raw_server.send([{"jsonrpc": "2.0", "id": 7, "method": "initialize"}])
    assert raw_server.receive()["error"]["code"] == -32600
    raw_server.send({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "session/prompt",
            "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]},
        }
    )
    error = raw_server.receive()
    assert error["id"] == 8 and error["error"]["code"] == -32002
    assert "Unknown session" in error["error"]["message"]

    # ... and it still serves real requests.
    raw_server.send(
        {"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    answer = raw_server.receive()
    assert answer["id"] == 9 and answer["result"]["sessionId"].startswith("sess_")
    assert raw_server.close() == 0  # it exits when stdin closes


def test_parse_error_names_the_problem(raw_server: RawServer) -> None:
    raw_server.send_bytes(b'{"jsonrpc": "2.0", "id": "abc", "method": ')
    answer = raw_server.receive()
    assert answer["id"] == "abc"
    assert answer["error"]["code"] == -32700
    assert "not JSON" in answer["error"]["message"]


def test_bad_prompt_blocks_and_settings_are_refused(raw_server: RawServer, workspace) -> None:
    raw_server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "relative/dir"}}
    )
    assert "absolute" in raw_server.receive()["error"]["message"]
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(workspace), "_meta": {"parley": {"toolPolicy": "yolo"}}},
        }
    )
    assert "toolPolicy" in raw_server.receive()["error"]["message"]
    raw_server.send(
        {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    session = raw_server.receive()["result"]["sessionId"]
    # (the slash commands are announced after the answer: `answer` skips that notification)
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "session/prompt",
            "params": {
                "sessionId": session,
                "prompt": [{"type": "audio", "data": "...", "mimeType": "audio/wav"}],
            },
        }
    )
    assert "not supported" in raw_server.answer()["error"]["message"]
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "  "}]},
        }
    )
    assert "empty" in raw_server.answer()["error"]["message"]


# --- the wire: no message kills or deafens the server -------------------------------------

WORKS = {"jsonrpc": "2.0", "method": "_parley/models", "params": {}}


def still_serves(server: RawServer, msg_id: str) -> None:
    """A normal request sent now is the next one answered."""
    server.send({**WORKS, "id": msg_id})
    answer = server.answer()
    assert answer["id"] == msg_id and "models" in answer["result"], answer


def test_responses_of_any_shape_are_never_answered_and_never_stop_the_server(
    raw_server: RawServer,
) -> None:
    for response in [
        {"jsonrpc": "2.0", "id": 5, "error": {"code": "x"}},
        {"jsonrpc": "2.0", "id": 5, "error": {"code": True, "message": 7}},
        {"jsonrpc": "2.0", "id": 5, "error": "not an object"},
        {"jsonrpc": "2.0", "id": 5, "error": None},
        {"jsonrpc": "2.0", "id": 5, "result": 1, "error": {"code": 1, "message": "both"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}},
        {"jsonrpc": "2.0", "id": [1], "result": {}},
        {"jsonrpc": "2.0", "id": {"a": 1}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": "parley-0000", "result": None},  # no such request of ours
        {"id": 5, "result": "no jsonrpc field"},
    ]:
        raw_server.send(response)
    raw_server.send_bytes(
        b'{"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "x", "data": '
        + b"[" * 900
        + b"]" * 900
        + b"}}"
    )
    still_serves(raw_server, "after")  # and nothing was answered before it
    assert raw_server.close() == 0


def test_json_nested_any_depth_is_answered(raw_server: RawServer, workspace: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    raw_server.send_bytes(
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": ' + deep + b"}"
    )
    answer = raw_server.answer()
    assert answer["id"] == 1 and answer["error"]["code"] == -32600
    assert "nested too deeply" in answer["error"]["message"]
    raw_server.send_bytes(deep)  # no id to answer: logged and skipped
    raw_server.send_bytes(
        b'{"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": ' + b"{" * 50_000
    )
    assert raw_server.answer()["id"] == 2
    # Just under Python's own limit: parsed, then refused by the handler like any bad params.
    nested = {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": str(workspace)}}
    raw_server.send_bytes(
        json.dumps(nested).encode()[:-2] + b', "_meta": ' + b"[" * 900 + b"]" * 900 + b"}}"
    )
    answer = raw_server.answer()
    assert answer["id"] == 3
    still_serves(raw_server, "after")


def test_a_response_colliding_with_a_running_request_is_dropped(
    raw_server: RawServer, fake, workspace: Path
) -> None:
    fake.set_script([Reply(text="slow " * 40, pacing=Pacing(chunks_per_second=40))])
    raw_server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    session = raw_server.answer()["result"]["sessionId"]
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "Talk."}]}
    raw_server.send({"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": prompt})
    assert raw_server.receive()["method"] == "session/update"  # it is running
    # The client answers its own request's id, as if it were ours: logged and dropped.
    raw_server.send({"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "forged"}})
    raw_server.send({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "forged"}})
    still_serves(raw_server, "meanwhile")
    answer = raw_server.answer()
    assert answer["id"] == 7 and answer["result"]["stopReason"] == "end_turn"
    still_serves(raw_server, "after")  # exactly one answer to 7: the next is this one's
    assert "no request of ours is waiting for it" in raw_server.stderr()


@pytest.mark.parametrize(
    "bad_answer",
    [
        b'{"jsonrpc": "2.0", "id": "ID", "error": {"code": "x"}}',
        b'{"jsonrpc": "2.0", "id": "ID", "result": {"outcome": {"outcome": "selec',  # cut
    ],
    ids=["error code not an integer", "truncated"],
)
def test_a_malformed_answer_to_the_servers_own_request_is_a_rejection(
    raw_server: RawServer, fake, workspace: Path, bad_answer: bytes
) -> None:
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "1 + 1"}),)), Reply(text="ok")]
    )
    raw_server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    session = raw_server.answer()["result"]["sessionId"]
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "Eval."}]}
    raw_server.send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
    while (request := raw_server.receive()).get("method") != "session/request_permission":
        pass
    raw_server.send_bytes(bad_answer.replace(b"ID", request["id"].encode()))
    answer = raw_server.answer()  # the prompt's: the bad answer itself is never answered
    assert answer["id"] == 2 and answer["result"]["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "could not ask the user for permission" in sent  # the call was not run
    still_serves(raw_server, "after")


def test_an_oversized_frame_is_refused_without_being_held(raw_server: RawServer) -> None:
    still_serves(raw_server, "warm-up")
    rss_before = raw_server.rss_kib()
    padding = b"a" * (MAX_FRAME_BYTES + 1024 * 1024)
    raw_server.send_bytes(
        b'{"jsonrpc": "2.0", "id": "big", "method": "initialize", "params": {"x": "'
        + padding
        + b'"}}'
    )
    del padding
    answer = raw_server.answer(timeout=120)
    assert answer["id"] == "big" and answer["error"]["code"] == -32600
    assert "over the limit of 64 MB" in answer["error"]["message"]
    still_serves(raw_server, "after")
    grown_mib = (raw_server.rss_kib() - rss_before) / 1024
    # LSP frames are skipped in pieces; an NDJSON line is held up to the limit, then let go.
    assert grown_mib < (16 if raw_server.framing == "lsp" else 100), grown_mib


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(b"Content-Length: abc\r\n\r\n{}", id="bad Content-Length"),
        pytest.param(b"Content-Length: -5\r\n\r\n{}", id="negative Content-Length"),
        pytest.param(b"hello, this is not a header\r\n\r\n", id="garbage line"),
        pytest.param(b"\x00\xff\xfe garbage without a newline", id="garbage before a header"),
        pytest.param(b'Content-Length: 5\r\n{"id": 1}', id="missing blank line"),
        pytest.param(b"Content-Type: x\r\n\r\n{}", id="no Content-Length"),
        pytest.param(b"X-Junk: " + b"j" * 100_000 + b"\r\n\r\n", id="huge header line"),
        pytest.param(b"X-A: b\r\n" * 100 + b"\r\n", id="too many headers"),
        pytest.param(
            b'Content-Length: 99999999999\r\n\r\n{"jsonrpc": "2.0", "id": "liar", "method": "x"}',
            id="a length far over the cap",
        ),
    ],
)
def test_the_lsp_reader_resynchronises_after_a_framing_error(
    fake, tmp_path: Path, broken: bytes
) -> None:
    server = RawServer(server_env(fake, tmp_path / "home"), framing="lsp")
    try:
        still_serves(server, "before")
        server.send_raw(broken)
        if b'"liar"' in broken:
            answer = server.answer()
            assert answer["id"] == "liar" and "over the limit" in answer["error"]["message"]
        still_serves(server, "after")
        still_serves(server, "and after")
        assert server.close() == 0
        assert "Traceback" not in server.stderr()
    finally:
        server.process.kill()


def test_lone_surrogates_are_repaired_where_they_enter(
    raw_server: RawServer, fake, workspace: Path, tmp_path: Path
) -> None:
    fake.set_script([Reply(text="Fine.")])
    raw_server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    session = raw_server.answer()["result"]["sessionId"]
    # An editor that cut an emoji in half: the escape of a lone high surrogate.
    raw_server.send_bytes(
        b'{"jsonrpc": "2.0", "id": "\\udc00", "method": "session/prompt", "params": '
        b'{"sessionId": "%s", "prompt": [{"type": "text", "text": "half \\ud83d emoji"}]}}'
        % session.encode()
    )
    answer = raw_server.answer()
    assert answer["id"] == "\ufffd" and answer["result"]["stopReason"] == "end_turn"
    assert "half \ufffd emoji" in json.dumps(fake.requests[-1].body, ensure_ascii=False)
    raw_server.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/load",
            "params": {"sessionId": session, "cwd": str(workspace), "mcpServers": []},
        }
    )
    assert "result" in raw_server.answer()
    assert raw_server.close() == 0
    export = subprocess.run(
        [sys.executable, "-m", "parley", "export", session],
        env={**os.environ, **server_env(fake, tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert export.returncode == 0 and "half \ufffd emoji" in export.stdout


def test_bytes_that_are_not_utf8_are_repaired_not_refused(raw_server: RawServer) -> None:
    raw_server.send_bytes(b'{"jsonrpc": "2.0", "id": "caf\xe9", "method": "_parley/models"}')
    answer = raw_server.answer()
    assert answer["id"] == "caf\ufffd" and "models" in answer["result"]


@pytest.fixture(params=["lsp", "ndjson"])
def info_server(request, fake, tmp_path):
    """A raw server logging at INFO: what an operator who asks for more sees."""
    server = RawServer(
        {**server_env(fake, tmp_path / "home"), "PARLEY_LOG_LEVEL": "INFO"}, framing=request.param
    )
    yield server
    if server.process.poll() is None:
        server.process.kill()


def test_errors_are_one_line_and_answers_carry_no_traceback(
    info_server: RawServer, fake, workspace: Path
) -> None:
    """Answered errors are INFO (the client was told): at INFO, one line each."""
    raw_server = info_server
    fake.set_script([Reply(text="x", fault=Fault("http", status=400))])
    ghost = {"name": "ghost", "command": "/no/such/mcp-server", "args": [], "env": []}
    unknown = {"sessionId": "sess_unknown", "prompt": [{"type": "text", "text": "Hello?"}]}
    requests = {
        1: ("no/such/method", None),
        2: ("session/new", {"cwd": 7}),
        3: ("session/new", {"cwd": str(workspace), "mcpServers": [ghost]}),
        5: ("session/prompt", unknown),
        6: ("session/list", {"cursor": "not-ours"}),
    }
    answers = {}
    for msg_id, (method, params) in requests.items():
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        raw_server.send(message)
        answers[msg_id] = raw_server.answer()
    codes = {msg_id: a.get("error", {}).get("code") for msg_id, a in answers.items()}
    assert codes == {1: -32601, 2: -32602, 3: None, 5: -32002, 6: -32602}
    session = answers[3]["result"]["sessionId"]
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "Hello?"}]}
    raw_server.send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": prompt})
    assert raw_server.answer()["error"]["code"] == -32001
    assert raw_server.close() == 0
    stderr = raw_server.stderr()
    assert "Traceback" not in stderr
    for msg_id in (1, 2, 4, 5, 6):  # one line each: pygls' own second line is filtered out
        assert len(re.findall(rf"\b[Rr]equest {msg_id}\b", stderr)) == 1, stderr
    assert "Method Not Found" not in stderr
    (mcp_line,) = [line for line in stderr.splitlines() if "ghost" in line]
    assert "MCP server ghost did not start: its command was not found" in mcp_line
    about_requests = [
        line for line in stderr.strip().splitlines() if " parley.sandbox: " not in line
    ]
    about_requests = [line for line in about_requests if " httpx2: " not in line]
    assert len(about_requests) == 6, stderr  # nothing else
    assert "WARNING" not in stderr  # each was answered: INFO


def test_a_session_list_cursor_the_server_did_not_issue_is_invalid_params(
    raw_server: RawServer,
) -> None:
    for msg_id, cursor in enumerate(["", "abc", "-50", "7", "050", "0", "١٢"], start=1):
        message = {"jsonrpc": "2.0", "id": msg_id, "method": "session/list"}
        raw_server.send({**message, "params": {"cursor": cursor}})
        error = raw_server.answer()["error"]
        assert error["code"] == -32602 and "not a cursor this server issued" in error["message"]
    for msg_id, params in [(98, {}), (99, {"cursor": "50"})]:  # a second page's cursor
        message = {"jsonrpc": "2.0", "id": msg_id, "method": "session/list", "params": params}
        raw_server.send(message)
        assert raw_server.answer()["result"] == {"sessions": []}


def test_an_unexpected_error_answers_32603_with_its_type_and_message_only() -> None:
    """In process: a handler that raises, through the protocol the server uses."""
    server = JsonRPCServer(protocol_cls=ParleyProtocol, converter_factory=cattrs.Converter)
    written: list[bytes] = []

    class Writer:
        def write(self, data: bytes) -> None:
            written.append(data)

    @server.feature("boom")
    def boom(params: Any) -> None:
        raise KeyError("Authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwx")

    server.protocol.set_writer(Writer(), include_headers=False)
    server.protocol.receive(b'{"jsonrpc": "2.0", "id": 1, "method": "boom", "params": {}}')
    (answer,) = [json.loads(data) for data in written]
    assert answer["id"] == 1
    assert answer["error"]["code"] == -32603
    assert "data" not in answer["error"]  # pygls would send {"traceback": [...]}
    assert answer["error"]["message"].startswith("Internal error: KeyError")
    assert "sk-proj" not in answer["error"]["message"]


# --- provider faults ---------------------------------------------------------------------

# The stream faults come after the first text delta in both wire formats (Anthropic's third
# chunk is a ping): a stream that breaks off before any text is retried, not an error.
FAULTS = {
    "429 rate limit": (Fault("http", status=429, retry_after=0.01, times=3), 429, "rate_limit"),
    "500 server error": (Fault("http", status=500, times=3), 500, "server_error"),
    "dropped stream": (
        Fault("drop", after_chunks=4, streaming_only=True),
        None,
        "stream_interrupted",
    ),
    "error inside the stream": (
        Fault("error_event", after_chunks=4, streaming_only=True),
        None,
        "stream_error",
    ),
}


@pytest.mark.parametrize("fault_name", sorted(FAULTS))
async def test_provider_fault_ends_the_prompt_with_the_protocol_error_and_the_next_works(
    client: ParleyClient, fake, workspace, provider: str, fault_name: str
) -> None:
    fault, status, kind = FAULTS[fault_name]
    fake.set_script([Reply(text="Partial answer that breaks off", fault=fault)])
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?", timeout=30)
    error = raised.value
    assert error.code == -32001
    assert error.data["provider"] == provider
    assert error.data["retryable"] is True
    if status is not None:
        assert error.data["status"] == status
        assert len(fake.requests) == 3  # the SDK retried twice
    if kind != "stream_error" or provider == "openai":
        assert error.data["type"] == kind
    assert error.message  # a sentence a person can act on

    # The fault was used up: the same session answers the next prompt.
    result = await client.prompt(session, "Again?", timeout=30)
    assert result["stopReason"] == "end_turn"


async def test_anthropic_overloaded_529(start_server, fake, workspace) -> None:
    client = await start_server(model=MODELS["anthropic"])
    await client.initialize()
    fake.set_script([Reply(text="ok", fault=Fault("http", status=529, retry_after=0.01, times=3))])
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?", timeout=30)
    assert raised.value.code == -32001
    assert raised.value.data["status"] == 529
    assert raised.value.data["type"] == "overloaded"


async def test_missing_api_key_says_which_variable_to_set(start_server, workspace) -> None:
    client = await start_server(extra_env={"OPENAI_API_KEY": ""})
    await client.initialize()
    models = await client.request("_parley/models", {})
    openai_model = next(m for m in models["models"] if m["id"] == "openai:gpt-4.1-mini")
    assert openai_model["available"] is False and "OPENAI_API_KEY" in openai_model["reason"]
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?")
    assert raised.value.code == -32001
    assert "OPENAI_API_KEY" in raised.value.message


# --- cancel ------------------------------------------------------------------------------


async def test_cancel_mid_stream_returns_fast_and_keeps_what_was_said(
    client: ParleyClient, fake, workspace
) -> None:
    slow = Reply(text="word " * 400, chunk_size=5, pacing=Pacing(chunks_per_second=50))
    fake.set_script([slow, Reply(text="Fresh answer.")])
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Talk for a long time."))
    await client.wait_for_update(session, lambda u: u["sessionUpdate"] == "agent_message_chunk")
    cancelled_at = time.monotonic()
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 5)
    assert result["stopReason"] == "cancelled"
    assert time.monotonic() - cancelled_at < 1.0
    # The provider read the prompt and generated, but never said how much: unknown, not 0.
    assert result["_meta"]["parley"]["usageComplete"] is False
    streamed = client.text_of(session)
    assert streamed.startswith("word")
    (request,) = fake.wait_for_requests(1)
    assert request.client_hung_up  # the provider stream was closed

    # The next prompt works, and the history kept the prompt and the text streamed before.
    again = await client.prompt(session, "Now briefly.")
    assert again["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "Talk for a long time." in sent and streamed.strip() in sent


async def test_cancel_while_waiting_for_permission(start_server, fake, workspace) -> None:
    client = await start_server()
    never_answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    client.permission_handler = lambda params: never_answered
    fake.set_script(
        [Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "1"}),)), Reply(text="ok")]
    )
    await client.initialize()
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Eval."))
    while not client.permission_requests:
        await asyncio.sleep(0.02)
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 2)
    assert result["stopReason"] == "cancelled"
    never_answered.set_result({"outcome": {"outcome": "cancelled"}})
    # The unfinished call got a result, so the provider accepts the history.
    again = await client.prompt(session, "Something else.")
    assert again["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "cancelled" in sent


async def test_cancel_interrupts_a_running_tool(client: ParleyClient, fake, workspace) -> None:
    started = asyncio.Event()

    async def slow_tool(params: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(30)
        return {"content": "too late"}

    client.editor_tool_handler = slow_tool
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="ok")])
    session = await client.new_session(str(workspace))
    prompt = asyncio.ensure_future(client.prompt(session, "Weather?"))
    await asyncio.wait_for(started.wait(), 10)
    client.cancel(session)
    result = await asyncio.wait_for(prompt, 2)
    assert result["stopReason"] == "cancelled"
    # The model call ended and was counted before the tool ran: nothing is unknown.
    assert result["_meta"]["parley"]["usageComplete"] is True
    failed = [
        u for u in client.updates_of(session, "tool_call_update") if u.get("status") == "failed"
    ]
    assert failed and "cancelled" in failed[-1]["content"][0]["content"]["text"]


async def test_a_second_prompt_while_one_runs_is_refused(
    client: ParleyClient, fake, workspace
) -> None:
    fake.set_script([Reply(text="slow " * 50, pacing=Pacing(chunks_per_second=50))])
    session = await client.new_session(str(workspace))
    first = asyncio.ensure_future(client.prompt(session, "One."))
    await client.wait_for_update(session, lambda u: u["sessionUpdate"] == "agent_message_chunk")
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Two.")
    assert "already running" in raised.value.message
    client.cancel(session)
    assert (await first)["stopReason"] == "cancelled"


# --- tools that fail ---------------------------------------------------------------------


async def test_circuit_breaker_ends_a_loop_of_identical_errors(
    client: ParleyClient, fake, workspace
) -> None:
    client.editor_tool_handler = lambda params: {"content": "city not found", "isError": True}
    fake.set_script([Reply(tool_calls=(WEATHER,))])  # the model keeps calling, forever
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Weather?")
    assert result["stopReason"] == "end_turn"
    assert len(client.editor_calls) == 5
    ((level, said),) = client.notices_of(session)  # Parley's words, not the model's
    assert level == "warning" and "failed 5 times in a row" in said


async def test_round_limit(start_server, fake, workspace, tmp_path) -> None:
    config = tmp_path / "limit.toml"
    config.write_text("max_turn_requests = 3\n")
    client = await start_server(extra_env={"PARLEY_CONFIG": str(config)})
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = lambda params: {"content": f"ok {len(client.editor_calls)}"}
    fake.set_script([Reply(tool_calls=(WEATHER,))])
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Loop.")
    assert result["stopReason"] == "max_turn_requests"
    assert result["_meta"]["parley"]["turn"]["rounds"] == 3


async def test_unknown_tool_and_bad_arguments_go_back_to_the_model(
    client: ParleyClient, fake, workspace
) -> None:
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("launch_rockets", {}),)),
            Reply(text="Sorry."),
        ]
    )
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "Go.")
    assert result["stopReason"] == "end_turn"
    sent = json.dumps(fake.requests[-1].body)
    assert "no tool named 'launch_rockets'" in sent
    listed = sent.split("no tool named 'launch_rockets'. Tools: ", 1)[1].split(".", 1)[0]
    assert {"get_weather", "read_file", "edit_file"} <= set(listed.split(", "))  # what there is
    # The user sees the call failed, not completed.
    updates = client.updates_of(session, "tool_call_update")
    assert [u["status"] for u in updates if "status" in u] == ["failed"]


async def test_editor_tool_error_reaches_the_model(client: ParleyClient, fake, workspace) -> None:
    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the editor exploded")

    client.editor_tool_handler = broken
    fake.set_script([Reply(tool_calls=(WEATHER,)), Reply(text="Sorry.")])
    session = await client.new_session(str(workspace))
    await client.prompt(session, "Weather?")
    assert "The editor failed to run get_weather" in json.dumps(fake.requests[-1].body)


@pytest.mark.parametrize(
    ("method", "key"),
    [("$/cancelRequest", "id"), ("$/cancel_request", "requestId"), ("$/cancel_request", "id")],
)
async def test_cancel_request_answers_the_prompt_with_request_cancelled(
    client: ParleyClient, fake, workspace, method: str, key: str
) -> None:
    fake.set_script(
        [Reply(text="slow " * 200, pacing=Pacing(chunks_per_second=50)), Reply(text="ok")]
    )
    session = await client.new_session(str(workspace))
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "Talk."}]}
    pending = client.protocol.send_request_async("session/prompt", params, msg_id="prompt-1")
    await client.wait_for_update(session, lambda u: u["sessionUpdate"] == "agent_message_chunk")
    client.notify(method, {key: "prompt-1"})  # ACP names it requestId, LSP id
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(pending, 5)
    assert raised.value.code == -32800
    assert (await client.prompt(session, "Again."))["stopReason"] == "end_turn"


def test_stderr_warns_only_of_what_no_one_was_told(
    raw_server: RawServer, fake, workspace: Path
) -> None:
    """An error answered to the client is not also a WARNING (ACP clients show stderr to
    their users: it would appear twice); a late answer to a request of ours that timed out is
    no news either. An answer to an id the server never sent is still worth a warning."""
    fake.set_script([Reply(text="never", fault=Fault("http", status=400))])
    raw_server.send(
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(workspace)}}
    )
    session = raw_server.answer()["result"]["sessionId"]
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "Fail."}]}
    raw_server.send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
    assert "error" in raw_server.answer(timeout=60)
    raw_server.send({"jsonrpc": "2.0", "id": 3, "method": "session/load", "params": {}})
    assert raw_server.answer()["error"]["code"] == -32602
    raw_server.send({"jsonrpc": "2.0", "id": "parley-0ld", "result": {}})  # ours, too late
    still_serves(raw_server, "after")
    assert "WARNING" not in raw_server.stderr()
    raw_server.send({"jsonrpc": "2.0", "id": "forged", "result": {}})
    still_serves(raw_server, "again")
    assert "WARNING parley.protocol.dispatch: Dropped a response to id 'forged'" in (
        raw_server.stderr()
    )
