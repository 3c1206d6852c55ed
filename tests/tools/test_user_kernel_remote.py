"""A session attached to a kernel of a Jupyter Server (issue 41): a real `jupyter_server`
started by the test, with a token; the token never reaches the store, the model or the
client, and a session reloaded without it says so and goes on with Parley's own kernel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply
from test_user_kernel import allow_once, call, run_calls
from user_kernel_fixtures import JupyterServer


async def user_cell(client: Any, code: str) -> None:
    reply = await client.execute_interactive(code, timeout=60)
    assert reply["content"]["status"] == "ok"


async def test_a_servers_kernel_is_used_with_a_token_read_from_the_named_variable(
    start_server, fake: FakeLLM, jupyter_server: JupyterServer, tmp_path: Path
) -> None:
    kernel_id = await jupyter_server.start_kernel()
    notebook = await jupyter_server.users_notebook(kernel_id)
    try:
        await user_cell(notebook, "prices = {'tea': 2.5}")
        client = await start_server(extra_env={"NOTEBOOK_TOKEN": jupyter_server.token})
        await client.initialize()
        client.permission_handler = allow_once
        kernel = {"server": jupyter_server.url, "kernelId": kernel_id, "tokenEnv": "NOTEBOOK_TOKEN"}
        session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
        described, evaluated = await run_calls(
            client,
            fake,
            session,
            [
                call("python_describe", target="prices"),
                call("python_eval", code="prices['coffee'] = 3.0\nsorted(prices)"),
            ],
        )
        assert "prices (live, from your kernel)" in described and "dict" in described
        assert "['coffee', 'tea']" in evaluated
        reply = await notebook.execute_interactive("assert prices['coffee'] == 3.0", timeout=60)
        assert reply["content"]["status"] == "ok"
    finally:
        notebook.stop_channels()


async def test_an_inline_token_is_never_stored_nor_sent_and_a_reload_without_it_says_so(
    start_server, fake: FakeLLM, jupyter_server: JupyterServer, tmp_path: Path
) -> None:
    kernel_id = await jupyter_server.start_kernel()
    home = tmp_path / "home"
    # The workspace holds none of the server's own files (its runtime file has the token).
    workspace = tmp_path / "project"
    workspace.mkdir()
    client: ParleyClient = await start_server(home=home)
    await client.initialize()
    client.permission_handler = allow_once
    kernel = {"server": jupyter_server.url, "kernelId": kernel_id, "token": jupyter_server.token}
    session = await client.new_session(str(workspace), toolPolicy="sync", kernel=kernel)
    (evaluated,) = await run_calls(client, fake, session, [call("python_eval", code="6 * 7")])
    assert "value: 42" in evaluated
    sent_to_model = "".join(str(request.body) for request in fake.requests)
    assert jupyter_server.token not in sent_to_model
    shown = str(client.updates_of(session))
    assert jupyter_server.token not in shown
    for stored in home.rglob("*"):
        if stored.is_file():
            assert jupyter_server.token.encode() not in stored.read_bytes(), stored
    await client.stop()

    again: ParleyClient = await start_server(home=home)
    await again.initialize()
    await again.load_session(session, str(workspace))
    ((level, text),) = again.notices_of(session)
    assert level == "warning"
    assert "refused the token" in text and "Parley's own kernel" in text


@pytest.mark.parametrize(
    ("kernel", "named"),
    [
        ({"server": "ftp://host", "kernelId": "k"}, "http:// or https://"),
        ({"server": "http://u:p@host", "kernelId": "k"}, "plain URL"),
        ({"server": "http://host"}, "'kernelId' must be"),
        ({"connectionFile": "relative.json"}, "absolute path"),
        ({"server": "http://host", "kernelId": "k", "token": 5}, "'token' must be a string"),
    ],
)
async def test_a_wrong_kernel_object_is_invalid_params_naming_the_field(
    start_server, tmp_path: Path, kernel: dict[str, Any], named: str
) -> None:
    client = await start_server()
    await client.initialize()
    with pytest.raises(Exception, match=r"_meta\.parley\.kernel") as refused:
        await client.new_session(str(tmp_path), kernel=kernel)
    assert named in str(refused.value)


async def test_stop_interrupts_a_servers_kernel_through_its_rest_api_and_it_lives_on(
    start_server, fake: FakeLLM, jupyter_server: JupyterServer, tmp_path: Path
) -> None:
    kernel_id = await jupyter_server.start_kernel()
    notebook = await jupyter_server.users_notebook(kernel_id)
    try:
        await user_cell(notebook, "kept = 'still here'")
        client = await start_server(extra_env={"NOTEBOOK_TOKEN": jupyter_server.token})
        await client.initialize()
        client.permission_handler = allow_once
        kernel = {"server": jupyter_server.url, "kernelId": kernel_id, "tokenEnv": "NOTEBOOK_TOKEN"}
        session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
        long_sleep = call("python_eval", code="import time\ntime.sleep(600)")
        fake.set_script([Reply(tool_calls=(long_sleep,))])
        prompt = asyncio.create_task(client.prompt(session, "Wait.", timeout=60))
        await client.wait_for_update(
            session, lambda u: u.get("status") == "in_progress", timeout=30
        )
        await asyncio.sleep(0.5)
        client.cancel(session)
        assert (await prompt)["stopReason"] == "cancelled"
        reply = await notebook.execute_interactive("assert kept == 'still here'", timeout=20)
        assert reply["content"]["status"] == "ok"  # interrupted, not killed or restarted
    finally:
        notebook.stop_channels()


async def test_a_server_nobody_answers_at_is_said_and_the_session_goes_on(
    start_server, fake: FakeLLM, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = await start_server()
    await client.initialize()
    client.permission_handler = allow_once
    kernel = {"server": f"http://127.0.0.1:{port}", "kernelId": "k1", "token": "t" * 20}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await client.wait_for_update(session, lambda u: "_meta" in u, timeout=30)
    ((level, text),) = client.notices_of(session)
    assert level == "warning" and "the server cannot be reached" in text
    (evaluated,) = await run_calls(client, fake, session, [call("python_eval", code="1 + 2")])
    assert "value: 3" in evaluated
