"""How fast the Python kernel is: cold start, and a trivial eval's round trip.

python -m parley.tools.kernel_bench [workspace]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

from parley.tools.kernel import KernelSettings, PythonKernel


async def bench_kernel(workspace: Path, repeats: int = 20) -> dict[str, float]:
    """Milliseconds: the first eval of a fresh kernel (process start included), and the
    median and 90th percentile of `repeats` trivial evals after it."""
    kernel = PythonKernel(workspace, KernelSettings())
    try:
        started = time.perf_counter()
        first = await kernel.call("eval", code="1 + 1")
        cold_start = time.perf_counter() - started
        if not first.ok:
            raise RuntimeError(f"the kernel did not answer: {first.kernel_note or first.error}")
        round_trips = []
        for _ in range(repeats):
            started = time.perf_counter()
            await kernel.call("eval", code="1 + 1")
            round_trips.append(time.perf_counter() - started)
    finally:
        await kernel.aclose()
    round_trips.sort()
    p90_index = min(len(round_trips) - 1, int(0.9 * len(round_trips)))
    return {
        "cold_start_ms": cold_start * 1000,
        "eval_round_trip_p50_ms": statistics.median(round_trips) * 1000,
        "eval_round_trip_p90_ms": round_trips[p90_index] * 1000,
    }


def main() -> None:
    workspace = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    results = asyncio.run(bench_kernel(workspace))
    for name, value in results.items():
        print(f"{name:<26} {value:8.2f}")


if __name__ == "__main__":
    main()
