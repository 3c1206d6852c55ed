"""Shared fixtures: the fake LLM, a sample workspace, and `parley serve` as a subprocess.

The server runs exactly as an editor runs it: a child process spoken to over JSON-RPC on
its stdin/stdout (through pytest-lsp's client/server plumbing), with its providers pointed
at the fake LLM over real HTTP.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from parley.client import ParleyClient
from parley.core.loop_watchdog import describe, read_reports
from parley.fakellm import FakeLLM
from pytest_lsp import ClientServerConfig

# A real llama.cpp server with a tiny script model: `script_model`, `llama_servers`, ...;
# an async test that times out shows where its tasks wait (tests/timeout_stacks.py); the
# user's own kernel and a Jupyter Server (`users_kernel`, `jupyter_server`); the OpenAI and
# Anthropic SDKs' clients of the fake LLM (`openai_client`, `anthropic_client`).
pytest_plugins = ("fakellm_clients", "llamacpp_fixtures", "timeout_stacks", "user_kernel_fixtures")

# No per-example deadline: what a property checks is its invariant, never its time (a loaded
# 2-core machine took 286 ms for a 136 ms example; speed is `parley bench`'s).
settings.register_profile("parley", deadline=None)
settings.load_profile("parley")

REPO = Path(__file__).resolve().parents[1]
# The tests' folder: its helpers (the fake editor agent, the MCP server, the display cases)
# live here, the tests in its folders by concern.
TESTS = REPO / "tests"
# Real recorded provider streams (tests/fixtures/wire/README.md says where each came from).
WIRE_FIXTURES = REPO / "tests" / "fixtures" / "wire"


def wire_fixture(name: str) -> Path:
    """A recorded body of tests/fixtures/wire; one missing from the repository fails the test."""
    path = WIRE_FIXTURES / name
    if not path.is_file():
        pytest.fail(f"wire fixture {path} is missing from the repository")
    return path


# A server's event loop blocked longer than this fails the test (see `loop_watchdog`). It was
# 250 ms while store commits waited on the disk on the loop (105-205 ms in 5 of 6 fresh-clone
# runs); with the store's checkpoints in their own thread, a whole run of the suite on this
# 2-core machine at a load average of 9-12 reported no block over 100 ms (docs/testing.md).
LOOP_WATCHDOG_MS = 100

# The servers the tests start are forked by a warm process of this pytest process's own (a
# start costs a fork, not a second of imports: parley/warm_process.py), in a runtime
# directory of its own, ended with the session (`pytest_sessionfinish`). PARLEY_TEST_WARM=0:
# every server cold. tests/protocol/test_warm_start.py starts warm processes of its own.
WARM_RUNTIME = Path(tempfile.mkdtemp(prefix="pt", dir="/tmp"))
# Enterable by all, as the seccomp filter's folder in it must be for the tests' unprivileged
# children (its `parley/` stays 0700: warm_start.runtime_directory).
WARM_RUNTIME.chmod(0o711)
if os.environ.get("PARLEY_TEST_WARM", "1") == "1":
    os.environ.update(
        PARLEY_WARM="1", XDG_RUNTIME_DIR=str(WARM_RUNTIME), PARLEY_WARM_IDLE_SECONDS="300"
    )
else:
    os.environ["PARLEY_WARM"] = "0"


def pytest_sessionfinish() -> None:
    """The warm processes this process's tests started end with it (and their servers)."""
    for log in (WARM_RUNTIME / "parley").glob("warm-*.log"):
        for pid in re.findall(r"\(pid (\d+)\)", log.read_text(errors="replace")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    shutil.rmtree(WARM_RUNTIME, ignore_errors=True)


MODELS = {"openai": "openai:gpt-4.1-mini", "anthropic": "anthropic:claude-sonnet-4-5"}


@pytest.fixture(autouse=True)
def loop_watchdog(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Every `parley serve` a test starts (directly, through `parley chat`, a bench) runs
    with its event loop watched (`parley.core.loop_watchdog`): the test fails if a server's
    loop was blocked longer than LOOP_WATCHDOG_MS, and says what blocked it."""
    reports = tmp_path_factory.mktemp("loop-watchdog") / "reports.jsonl"
    monkeypatch.setenv("PARLEY_LOOP_WATCHDOG_MS", str(LOOP_WATCHDOG_MS))
    monkeypatch.setenv("PARLEY_LOOP_WATCHDOG_FILE", str(reports))
    yield reports
    blocks = read_reports(reports)
    if blocks:
        pytest.fail(
            f"A server's event loop was blocked {len(blocks)} time(s):\n\n"
            + "\n\n".join(describe(block) for block in blocks),
            pytrace=False,
        )


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "geometry.py").write_text(
        '"""Shapes."""\n\n\ndef area(width, height):\n    """Width times height."""\n'
        "    return width * height\n"
    )
    return root


def server_env(fake: FakeLLM, home: Path, model: str = MODELS["openai"]) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": fake.openai_base_url,
        "OPENAI_API_KEY": "sk-test-parley-0123456789",
        "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-parley-0123456789",
        "PARLEY_MODEL": model,
        "PARLEY_HOME": str(home),
        "PARLEY_CONFIG": str(home / "no-config.toml"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }


ClientFactory = Callable[..., "AsyncIterator[ParleyClient]"]


@pytest.fixture
async def start_server(fake: FakeLLM, tmp_path: Path) -> AsyncIterator[Callable[..., object]]:
    """Start `parley serve` (several times if a test wants); all are stopped at the end."""
    clients: list[ParleyClient] = []

    async def start(
        model: str = MODELS["openai"],
        framing: str = "lsp",
        extra_env: dict[str, str] | None = None,
        home: Path | None = None,
    ) -> ParleyClient:
        env = {**os.environ, **server_env(fake, home or tmp_path / "home", model)}
        env.update(extra_env or {})
        config = ClientServerConfig(
            server_command=[sys.executable, "-m", "parley", "serve", "--framing", framing],
            client_factory=ParleyClient,
            server_env=env,
        )
        client = await config.start()
        assert isinstance(client, ParleyClient)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.stop()


@pytest.fixture(params=sorted(MODELS))
def provider(request: pytest.FixtureRequest) -> str:
    """Run a test once per provider wire format."""
    return request.param


@pytest.fixture
async def client(start_server: Callable[..., object], provider: str) -> ParleyClient:
    started = await start_server(model=MODELS[provider])  # type: ignore[misc]
    await started.initialize(tools=[WEATHER_TOOL])
    return started


# A tool the test client offers, as an editor would, so tests see calls reach a real peer.
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "kind": "fetch",
    "needsPermission": False,
}
