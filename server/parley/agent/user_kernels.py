"""A session attached to the user's own kernel, or back on Parley's (docs/protocol.md, "The
user's own kernel").

`UserKernels.attach` swaps a session's Python tools: Parley's `python_eval`,
`python_describe`, `python_source`, `python_members` and `python_last_error` give way to the
user kernel's (tools/user_kernel_tools.py), each keeping the tool it replaced, which comes
back when the session is detached. The kernel's address is the session's `kernel` setting,
stored with it; a token is never stored: it is read from the variable the user named
(`tokenEnv`) when the session attaches, or, given inline, kept in this server's memory only.
A kernel that cannot be reached is said in one sentence and the session uses Parley's own.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import attrs

from parley.agent.session import Session
from parley.core.kernel_choice import OWN_KERNEL, KernelAddress, KernelChoice
from parley.tools.jupyter_link import KernelLink, LocalLink
from parley.tools.jupyter_remote import RemoteLink
from parley.tools.jupyter_runtime import RunningKernel, running_kernels
from parley.tools.user_kernel import KernelUnavailable, UserKernel, UserKernelSettings
from parley.tools.user_kernel_tools import (
    ATTACHED_TOOLS,
    IN_YOUR_KERNEL,
    UserKernelTool,
    user_kernel_tools,
)

KERNEL_OPTION = "kernel"
ATTACH_SECONDS = 15.0  # to connect and hear the heartbeat (a remote server's REST included)
OWN_KERNEL_NOTE = (
    "It now uses Parley's own kernel; attach it to another with the Kernel option "
    "(or `_meta.parley.kernel`)."
)


class UserKernels:
    """This server's attachments: the tokens given inline, by address (memory only)."""

    def __init__(self, settings: UserKernelSettings) -> None:
        self.settings = settings
        self._tokens: dict[KernelAddress, str] = {}

    async def attach(self, session: Session, choice: KernelChoice | None) -> str | None:
        """Attach `session` to `choice` (None: Parley's own kernel). Returns what to tell
        the user when the kernel could not be used (the session then uses Parley's own)."""
        await detach(session)
        if choice is None:
            _set_address(session, None)
            return None
        if choice.token:
            self._tokens[choice.address] = choice.token
        limits = self.settings
        if session.settings.eval_timeout_seconds is not None:
            limits = attrs.evolve(limits, timeout_seconds=session.settings.eval_timeout_seconds)
        try:
            kernel = UserKernel(self._link(choice.address), limits)
        except KernelUnavailable as error:
            _set_address(session, None)
            return unattached(choice.address, str(error))
        try:
            await asyncio.wait_for(kernel.check(), ATTACH_SECONDS)
        except (KernelUnavailable, TimeoutError) as error:
            await kernel.aclose()
            _set_address(session, None)
            return unattached(choice.address, str(error) or "it did not answer in time.")
        for tool in user_kernel_tools(kernel, _parleys_tools(session)):
            session.tools.add(tool)
        _set_address(session, choice.address)
        return None

    def _link(self, address: KernelAddress) -> KernelLink:
        if address.connection_file is not None:
            return LocalLink(address.connection_file)
        assert address.server is not None and address.kernel_id is not None
        token = self._tokens.get(address)
        if address.token_env is not None:
            token = os.environ.get(address.token_env)
            if token is None:
                raise KernelUnavailable(
                    f"the variable {address.token_env} is not set in Parley's environment."
                )
        return RemoteLink(address.server, address.kernel_id, token)


def _parleys_tools(session: Session) -> dict[str, object]:
    tools = {}
    for name in ATTACHED_TOOLS:
        tool = session.tools.get(name)
        if tool is not None:
            tools[name] = tool
    return tools


def _set_address(session: Session, address: KernelAddress | None) -> None:
    if session.settings.kernel != address:
        session.settings = attrs.evolve(session.settings, kernel=address)
        session.save()


async def detach(session: Session) -> None:
    """Put Parley's own Python tools back and disconnect from the user's kernel (which runs
    on: it is the user's)."""
    for name in ATTACHED_TOOLS:
        tool = session.tools.get(name)
        if isinstance(tool, UserKernelTool):
            if tool.replaced is not None:
                session.tools.add(tool.replaced)
            else:
                session.tools.remove(name)
            await tool.aclose()


def unattached(address: KernelAddress, why: str) -> str:
    """What the user is told when a session could not attach to `address` (or, on load,
    reattach to the kernel it was attached to)."""
    return f"Parley could not attach this session to {address.shown()}: {why} {OWN_KERNEL_NOTE}"


def kernel_option(address: KernelAddress | None, running: list[RunningKernel]) -> dict[str, Any]:
    """The `kernel` config option: Parley's own, the kernel the session is attached to, and
    the local kernels running now (by connection file). A Jupyter Server's kernel is chosen
    with `_meta.parley.kernel` (it needs a token)."""
    current = OWN_KERNEL if address is None else option_value(address)
    choices = [
        {"value": OWN_KERNEL, "name": "Parley's own", "description": "Sandboxed, per session"}
    ]
    if address is not None:
        choices.append({"value": current, "name": address.shown(), "description": IN_YOUR_KERNEL})
    for kernel in running:
        if kernel.connection_file != current:
            name = os.path.basename(kernel.connection_file)
            choices.append({"value": kernel.connection_file, "name": name})
    return {
        "id": KERNEL_OPTION,
        "name": "Kernel",
        "description": "Where the Python tools run: Parley's own kernel or yours",
        "type": "select",
        "currentValue": current,
        "options": choices,
    }


def option_value(address: KernelAddress) -> str:
    """An attached kernel as the option's value: its connection file, or server#kernel id."""
    return address.connection_file or f"{address.server}#{address.kernel_id}"


def chosen_kernel(value: Any, session: Session) -> KernelChoice | None:
    """The kernel a `session/set_config_option` of `kernel` chose (one of its values: Parley's
    own, the current one, a running local kernel's connection file); `InvalidOptions`
    otherwise."""
    address = session.settings.kernel
    if value == OWN_KERNEL:
        return None
    if address is not None and value == option_value(address):
        return KernelChoice(address)
    running = {kernel.connection_file for kernel in running_kernels()}
    if not isinstance(value, str) or value not in running:
        raise ValueError(
            f"value: kernel must be {OWN_KERNEL!r}, the attached kernel or a running "
            f"kernel's connection file, not {str(value)[:200]!r}"
        )
    return KernelChoice(KernelAddress(connection_file=value))
