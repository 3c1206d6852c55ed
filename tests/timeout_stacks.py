"""A pytest plugin (tests/conftest.py loads it): when pytest-timeout fails an async test, it
also shows where each task of the test's event loop waits.

pytest-timeout's signal method fails the test with the stack the signal interrupted, and the
other threads' stacks; in an async test that stack ends in the event loop's `select`, which
says nothing of what the test awaited. The tasks' own stacks do.
"""

from __future__ import annotations

import asyncio
import signal
import traceback
from collections.abc import Generator
from types import FrameType
from typing import Any

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> Generator[None, Any, Any]:
    result = yield
    handler = signal.getsignal(signal.SIGALRM)
    if settings.method == "signal" and callable(handler):

        def with_tasks(signum: int, frame: FrameType | None) -> None:
            __tracebackhide__ = True
            show_waiting_tasks(item)
            handler(signum, frame)

        signal.signal(signal.SIGALRM, with_tasks)
    return result


def show_waiting_tasks(item: pytest.Item) -> None:
    """Each task of the running event loop (none: not an async test) and where it waits."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    terminal = item.config.get_terminal_writer()
    for task in asyncio.all_tasks(loop):
        terminal.sep("~", title=f"Task {task.get_name()} (pytest-timeout)")
        terminal.write("".join(traceback.format_list(awaiting(task.get_coro()))))


def awaiting(coroutine: Any) -> traceback.StackSummary:
    """Where a suspended coroutine waits, outermost first: each coroutine it awaits in turn
    (a task's own stack shows only its outermost one)."""
    frames = []
    while coroutine is not None and getattr(coroutine, "cr_frame", None) is not None:
        frames.append((coroutine.cr_frame, coroutine.cr_frame.f_lineno))
        coroutine = coroutine.cr_await
    return traceback.StackSummary.extract(frames)
