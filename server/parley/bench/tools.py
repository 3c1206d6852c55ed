"""Rows 5 and 6: the Python kernel, the read-only Python tools on a big package, and the
text parsers."""

from __future__ import annotations

import time
from pathlib import Path

from parley.bench.harness import BenchSizes, Row, ms, per_second

# --- 5, 6. the kernel and the text parsers ----------------------------------------------------


async def kernel_rows(home: Path, sizes: BenchSizes) -> list[Row]:
    from parley.tools.kernel_bench import bench_kernel

    workspace = home / "kernel-workspace"
    workspace.mkdir(exist_ok=True)
    figures = await bench_kernel(workspace, repeats=sizes.kernel_evals)
    return [
        Row(
            measure="5a. Python kernel cold start: process start to the first eval's answer",
            parley=f"{figures['cold_start_ms']:,.1f} ms",
        ),
        Row(
            measure=f"5b. Kernel round trip of a trivial eval (`1 + 1`), p50 of "
            f"{sizes.kernel_evals} (p90 {figures['eval_round_trip_p90_ms']:,.1f} ms)",
            parley=f"{figures['eval_round_trip_p50_ms']:,.2f} ms",
        ),
    ]


def write_big_package(root: Path, modules: int) -> str:
    """A package of `modules` modules, each with a docstring, a class and a few functions:
    the size of a real project's package."""
    package = root / "bigpkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""A generated package."""\n')
    for n in range(modules):
        functions = "".join(
            f"def f{n}_{k}(a: int, b: str = 'x', *rest, flag: bool = False) -> int:\n"
            f'    """Function {k} of module {n}."""\n    return a + {k}\n\n\n'
            for k in range(4)
        )
        klass = (
            f'class Thing{n}:\n    """A thing."""\n\n'
            "    def __init__(self, size):\n        self.size = size\n\n"
            "    def grow(self, by=1):\n        return self.size + by\n"
        )
        (package / f"mod{n}.py").write_text(f'"""Module {n}."""\n\n\n{functions}{klass}')
    return f"bigpkg.mod{modules // 2}.f{modules // 2}_2"


async def static_introspection_rows(home: Path, sizes: BenchSizes) -> list[Row]:
    from parley.tools.base import ToolContext
    from parley.tools.server_tools import server_tools

    workspace = home / "static-workspace"
    target = write_big_package(workspace, sizes.static_package_modules)
    tools = {tool.spec.name: tool for tool in server_tools(workspace)}
    describe = tools["python_describe"]
    context = ToolContext(session_id="bench", tool_call_id="bench", cwd=workspace)
    times = []
    for _ in range(2):  # cold: griffe reads every module; warm: only the files' times
        started = time.monotonic()
        result = await describe.run({"target": target}, context)
        times.append(time.monotonic() - started)
        assert not result.is_error, result.content
    await describe.aclose()
    label = (
        f"`python_describe` from the source (griffe, nothing imported) on a package of "
        f"{sizes.static_package_modules} modules"
    )
    return [
        Row(measure=f"5c. {label}, cold (first call)", parley=ms(times[0])),
        Row(measure=f"5d. {label}, warm (second call)", parley=ms(times[1])),
    ]


def parser_rows(sizes: BenchSizes) -> list[Row]:
    from parley.providers.text_parsers_bench import bench_parsers

    figures = bench_parsers(sizes.parser_chunks)
    return [
        Row(
            measure=f"6. Text parser `{name}`: {sizes.parser_chunks:,} 4-character chunks",
            parley=per_second(rate),
        )
        for name, rate in figures.items()
    ]
