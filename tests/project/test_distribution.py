"""The distribution a user installs (`uv tool install parley-code`, `pipx install
parley-code`): `python -m build` makes an sdist and a wheel that carry what `parley` needs at
run time — the fake LLM of `parley demo` and the kernel's own script included, the tests not —
with the metadata an index shows, and the version `parley --version` and `initialize` say."""

from __future__ import annotations

import contextlib
import email
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import parley
import pytest
from acp.schema import InitializeResponse
from conftest import REPO
from uv import find_uv_bin

NAME = "parley-code"  # `parley` on PyPI is another project (README, "Install")
RUN_TIME = ("parley/fakellm/demo.py", "parley/tools/kernel_main.py", "parley/py.typed")

# Building, installing and running the wheel takes about 20 s: `-m "not slow"` skips it. On a
# machine with cold caches the build and the install each fetch from PyPI, under limits of
# their own of 600 s: past the suite's per-test timeout (pyproject.toml), so one of its own.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


@contextlib.contextmanager
def made_once(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str
) -> Iterator[tuple[Path, bool]]:
    """A directory the test run makes once, whichever pytest-xdist worker needs it first: the
    others wait on a lock beside it, then find it made (the bool). Made again after a failure."""
    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # this run's directory, shared by its workers
    directory = root / name
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        made = (directory / ".made").exists()
        if not made:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
        yield directory, made
        (directory / ".made").touch()


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[Path, Path]:
    with made_once(tmp_path_factory, worker_id, "parley-dist") as (out, made):
        if not made:
            # build's own frontend; uv (not pip) fills its isolated build environments.
            build = [sys.executable, "-m", "build", "--installer", "uv"]
            done = subprocess.run(
                [*build, "--outdir", str(out), str(REPO)],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


def test_the_wheel_carries_the_server_and_its_metadata(built: tuple[Path, Path]) -> None:
    wheel, _ = built
    assert wheel.name == f"parley_code-{parley.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = f"parley_code-{parley.__version__}.dist-info"
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    for needed in RUN_TIME:
        assert needed in names
    assert not [name for name in names if name.startswith("tests/") or "__pycache__" in name]
    assert f"{info}/licenses/LICENSE" in names
    assert metadata["Name"] == NAME and metadata["Version"] == parley.__version__
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "MIT"
    assert "Programming Language :: Python :: 3.11" in metadata.get_all("Classifier")
    assert "parley = parley.entry:main" in entry_points


def test_the_sdist_leaves_the_tests_out(built: tuple[Path, Path]) -> None:
    _, sdist = built
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    assert "server/parley/fakellm/demo.py" in names and "LICENSE" in names
    assert not [name for name in names if name.startswith("tests/")]


def test_the_wheels_own_code_runs_and_says_its_version(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """The wheel's files (not the repository's) import and answer `--version`."""
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path)
    program = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); sys.argv = ['parley', '--version']; "
        "import parley, parley.fakellm.demo, parley.tools.kernel_main; "
        f"assert parley.__file__.startswith({str(tmp_path)!r}), parley.__file__; "
        "from parley.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == f"parley {parley.__version__} (parley-code)\n", done.stderr


# --- The wheel installed where a user would: a new venv, no repository on sys.path -----------


@dataclass(frozen=True)
class UserInstall:
    command: Path  # `parley`, where uv put it for the user (their ~/.local/bin)
    python: Path  # the interpreter of the tool's own venv


@pytest.fixture(scope="session")
def installed(
    built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> UserInstall:
    """The wheel installed with the README's command, `uv tool install`: a new venv of its
    own, made from the base interpreter (not the repository's .venv), its dependencies
    resolved from the wheel's metadata (pinned by constraints.txt, as CI tests them)."""
    wheel, _ = built
    with made_once(tmp_path_factory, worker_id, "parley-user") as (user, made):
        tools, bin_dir = user / "tools", user / "bin"  # ~/.local/share/uv/tools, ~/.local/bin
        if not made:
            base_python = Path(sys.base_prefix) / "bin" / f"python{PYTHON_VERSION}"
            uv_tool_install = [find_uv_bin(), "tool", "install", "--python", str(base_python)]
            constraints = ["--constraints", str(REPO / "constraints.txt")]
            done = subprocess.run(
                [*uv_tool_install, *constraints, str(wheel)],
                capture_output=True,
                text=True,
                timeout=600,
                cwd=user,
                env=user_env(user)
                | {"UV_TOOL_DIR": str(tools), "UV_TOOL_BIN_DIR": str(bin_dir)}
                | {"UV_PYTHON_DOWNLOADS": "never"},
            )
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return UserInstall(bin_dir / "parley", tools / "parley-code" / "bin" / "python")


# The repository's, or the test run's (a user's Python writes its bytecode).
REPOSITORY_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "PARLEY_VENV",
    "PYTHONDONTWRITEBYTECODE",
    # The suite's loop watchdog (conftest.py) holds the repository's servers to 100 ms. A
    # fresh install's first run imports its SDK from files just written and compiles their
    # bytecode: loading pydantic-core's extension module in the preload thread held the
    # GIL for 116 ms once (its disk read, not CPU). What this module checks is the install.
    "PARLEY_LOOP_WATCHDOG_MS",
    "PARLEY_LOOP_WATCHDOG_FILE",
)


def user_env(home: Path) -> dict[str, str]:
    """A user's environment: nothing of the repository, no key, Parley's files in `home`."""
    env = {key: value for key, value in os.environ.items() if key not in REPOSITORY_VARIABLES}
    return env | {
        "PARLEY_HOME": str(home / "data"),  # the demo's project goes beside it, in `home`
        "PARLEY_CONFIG": str(home / "no-config.toml"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }


def run_installed(
    installed: UserInstall, home: Path, *args: str, stdin: str = ""
) -> CompletedProcess[str]:
    return subprocess.run(
        [str(installed.command), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=user_env(home),
        cwd=home,  # outside the repository
        timeout=120,
    )


def test_the_installed_parley_runs_its_venvs_copy_not_the_repositorys(
    installed: UserInstall, tmp_path: Path
) -> None:
    shebang = installed.command.read_text().splitlines()[0]
    assert shebang == f"#!{installed.python}"  # the tool's venv runs it
    program = "import json, sys, parley; print(json.dumps([parley.__file__, sys.path]))"
    done = subprocess.run(
        [str(installed.python), "-c", program],
        capture_output=True,
        text=True,
        env=user_env(tmp_path),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    where, search_path = json.loads(done.stdout)
    site_packages = (
        installed.python.parents[1] / "lib" / f"python{PYTHON_VERSION}" / "site-packages"
    )
    assert Path(where).is_relative_to(site_packages), where
    # ('' is the working directory, tmp_path.)
    inside = [entry for entry in search_path if (tmp_path / entry).resolve().is_relative_to(REPO)]
    assert not inside, search_path
    version = run_installed(installed, tmp_path, "--version")
    assert version.stdout == f"parley {parley.__version__} (parley-code)\n", version.stderr


def test_the_installed_demo_fixes_the_project_and_keeps_its_session(
    installed: UserInstall, tmp_path: Path
) -> None:
    """What a user sees on `parley demo` right after `uv tool install parley-code`."""
    done = run_installed(installed, tmp_path, "demo")
    assert done.returncode == 0, done.stderr
    assert "SCRIPTED" in done.stderr  # the user is told the model is scripted
    assert done.stderr.index("Exit code: 1") < done.stderr.index("Exit code: 0")
    assert done.stdout.rstrip().endswith("Both tests pass now.")
    project = tmp_path / "parley-demo" / "project"
    assert "return 2 * (width + height)" in (project / "geometry.py").read_text()
    assert str(project) in done.stderr  # where to look at it afterwards
    listed = run_installed(installed, tmp_path, "sessions")
    assert "The tests fail. Find out why and fix it." in listed.stdout, listed.stderr


def test_the_installed_server_answers_an_acp_initialize_with_the_wheels_version(
    built: tuple[Path, Path], installed: UserInstall, tmp_path: Path
) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        info = f"parley_code-{parley.__version__}.dist-info"
        wheel_version = email.message_from_bytes(archive.read(f"{info}/METADATA"))["Version"]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientCapabilities": {},
            "clientInfo": {"name": "a-user's-editor", "version": "1"},
        },
    }
    # ACP's stdio framing: one JSON message per line. The server ends at the end of stdin.
    done = run_installed(
        installed, tmp_path, "serve", "--framing", "ndjson", stdin=json.dumps(initialize) + "\n"
    )
    assert done.returncode == 0, done.stderr
    (answer,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert answer["id"] == 1, answer
    result = InitializeResponse.model_validate(answer["result"])  # ACP's own schema, by its SDK
    assert result.protocol_version == 1
    assert answer["result"]["agentInfo"] == {"name": "parley", "version": wheel_version}
