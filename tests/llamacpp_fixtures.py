"""Fixtures for tests against a real llama.cpp server (`parley.scriptllm`): the script model
(built once per session, cached under ~/.cache/parley), servers started per configuration and
reused, and `parley serve` pointed at one of them.

Loaded by tests/conftest.py (`pytest_plugins`). Skipped only where the platform has no
`xllamacpp` wheel.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

try:
    import xllamacpp  # noqa: F401
except ImportError as error:  # pragma: no cover - platforms without a wheel
    XLLAMACPP_MISSING: str | None = f"no xllamacpp wheel for this platform: {error}"
else:
    XLLAMACPP_MISSING = None

from parley.scriptllm.scripts import HELLO_PY
from parley.scriptllm.serve import ScriptServer

LLAMACPP_MODEL = "llamacpp:script"


@pytest.fixture(scope="session")
def script_model() -> Path:
    if XLLAMACPP_MISSING:
        pytest.skip(XLLAMACPP_MISSING)
    from parley.scriptllm.model import built_model

    return built_model()


class LlamaServers:
    """Running llama.cpp servers, one per configuration, shared by the session's tests;
    `fresh` ones (a test that kills its server) are stopped with the session too."""

    def __init__(self, model: Path, logs: Path) -> None:
        self.model = model
        self.logs = logs
        self.running: dict[tuple[Any, ...], ScriptServer] = {}
        self.extra: list[ScriptServer] = []

    def get(
        self,
        template: str = "qwen2.5",
        ctx: int = 4096,
        prefill_assistant: bool = True,
        fresh: bool = False,
        port: int = 0,
    ) -> ScriptServer:
        key = (template, ctx, prefill_assistant)
        if not fresh and key in self.running and self.running[key].process.poll() is None:
            return self.running[key]
        name = re.sub(r"\W", "-", f"{template}-{ctx}-{prefill_assistant}-{len(self.extra)}")
        server = ScriptServer(
            self.model,
            self.logs / f"{name}.log",
            ctx=ctx,
            template=template,
            prefill_assistant=prefill_assistant,
            port=port,
        )
        if fresh:
            self.extra.append(server)
        else:
            self.running[key] = server
        return server

    def stop_all(self) -> None:
        for server in [*self.running.values(), *self.extra]:
            server.kill()


@pytest.fixture(scope="session")
def llama_servers(
    script_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServers]:
    servers = LlamaServers(script_model, tmp_path_factory.mktemp("llama-logs"))
    yield servers
    servers.stop_all()


@pytest.fixture
def hello_workspace(workspace: Path) -> Path:
    """The workspace the tool scripts read `hello.py` in (it holds the after-tool trigger)."""
    (workspace / "hello.py").write_text(HELLO_PY)
    return workspace


async def start_parley_on(
    start_server: Any,
    server: ScriptServer,
    home: Path,
    provider_lines: str = "",
    model_lines: str = "",
    model: str = LLAMACPP_MODEL,
) -> Any:
    """`parley serve` with the llamacpp preset pointed at `server` (a config file), initialised
    and answering every permission request with "allow"."""
    from parley.client import allow_all

    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(
        f'[providers.llamacpp]\nbase_url = "{server.openai_base_url}"\n{provider_lines}\n'
        f'[models."{model}"]\n{model_lines}\n'
    )
    client = await start_server(model=model, home=home, extra_env={"PARLEY_CONFIG": str(config)})
    await client.initialize()
    client.permission_handler = allow_all
    return client


def server_metrics(server: ScriptServer) -> dict[str, float]:
    """llama.cpp's own counters (GET /metrics), by name without the `llamacpp:` prefix."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    counters = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, _, value = line.partition(" ")
            counters[name.removeprefix("llamacpp:")] = float(value)
    return counters


def slots(server: ScriptServer) -> list[dict[str, Any]]:
    return httpx.get(f"{server.url}/slots", timeout=10).json()


class RecordingProxy:
    """An HTTP proxy in front of a llama.cpp server that keeps what it answered: each chat
    completion's request body and the usage the server reported (the non-streamed body's,
    or a stream's last `usage` chunk; None for a stream the client closed first)."""

    def __init__(self, server: ScriptServer) -> None:
        self.target = server.url
        self.calls: list[dict[str, Any]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def _forward(self, body: bytes | None) -> None:
                call: dict[str, Any] = {"path": self.path, "usage": None}
                if body:
                    call["request"] = json.loads(body)
                # Kept in arrival order: a stream the client closed early is known to be
                # over only when a write to it fails, which may come after later calls end.
                proxy.calls.append(call)
                with httpx.stream(
                    self.command,
                    proxy.target + self.path,
                    content=body,
                    headers={"Content-Type": "application/json"},
                    timeout=120,
                ) as response:
                    self.send_response(response.status_code)
                    self.send_header("Content-Type", response.headers.get("content-type", ""))
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    call["status"] = response.status_code
                    text = []
                    try:
                        for piece in response.iter_text():
                            text.append(piece)
                            self.wfile.write(f"{len(piece.encode()):x}\r\n".encode())
                            self.wfile.write(piece.encode() + b"\r\n")
                            self.wfile.flush()
                        # Before the last chunk: once it is sent, the test may read the call.
                        call["usage"] = _usage_of("".join(text))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:  # the client closed the stream early
                        call["usage"] = _usage_of("".join(text))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.openai_base_url = f"{self.url}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def chat_calls(self) -> list[dict[str, Any]]:
        return [call for call in self.calls if call["path"].endswith("/chat/completions")]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _usage_of(text: str) -> dict[str, Any] | None:
    if not text.startswith("data:"):
        try:
            return json.loads(text).get("usage")
        except ValueError:
            return None
    usage = None
    for line in text.splitlines():
        if line.startswith("data: {"):
            usage = json.loads(line[len("data: ") :]).get("usage") or usage
    return usage


@pytest.fixture
def recording_proxy() -> Iterator[Any]:
    """`recording_proxy(server)`: a RecordingProxy in front of it, closed at the end."""
    proxies: list[RecordingProxy] = []

    def start(server: ScriptServer) -> RecordingProxy:
        proxies.append(RecordingProxy(server))
        return proxies[-1]

    yield start
    for proxy in proxies:
        proxy.close()
