"""A session's settings, declared once (core/session_settings.py): every setting a client may
set is taken by `session/new` and `_parley/session/configure` by its declaration alone, kept
by the store, read back by a new server and copied by a fork — no other code lists them.
`maxTurnRequests` is the setting added to prove it (docs/architecture.md, "Adding a session
setting"). `parley serve` as a subprocess, the fake LLM over HTTP; the store read as the
next server reads it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import attrs
import pytest
from conftest import MODELS
from hypothesis import example, given
from hypothesis import strategies as st
from parley.core.session_settings import (
    CONFIGURE,
    NEW,
    SessionSettings,
    from_stored,
    settable,
    stored_form,
)
from parley.core.updates import camel
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.store import Store

READ = ScriptedToolCall("read_file", {"path": "geometry.py"})
OTHER_MODEL = "anthropic:claude-sonnet-4-5"  # takes a thinking level


def not_default(field: attrs.Attribute[Any]) -> Any:
    """A value of the setting's type that is not its default, from its type alone."""
    union = get_origin(field.type) is not Literal and get_args(field.type)
    kind = next(kind for kind in union or (field.type,) if kind is not type(None))
    if field.name == "model":
        return OTHER_MODEL
    if get_origin(kind) is Literal:
        return next(choice for choice in reversed(get_args(kind)) if choice != field.default)
    if attrs.has(kind):  # an object of settings (the kernel's address): each of its fields
        return kind(**{inner.name: not_default(inner) for inner in attrs.fields(kind)})
    return {str: "Be brief.", int: 3, float: 2.5}[kind]


def stored_settings(home: Path, session_id: str) -> SessionSettings:
    store = Store.open_in(home)
    try:
        stored = store.session(session_id)
        assert stored is not None
        return stored.settings
    finally:
        store.close()


async def test_every_declared_setting_is_taken_stored_reloaded_and_forked(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    """Each setting marked NEW set at `session/new`, each marked CONFIGURE changed by
    `_parley/session/configure`: the store holds them all, a fork holds the same, a new
    server loading the session runs with them (its model is the one asked for)."""
    home = tmp_path / "home"
    at_start = {field.name: not_default(field) for field in settable(NEW)}
    at_start["model"] = MODELS["openai"]  # changed below, by configure
    client = await start_server()
    await client.initialize()
    session = await client.new_session(
        str(workspace), **{camel(name): value for name, value in at_start.items()}
    )
    changed = {field.name: not_default(field) for field in settable(CONFIGURE)}
    changed["thought_level"] = "high"  # one the other model takes
    await client.request(
        "_parley/session/configure",
        {"sessionId": session, **{camel(name): value for name, value in changed.items()}},
    )
    fake.set_script([Reply(text="Stored.")])
    await client.prompt(session, "Keep this.")

    expected = attrs.evolve(SessionSettings(), **{**at_start, **changed})
    assert stored_settings(home, session) == expected
    fork = (await client.request("session/fork", {"sessionId": session, "cwd": str(workspace)}))[
        "sessionId"
    ]
    fake.set_script([Reply(text="Forked.")])
    await client.prompt(fork, "Go on.")
    assert stored_settings(home, fork) == expected

    again = await start_server()
    await again.initialize()
    loaded = await again.load_session(session, str(workspace))
    assert loaded["_meta"]["parley"]["model"] == OTHER_MODEL


async def test_a_sessions_request_limit_stops_its_turn_and_is_said_with_its_number(
    start_server: Any, fake: FakeLLM, workspace: Path
) -> None:
    """The setting added through the declaration alone: `maxTurnRequests` at `session/new`
    (config.toml's 25 for the session beside it), then changed by configure."""
    fake.set_script([Reply(tool_calls=(READ,)), Reply(tool_calls=(READ,))])
    client = await start_server()
    await client.initialize()
    session = await client.new_session(str(workspace), maxTurnRequests=1)
    result = await client.prompt(session, "Read it.")
    assert result["stopReason"] == "max_turn_requests"
    assert client.notices_of(session) == [
        ("warning", "Stopped: the turn reached its limit of 1 model request.")
    ]

    await client.request("_parley/session/configure", {"sessionId": session, "maxTurnRequests": 3})
    fake.set_script([Reply(tool_calls=(READ,)), Reply(tool_calls=(READ,)), Reply(text="Done.")])
    assert (await client.prompt(session, "Again."))["stopReason"] == "end_turn"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"maxTurnRequests": 0}, "'maxTurnRequests' must be > 0"),
        ({"maxTurnRequests": "3"}, "_meta.parley.maxTurnRequests"),
        ({"evalTimeoutSeconds": -1}, "'evalTimeoutSeconds' must be > 0"),
        ({"toolPolicy": "yolo"}, "_meta.parley.toolPolicy: must be one of"),
    ],
)
async def test_a_setting_out_of_its_type_is_refused_naming_it(
    start_server: Any, workspace: Path, options: dict[str, Any], named: str
) -> None:
    client = await start_server()
    await client.initialize()
    with pytest.raises(Exception, match="invalid params") as refused:
        await client.new_session(str(workspace), **options)
    assert named in str(refused.value)


async def test_a_setting_the_client_may_not_set_at_new_is_left_to_its_request(
    start_server: Any, fake: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    """`mode` and `budget` are set by their own requests (session/set_mode, the config
    option), never by `_meta.parley` of `session/new`: there they are ignored, as any key
    Parley does not read."""
    client = await start_server()
    await client.initialize()
    session = await client.new_session(str(workspace), mode="plan", budget="0.01")
    fake.set_script([Reply(text="Hi.")])
    await client.prompt(session, "Hi.")
    stored = stored_settings(tmp_path / "home", session)
    assert (stored.mode, stored.budget) == ("ask", None)


# --- the stored form --------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
NAMES = st.sampled_from([field.name for field in attrs.fields(SessionSettings)])


@given(st.dictionaries(NAMES | st.text(), JSON))
@example(stored={"max_turn_requests": math.inf})  # JSON's Infinity where a whole number goes
def test_any_stored_object_reads_as_settings_keeping_what_fits(stored: dict[str, Any]) -> None:
    """Whatever another program (or a later Parley) wrote: each setting is the stored value
    when it is one of the setting's type, else its default; never an error."""
    settings = from_stored(json.loads(json.dumps(stored)))
    for field in attrs.fields(SessionSettings):
        value = getattr(settings, field.name)
        assert value == field.default or value == stored.get(field.name)


def valid(values: dict[str, Any]) -> bool:
    try:
        SessionSettings(**values)
    except ValueError:
        return False
    return True


ANY_SETTINGS = (
    st.fixed_dictionaries(
        {field.name: st.from_type(field.type) for field in attrs.fields(SessionSettings)}
    )
    .filter(valid)
    .map(lambda values: SessionSettings(**values))
)


@given(ANY_SETTINGS)
def test_stored_settings_read_back_the_same(settings: SessionSettings) -> None:
    assert from_stored(json.loads(json.dumps(stored_form(settings)))) == settings


def test_each_settable_value_round_trips_through_the_store() -> None:
    every = SessionSettings(
        **{field.name: not_default(field) for field in attrs.fields(SessionSettings)}
    )
    assert from_stored(json.loads(json.dumps(stored_form(every)))) == every
