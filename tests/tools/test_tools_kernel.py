"""The Python kernel and its tools, against real kernel processes on a sample workspace."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from parley.child_env import child_environment
from parley.config import ConfigError, load_settings
from parley.server import kernel_settings
from parley.tools.base import Tool, ToolContext, ToolResult
from parley.tools.kernel import KernelSettings, PythonKernel, choose_interpreter
from parley.tools.kernel_bench import bench_kernel
from parley.tools.server_tools import server_tools

GEOMETRY = '''\
"""Shapes and their measures."""


def area(width, height):
    """Area of a width-by-height rectangle."""
    return width * height


def perimeter(width, height):
    """Perimeter of a rectangle."""
    return 2 * (width + height)


class Shape:
    """A named rectangle."""

    def __init__(self, name, width, height):
        self.name = name
        self.width = width
        self.height = height

    def area(self):
        """This shape's area."""
        return area(self.width, self.height)

    @property
    def is_square(self):
        return self.width == self.height
'''

REPORT = """\
import geometry
from geometry import area


def total_area(shapes):
    return sum(area(s.width, s.height) for s in shapes)


def describe(shape):
    return f"{shape.name}: {geometry.area(shape.width, shape.height)}"
"""

SETTINGS = KernelSettings(
    timeout_seconds=1.0, interrupt_grace_seconds=0.5, memory_limit_bytes=512 * 1024**2
)


def make_sample_workspace(root: Path) -> Path:
    (root / "geometry").mkdir()
    (root / "geometry" / "__init__.py").write_text(GEOMETRY)
    (root / "geometry" / "report.py").write_text(REPORT)
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "generated.py").write_text("from geometry import area\nprint(area(1, 2))\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_sample_workspace(tmp_path)


@pytest.fixture
async def tools(workspace: Path) -> AsyncIterator[dict[str, Any]]:
    by_name = {tool.spec.name: tool for tool in server_tools(workspace, SETTINGS)}
    yield by_name
    await by_name["python_eval"].aclose()


async def call(tool: Tool, **arguments: Any) -> ToolResult:
    context = ToolContext(session_id="s1", tool_call_id="t1", cwd=Path("."))
    return await tool.run(arguments, context)


async def evaluate(tools: dict[str, Any], code: str) -> ToolResult:
    return await call(tools["python_eval"], code=textwrap.dedent(code))


# --- eval ---------------------------------------------------------------------------------


async def test_an_expression_answers_its_repr(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "'ab' * 2")
    assert result.content == "value: 'abab'"
    assert not result.is_error


async def test_statements_show_their_output_and_the_last_value(tools: dict[str, Any]) -> None:
    result = await evaluate(
        tools, "print('hello')\nimport sys\nprint('oops', file=sys.stderr)\n6*7"
    )
    assert result.content == "stdout:\nhello\nstderr:\noops\nvalue: 42"


async def test_code_without_output_says_so(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "x = 1")
    assert result.content == "(no output and no value)"


async def test_state_is_kept_between_evals(tools: dict[str, Any]) -> None:
    await evaluate(tools, "counter = 10\ndef bump():\n    global counter\n    counter += 1")
    await evaluate(tools, "bump()")
    assert (await evaluate(tools, "counter")).content == "value: 11"


async def test_the_workspace_modules_import_by_name(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "import geometry, os\n(geometry.area(2, 3), os.getcwd())")
    assert result.content.startswith("value: (6, ")
    assert str(tools["read_file"].workspace) in result.content


async def test_an_exception_is_a_traceback_and_the_last_error(tools: dict[str, Any]) -> None:
    assert "not running" in (await call(tools["python_last_error"])).content
    result = await evaluate(tools, "def divide(a):\n    return a / 0\n\ndivide(1)")
    assert result.is_error
    assert "Traceback (most recent call last):" in result.content
    assert "return a / 0" in result.content  # the model's own code is shown
    assert result.content.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "kernel_main.py" not in result.content

    await evaluate(tools, "still_alive = True")
    last = await call(tools["python_last_error"])
    assert not last.is_error
    assert last.content.startswith("python_eval #1 at ")
    assert "raised ZeroDivisionError" in last.content
    assert "return a / 0" in last.content


async def test_a_syntax_error_points_at_the_code(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "def f(:\n    pass")
    assert result.is_error
    assert "SyntaxError" in result.content
    assert "def f(:" in result.content


async def test_system_exit_does_not_end_the_kernel(tools: dict[str, Any]) -> None:
    await evaluate(tools, "kept = 1")
    result = await evaluate(tools, "import sys; sys.exit(3)")
    assert result.is_error and "SystemExit: 3" in result.content
    assert (await evaluate(tools, "kept")).content == "value: 1"


async def test_output_of_subprocesses_is_captured(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "import os\nos.system('echo from-the-shell')")
    assert "output from subprocesses or C code:\nfrom-the-shell" in result.content


async def test_a_megabyte_of_output_is_cut_with_a_note(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "print('x' * 1_000_000)")
    assert "[… 980,001 more characters cut]" in result.content
    assert len(result.content) < 21_000
    result = await evaluate(tools, "'y' * 1_000_000")
    assert "[… 980,002 more characters cut]" in result.content  # the repr's quotes count


# --- the kernel's failures ----------------------------------------------------------------


async def test_an_infinite_loop_is_interrupted_at_the_timeout(tools: dict[str, Any]) -> None:
    await evaluate(tools, "before = 'kept'")
    result = await evaluate(tools, "while True:\n    pass")
    assert result.is_error
    assert result.content.startswith(
        "Interrupted at the 1 s time limit (KeyboardInterrupt in the code); "
        "the kernel and its namespace are intact."
    )
    assert "KeyboardInterrupt" in result.content
    assert (await evaluate(tools, "before")).content == "value: 'kept'"


async def test_code_ignoring_the_interrupt_is_killed(tools: dict[str, Any]) -> None:
    await evaluate(tools, "before = 'lost'")
    stubborn = """
        import time
        while True:
            try:
                time.sleep(10)
            except KeyboardInterrupt:
                pass
    """
    result = await evaluate(tools, stubborn)
    assert result.is_error
    assert result.content.startswith(
        "The code was still running 0.5 s after being interrupted at the 1 s time limit, so "
        "the Python kernel was killed; its namespace was lost. A fresh kernel starts on the "
        "next call."
    )
    after = await evaluate(tools, "before")
    assert after.is_error and "NameError" in after.content
    assert (await evaluate(tools, "1 + 1")).content == "value: 2"


async def test_a_kernel_that_exits_is_reported_and_restarted(tools: dict[str, Any]) -> None:
    await evaluate(tools, "before = 1")
    result = await evaluate(tools, "import os\nos._exit(1)")
    assert result.is_error
    assert result.content == (
        "The Python kernel died (exit code 1); its namespace was lost. It restarts on next use."
    )
    assert (await evaluate(tools, "2 + 2")).content == "value: 4"
    assert "NameError" in (await evaluate(tools, "before")).content
    last = await call(tools["python_last_error"])
    assert "NameError" in last.content


async def test_a_segfault_is_reported_with_its_traceback(tools: dict[str, Any]) -> None:
    result = await evaluate(tools, "import ctypes\nctypes.string_at(0)")
    assert result.is_error
    assert result.content.startswith("The Python kernel died (killed by signal SIGSEGV)")
    assert "Fatal Python error: Segmentation fault" in result.content
    assert (await evaluate(tools, "'back'")).content == "value: 'back'"


async def test_a_memory_bomb_meets_the_memory_limit(tools: dict[str, Any]) -> None:
    await evaluate(tools, "before = 'kept'")
    result = await evaluate(tools, "hog = bytearray(10**10)")
    assert result.is_error
    assert "MemoryError" in result.content or "died" in result.content
    assert (await evaluate(tools, "len(bytearray(10**6))")).content == "value: 1000000"


async def test_cancelling_a_call_interrupts_the_code(tools: dict[str, Any]) -> None:
    await evaluate(tools, "before = 'kept'")
    slow = asyncio.create_task(evaluate(tools, "import time\ntime.sleep(20)\nfinished = True"))
    await asyncio.sleep(0.3)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    started = asyncio.get_running_loop().time()
    result = await evaluate(tools, "(before, 'finished' in globals())")
    assert result.content == "value: ('kept', False)"
    assert asyncio.get_running_loop().time() - started < 1.5  # no restart, no grace wait
    last = await call(tools["python_last_error"])
    assert "KeyboardInterrupt" in last.content


async def test_a_closed_kernel_is_gone(workspace: Path) -> None:
    kernel = PythonKernel(workspace, SETTINGS)
    reply = await kernel.call("eval", code="import os; os.getpid()")
    assert reply.ok and kernel.pid is not None
    pid = kernel.pid  # the machine's (in the sandbox, the kernel's own is in its namespace)
    await kernel.aclose()
    await kernel.aclose()  # idempotent
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    closed = await kernel.call("eval", code="1")
    assert closed.kernel_note == "The Python kernel has been shut down."


# --- the CPU-time cap ---------------------------------------------------------------------

# The wall-clock timeout is far away, so only the CPU cap can stop these calls.
CPU_CAPPED = KernelSettings(timeout_seconds=120.0, interrupt_grace_seconds=0.5, cpu_seconds=1.0)


@pytest.fixture
async def cpu_capped_tools(workspace: Path) -> AsyncIterator[dict[str, Any]]:
    by_name = {tool.spec.name: tool for tool in server_tools(workspace, CPU_CAPPED)}
    yield by_name
    await by_name["python_eval"].aclose()


async def test_a_python_loop_is_stopped_at_the_cpu_limit(
    cpu_capped_tools: dict[str, Any],
) -> None:
    await evaluate(cpu_capped_tools, "before = 'kept'")
    result = await evaluate(cpu_capped_tools, "while True:\n    pass")
    assert result.is_error
    assert result.content.startswith(
        "Stopped at the 1 s CPU-time limit per call (CPUTimeLimitExceeded in the code); "
        "the kernel and its namespace are intact."
    )
    assert "CPUTimeLimitExceeded: the call used more than its 1 s of CPU time" in result.content
    assert (await evaluate(cpu_capped_tools, "before")).content == "value: 'kept'"


async def test_c_code_past_the_cpu_limit_kills_the_kernel(cpu_capped_tools: dict[str, Any]) -> None:
    await evaluate(cpu_capped_tools, "before = 'lost'")
    # sum() over a range loops in C without ever checking for signals.
    result = await evaluate(cpu_capped_tools, "sum(range(10**12))")
    assert result.is_error
    assert result.content.startswith(
        "The code used more than the 1 s of CPU time allowed per call and could not be "
        "interrupted, so the Python kernel was killed; its namespace was lost. A fresh kernel "
        "starts on the next call."
    )
    assert "NameError" in (await evaluate(cpu_capped_tools, "before")).content
    assert (await evaluate(cpu_capped_tools, "1 + 1")).content == "value: 2"


async def test_the_cpu_limit_is_per_call(cpu_capped_tools: dict[str, Any]) -> None:
    burn = """
        import time
        started = time.process_time()
        while time.process_time() - started < 0.7:
            pass
        'done'
    """
    for _ in range(3):  # 2.1 s in all: more than one call's cap, less than each call's
        assert (await evaluate(cpu_capped_tools, burn)).content == "value: 'done'"


def test_the_cpu_cap_is_configurable(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    environ = {"PARLEY_CONFIG": str(config)}
    assert kernel_settings(load_settings(environ)).cpu_seconds == 60.0
    config.write_text("[kernel]\ncpu_seconds = 5\n")
    assert kernel_settings(load_settings(environ)).cpu_seconds == 5.0
    config.write_text("[kernel]\ncpu_seconds = 0\n")
    assert kernel_settings(load_settings(environ)).cpu_seconds is None
    config.write_text("[kernel]\ncpu_seconds = -1\n")
    with pytest.raises(ConfigError, match="cpu_seconds"):
        load_settings(environ)


# --- the kernel's environment -------------------------------------------------------------

SECRETS = {
    "OPENAI_API_KEY": "sk-openai-secret",
    "OPENAI_ORG_ID": "org-secret",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GITHUB_TOKEN": "ghp-secret",
    "HF_TOKEN": "hf-secret",
    "DB_PASSWORD": "db-secret",
    "PGPASSWORD": "pg-secret",
    "MYAPIKEY": "apikey-secret",
    "stripe_secret_key": "stripe-secret",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/gcp-secret.json",
    "DATABASE_URL": "postgres://me:url-secret@db.example/app",
    "CUSTOM_LLM_CREDS": "custom-secret",  # a provider's key variable, named in the config
}
ORDINARY = {
    "PARLEY_PLAIN_SETTING": "plain",
    "TOKENIZERS_PARALLELISM": "false",  # a word that only starts like a secret one
    "PUBLIC_URL": "https://example.com/app",
}


def test_secrets_are_left_out_of_a_child_environment() -> None:
    environ = {**SECRETS, **ORDINARY, "PATH": "/usr/bin", "HOME": "/home/me"}
    # An allow-list: the ordinary variables pass only when the user names them ([sandbox] env).
    assert child_environment(["CUSTOM_LLM_CREDS"], environ) == {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
    }
    named = [*ORDINARY, *SECRETS]  # naming a secret does not let it through
    child = child_environment(["CUSTOM_LLM_CREDS"], environ, named)
    assert child == {**ORDINARY, "PATH": "/usr/bin", "HOME": "/home/me"}


async def test_the_kernel_sees_no_secret_of_the_server(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**SECRETS, **ORDINARY}.items():
        monkeypatch.setenv(name, value)
    sandbox = attrs.evolve(SETTINGS.sandbox, env=(*ORDINARY, *SECRETS))  # the user names them
    settings = attrs.evolve(SETTINGS, secret_env_names=("CUSTOM_LLM_CREDS",), sandbox=sandbox)
    kernel = PythonKernel(workspace, settings)
    try:
        reply = await kernel.call("eval", code="import os\ndict(os.environ)")
    finally:
        await kernel.aclose()
    environ = eval(reply.result["value"])
    assert not set(SECRETS) & set(environ)
    assert not [value for value in SECRETS.values() if value in reply.result["value"]]
    assert {name: environ.get(name) for name in ORDINARY} == ORDINARY
    assert environ["PATH"] == os.environ["PATH"]
    assert environ["HOME"] == os.environ["HOME"]


# --- interpreter choice -------------------------------------------------------------------


async def test_the_workspace_venv_runs_the_kernel(workspace: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=workspace)
    venv_python = workspace / ".venv" / "bin" / "python"
    assert choose_interpreter(workspace) == str(venv_python)
    # The workspace's own environment wins over a configured interpreter ...
    assert choose_interpreter(workspace, "/usr/bin/python3") == str(venv_python)
    kernel = PythonKernel(workspace, SETTINGS)
    try:
        reply = await kernel.call("eval", code="import sys; sys.prefix")
    finally:
        await kernel.aclose()
    assert reply.result["value"] == repr(str(workspace / ".venv"))


def test_without_a_venv_parleys_python_runs_the_kernel(tmp_path: Path) -> None:
    assert choose_interpreter(tmp_path) == sys.executable
    # ... and without one, the configured interpreter wins over Parley's own.
    assert choose_interpreter(tmp_path, "/usr/bin/python3") == "/usr/bin/python3"
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")
    assert choose_interpreter(tmp_path) == str(tmp_path / "venv" / "bin" / "python")


async def test_a_missing_interpreter_is_reported(workspace: Path) -> None:
    kernel = PythonKernel(workspace, KernelSettings(python="/nonexistent/python"))
    reply = await kernel.call("eval", code="1")
    await kernel.aclose()
    assert not reply.ok
    assert reply.kernel_note is not None
    assert reply.kernel_note.startswith("Could not start the Python kernel with /nonexistent")


# --- introspection ------------------------------------------------------------------------
# Without an eval the read-only tools answer from the source (static_python.py); the kernel
# is not started for them. tests/tools/test_static_introspection.py covers a hostile workspace.

STATIC = "(read from the source: nothing was imported or run)"


async def test_describe_a_function_by_dotted_path(tools: dict[str, Any]) -> None:
    result = await call(tools["python_describe"], target="geometry.area")
    assert not result.is_error, result.content
    assert result.content.splitlines() == [
        "geometry.area: function (builtins.function)",
        "signature: area(width, height)",
        "defined in: geometry/__init__.py:4",
        "doc:",
        "Area of a width-by-height rectangle.",
        STATIC,
    ]
    assert not tools["python_eval"].kernel.is_running


async def test_describe_a_name_from_the_namespace(tools: dict[str, Any]) -> None:
    await evaluate(tools, "from geometry import Shape\nsquare = Shape('sq', 2, 2)")
    result = await call(tools["python_describe"], target="square")
    assert "square: data (geometry.Shape)" in result.content
    assert "<geometry.Shape object" in result.content
    result = await call(tools["python_describe"], target="square.is_square")
    assert "value: True" in result.content


async def test_describe_an_unknown_name(tools: dict[str, Any]) -> None:
    result = await call(tools["python_describe"], target="nowhere.thing")
    assert result.is_error
    assert result.content == (
        "'nowhere' was not found as Python source in the workspace, its virtualenv or the "
        "standard library, and is not a builtin (a compiled module can be inspected live "
        "after an approved python_eval imports it)"
    )
    result = await call(tools["python_describe"], target="geometry.volume")
    assert result.content == "geometry (module) has no attribute 'volume' in its source"
    await evaluate(tools, "import geometry")  # live now: the live object has no volume either
    result = await call(tools["python_describe"], target="geometry.volume")
    assert result.content == "geometry (module) has no attribute 'volume' in its source"


async def test_a_module_that_cannot_import_is_still_described(
    tools: dict[str, Any], workspace: Path
) -> None:
    # Before: describe imported broken.py, and its ModuleNotFoundError became the last error.
    # Now nothing is imported: the source answers, and there is no error to record.
    (workspace / "broken.py").write_text("import does_not_exist_anywhere\n\ndef thing(): ...\n")
    result = await call(tools["python_describe"], target="broken.thing")
    assert not result.is_error
    assert "broken.thing: function (builtins.function)" in result.content
    last = await call(tools["python_last_error"])
    assert last.content == "No exception is recorded: the kernel is not running."


async def test_an_exception_in_a_live_tool_becomes_the_last_error(tools: dict[str, Any]) -> None:
    await evaluate(
        tools,
        """
        class Flaky:
            @property
            def value(self):
                raise RuntimeError("no value today")

        flaky = Flaky()
        """,
    )
    result = await call(tools["python_describe"], target="flaky.value")
    assert result.is_error and "RuntimeError: no value today" in result.content
    last = await call(tools["python_last_error"])
    assert "python_describe('flaky.value')" in last.content


async def test_source_of_a_method(tools: dict[str, Any]) -> None:
    result = await call(tools["python_source"], target="geometry.Shape.area")
    assert result.content == (
        "geometry/__init__.py, lines 22-24:\n"
        "    def area(self):\n"
        '        """This shape\'s area."""\n'
        "        return area(self.width, self.height)\n"
        f"\n{STATIC}"
    )
    await evaluate(tools, "import geometry")
    live = await call(tools["python_source"], target="geometry.Shape.area")
    assert live.content == result.content.removesuffix(f"\n{STATIC}")


async def test_source_of_a_module_and_of_a_builtin(tools: dict[str, Any]) -> None:
    result = await call(tools["python_source"], target="geometry.report")
    assert result.content.startswith("geometry/report.py, lines 1-10:\nimport geometry\n")
    result = await call(tools["python_source"], target="len")
    assert result.is_error and result.content.startswith("no Python source for len")


async def test_members_of_a_class_and_a_module(tools: dict[str, Any]) -> None:
    result = await call(tools["python_members"], target="geometry.Shape")
    lines = result.content.splitlines()
    # Read from the source, the attributes __init__ sets are members too (3 more than live).
    assert lines[0] == "geometry.Shape (class), 6 members:"
    assert "  __init__  [method] (self, name, width, height)" in lines
    assert "  area  [method] (self)  # This shape's area." in lines
    assert "  is_square  [property] (self)" in lines
    assert "  width  [data (instance)] = width" in lines

    result = await call(tools["python_members"], target="geometry")
    assert "  Shape  [class] (name, width, height)  # A named rectangle." in result.content
    assert "  perimeter  [function] (width, height)  # Perimeter of a rectangle." in (
        result.content
    )


async def test_apropos_in_loaded_modules_and_in_a_package(tools: dict[str, Any]) -> None:
    # Before: not found until an eval imported geometry. Now the source of the workspace's
    # own modules is searched without importing them.
    result = await call(tools["python_apropos"], pattern="perim")
    assert result.content.splitlines() == [
        "1 names match 'perim' in the workspace's modules (2 modules):",
        "  geometry.perimeter  [function] (width, height)",
        STATIC,
    ]
    await evaluate(tools, "import geometry, json")
    result = await call(tools["python_apropos"], pattern="PERIM|jsondecodeerror")
    assert "in the workspace's modules and the kernel's loaded modules" in result.content
    assert "  geometry.perimeter  [function] (width, height)" in result.content
    assert "  json.decoder.JSONDecodeError  [class]" in result.content  # loaded by the eval

    result = await call(tools["python_apropos"], pattern="area", package="geometry")
    assert result.content.splitlines() == [
        "3 names match 'area' in package geometry (2 modules):",
        "  geometry.Shape.area  [method] (self)",
        "  geometry.area  [function] (width, height)",
        "  geometry.report.total_area  [function] (shapes)",  # its import of area is not listed
        STATIC,
    ]


async def test_apropos_output_is_bounded(tools: dict[str, Any]) -> None:
    await evaluate(tools, "import json")  # the kernel's loaded modules hold many names
    result = await call(tools["python_apropos"], pattern=".")
    assert "more not shown; narrow it]" in result.content
    assert len(result.content.splitlines()) <= 202


async def test_apropos_refuses_a_bad_regex(tools: dict[str, Any]) -> None:
    result = await call(tools["python_apropos"], pattern="(")
    assert result.is_error and "not a valid regular expression" in result.content


async def test_who_calls_finds_the_call_sites_and_skips_ignored_files(
    tools: dict[str, Any],
) -> None:
    result = await call(tools["python_who_calls"], name="area")
    assert result.content.splitlines() == [
        "3 calls to area(...):",
        "geometry/__init__.py:24 in Shape.area: return area(self.width, self.height)",
        "geometry/report.py:6 in total_area: return sum(area(s.width, s.height) for s in shapes)",
        'geometry/report.py:10 in describe: return f"{shape.name}: '
        '{geometry.area(shape.width, shape.height)}"',
    ]
    assert "build/" not in result.content
    result = await call(tools["python_who_calls"], name="geometry.perimeter")
    assert result.content == "No calls to perimeter(...) found in the workspace's Python files."


async def test_every_tool_has_a_spec_the_model_can_use(workspace: Path) -> None:
    tools = server_tools(workspace)
    names = [tool.spec.name for tool in tools]
    assert names == [
        "python_eval",
        "python_describe",
        "python_source",
        "python_members",
        "python_apropos",
        "python_who_calls",
        "python_last_error",
        "read_file",
        "list_directory",
        "search_files",
        "edit_file",
        "write_file",
        "run_command",
        "update_plan",
    ]
    for tool in tools:
        assert isinstance(tool, Tool)
        assert tool.spec.input_schema["type"] == "object"
        assert "\n" not in tool.spec.description
    asked = [tool.spec.name for tool in tools if tool.spec.needs_permission]
    assert asked == ["python_eval", "edit_file", "write_file", "run_command"]
    await tools[0].aclose()


async def test_the_benchmark_measures_the_kernel(workspace: Path) -> None:
    figures = await bench_kernel(workspace, repeats=5)
    assert set(figures) == {"cold_start_ms", "eval_round_trip_p50_ms", "eval_round_trip_p90_ms"}
    assert 0 < figures["eval_round_trip_p50_ms"] < figures["cold_start_ms"]
