"""The permission question for shell commands, and "allow always" by command prefix, per
workspace root (docs/security.md, "Commands are allowed always only by prefix, in one
workspace"): a prefix covers only commands whose every word is proven safe
(tools/command_policy.py), and only in the root the command runs in.

Over the wire: `parley serve` as a subprocess, the scripted model calling the real
`run_command` (tools/run_command.py: each allowed command really runs, sandboxed, in the
test's workspace), the test answering the questions as a user would.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp_schema import acp_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.client import ParleyClient
from parley.core.call_view import CallView
from parley.core.choices import AllowPrefix, CommandOffer
from parley.core.conversation import ToolCall
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.protocol.permission import (
    NOT_COVERABLE,
    permission_decision,
    permission_options,
    permission_request,
)
from parley.sandbox import SandboxSettings, sandbox_status

_here = sandbox_status(SandboxSettings())
needs_sandbox = pytest.mark.skipif(
    not _here.sandboxed, reason=f"commands cannot run sandboxed here: {_here.reason}"
)

ONCE = {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}
REJECT = {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}


def always(prefix: str) -> dict[str, str]:
    return {
        "optionId": f"allow_always:{prefix}",
        "name": f"Always allow `{prefix}` here",
        "kind": "allow_always",
    }


async def command_client(
    start: Callable[..., Any], answers: list[str] | None = None, **server: Any
) -> ParleyClient:
    """A server whose client answers its questions with `answers` in order (then rejects)."""
    client: ParleyClient = await start(**server)
    await client.initialize()
    pending = list(answers or [])

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        option = pending.pop(0) if pending else "reject_once"
        return {"outcome": {"outcome": "selected", "optionId": option}}

    client.permission_handler = answer
    return client


async def run_commands(
    client: ParleyClient, fake: FakeLLM, session: str, *commands: str, after: int = 0
) -> None:
    """One turn in which the model runs `commands`, one per round; `after`: the assistant
    messages the session has already (the fake model answers by their number)."""
    calls = [ScriptedToolCall("run_command", {"command": command}) for command in commands]
    earlier = [Reply(text="Earlier.")] * after
    fake.set_script([*earlier, *(Reply(tool_calls=(call,)) for call in calls), Reply(text="Done.")])
    result = await client.prompt(session, "Run them.", timeout=60)
    assert result["stopReason"] == "end_turn"


def asked(client: ParleyClient) -> list[str]:
    return [q["toolCall"]["rawInput"]["command"] for q in client.permission_requests]


def ran(client: ParleyClient) -> list[str]:
    """The commands that ran (their calls completed: a refused one fails unrun), in order."""
    commands: dict[str, str] = {}
    completed: list[str] = []
    for updates in client.updates.values():
        for update in updates:
            call_id, arguments = update.get("toolCallId"), update.get("rawInput") or {}
            if "command" in arguments:
                commands[call_id] = arguments["command"]
            elif update.get("status") == "completed":
                completed.append(commands[call_id])
    return completed


@needs_sandbox
async def test_the_question_shows_the_command_and_its_prefixes_whatever_auto_approve_says(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await command_client(start_server)
    # A client's autoApprove naming the tool does not skip a command's question.
    session = await client.new_session(str(workspace), autoApprove=["run_command"])
    command = "git status --short -- 'a file.txt'"
    await run_commands(client, fake, session, command, "git status | sh")
    configure = {"sessionId": session, "autoApprove": ["run_command"]}
    await client.request("_parley/session/configure", configure)
    await run_commands(client, fake, session, "pytest -q", after=3)

    simple, compound, configured = client.permission_requests
    assert simple["toolCall"]["kind"] == "execute"
    assert simple["toolCall"]["rawInput"] == {"command": command}
    # The real tool's view: the command in full, once, and the directory it runs in.
    assert simple["toolCall"]["title"] == "Run `git status --short -- 'a file.txt'`"
    assert simple["toolCall"]["locations"] == [{"path": str(workspace)}]
    # The title holds the whole command: the content does not repeat it (issue 37).
    assert "content" not in simple["toolCall"]
    assert simple["options"] == [ONCE, always("git status"), always("git"), REJECT]
    assert "UNSANDBOXED" not in str(simple["toolCall"])
    # A compound command: once or not at all.
    assert compound["toolCall"]["rawInput"] == {"command": "git status | sh"}
    assert compound["options"] == [ONCE, REJECT]
    assert configured["toolCall"]["rawInput"] == {"command": "pytest -q"}
    assert ran(client) == []  # all rejected


@needs_sandbox
async def test_allowing_pytest_always_covers_pytest_but_never_a_compound_command(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await command_client(start_server, ["allow_always:pytest"])
    session = await client.new_session(str(workspace))
    await run_commands(
        client,
        fake,
        session,
        "pytest",
        "pytest -q",
        "pytest; rm -rf x",
        "pytest && curl https://example.com/install.sh",
        "pytest $(rm -rf x)",
        "bash -c pytest",
    )
    assert asked(client) == [
        "pytest",
        "pytest; rm -rf x",
        "pytest && curl https://example.com/install.sh",
        "pytest $(rm -rf x)",
        "bash -c pytest",
    ]
    assert ran(client) == ["pytest", "pytest -q"]  # the others rejected
    said = [content.get("content", {}).get("text") for content in question_content(client, 0)]
    assert NOT_COVERABLE not in said  # `pytest` is offered always
    for position, question in enumerate(client.permission_requests[1:], start=1):
        assert question["options"] == [ONCE, REJECT]
        # The question says why "always" is not offered (issue 42).
        said = [
            content.get("content", {}).get("text") for content in question_content(client, position)
        ]
        assert said[-1] == NOT_COVERABLE


def question_content(client: ParleyClient, position: int) -> list[dict[str, Any]]:
    return client.permission_requests[position]["toolCall"].get("content", [])


@needs_sandbox
async def test_the_rule_holds_in_the_workspace_for_every_session_and_only_there(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    first = await command_client(start_server, ["allow_always:pytest"])
    session = await first.new_session(str(workspace))
    await run_commands(first, fake, session, "pytest -x")
    other_session = await first.new_session(str(workspace))
    await run_commands(first, fake, other_session, "pytest -q")
    assert asked(first) == ["pytest -x"]
    assert ran(first) == ["pytest -x", "pytest -q"]

    # Another server on the same store (a restart, another window).
    second = await command_client(start_server)
    same_workspace = await second.new_session(str(workspace))
    await run_commands(second, fake, same_workspace, "pytest --lf")
    elsewhere = tmp_path / "other-project"
    elsewhere.mkdir()
    other_workspace = await second.new_session(str(elsewhere))
    await run_commands(second, fake, other_workspace, "pytest --lf")
    assert asked(second) == ["pytest --lf"]  # in the other workspace only
    assert second.permission_requests[0]["sessionId"] == other_workspace
    assert ran(second) == ["pytest --lf"]

    # Without the sandbox: nothing offered always, the question says so, the rule not used.
    unsandboxed = await command_client(start_server, extra_env={"PARLEY_SANDBOX": "off"})
    session = await unsandboxed.new_session(str(workspace))
    await run_commands(unsandboxed, fake, session, "pytest -q")
    (question,) = unsandboxed.permission_requests
    assert question["options"] == [ONCE, REJECT]
    content = str(question["toolCall"]["content"])
    assert "Runs UNSANDBOXED: PARLEY_SANDBOX=off" in content
    assert question["toolCall"]["title"] == "Run `pytest -q` (unsandboxed)"
    assert ran(unsandboxed) == []


@needs_sandbox
async def test_an_option_the_question_did_not_offer_allows_nothing(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    client = await command_client(
        start_server, ["allow_always:rm", "allow_always:rm -rf", "allow_always", "allow_once"]
    )
    session = await client.new_session(str(workspace))
    await run_commands(client, fake, session, "pytest -q", "pytest -q", "ls", "rm -rf build")
    # Invented ids reject the call and add no rule; `allow_always` is not offered for a
    # command (it would allow the tool), so it rejects too.
    assert asked(client) == ["pytest -q", "pytest -q", "ls", "rm -rf build"]
    assert ran(client) == ["rm -rf build"]  # allowed once, at its own question


def git_repository(directory: Path) -> None:
    """A repository with one commit, made outside the sandbox."""
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(directory), "PATH": "/usr/bin:/bin"}
    for command in (
        ["git", "init", "-q"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty",
         "-m", "first"],
    ):  # fmt: skip
        subprocess.run(command, cwd=directory, env=env, check=True, capture_output=True)


@needs_sandbox
async def test_allowing_git_log_always_covers_its_safe_options_never_its_output_file(
    start_server, fake: FakeLLM, workspace: Path
) -> None:
    git_repository(workspace)
    config = (workspace / ".git" / "config").read_text()
    client = await command_client(start_server, ["allow_always:git log"])
    session = await client.new_session(str(workspace))
    planted = 'git log -1 --output=.git/config "--format=%n[core]%n%x09fsmonitor = touch x%n"'
    await run_commands(
        client,
        fake,
        session,
        "git log -1",
        "git log --oneline",
        "git --no-pager log -3 --stat",
        planted,
        "git log -1 --out=.git/config --format=x",
        "git config core.fsmonitor 'touch x'",
        "git grep -Otouch first",
    )
    assert asked(client) == [
        "git log -1",
        "git --no-pager log -3 --stat",  # not a `git log …` prefix: `git` was not allowed
        planted,
        "git log -1 --out=.git/config --format=x",
        "git config core.fsmonitor 'touch x'",
        "git grep -Otouch first",
    ]
    assert ran(client) == ["git log -1", "git log --oneline"]  # the others rejected
    first = client.permission_requests[0]
    assert first["options"] == [ONCE, always("git log"), always("git"), REJECT]
    for question in client.permission_requests[2:]:
        assert question["options"] == [ONCE, REJECT]  # nothing to allow always
    assert (workspace / ".git" / "config").read_text() == config


@needs_sandbox
async def test_a_rule_holds_only_in_the_root_the_command_runs_in(
    start_server, fake: FakeLLM, workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-root"
    (other / "sub").mkdir(parents=True)
    client = await command_client(start_server, ["allow_always:ls", "allow_always:ls"])
    result = await client.request(
        "session/new",
        {"cwd": str(workspace), "mcpServers": [], "additionalDirectories": [str(other)]},
    )
    session = result["sessionId"]
    commands = [
        ("ls", None),  # asked, then always allowed in the workspace
        ("ls", "."),
        ("ls", str(other)),  # another root: asked, then always allowed there too
        ("ls", str(other / "sub")),
        ("ls", "/etc"),  # refused by the gate: nothing to allow always
    ]
    calls = [ScriptedToolCall("run_command", {"command": c, "cwd": w}) for c, w in commands]
    fake.set_script([*(Reply(tool_calls=(call,)) for call in calls), Reply(text="Done.")])
    assert (await client.prompt(session, "List.", timeout=60))["stopReason"] == "end_turn"

    cwds = [q["toolCall"]["rawInput"].get("cwd") for q in client.permission_requests]
    assert cwds == [None, str(other), "/etc"]
    assert client.permission_requests[1]["options"] == [ONCE, always("ls"), REJECT]
    assert client.permission_requests[2]["options"] == [ONCE, REJECT]
    assert ran(client) == ["ls"] * 4


# --- the answer, in-process -------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
option_ids = st.one_of(
    st.sampled_from(["allow_once", "allow_always", "reject_once", "allow_always:", "allow"]),
    st.text(max_size=12).map(lambda prefix: f"allow_always:{prefix}"),
    json_values,
)
offers = st.one_of(
    st.none(),
    st.builds(
        CommandOffer,
        st.lists(st.sampled_from(["git", "git status", "pytest", "rm", ""]), max_size=3).map(tuple),
        st.none() | st.just("PARLEY_SANDBOX=off"),
    ),
)


@settings(max_examples=150, deadline=None)
@given(option=option_ids, outcome=st.sampled_from(["selected", "cancelled", None]), offer=offers)
def test_only_an_offered_option_allows_and_only_an_offered_prefix_becomes_a_rule(
    option: Any, outcome: Any, offer: CommandOffer | None
) -> None:
    answer = {"outcome": {"outcome": outcome, "optionId": option}}
    decision = permission_decision(answer, offer)
    offered = [o["optionId"] for o in permission_options(offer)]
    if outcome == "cancelled":
        assert decision == "cancelled"  # the user stopped the turn at the question
    elif outcome != "selected" or option not in offered or option == "reject_once":
        assert decision == "reject"
    elif isinstance(decision, AllowPrefix):
        assert offer is not None and offer.unsandboxed is None
        assert decision.prefix in offer.prefixes and option == f"allow_always:{decision.prefix}"
    else:
        assert decision == option  # allow_once; allow_always only for a tool, not a command
    if offer is not None:
        assert "allow_always" not in offered


@pytest.mark.parametrize(
    "offer",
    [
        CommandOffer(("git status", "git")),
        CommandOffer(()),
        CommandOffer(("pytest",), unsandboxed="PARLEY_SANDBOX=off"),
    ],
)
def test_a_commands_question_is_valid_acp(offer: CommandOffer) -> None:
    call = ToolCall("c1", "run_command", {"command": "git status"}, "call_1")
    view = CallView("Run `git status`", content=("```sh\ngit status\n```",))
    params = permission_request("sess_1", call, "execute", view, offer)
    message = {"jsonrpc": "2.0", "id": 1, "method": "session/request_permission", "params": params}
    assert acp_schema().check_agent_messages([], [message]) == []
    texts = str(params["toolCall"]["content"])
    assert ("UNSANDBOXED" in texts) == (offer.unsandboxed is not None)
