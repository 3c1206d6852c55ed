"""A session attached to the user's own kernel (issue 41): a real ipykernel started through
jupyter_client, `parley serve` as a subprocess, the fake LLM scripting the model's calls."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from parley.client import ParleyClient
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from user_kernel_fixtures import UsersKernel

INVENTORY = '''
class Inventory:
    """Stock by item."""

    def __init__(self):
        self.items = {"apples": 3}

    def add(self, item, count):
        """Add `count` of `item`."""
        self.items[item] = self.items.get(item, 0) + count
        return self.items[item]


stock = Inventory()
'''


def call(tool: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool, arguments)


def allow_once(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


async def run_calls(
    client: ParleyClient,
    fake: FakeLLM,
    session: str,
    calls: list[ScriptedToolCall],
    answered: int = 0,
) -> list[str]:
    """One call per round in one turn; what the model got back for each. `answered`: the
    model's messages in the session so far (the fake picks a reply by their number)."""
    earlier = [Reply(text="(an earlier turn)")] * answered
    fake.set_script(earlier + [Reply(tool_calls=(c,)) for c in calls] + [Reply(text="Done.")])
    before = len(fake.requests)
    result = await client.prompt(session, "Look at my kernel.", timeout=120)
    assert result["stopReason"] == "end_turn"
    requests = fake.requests[before:]
    return [request.body["messages"][-1]["content"] for request in requests[1:]]


@pytest.fixture
async def client(start_server) -> ParleyClient:
    started = await start_server()
    await started.initialize()
    started.permission_handler = allow_once
    return started


async def test_the_tools_read_and_change_the_users_live_namespace(
    client: ParleyClient, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    await users_kernel.run_cell(INVENTORY)
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    described, members, source, evaluated, last_error = await run_calls(
        client,
        fake,
        session,
        [
            call("python_describe", target="stock"),
            call("python_members", target="stock"),
            call("python_source", target="Inventory.add"),
            call("python_eval", code="stock.add('pears', 5)\nstock.items"),
            call("python_last_error"),
        ],
    )
    assert "stock (live, from your kernel)" in described
    assert "Inventory" in described and "Stock by item." in described
    assert "add" in members and "items" in members
    assert "def add(self, item, count):" in source
    assert "'pears': 5" in evaluated
    assert "No exception has been reported" in last_error
    assert "Your last cells (the kernel's history):" in last_error
    assert "class Inventory" in last_error  # the user's cell, not Parley's eval
    assert "pears" not in last_error

    # The eval was asked about, saying where it runs, with no "always" to choose.
    (question,) = client.permission_requests
    assert "in your kernel, not sandboxed" in question["toolCall"]["title"]
    assert [o["kind"] for o in question["options"]] == ["allow_once", "reject_once"]

    # The user's next cell sees the change; Parley's code is not in their history.
    assert (await users_kernel.run_cell("print(stock.items['pears'])")).strip() == "5"
    history = await users_kernel.history()
    assert any("class Inventory" in cell for cell in history)
    assert not any("pears', 5" in cell for cell in history)


async def test_a_users_error_is_the_last_error_and_a_rejected_eval_does_not_run(
    client: ParleyClient, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await users_kernel.run_cell("touched = []")
    # The user's cell raises after Parley attached (it hears the kernel's broadcasts).
    await run_calls(client, fake, session, [call("python_describe", target="touched")])
    failing = users_kernel.client.execute("ratio = 1 / len(touched)")
    while True:
        reply = await users_kernel.client.get_shell_msg(timeout=30)
        if reply["parent_header"]["msg_id"] == failing:
            break
    client.permission_handler = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "reject_once"}
    }
    (last_error, rejected) = await run_calls(
        client,
        fake,
        session,
        [call("python_last_error"), call("python_eval", code="touched.append('parley')")],
        answered=2,
    )
    assert "your cell" in last_error and "ZeroDivisionError" in last_error
    assert "ratio = 1 / len(touched)" in last_error
    assert "rejected" in rejected
    assert (await users_kernel.run_cell("print(touched)")).strip() == "[]"


async def test_stop_interrupts_a_long_eval_and_the_kernel_lives_on(
    client: ParleyClient, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    await users_kernel.run_cell("kept = 'still here'")
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    fake.set_script([Reply(tool_calls=(call("python_eval", code="import time\ntime.sleep(600)"),))])
    prompt = asyncio.create_task(client.prompt(session, "Wait.", timeout=60))
    await client.wait_for_update(session, lambda u: u.get("status") == "in_progress", timeout=30)
    await asyncio.sleep(0.5)  # the sleep has started
    client.cancel(session)
    result = await prompt
    assert result["stopReason"] == "cancelled"
    # Not killed: the user's namespace is there, and the kernel runs their next cell.
    assert (await users_kernel.run_cell("print(kept)", timeout=20)).strip() == "still here"
    assert await users_kernel.manager.is_alive()


async def test_a_busy_kernel_is_refused_without_running_parleys_code(
    start_server, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[kernel]\nbusy_wait_seconds = 1\n")
    client = await start_server(extra_env={"PARLEY_CONFIG": str(config)})
    await client.initialize()
    client.permission_handler = allow_once
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await users_kernel.run_cell("ran = []")
    users_cell = users_kernel.client.execute("import time\ntime.sleep(6)\nran.append('user')")
    await asyncio.sleep(0.5)
    (refused,) = await run_calls(
        client, fake, session, [call("python_eval", code="ran.append('parley')")]
    )
    assert "is busy" in refused and "was not run" in refused
    while (await users_kernel.client.get_shell_msg(timeout=30))["parent_header"][
        "msg_id"
    ] != users_cell:
        pass
    assert (await users_kernel.run_cell("print(ran)")).strip() == "['user']"


async def test_a_dead_kernel_is_said_and_the_session_goes_on(
    client: ParleyClient, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await users_kernel.manager.shutdown_kernel(now=True)
    (dead, who) = await run_calls(
        client,
        fake,
        session,
        [call("python_eval", code="1 + 1"), call("python_who_calls", name="area")],
    )
    assert "does not answer its heartbeat" in dead
    assert "No calls to area" in who  # the session goes on


async def test_a_reloaded_session_reattaches_and_says_when_its_kernel_is_gone(
    start_server, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first = await start_server(home=home)
    await first.initialize()
    first.permission_handler = allow_once
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await first.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await users_kernel.run_cell("answer = 41")
    await run_calls(first, fake, session, [call("python_eval", code="answer += 1")])
    await first.stop()

    # A new server: the session remembers its kernel, and the tools are there again.
    second = await start_server(home=home)
    await second.initialize()
    await second.load_session(session, str(tmp_path))
    assert second.notices_of(session) == []
    (described,) = await run_calls(
        second, fake, session, [call("python_describe", target="answer")], answered=2
    )
    assert "42" in described and "from your kernel" in described
    await second.stop()

    # The kernel is gone: the load says so, and the session goes on with Parley's own.
    await users_kernel.manager.shutdown_kernel(now=True)
    third = await start_server(home=home)
    await third.initialize()
    third.permission_handler = allow_once
    await third.load_session(session, str(tmp_path))
    ((level, text),) = third.notices_of(session)
    assert level == "warning"
    assert "could not attach this session to the kernel of" in text
    assert "Parley's own kernel" in text
    (evaluated,) = await run_calls(
        third, fake, session, [call("python_eval", code="'answer' in dir()")], answered=4
    )
    assert "value: False" in evaluated  # Parley's own, fresh kernel
    (question,) = third.permission_requests
    assert "in your kernel" not in question["toolCall"]["title"]


async def test_a_connection_file_whose_kernel_never_answers_is_said_and_the_session_goes_on(
    client: ParleyClient, fake: FakeLLM, tmp_path: Path
) -> None:
    import json
    import socket

    ports = []
    for _ in range(5):  # ports nothing listens on
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    names = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
    silent = tmp_path / "kernel-silent.json"
    silent.write_text(
        json.dumps({**dict(zip(names, ports, strict=True)), "ip": "127.0.0.1", "key": "k"})
    )
    session = await client.new_session(
        str(tmp_path), toolPolicy="sync", kernel={"connectionFile": str(silent)}
    )
    await client.wait_for_update(session, lambda u: "_meta" in u, timeout=30)
    ((level, text),) = client.notices_of(session)
    assert level == "warning" and "kernel-silent.json" in text
    assert "does not answer its heartbeat" in text
    (evaluated,) = await run_calls(client, fake, session, [call("python_eval", code="2 + 2")])
    assert "value: 4" in evaluated


async def test_the_kernel_option_shows_the_choice_and_switches_it(
    start_server, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    client = await start_server()  # after the kernel: its runtime directory is the test's
    await client.initialize()
    client.permission_handler = allow_once
    await users_kernel.run_cell("mine = 'the user'")
    sync = {"parley": {"toolPolicy": "sync"}}
    result = await client.request(
        "session/new", {"cwd": str(tmp_path), "mcpServers": [], "_meta": sync}
    )
    session = result["sessionId"]
    (option,) = [o for o in result["configOptions"] if o["id"] == "kernel"]
    assert option["currentValue"] == "parley"
    assert users_kernel.connection_file in [choice["value"] for choice in option["options"]]

    answer = await client.request(
        "session/set_config_option",
        {"sessionId": session, "configId": "kernel", "value": users_kernel.connection_file},
    )
    (option,) = [o for o in answer["configOptions"] if o["id"] == "kernel"]
    assert option["currentValue"] == users_kernel.connection_file
    (mine,) = await run_calls(client, fake, session, [call("python_describe", target="mine")])
    assert "the user" in mine

    await client.request(
        "session/set_config_option", {"sessionId": session, "configId": "kernel", "value": "parley"}
    )
    (theirs,) = await run_calls(
        client, fake, session, [call("python_eval", code="'mine' in dir()")], answered=2
    )
    assert "value: False" in theirs
    with pytest.raises(Exception, match="kernel must be"):
        await client.request(
            "session/set_config_option",
            {"sessionId": session, "configId": "kernel", "value": "/etc/passwd"},
        )


async def test_a_restart_of_the_users_kernel_is_said_and_the_session_goes_on(
    client: ParleyClient, fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    await users_kernel.run_cell("before = 1")
    kernel = {"connectionFile": users_kernel.connection_file}
    session = await client.new_session(str(tmp_path), toolPolicy="sync", kernel=kernel)
    await run_calls(client, fake, session, [call("python_describe", target="before")])
    await users_kernel.manager.restart_kernel(now=True)
    await users_kernel.client.wait_for_ready(timeout=60)
    (evaluated,) = await run_calls(
        client, fake, session, [call("python_eval", code="'before' in dir()")], answered=2
    )
    assert "restarted: its namespace is new" in evaluated
    assert "value: False" in evaluated
