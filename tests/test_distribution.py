"""The distribution a user installs (`uv tool install parley-code`, `pipx install
parley-code`): `python -m build` makes an sdist and a wheel that carry what `parley` needs at
run time — the fake LLM of `parley demo` and the kernel's own script included, the tests not —
with the metadata an index shows, and the version `parley --version` and `initialize` say."""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import parley
import pytest
from conftest import REPO

NAME = "parley-code"  # `parley` on PyPI is another project (README, "Install")
RUN_TIME = ("parley/fakellm/demo.py", "parley/tools/kernel_main.py", "parley/py.typed")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
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
    assert "parley = parley.cli:main" in entry_points


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
