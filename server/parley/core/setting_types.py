"""The kinds of value a setting takes, and the config.toml tables whose defaults the tools
that read them share (`[kernel]`: tools/kernel.py, `[commands]`: tools/run_command.py), so
each default is written once. config_file.py structures the file into them; each type's hook
there says what it takes (a strict TOML type, then its range)."""

from __future__ import annotations

from typing import NewType

import attrs

Positive = NewType("Positive", float)  # a number > 0 (seconds, US dollars)
NonNegative = NewType("NonNegative", float)  # a number >= 0 (prices; a CPU cap, 0: none)
Share = NewType("Share", float)  # a share of a whole: > 0 and <= 1
Count = NewType("Count", int)  # a whole number >= 0
PositiveCount = NewType("PositiveCount", int)  # a whole number > 0
PathText = NewType("PathText", str)  # a file or directory: a string, not empty


@attrs.frozen
class KernelTable:
    """[kernel]: the per-session Python kernel."""

    python: str | None = None  # an explicit interpreter; none: the workspace's venv
    timeout_seconds: Positive = Positive(30.0)
    output_limit: PositiveCount = PositiveCount(20_000)  # characters kept per stream
    memory_limit_bytes: Count = Count(4 * 1024**3)  # RLIMIT_AS in the child; 0: no limit
    cpu_seconds: NonNegative = NonNegative(60.0)  # CPU time per call; 0: no cap
    # The user's own kernel: how long a call waits for a cell of theirs still running.
    busy_wait_seconds: Positive = Positive(10.0)


@attrs.frozen
class CommandsTable:
    """[commands]: the model's shell commands (`run_command`). Unknown keys are refused."""

    timeout_seconds: Positive = Positive(120.0)  # a call's default
    max_timeout_seconds: Positive = Positive(600.0)  # the most a call may ask for
