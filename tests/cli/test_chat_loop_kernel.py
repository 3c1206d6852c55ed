"""`parley chat --kernel FILE` with no prompt, on a terminal (issue 41): the conversation's
Python tools run in the user's own kernel, a real ipykernel started through jupyter_client
(`user_kernel_fixtures.py`); `parley chat` runs in a pty as at a shell
(`test_chat_loop.ChatTerminal`), the model is the fake LLM over HTTP."""

from __future__ import annotations

from pathlib import Path

from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from test_chat_loop import ChatTerminal
from user_kernel_fixtures import UsersKernel


async def test_the_conversation_evaluates_in_the_users_kernel(
    fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path, workspace: Path
) -> None:
    """The opening line names the kernel (the server's name for it); an eval there changes
    the user's variable, which their next cell sees."""
    await users_kernel.run_cell("total = 10")
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "total *= 3\ntotal"}),)),
            Reply(text="It is 30 now."),
        ]
    )
    env = server_env(fake, tmp_path / "home")
    kernel = users_kernel.connection_file
    terminal = ChatTerminal("--cwd", str(workspace), "--yes", "--kernel", kernel, env=env)
    try:
        terminal.expect(f"a new session · the kernel of {kernel}")
        terminal.expect_prompt()
        terminal.type(b"Triple it\r")
        shown = terminal.expect("It is 30 now.")
        assert "Run Python in your kernel, not sandboxed" in shown
        terminal.expect_prompt()
        terminal.type(b"\x04")  # Ctrl-D quits
        assert terminal.ended() == 0
    finally:
        terminal.close()
    assert (await users_kernel.run_cell("print(total)")).strip() == "30"


def test_a_kernel_it_cannot_use_is_said_and_nothing_is_sent(
    fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    """As the one-shot path: the server's notice on the terminal, exit 2, no model call."""
    fake.set_script([Reply(text="Never asked.")])
    missing = tmp_path / "kernel-gone.json"
    env = server_env(fake, tmp_path / "home")
    terminal = ChatTerminal("--cwd", str(workspace), "--kernel", str(missing), env=env)
    try:
        terminal.expect("could not attach this session to the kernel of")
        assert terminal.ended() == 2
    finally:
        terminal.close()
    assert "kernel-gone.json cannot be opened" in terminal.shown
    assert fake.requests == []
