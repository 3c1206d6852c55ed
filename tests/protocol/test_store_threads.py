"""The store is used from the event loop and from the pool's threads at once (a replay read
while the loop writes, the store closed at exit while a read is under way): one thread at a
time uses its connection (server/parley/store_connection.py).

Before, a `close()` in one thread while another's statement ran freed SQLite's handle under
the statement: the server died of a segfault (SIGSEGV in `sqlite3_last_insert_rowid`, or
in the row's text factory), as CI saw at a server's exit. The race runs in a child process,
so that a crash is a failed test, not a lost test worker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parley.bench.sessions import write_long_session
from parley.core.conversation import TextBlock, UserMessage
from parley.core.session_settings import SessionSettings
from parley.store import Store, StoredSession
from parley.store_fork import fork_stored
from parley.store_messages import encode_message

RACE = textwrap.dedent(
    """
    import random, sqlite3, sys, threading, time
    from pathlib import Path
    from parley.store import Store

    home, session_id, attempts = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    refused = 0
    for attempt in range(attempts):
        store = Store.open_in(home)
        errors = []

        def read():
            try:
                while True:
                    store.messages(session_id)
                    store.message_count(session_id)
            except sqlite3.ProgrammingError as error:
                errors.append(error)

        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        time.sleep(random.uniform(0.005, 0.05))  # the close lands somewhere in a read
        store.close()
        for reader in readers:
            reader.join()
        assert [str(e) for e in errors] == ["Cannot operate on a closed database."] * 2, errors
        refused += len(errors)
    print(refused)
    """
)


def test_closing_the_store_while_other_threads_read_refuses_them_and_never_crashes(
    tmp_path: Path,
) -> None:
    """Two threads read a 1,000-message session in a loop while the main thread closes the
    store, 150 times: each reader gets `ProgrammingError` (a clean error its caller reports)
    and the process lives. On the unguarded connection it died of SIGSEGV (4 runs in 4)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    session_id = write_long_session(tmp_path / "data", workspace, 1000)
    race = subprocess.run(
        [sys.executable, "-c", RACE, str(tmp_path / "data"), session_id, "150"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert race.returncode == 0, (race.returncode, race.stderr[-3000:])
    assert race.stdout.strip() == "300"


def test_a_transaction_in_one_thread_holds_the_statements_of_another_out(tmp_path: Path) -> None:
    """A fork (one transaction: the session's rows copied) in a thread while the loop's
    thread appends messages: no append lands inside the fork's transaction (where the
    fork's copy would take it, or its rollback undo it); each message is the parent's once."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    session_id = write_long_session(tmp_path / "data", workspace, 2000)
    store = Store.open_in(tmp_path / "data")
    forks = [f"fork-{n}" for n in range(20)]

    def fork_all() -> None:
        for fork_id in forks:
            assert fork_stored(store, session_id, fork_id, "a fork", "2026-11-29T00:00:00Z")

    forking = threading.Thread(target=fork_all)
    forking.start()
    appended = 0
    while forking.is_alive() or appended < 20:
        store.append_message(
            session_id, UserMessage((TextBlock(f"more {appended}"),)), "2026-11-29T00:00:01Z"
        )
        appended += 1
    forking.join()
    parent = [encode_message(m) for m in store.messages(session_id)]
    assert len(parent) == 2000 + appended
    for fork_id in forks:
        copied = [encode_message(m) for m in store.messages(fork_id)]
        # A fork is the parent as it was at some moment: a prefix of it, in order.
        assert copied == parent[: len(copied)]
    store.close()


PAGE = 512  # store._MESSAGES_PAGE
PAGE_COUNTS = (0, 1, PAGE - 1, PAGE, PAGE + 1, 2 * PAGE, 2 * PAGE + 3)


@settings(max_examples=40, deadline=None)
@given(
    count=st.sampled_from(PAGE_COUNTS),
    after=st.integers(0, 2 * PAGE + 5),
    span=st.none() | st.integers(0, 2 * PAGE + 5),
)
def test_messages_read_a_page_at_a_time_are_the_range_asked_for(
    shared_store: tuple[Store, dict[int, str]], count: int, after: int, span: int | None
) -> None:
    """`iter_messages` reads a page per statement (so that no cursor outlives the lock): any
    range, across and on the pages' edges, is the messages after `after` up to `upto`."""
    store, sessions = shared_store
    upto = None if span is None else after + span
    texts = [m.content[0].text for m in store.iter_messages(sessions[count], after, upto)]
    expected = [f"message {n}" for n in range(1, count + 1)][after:upto]
    assert texts == expected


@pytest.fixture(scope="module")
def shared_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Store, dict[int, str]]]:
    """One store for every example: a session of each count of messages."""
    store = Store.open_in(tmp_path_factory.mktemp("paged"))
    yield store, {count: _session_of(store, count) for count in PAGE_COUNTS}
    store.close()


def _session_of(store: Store, count: int) -> str:
    session_id = f"paged-{count}"
    now = "2026-11-29T00:00:00Z"
    store.save_session(
        StoredSession(session_id, "/ws", None, SessionSettings(), {}, 0, 0, now, now)
    )
    for n in range(1, count + 1):
        store.append_message(session_id, UserMessage((TextBlock(f"message {n}"),)), now)
    return session_id
