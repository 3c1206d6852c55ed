"""Multi-root workspaces (ACP `additionalDirectories` in `session/new`, `session/load` and
`session/resume`): each directory the client lists is a workspace root for the file tools'
gate, writable in the sandbox, and named to the model; nothing else is reached.

`parley serve` driven by the official ACP Python SDK as a client (every message the server
sends checked against ACP's JSON Schema), the scripted model over HTTP. The gate's own
property test over several roots is in tests/trust/test_roots_gate.py.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.helpers import text_block
from acp_client import AcpRun, acp_server
from conftest import server_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley.fakellm import FakeLLM, Reply, ScriptedToolCall
from parley.protocol.params import LoadSessionParams, additional_roots, parse_params
from parley.sandbox import ChildSpec, SandboxSettings, prepare, sandbox_status
from pygls.exceptions import JsonRpcInvalidParams

INVALID_PARAMS = -32602
CANARY = "CANARY-OUTSIDE-EVERY-ROOT"
LIBRARY = "def shared():\n    return 'from the other root'\n"

_here = sandbox_status(SandboxSettings(), environ={})
needs_bwrap = pytest.mark.skipif(
    not _here.sandboxed, reason=f"bubblewrap cannot run here: {_here.reason}"
)


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name, arguments)


def one_round_each(*calls: ScriptedToolCall) -> list[Reply]:
    return [*(Reply(tool_calls=(c,)) for c in calls), Reply(text="Done.")]


def last_request(fake: FakeLLM) -> dict[str, Any]:
    """The request of the turn since the script was set that holds all the others."""
    return max((r.body for r in fake.requests), key=lambda body: len(body["messages"]))


def tool_results(fake: FakeLLM) -> list[str]:
    """The tool results the model was sent, in order."""
    return [m["content"] for m in last_request(fake)["messages"] if m["role"] == "tool"]


def system_prompt(fake: FakeLLM) -> str:
    return str(last_request(fake)["messages"][0]["content"])


@pytest.fixture
def acp_env(fake: FakeLLM, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **server_env(fake, tmp_path / "home")}


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """A second root, beside the workspace."""
    root = tmp_path / "other"
    root.mkdir()
    (root / "lib.py").write_text(LIBRARY)
    return root


@pytest.fixture
def unlisted(tmp_path: Path) -> Path:
    """A directory beside both roots that the client never lists."""
    directory = tmp_path / "unlisted"
    directory.mkdir()
    (directory / "secret.txt").write_text(CANARY + "\n")
    return directory


async def new_session(run: AcpRun, cwd: Path, *roots: Path) -> str:
    await run.initialize()
    response = await run.conn.new_session(
        cwd=str(cwd), additional_directories=[str(root) for root in roots]
    )
    return response.session_id


async def prompt(run: AcpRun, session_id: str, text: str) -> None:
    await run.conn.prompt(session_id=session_id, prompt=[text_block(text)])


async def test_a_file_in_another_root_is_read_edited_and_undone_by_its_absolute_path(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, other: Path, unlisted: Path
) -> None:
    library = other / "lib.py"
    fake.set_script(
        one_round_each(
            call("read_file", path=str(library)),
            call("edit_file", path=str(library), old_text="from the other", new_text="EDITED"),
            call("read_file", path="geometry.py"),  # relative: the cwd's
            call("read_file", path="../other/lib.py"),  # relative, into the other root
            call("read_file", path=str(unlisted / "secret.txt")),
            call("read_file", path="../unlisted/secret.txt"),
            call("write_file", path=str(unlisted / "planted.txt"), content="planted\n"),
        )
    )
    async with acp_server(acp_env) as run:
        session_id = await new_session(run, workspace, other)
        await prompt(run, session_id, "Use the shared code.")
        sent_system = system_prompt(fake)
        results = tool_results(fake)
        await prompt(run, session_id, "/undo")
        undone = run.editor.text_of(session_id)
    run.recording.assert_conformant()
    assert "return 'from the other root'" in results[0]
    assert results[1].startswith(f"Edited {library}")
    assert "def area(width, height)" in results[2]
    assert "return 'EDITED root'" in results[3]  # read after the edit
    for refused in results[4:]:
        assert "outside the workspace's roots" in refused, refused
    assert CANARY not in json.dumps([request.body for request in fake.requests])
    assert not (unlisted / "planted.txt").exists()
    asked = [request.locations for request in run.editor.permission_requests]
    assert [location.path for location in asked[0] or []] == [str(library)]
    assert len(asked) == 1  # only the edit asked; the refused write was refused unasked
    # The model is told both roots.
    assert str(workspace) in sent_system and str(other) in sent_system
    # /undo puts the other root's file back as it was.
    assert "restored" in undone
    assert library.read_text() == LIBRARY


async def test_symlinks_lead_into_a_root_or_are_refused(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, other: Path, unlisted: Path
) -> None:
    (workspace / "to_other").symlink_to(other / "lib.py")
    (workspace / "to_other_dir").symlink_to("../other")
    (workspace / "beside_other").symlink_to(f"{other}/../unlisted/secret.txt")
    (workspace / "out").symlink_to(unlisted)
    (other / "back").symlink_to(workspace / "geometry.py")
    (other / "escape").symlink_to("../unlisted/secret.txt")
    fake.set_script(
        one_round_each(
            call("read_file", path="to_other"),
            call("read_file", path="to_other_dir/back"),  # A → B → A
            call("read_file", path="beside_other"),
            call("read_file", path="out/secret.txt"),
            call("read_file", path=str(other / "escape")),
            call("write_file", path="out/planted.txt", content="planted\n"),
            call("list_directory", path=str(other)),
        )
    )
    async with acp_server(acp_env) as run:
        session_id = await new_session(run, workspace, other)
        await prompt(run, session_id, "Follow the links.")
    run.recording.assert_conformant()
    results = tool_results(fake)
    assert "return 'from the other root'" in results[0]
    assert "def area(width, height)" in results[1]
    for refused in results[2:6]:
        assert "outside the workspace's roots" in refused, refused
    assert "escape -> (outside the workspace)" in results[6]
    assert f"back -> {workspace / 'geometry.py'}" not in results[6]  # shown relative
    assert "back -> geometry.py" in results[6]
    assert CANARY not in json.dumps([request.body for request in fake.requests])
    assert sorted(os.listdir(unlisted)) == ["secret.txt"]


async def test_a_directory_that_is_not_absolute_or_not_there_is_invalid_params_naming_it(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, other: Path, tmp_path: Path
) -> None:
    fake.set_script([Reply(text="Noted.")])
    missing = tmp_path / "missing"
    bad: list[tuple[list[Any], str]] = [
        (["relative/dir"], "additionalDirectories[0]: 'relative/dir' is not an absolute path"),
        ([str(other), str(missing)], f"additionalDirectories[1]: {str(missing)!r} is not an"),
        ([str(other / "lib.py")], "is not an existing directory"),
        (["~/somewhere"], "is not an absolute path"),
    ]
    async with acp_server(acp_env) as run:
        initialized = await run.initialize()
        for directories, said in bad:
            with pytest.raises(RequestError) as refused:
                await run.conn.new_session(cwd=str(workspace), additional_directories=directories)
            assert refused.value.code == INVALID_PARAMS and said in str(refused.value)
        session_id = (await run.conn.new_session(cwd=str(workspace))).session_id
        await prompt(run, session_id, "Remember this.")
        for method in ("session/load", "session/resume"):
            with pytest.raises(RequestError) as refused:
                await run.raw_request(
                    method,
                    {
                        "sessionId": session_id,
                        "cwd": str(workspace),
                        "mcpServers": [],
                        "additionalDirectories": [str(other), 7],
                    },
                )
            assert refused.value.code == INVALID_PARAMS
            assert "additionalDirectories[1]" in str(refused.value)
        with pytest.raises(RequestError) as refused:
            await run.conn.load_session(
                cwd=str(workspace), session_id=session_id, additional_directories=["rel"]
            )
        assert "additionalDirectories[0]: 'rel' is not an absolute path" in str(refused.value)
    capabilities = initialized.agent_capabilities
    assert capabilities is not None and capabilities.session_capabilities is not None
    assert capabilities.session_capabilities.additional_directories is not None
    run.recording.assert_conformant()


async def test_load_and_resume_take_the_roots_given_then(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, other: Path, tmp_path: Path
) -> None:
    third = tmp_path / "third"
    third.mkdir()
    (third / "notes.txt").write_text("notes of the third root\n")
    # The scripted model answers by the number of assistant messages so far: three turns.
    fake.set_script(
        3
        * one_round_each(
            call("read_file", path=str(other / "lib.py")),
            call("read_file", path=str(third / "notes.txt")),
        )
    )
    async with acp_server(acp_env) as run:
        session_id = await new_session(run, workspace, other)
        await prompt(run, session_id, "Read both.")
        first = tool_results(fake)
        await run.conn.load_session(
            cwd=str(workspace), session_id=session_id, additional_directories=[str(third)]
        )
        await prompt(run, session_id, "Read both again.")
        loaded, loaded_system = tool_results(fake)[-2:], system_prompt(fake)
        await run.conn.resume_session(cwd=str(workspace), session_id=session_id)
        await prompt(run, session_id, "And now?")
        resumed, resumed_system = tool_results(fake)[-2:], system_prompt(fake)
        # A session never prompted (not stored yet) takes the roots of its load too.
        unstored = (
            await run.conn.new_session(cwd=str(workspace), additional_directories=[str(other)])
        ).session_id
        await run.conn.load_session(
            cwd=str(workspace), session_id=unstored, additional_directories=[str(third)]
        )
        await prompt(run, unstored, "Read both, fresh.")
        of_fresh = [r.body for r in fake.requests if "Read both, fresh." in json.dumps(r.body)]
        longest = max(of_fresh, key=lambda body: len(body["messages"]))
        fresh = [m["content"] for m in longest["messages"] if m["role"] == "tool"]
    assert "outside the workspace" in fresh[0] and "notes of the third root" in fresh[1]
    run.recording.assert_conformant()
    assert "from the other root" in first[0] and "outside the workspace's roots" in first[1]
    assert "outside the workspace" in loaded[0] and "notes of the third root" in loaded[1]
    assert str(third) in loaded_system and str(other) not in loaded_system
    for result in resumed:  # no additionalDirectories: the cwd's root only
        assert "is outside the workspace (" in result
    assert str(third) not in resumed_system and str(other) not in resumed_system


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("places")
    (base / "dir").mkdir()
    (base / "file").write_text("x")
    (base / "link_to_dir").symlink_to(base / "dir")
    return {"dir": str(base / "dir"), "file": str(base / "file"), "link": str(base / "link_to_dir")}


def entries(places: dict[str, str]) -> st.SearchStrategy[Any]:
    nasty = [
        *places.values(),
        *(f"{places['dir']}/", f"{places['dir']}/../dir", f"{places['dir']}/missing", "/", "//"),
        *("relative", "./x", "../x", "~", "~/x", "", " ", f"{places['dir']}\0", "\0"),
        *(f"{places['dir']}\udcff", "\udcff", "C:\\Users", "file:///tmp"),
    ]
    scalar = st.one_of(
        st.sampled_from(nasty), st.text(max_size=12), st.integers(), st.booleans(), st.none()
    )
    return st.one_of(
        st.none(),
        scalar,
        st.lists(st.one_of(scalar, st.lists(st.text(max_size=3), max_size=2)), max_size=4),
        st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    )


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_additional_directories_are_roots_or_invalid_params_naming_the_entry(
    places: dict[str, str], data: st.DataObject
) -> None:
    """Whatever a client sends as `additionalDirectories`: null or an array of absolute paths
    to existing directories become the roots, in order; anything else is `-32602` naming
    the field (and the first bad entry's index), never another error."""
    value = data.draw(entries(places))
    raw = {"sessionId": "s", "cwd": "/", "mcpServers": [], "additionalDirectories": value}
    good = value is None or (
        isinstance(value, list)
        and all(
            isinstance(entry, str)
            and "\0" not in entry
            and os.path.isabs(entry)
            and os.path.isdir(entry)
            for entry in value
        )
    )
    try:
        roots = additional_roots(parse_params(LoadSessionParams, raw).additional_directories)
    except JsonRpcInvalidParams as error:
        assert not good, value
        assert "additionalDirectories" in error.message
        if isinstance(value, list):
            first_bad = next(
                position
                for position, entry in enumerate(value)
                if not isinstance(entry, str)
                or not (os.path.isabs(entry) and os.path.isdir(entry))
                or "\0" in entry
            )
            assert f"additionalDirectories[{first_bad}]" in error.message
        json.dumps(error.message)  # travels as JSON
        return
    assert good, value
    assert [str(root) for root in roots] == [os.fspath(Path(entry)) for entry in value or []]


KERNEL_WRITES = """\
import pathlib
wrote = []
for target in {targets!r}:
    try:
        pathlib.Path(target).write_text('written by the kernel')
        wrote.append(target)
    except OSError as error:
        wrote.append(error.strerror)
'wrote', wrote
"""


@needs_bwrap
async def test_the_sandboxed_kernel_writes_in_every_root_and_nowhere_else(
    acp_env: dict[str, str], fake: FakeLLM, workspace: Path, other: Path, unlisted: Path
) -> None:
    system_outside = Path(f"/var/tmp/parley-planted-{uuid.uuid4().hex}")
    targets = [
        str(workspace / "in_cwd.txt"),
        str(other / "in_other.txt"),
        str(unlisted / "planted.txt"),
        str(system_outside),
    ]
    code = KERNEL_WRITES.format(targets=targets)
    fake.set_script(one_round_each(call("python_eval", code=code)))
    try:
        async with acp_server(acp_env) as run:
            session_id = await new_session(run, workspace, other)
            await prompt(run, session_id, "Write them.")
        (seen,) = tool_results(fake)
        assert (workspace / "in_cwd.txt").read_text() == "written by the kernel"
        assert (other / "in_other.txt").read_text() == "written by the kernel"
        assert not (unlisted / "planted.txt").exists()
        assert not system_outside.exists() and "Read-only file system" in seen, seen
        run.recording.assert_conformant()
    finally:
        system_outside.unlink(missing_ok=True)


@needs_bwrap
def test_each_root_is_bound_writable_once_and_a_root_inside_another_only_through_it(
    tmp_path: Path,
) -> None:
    """A root inside another is not bound by its own path: a child writing in the outer
    root could have put a symlink there, and bwrap would make its target writable."""
    outer, other = tmp_path / "outer", tmp_path / "other"
    (outer / "inner").mkdir(parents=True)
    other.mkdir()

    def binds(workspace: Path, *writable: Path) -> list[str]:
        spec = ChildSpec(("/bin/true",), workspace, {}, writable=writable)
        argv = prepare(spec, SandboxSettings()).argv
        return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--bind"]

    assert sorted(binds(outer, other)) == sorted([str(outer), str(other)])
    assert sorted(binds(outer, outer / "inner", other)) == sorted([str(outer), str(other)])
    assert binds(outer / "inner", outer) == [str(outer)]
    (outer / "inner").rename(outer / "away")
    (outer / "inner").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    assert binds(outer, outer / "inner") == [str(outer)]
    assert binds(other, outer / "inner") == [str(other)]  # not its target
    assert binds(outer / "inner", outer) == [str(outer)]  # the workspace itself swapped
