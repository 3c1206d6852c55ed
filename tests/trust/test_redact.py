"""Secrets never leave: provider error texts, answers and log lines are redacted.

Unit tests of `parley.core.redact`, then the whole path: a gateway that echoes the request's
headers (the fake LLM's `echo_headers` fault) must not bring the API key to the client,
stderr (at DEBUG too) or any byte under PARLEY_HOME.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import MODELS
from parley.cli import RedactingFormatter
from parley.core.redact import REDACTED, Redactor, redact_json, secrets_in
from parley.fakellm import Fault, Reply
from pygls.exceptions import JsonRpcException

OPENAI_KEY = "sk-test-parley-0123456789"
ANTHROPIC_KEY = "sk-ant-test-parley-0123456789"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer abc.DEF-123_456", "Authorization: Bearer "),
        ('{"authorization": "Bearer zzz"}', '{"authorization": "Bearer '),
        ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "{'Authorization': 'Basic "),
        ("x-api-key: whatever-it-is", "x-api-key: "),
        ('"api_key": "abc"', '"api_key": "'),
        ("proxy-authorization=token xyz", "proxy-authorization=token "),
        ("GET /v1?key=AIzaSyA0123456789abcdefghijklmnopqrstu&alt=json", "GET /v1?key="),
        ("the header said Bearer eyJhbGciOiJIUzI1NiJ9.e30.x1", "the header said Bearer "),
        (f"invalid key {OPENAI_KEY}, check it", "invalid key "),
        (f"invalid key {ANTHROPIC_KEY}", "invalid key "),
        ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx", ""),
        ("ghp_0123456789abcdefghijABCDEFGHIJ012345", ""),
        ("access_token=abcdefghij0123456789", "access_token="),
        ('"client_secret": "Zm9vYmFyYmF6cXV4MTIzNDU2"', '"client_secret": "'),
    ],
)
def test_secrets_are_replaced_and_the_rest_is_kept(text: str, kept: str) -> None:
    redacted = Redactor()(text)
    assert REDACTED in redacted
    assert redacted.startswith(kept)
    secret = text[len(kept) :].split()[0].strip("'\",}&")
    assert secret not in redacted


@pytest.mark.parametrize(
    "text",
    [
        '"max_tokens": 1000, "input_tokens": 12, "cache_key": "main"',
        "token=none, key=value",
        "the bearer of bad news",
        "Rate limit reached for gpt-4.1-mini in organization org-abc on tokens per min.",
        "task-sketch and desk-lamp are words",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor()(text) == text


def test_exact_values_are_removed_wherever_they_appear() -> None:
    redactor = Redactor(["plainvaluewithoutshape", "short", None])
    assert redactor("x plainvaluewithoutshape y") == f"x {REDACTED} y"
    assert redactor("short words stay") == "short words stay"  # too short to be a key
    # A value both known and shaped like a key is replaced once, cleanly.
    twice = Redactor([OPENAI_KEY])(f"Authorization: Bearer {OPENAI_KEY}; next")
    assert twice == f"Authorization: Bearer {REDACTED}; next"


def test_secret_variables_are_found_by_name() -> None:
    environ = {
        "OPENAI_API_KEY": "a",
        "GITHUB_TOKEN": "b",
        "AWS_SECRET_ACCESS_KEY": "c",
        "DB_PASSWORD": "d",
        "CLIENT_SECRET": "e",
        "HOME": "/home/x",
        "KEYBOARD": "us",
    }
    assert sorted(secrets_in(environ)) == ["a", "b", "c", "d", "e"]


def test_json_values_are_redacted_throughout() -> None:
    data = {"detail": [f"key {OPENAI_KEY}", {"authorization": "Bearer x1"}], "status": 401}
    assert json.dumps(redact_json(data)).count(REDACTED) == 2
    assert redact_json(data)["status"] == 401


def test_log_lines_and_their_tracebacks_are_redacted() -> None:
    formatter = RedactingFormatter("%(message)s")
    try:
        raise RuntimeError(f"gateway said: Authorization: Bearer {OPENAI_KEY}")
    except RuntimeError as error:
        record = logging.LogRecord(
            "t",
            logging.ERROR,
            __file__,
            1,
            "failed: %s",
            (error,),
            exc_info=(type(error), error, error.__traceback__),
        )
    line = formatter.format(record)
    assert "Traceback" in line and "RuntimeError" in line
    assert OPENAI_KEY not in line


# --- over JSON-RPC: a gateway that echoes the request's headers -------------------------


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_an_echoed_api_key_reaches_no_client_log_or_store(
    start_server, fake, workspace: Path, tmp_path: Path, provider: str
) -> None:
    home = tmp_path / "home"
    client = await start_server(
        model=MODELS[provider], home=home, extra_env={"PARLEY_LOG_LEVEL": "DEBUG"}
    )
    await client.initialize()
    fake.set_script(
        [Reply(text="never", fault=Fault("echo_headers", status=400)), Reply(text="ok")]
    )
    session = await client.new_session(str(workspace))
    with pytest.raises(JsonRpcException) as raised:
        await client.prompt(session, "Hello?", timeout=30)
    error = raised.value
    assert error.code == -32001
    # The gateway's words arrive, without the key it quoted.
    assert "Request headers:" in error.message and f"Bearer {REDACTED};" in error.message
    (echoed,) = fake.requests
    assert echoed.status == 400

    # The session goes on, and the key is nowhere.
    assert (await client.prompt(session, "Again?", timeout=30))["stopReason"] == "end_turn"
    await client.stop()
    stderr = "\n".join(client.stderr_lines)
    assert "DEBUG" in stderr  # the log level took effect
    everything = b"".join(path.read_bytes() for path in home.rglob("*") if path.is_file())
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, "test-parley-0123456789"):
        assert secret not in error.message
        assert secret not in json.dumps(error.data)
        assert secret not in stderr
        assert secret.encode() not in everything
        assert secret not in json.dumps(client.updates)
