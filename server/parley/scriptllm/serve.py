"""llama.cpp's own HTTP server (the `xllamacpp` wheel) on a model, in this process; and
`ScriptServer`, which runs it as a child process (`python -m parley.scriptllm serve`) so a
test can stop or kill it like any llama-server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

import httpx

from parley.scriptllm.vocab import template_text

STARTUP_TIMEOUT = 60.0


def serve_forever(
    model: Path,
    port: int,
    ctx: int,
    template: str | None,
    prefill_assistant: bool = True,
    parallel: int = 1,
) -> None:
    """Start the server, print `listening URL` once /health answers, then run until killed."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = ctx
    params.n_parallel = parallel
    params.port = port
    params.use_jinja = True
    if template:
        params.chat_template = template_text(template)
    params.prefill_assistant = prefill_assistant
    params.endpoint_props = True
    params.endpoint_slots = True
    params.endpoint_metrics = True
    params.warmup = False
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)
    url = server.listening_address
    if not url.startswith("http"):
        url = f"http://{url}"
    _wait_healthy(url)
    print(f"listening {url}", flush=True)
    threading.Event().wait()


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"llama.cpp server at {url} not healthy after {STARTUP_TIMEOUT}s")
        time.sleep(0.05)


class ScriptServer:
    """`python -m parley.scriptllm serve` as a child process; its log goes to `log`."""

    def __init__(
        self,
        model: Path,
        log: Path,
        ctx: int = 4096,
        template: str = "qwen2.5",
        prefill_assistant: bool = True,
        parallel: int = 1,
        port: int = 0,
    ) -> None:
        self.log = log
        command = [sys.executable, "-m", "parley.scriptllm", "serve", "--model", str(model)]
        command += ["--port", str(port), "--ctx", str(ctx), "--template", template]
        command += ["--parallel", str(parallel)]
        if not prefill_assistant:
            command.append("--no-prefill-assistant")
        with log.open("ab") as log_file:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if not line.startswith("listening "):
            self.kill()
            raise RuntimeError(f"scriptllm server did not start: {line!r}; see {log}")
        self.url = line.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1])

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def __enter__(self) -> ScriptServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.kill()
