"""Work that grows with a file or a history, run off the event loop.

An edit's view and diff, a replay's reading and decoding: each takes time in proportion to
a file or a conversation, and on the event loop it would leave every session unanswered
meanwhile (the loop watchdog, `loop_watchdog.py`, reports any such block in the tests).
They run here, in a small pool of threads of their own, so a burst of them (forty edits in
one round) queues in the pool instead of taking every thread asyncio's default executor
has for the quick file reads of other sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

# At most this many such jobs at once: the machine's other work (and the GIL) is shared.
WORKERS = 2

_pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="parley-work")

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`function(*args, **kwargs)` in the pool; the loop goes on meanwhile. Cancelling the
    wait leaves the job to finish in the pool, its result dropped."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool, functools.partial(function, *args, **kwargs))


_pausing = 0  # threads importing with the collector paused
_pausing_lock = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector held off while a big library is imported (in a thread). An
    SDK's import makes a quarter of a million objects, and the full collections they set
    off take a tenth of a second each, holding the GIL, and so the event loop. After, what
    was made is frozen out of later collections (`gc.freeze`)."""
    global _pausing
    with _pausing_lock:
        _pausing += 1
        gc.disable()
    try:
        yield
    finally:
        with _pausing_lock:
            _pausing -= 1
            if not _pausing:
                gc.freeze()
                gc.enable()


def import_now(*names: str) -> None:
    """Import these modules, with the collector paused (call it off the event loop)."""
    with collector_paused():
        for name in names:
            importlib.import_module(name)


async def import_off_loop(*names: str) -> None:
    """Import these modules in a thread (a library imported at first use would otherwise
    be imported on the event loop)."""
    await asyncio.to_thread(import_now, *names)
