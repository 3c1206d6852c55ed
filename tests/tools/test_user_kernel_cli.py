"""`parley kernels` and `parley chat --kernel` (issue 41): the command line, a real ipykernel
the user runs, the fake LLM scripting the model."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import server_env
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.kernels_command import BadKernel, kernel_argument
from user_kernel_fixtures import UsersKernel


async def parley(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "parley", *args,
        env={**os.environ, **env}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_parley_kernels_lists_the_running_kernel(
    fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    code, out, _ = await parley("kernels", "--json", env=server_env(fake, tmp_path / "home"))
    assert code == 0
    (listed,) = json.loads(out)
    assert listed["connectionFile"] == users_kernel.connection_file
    code, out, _ = await parley("kernels", env=server_env(fake, tmp_path / "home"))
    assert users_kernel.connection_file in out


async def test_parley_chat_with_kernel_evaluates_in_the_users_kernel(
    fake: FakeLLM, users_kernel: UsersKernel, tmp_path: Path
) -> None:
    await users_kernel.run_cell("total = 10")
    fake.set_script(
        [
            Reply(tool_calls=(ScriptedToolCall("python_eval", {"code": "total *= 3\ntotal"}),)),
            Reply(text="It is 30 now."),
        ]
    )
    env = server_env(fake, tmp_path / "home")
    code, out, err = await parley(
        "chat", "Triple it.", "--yes", "--tool-policy", "sync",
        "--kernel", users_kernel.connection_file, "--cwd", str(tmp_path), env=env,
    )  # fmt: skip
    assert code == 0, err
    assert "It is 30 now." in out
    assert "Run Python in your kernel, not sandboxed" in err
    assert (await users_kernel.run_cell("print(total)")).strip() == "30"


async def test_parley_chat_with_a_kernel_it_cannot_use_says_why_and_asks_nothing(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.set_script([Reply(text="Never asked.")])
    missing = tmp_path / "kernel-gone.json"
    code, out, err = await parley(
        "chat", "Anything.", "--kernel", str(missing), "--cwd", str(tmp_path),
        env=server_env(fake, tmp_path / "home"),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert "could not attach this session to the kernel of" in err
    assert "kernel-gone.json cannot be opened" in err
    assert fake.requests == []  # the prompt never ran in another kernel


def test_a_kernels_url_names_its_server_and_id_and_never_carries_a_token() -> None:
    wire = kernel_argument("https://lab.example:8888/user/me/api/kernels/1a2b-3c", "NB_TOKEN")
    assert wire == {
        "server": "https://lab.example:8888/user/me",
        "kernelId": "1a2b-3c",
        "tokenEnv": "NB_TOKEN",
    }
    with pytest.raises(BadKernel, match="not in the URL"):
        kernel_argument("http://host:8888/api/kernels/k?token=abc")
    with pytest.raises(BadKernel, match="/api/kernels/KERNEL_ID"):
        kernel_argument("http://host:8888/lab")
    assert kernel_argument("kernel-1.json")["connectionFile"] == os.path.abspath("kernel-1.json")
