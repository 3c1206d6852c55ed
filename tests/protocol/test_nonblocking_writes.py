"""What the server writes never holds its event loop: a client that reads a long replay
slowly gets all of it, in order, while the loop stays free (the loop watchdog, at 50 ms
here, reports nothing; `conftest.loop_watchdog` fails the test on any report).

The client is the test itself, reading the server's stdout in pieces and pausing between
some of them, as an editor under load does: with blocking writes, each pause held the loop
until the pipe had room again. And an answer of 8 MB, encoded off the loop and still in
order; a disk whose syncs stall; and a round whose tool calls carry 8 MB of arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest
from conftest import WEATHER_TOOL
from parley.bench.harness import server_environment
from parley.bench.sessions import TOOL_OUTPUT_LINE, write_long_session
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall

REPLAYED_MESSAGES = 50_000
READ_BYTES = 64 * 1024
PAUSE_EVERY_READS = 8  # the client reads 512 KB, then looks away
PAUSE_SECONDS = 0.15
EXPORTED_BYTES = 24 * 1024 * 1024


class SlowClient:
    """`parley serve` behind a client that reads its output slowly, frame by frame."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log  # the server's stderr: what a failed exit says
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "parley", "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, **env},
            )
        self._buffer = b""
        self._reads = 0

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        stdin: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdin.flush()

    def _read_some(self) -> None:
        self._reads += 1
        if self._reads % PAUSE_EVERY_READS == 0:
            time.sleep(PAUSE_SECONDS)
        data = os.read(self.process.stdout.fileno(), READ_BYTES)  # type: ignore[union-attr]
        if not data:
            raise EOFError("the server closed its output")
        self._buffer += data

    def receive(self) -> dict[str, Any]:
        while True:
            header_end = self._buffer.find(b"\r\n\r\n")
            if header_end >= 0:
                length = int(self._buffer[:header_end].split(b":")[1])
                end = header_end + 4 + length
                if len(self._buffer) >= end:
                    body = self._buffer[header_end + 4 : end]
                    self._buffer = self._buffer[end:]
                    return json.loads(body)
            self._read_some()

    def close(self) -> None:
        """End the server (its stdin closed), which must exit 0; else its log says why."""
        self.process.stdin.close()  # type: ignore[union-attr]
        code = self.process.wait(timeout=60)
        assert code == 0, (code, self.log.read_text(errors="replace")[-4000:])


@pytest.fixture
def watched_at_50_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_LOOP_WATCHDOG_MS", "50")


def test_a_slow_client_gets_a_long_replay_whole_and_in_order_and_the_loop_stays_free(
    fake: FakeLLM, tmp_path: Path, watched_at_50_ms: None
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    session_id = write_long_session(tmp_path / "data", workspace, REPLAYED_MESSAGES)
    client = SlowClient(server_environment(fake, tmp_path), tmp_path / "server.log")
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert client.receive()["id"] == 1
    load = {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
    client.send({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": load})

    prompts = []
    while "id" not in (message := client.receive()):
        update = message["params"]["update"]
        if update["sessionUpdate"] == "user_message_chunk":
            prompts.append(update["content"]["text"])
    assert message["id"] == 2 and "result" in message, message
    # Every turn, in order: the replay is whole, nothing dropped or reordered.
    assert prompts == [
        f"Question {n}: what does area do here?" for n in range(REPLAYED_MESSAGES // 4)
    ]
    client.close()


# --- a large answer ----------------------------------------------------------------------------


def test_a_large_export_is_answered_whole_and_in_order(fake: FakeLLM, tmp_path: Path) -> None:
    """`_parley/session/export` of a session whose tool outputs are 24 MB: the answer is
    encoded off the loop and arrives whole, with the suite's watchdog. Not at 50 ms: json's C
    encoder holds the GIL through one string, so its one 24 MB string holds the loop 60-85 ms
    wherever it is encoded (docs/architecture.md, "The event loop never blocks")."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    lines = EXPORTED_BYTES // 10 // len(TOOL_OUTPUT_LINE)
    session_id = write_long_session(tmp_path / "data", workspace, 40, tool_output_lines=lines)
    client = SlowClient(server_environment(fake, tmp_path), tmp_path / "server.log")
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert client.receive()["id"] == 1
    export = {"sessionId": session_id, "format": "markdown"}
    client.send({"jsonrpc": "2.0", "id": 2, "method": "_parley/session/export", "params": export})
    answer = client.receive()
    assert answer["id"] == 2
    text = answer["result"]["text"]
    assert len(text) > EXPORTED_BYTES
    assert text.count(TOOL_OUTPUT_LINE) == 10 * lines
    client.close()


# --- a disk that stalls --------------------------------------------------------------------------

# Each fsync and fdatasync of the server's process waits a second first: a disk under load.
SLOW_SYNC_C = """
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>
int fsync(int fd) {
    int (*real)(int) = dlsym(RTLD_NEXT, "fsync");
    usleep(1000000);
    return real(fd);
}
int fdatasync(int fd) {
    int (*real)(int) = dlsym(RTLD_NEXT, "fdatasync");
    usleep(1000000);
    return real(fd);
}
"""
PROMPT_CHARS = 6 * 1024 * 1024  # more than SQLite's write-ahead log holds before a checkpoint


@pytest.fixture
def slow_disk(tmp_path: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the slow disk's shim with")
    source = tmp_path / "slow_sync.c"
    source.write_text(SLOW_SYNC_C)
    shim = tmp_path / "slow_sync.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", shim, source, "-ldl"], check=True)
    return shim


async def test_the_stores_checkpoints_wait_on_a_slow_disk_off_the_loop(
    start_server: Any, fake: FakeLLM, workspace: Path, slow_disk: Path
) -> None:
    """A prompt of 6 MB fills SQLite's write-ahead log past its checkpoint size: the
    checkpoint writes the log into the database and syncs both. On a disk where a sync
    takes a second, the loop must not be the one that waits (the watchdog, at its usual
    250 ms here: the prompt's 6 MB are also measured and copied on it)."""
    client = await start_server(extra_env={"LD_PRELOAD": str(slow_disk)})
    await client.initialize()
    session = await client.new_session(str(workspace))
    for prompt, answer in (("x" * PROMPT_CHARS, "Long."), ("And now?", "Short.")):
        fake.set_script([Reply(text=answer)])
        result = await client.prompt(session, prompt, timeout=120)
        assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == "Long.Short."


# --- tool arguments of 8 MB ----------------------------------------------------------------------

LARGE_ARGUMENT_CALLS = 8
ARGUMENT_CHARS = 1024 * 1024  # a city of 1 MB in each call: 8 MB in the round


async def test_a_round_with_8_mb_of_tool_arguments_leaves_the_loop_free(
    start_server: Any, fake: FakeLLM, workspace: Path, watched_at_50_ms: None
) -> None:
    """A model that calls an editor's tool eight times with 1 MB of arguments each: the
    arguments are parsed, shown, answered, counted and sent back to the model in the next
    request, and all of that is done off the loop (the watchdog at 50 ms reports nothing)."""
    cities = [f"{n}" + "x" * ARGUMENT_CHARS for n in range(LARGE_ARGUMENT_CALLS)]
    calls = tuple(ScriptedToolCall("get_weather", {"city": city}) for city in cities)
    # In 4 KB deltas: the default 4 characters would be two million of them, a minute's work.
    fake.set_script([Reply(tool_calls=calls, chunk_size=4096), Reply(text="Sunny everywhere.")])
    client = await start_server()
    await client.initialize(tools=[WEATHER_TOOL])
    client.editor_tool_handler = lambda params: {
        "content": f"Sunny in {len(params['arguments']['city'])}"
    }
    session = await client.new_session(str(workspace))
    result = await client.prompt(session, "The weather in these cities?", timeout=120)
    assert result["stopReason"] == "end_turn"
    assert client.text_of(session) == "Sunny everywhere."
    assert [call["arguments"]["city"] for call in client.editor_calls] == cities
    # The next request sent the model every call and every answer, whole.
    sent = fake.requests[-1].body["messages"]
    sent_calls = [call for message in sent for call in message.get("tool_calls") or ()]
    assert [json.loads(call["function"]["arguments"])["city"] for call in sent_calls] == cities
    assert [m["content"] for m in sent if m["role"] == "tool"] == [
        f"Sunny in {len(city)}" for city in cities
    ]
