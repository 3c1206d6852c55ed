"""Pids cgroups: each child of Parley in a group of its own whose `pids.max` bounds a fork
loop, all of whose processes are killed, and which is removed, when the child ends
(`sandbox.Launch.end`). Where the system offers a writable pids controller: cgroup v2 with
the pids controller delegated to this process's group, or a v1 `pids` hierarchy.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

logger = logging.getLogger(__name__)

GROUP_PREFIX = "parley-"
# A child's first step: join the cgroup whose cgroup.procs is $0, then become the command.
JOIN_GROUP = ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"')
# After SIGKILL, how long the processes of a group may take to go (their parent reaps them).
GROUP_EMPTY_WAIT_SECONDS = 2.0
PROBE_TIMEOUT_SECONDS = 5.0


@attrs.frozen
class PidsBase:
    """A cgroup directory where Parley may create pids-limited groups."""

    path: Path
    version: int

    def describe(self) -> str:
        return f"cgroup v{self.version} pids controller at {self.path}"


@attrs.frozen
class PidsGroup:
    """One child's cgroup."""

    path: Path
    version: int

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        """SIGKILL every process in the group (a fork loop included: forks past the cap fail,
        so each round leaves fewer) until it is empty."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + GROUP_EMPTY_WAIT_SECONDS
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        deadline = time.monotonic() + GROUP_EMPTY_WAIT_SECONDS
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as error:  # EBUSY: its processes are not all reaped yet
                if time.monotonic() >= deadline:
                    logger.warning("Could not remove the cgroup %s: %s", self.path, error)
                    return
                time.sleep(0.02)


_group_numbers = itertools.count(1)


def new_group(label: str, pids_max: int) -> PidsGroup | None:
    base = pids_base()
    if base is None or pids_max <= 0:
        return None
    readable_label = re.sub(r"[^A-Za-z0-9_-]", "_", label)[:40]
    name = f"{GROUP_PREFIX}{os.getpid()}-{next(_group_numbers)}-{readable_label}"
    group = PidsGroup(base.path / name, base.version)
    try:
        group.path.mkdir()
        (group.path / "pids.max").write_text(str(pids_max))
    except OSError as error:
        logger.warning("No pids cap for %s: %s", label, error)
        group.remove()
        return None
    return group


@functools.cache
def pids_base() -> PidsBase | None:
    """Where this server may create pids groups (probed once), or None."""
    for base in _pids_candidates():
        probe = PidsGroup(base.path / f"{GROUP_PREFIX}{os.getpid()}-probe", base.version)
        try:
            probe.path.mkdir(exist_ok=True)
            (probe.path / "pids.max").write_text("8")
            usable = _joins(probe)
        except OSError:
            usable = False
        probe.remove()
        if usable:
            _remove_stale_groups(base.path)
            return base
    return None


def _joins(group: PidsGroup) -> bool:
    """Whether a child can move itself into `group`, as every launch's first step does."""
    try:
        done = subprocess.run(
            [*JOIN_GROUP, str(group.procs_file), "true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _pids_candidates() -> list[PidsBase]:
    """v2: this process's own cgroup when its pids controller is delegated to children; v1:
    this process's group in the pids hierarchy."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    candidates = []
    for line in memberships:
        number, controllers, relative = line.split(":", 2)
        if number == "0" and controllers == "":
            mount = _mount_point(mounts, "cgroup2", None)
            version = 2
        elif "pids" in controllers.split(","):
            mount = _mount_point(mounts, "cgroup", "pids")
            version = 1
        else:
            continue
        if mount is None:
            continue
        own = mount / relative.lstrip("/")
        base = own if own.is_dir() else mount  # in a container the mount is its own root
        if version == 2 and "pids" not in _read(base / "cgroup.subtree_control").split():
            continue
        candidates.append(PidsBase(base, version))
    return sorted(candidates, key=lambda candidate: -candidate.version)


def _mount_point(mounts: Sequence[str], kind: str, option: str | None) -> Path | None:
    for line in mounts:
        fields = line.split()
        if (
            len(fields) >= 4
            and fields[2] == kind
            and (option is None or option in fields[3].split(","))
        ):
            return Path(fields[1])
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _remove_stale_groups(base: Path) -> None:
    """The empty groups servers that are gone left behind (a crash, a kill -9)."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            match = re.match(rf"{GROUP_PREFIX}(\d+)-", entry.name)
            if match and not Path(f"/proc/{match.group(1)}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()
