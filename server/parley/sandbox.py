"""The one way Parley starts a child process: the Python kernel, stdio MCP servers, and
whatever runs next (shell commands).

`prepare(ChildSpec(...), settings)` turns what to run into a `Launch`: the argv, environment
and directory to start it with (any spawner: asyncio, the MCP SDK), plus what ends it.

- **Sandboxed** (bubblewrap, `bwrap`, where it runs): a PID namespace of its own with its own
  `/proc` (the server and every other process are not even visible), `--die-with-parent`, the
  workspace writable and the rest of the file system read-only, a private `/tmp`, a fresh
  `/dev`, no network unless the settings allow it for that child, no capabilities, and the
  environment it is given (without secrets: `child_env`). Killing the `bwrap` process ends
  every process in the namespace, `setsid` or not.
- **Fallback** (no `bwrap`, no user namespaces, `[sandbox] enabled = false`, or
  `PARLEY_SANDBOX=off`): a process group of its own, the user's rights; a child of a root
  server gets no capabilities (`setpriv`), so with the server non-dumpable
  (`make_undumpable`) it cannot read the server's `/proc/<pid>/environ`.

Either way, where the system offers a writable pids controller (cgroup v2 delegated, or v1),
each child runs in a cgroup of its own with `pids.max` (a fork loop is bounded), whose every
process is killed and which is removed when the child ends (`Launch.end`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import itertools
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

logger = logging.getLogger(__name__)

SANDBOX_VARIABLE = "PARLEY_SANDBOX"  # "off" forces the fallback
PROBE_TIMEOUT_SECONDS = 5.0
PR_SET_DUMPABLE = 4  # from <linux/prctl.h>
GROUP_PREFIX = "parley-"
# A child's first step: join the cgroup whose cgroup.procs is $0, then become the command.
JOIN_GROUP = ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"')
# After SIGKILL, how long the processes of a group may take to go (their parent reaps them).
GROUP_EMPTY_WAIT_SECONDS = 2.0


@attrs.frozen
class SandboxSettings:
    """config.toml's `[sandbox]`: whether children are sandboxed, their pids cap, and which of
    them may use the network."""

    enabled: bool = True  # False (or PARLEY_SANDBOX=off): every child runs unsandboxed
    pids_max: int = 1024  # processes per child, where a pids cgroup is offered; 0: no cap
    kernel_network: bool = False  # the Python kernel may use the network
    mcp_network: tuple[str, ...] = ()  # MCP servers (by name; "*": all) that may
    command_network: bool = False  # the model's shell commands (run_command) may
    # Directories children may write besides the workspace (`~/.npm` for `npx`, say);
    # those that do not exist are left out.
    writable: tuple[str, ...] = ()
    # Files and directories children may not even read, besides HIDDEN (`~/.config/foo`).
    hidden: tuple[str, ...] = ()

    def mcp_may_use_network(self, server: str) -> bool:
        return "*" in self.mcp_network or server in self.mcp_network


@attrs.frozen
class SandboxStatus:
    """What `parley doctor` and the server's log say: whether children are sandboxed and
    bounded, and if not why."""

    sandboxed: bool
    reason: str  # the sandbox in use, or why there is none
    pids_cap: str  # where the cap comes from, or why there is none
    pids_capped: bool

    def summary(self) -> str:
        how = "sandboxed" if self.sandboxed else "UNSANDBOXED"
        cap = f"pids cap: {self.pids_cap}" if self.pids_capped else f"no pids cap: {self.pids_cap}"
        return f"children run {how} ({self.reason}); {cap}"


@attrs.frozen
class ChildSpec:
    """What to run, where, with what: the launcher adds how."""

    argv: tuple[str, ...]
    workspace: Path  # the working directory, and the only writable place in the sandbox
    env: Mapping[str, str]  # exactly the child's environment (already without secrets)
    network: bool = False
    label: str = "child"  # names its cgroup, for a person reading `ps` or the cgroup tree
    cwd: Path | None = None  # where it starts, inside the workspace; None: the workspace
    # More directories the child may write, as the workspace (the session's other roots).
    writable: tuple[Path, ...] = ()


@attrs.frozen
class Launch:
    """A child ready to start: run `argv` in `cwd` with `env` (in a session of its own).

    `end()` (blocking: run it off the event loop) kills whatever is left in the child's pids
    group and removes the group; call it after the process was killed and waited for.
    """

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    sandboxed: bool
    group: PidsGroup | None = None

    def signal_of(self, returncode: int | None) -> int | None:
        """The signal that ended the child's command, from its exit code (bwrap reports a
        signal as 128 + its number, as a shell does)."""
        if returncode is None:
            return None
        if returncode < 0:
            return -returncode
        if self.sandboxed and returncode > 128:
            return returncode - 128
        return None

    def command_pid(self, spawned_pid: int) -> int | None:
        """The command's own process id (to signal it, to read its CPU time): the spawned
        process in the fallback; in the sandbox the child of bwrap's init inside it."""
        if not self.sandboxed:
            return spawned_pid
        init = _only_child(spawned_pid)
        return _only_child(init) if init is not None else None

    def end(self) -> None:
        if self.group is not None:
            self.group.kill_all()
            self.group.remove()


def prepare(spec: ChildSpec, settings: SandboxSettings) -> Launch:
    """How to start `spec`: in the sandbox where it runs, else in the fallback; in a pids group
    where the system offers one. Raises FileNotFoundError when the command does not exist."""
    workspace = spec.workspace.resolve()
    command = _resolved_command(spec.argv[0], spec.env, workspace)
    argv: list[str] = [command, *spec.argv[1:]]
    sandboxed = sandbox_status(settings).sandboxed
    if sandboxed:
        # The roots come resolved: one that resolves elsewhere now has a symlink in its place.
        roots = [root for root in spec.writable if root.is_dir() and root.resolve() == root]
        if any(root == spec.workspace or root in spec.workspace.parents for root in roots):
            workspace = spec.workspace  # inside a writable root: its bind holds it, as named
        writable = [*roots, *_existing_directories(settings.writable)]
        hidden = [  # as for the workspace (`_hiding`): never over a root or what holds one
            path
            for path in hidden_paths(settings.hidden)
            if not any(path == root or path in root.parents for root in roots)
        ]
        needed = needed_under_tmp(argv)
        arguments = _bwrap_arguments(workspace, spec.network, writable, hidden, needed, spec.cwd)
        argv = [*arguments, "--", *argv]
    elif _has_capabilities() and shutil.which("setpriv"):
        # Root (or any holder of CAP_SYS_PTRACE) could read the server's environ even when
        # it is not dumpable: the child gets no capabilities at all.
        argv = [*_DROP_CAPABILITIES, "--", *argv]
    group = _new_group(spec.label, settings.pids_max)
    if group is not None:  # join the group before anything else runs, then become the child
        argv = [*JOIN_GROUP, str(group.procs_file), *argv]
    cwd = workspace if spec.cwd is None else spec.cwd
    return Launch(tuple(argv), dict(spec.env), cwd, sandboxed, group)


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE=0 on this process: its /proc/<pid>/environ and memory become root's
    and need CAP_SYS_PTRACE to read, so a child without it cannot read the server's keys."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux
        return False


# --- the sandbox ---------------------------------------------------------------------------


# Where the user's credentials usually are: hidden from every sandboxed child (an empty
# directory, or /dev/null, in their place), so an approved eval or an MCP server cannot read
# them and hand them to the model. Relative to the home directory.
HIDDEN_IN_HOME = (
    ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass",
)  # fmt: skip


def hidden_paths(extra: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[Path]:
    """What exists of HIDDEN_IN_HOME, Parley's own data and configuration (other projects'
    conversations, MCP servers' headers) and the `extra` paths, resolved."""
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    data = environ.get("PARLEY_HOME") or Path(
        environ.get("XDG_DATA_HOME") or home / ".local" / "share", "parley"
    )
    config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config", "parley")
    named = [home / name for name in HIDDEN_IN_HOME] + [Path(data), config]
    if explicit := environ.get("PARLEY_CONFIG"):
        named.append(Path(explicit))
    named += [Path(path).expanduser() for path in extra]
    found = []
    for path in named:
        if path.is_absolute() and (path.exists() or path.is_symlink()):
            found.append(Path(os.path.realpath(path)))
    return found


def _hiding(hidden: Sequence[Path], workspace: Path) -> list[str]:
    """bwrap's arguments that put an empty directory (or /dev/null) over each hidden path;
    never over the workspace or a directory that holds it."""
    arguments: list[str] = []
    for path in hidden:
        if path == workspace or path in workspace.parents:
            continue
        if path.is_dir():
            arguments += ["--tmpfs", str(path)]
        else:
            arguments += ["--ro-bind", "/dev/null", str(path)]
    return arguments


def needed_under_tmp(argv: Sequence[str]) -> list[Path]:
    """What the command needs from /tmp, which is private in the sandbox: the command (and
    the virtual environment it belongs to: Python finds its prefix by `pyvenv.cfg`) and the
    files named on its command line (a script, the kernel's `kernel_main.py`) — a Parley or
    a project installed under /tmp still runs. Directories named as arguments are not
    bound: one could hold everything else in /tmp."""
    tmp = Path("/tmp")
    candidates = [Path(argv[0]), Path(os.path.realpath(argv[0]))]
    for command in candidates[:]:
        if (command.parent.parent / "pyvenv.cfg").is_file():
            candidates.append(command.parent.parent)
    candidates += [Path(arg) for arg in argv[1:] if os.path.isabs(arg) and os.path.isfile(arg)]
    needed: list[Path] = []
    for path in candidates:
        if tmp in path.parents and path.exists() and path not in needed:
            needed.append(path)
    return needed


def _bwrap_arguments(
    workspace: Path,
    network: bool,
    writable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    needed: Sequence[Path] = (),
    chdir: Path | None = None,
) -> list[str]:
    arguments = [
        _bwrap() or "bwrap",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        *_hiding(hidden, workspace),
    ]  # fmt: skip
    for path in needed:  # read-only, and before the workspace, whose own bind then wins
        arguments += ["--ro-bind", str(path), str(path)]
    # After /tmp: a workspace (or a writable directory) under /tmp is bound into the private one.
    for directory in _outermost([workspace, *writable]):
        arguments += ["--bind", str(directory), str(directory)]
    arguments += [
        "--chdir", str(chdir or workspace),
        "--unshare-pid",
        "--unshare-ipc",
        "--new-session",  # no controlling terminal to push input into
        "--die-with-parent",
    ]  # fmt: skip
    if not network:
        arguments.append("--unshare-net")
    return arguments


def _outermost(directories: Sequence[Path]) -> list[Path]:
    """The directories to bind writable: each once, and none inside another, whose bind holds
    it already. (Bound by its own path, a root inside a writable one could be a symlink a
    child put there by then, and bwrap would make its target writable.)"""
    kept: list[Path] = []
    for directory in sorted(set(directories), key=lambda path: len(path.parts)):
        if not any(directory == bound or bound in directory.parents for bound in kept):
            kept.append(directory)
    return kept


def _existing_directories(paths: Iterable[str]) -> list[Path]:
    found = []
    for path in paths:
        directory = Path(path).expanduser()
        if directory.is_absolute() and directory.is_dir():
            found.append(directory.resolve())
    return found


def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def _bwrap_probe() -> str | None:
    """None when bwrap runs here with what the sandbox needs; else why not (probed once)."""
    bwrap = _bwrap()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [
        bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
        "--unshare-net", "--die-with-parent", "true",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap cannot run: {error}"
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return f"bwrap cannot run here (no user namespaces?): {detail[0]}"
    return None


def sandbox_status(
    settings: SandboxSettings, environ: Mapping[str, str] | None = None
) -> SandboxStatus:
    environ = os.environ if environ is None else environ
    base = _pids_base()
    if base is None:
        pids, capped = "the system offers no writable pids cgroup", False
    elif settings.pids_max <= 0:
        pids, capped = "pids_max = 0 in config.toml", False
    else:
        pids, capped = f"{settings.pids_max} processes per child ({base.describe()})", True
    if not settings.enabled:
        why_not: str | None = "sandbox.enabled = false in config.toml"
    elif environ.get(SANDBOX_VARIABLE, "").lower() in ("off", "0", "false", "no"):
        why_not = f"{SANDBOX_VARIABLE}={environ[SANDBOX_VARIABLE]}"
    else:
        why_not = _bwrap_probe()
    if why_not is not None:
        return SandboxStatus(False, why_not + _capabilities_note(), pids, capped)
    return SandboxStatus(True, "bubblewrap: own PID namespace, read-only system", pids, capped)


def _capabilities_note() -> str:
    """What the fallback does about this process's capabilities (root's)."""
    if not _has_capabilities():
        return ""
    if shutil.which("setpriv"):
        return "; children get no capabilities (setpriv)"
    return "; setpriv is missing, so children keep this process's capabilities"


def _resolved_command(command: str, env: Mapping[str, str], cwd: Path) -> str:
    """The command's path as the child's PATH finds it: a missing command fails here, in
    words the user understands, not as bwrap's exit."""
    if os.sep in command:
        path = cwd / command
        found = str(path) if os.access(path, os.X_OK) and path.is_file() else None
    else:
        found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "command not found", command)
    return found


def _only_child(pid: int) -> int | None:
    """The one process whose parent is `pid` (None: none, or it is gone)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_bytes()
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid:
                return int(entry.name)
    return None


# --- the fallback: no capabilities ---------------------------------------------------------

_DROP_CAPABILITIES = [
    "setpriv",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
]


def _has_capabilities() -> bool:
    """Whether this process holds capabilities a child would inherit (root does)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16) != 0
    return os.geteuid() == 0 if hasattr(os, "geteuid") else False


# --- pids cgroups ----------------------------------------------------------------------------


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


def _new_group(label: str, pids_max: int) -> PidsGroup | None:
    base = _pids_base()
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
def _pids_base() -> PidsBase | None:
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
