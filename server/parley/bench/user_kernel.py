"""Row 5e: an eval's round trip in the user's own kernel (issue 41): a real ipykernel started
through jupyter_client, Parley's `UserKernel` (its busy probe, then `execute_request` with
`store_history: false`) against jupyter_client's own `execute_interactive` on the same kernel."""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

from parley.bench.harness import BenchSizes, Row, percentile

MEASURE = "5e. Attached kernel (a real ipykernel): round trip of an eval (`1 + 1`), p50 of"


async def user_kernel_row(home: Path, sizes: BenchSizes) -> Row:
    label = f"{MEASURE} {sizes.kernel_evals}"
    if importlib.util.find_spec("ipykernel") is None:
        return Row(measure=label, parley="— (ipykernel is not installed here)")
    from jupyter_client.manager import AsyncKernelManager

    from parley.tools.jupyter_link import LocalLink
    from parley.tools.user_kernel import UserKernel

    connection = home / "bench-kernel.json"
    manager = AsyncKernelManager(kernel_name="python3", connection_file=str(connection))
    await manager.start_kernel(cwd=str(home), stderr=subprocess.DEVNULL)
    bare = manager.client()
    bare.start_channels()
    kernel = UserKernel(LocalLink(str(connection)))
    try:
        await bare.wait_for_ready(timeout=60)
        parley_times, bare_times = [], []
        for _ in range(sizes.kernel_evals + 1):  # the first of each warms up
            started = time.monotonic()
            result = await kernel.execute("1 + 1")
            parley_times.append(time.monotonic() - started)
            assert result.ok and "value: 2" in result.parts, result.parts
            started = time.monotonic()
            await bare.execute_interactive(
                "1 + 1", store_history=False, timeout=30, output_hook=lambda message: None
            )
            bare_times.append(time.monotonic() - started)
    finally:
        await kernel.aclose()
        bare.stop_channels()
        await manager.shutdown_kernel(now=True)
    ours = percentile(parley_times[1:], 0.5)
    theirs = percentile(bare_times[1:], 0.5)
    return Row(
        measure=label,
        parley=f"{ours * 1000:,.2f} ms",
        baseline=f"{theirs * 1000:,.2f} ms (jupyter_client's execute_interactive)",
        compared=f"{ours / theirs:.2f}x" if theirs else "—",
    )
