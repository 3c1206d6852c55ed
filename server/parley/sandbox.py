"""The one way Parley starts a child process: the Python kernel, stdio MCP servers, and
whatever runs next (shell commands).

`prepare(ChildSpec(...), settings)` turns what to run into a `Launch`: the argv, environment
and directory to start it with (any spawner: asyncio, the MCP SDK), plus what ends it.

- **Sandboxed** (bubblewrap, `bwrap`, where it runs): a PID namespace of its own with its own
  `/proc` (the server and every other process are not even visible), `--die-with-parent`, the
  roots writable and the rest of the file system read-only, then what runs later outside the
  sandbox read-only again and the hidden places covered (`child_layout`, from
  `sandbox_policy`), a private `/tmp`, a fresh `/dev`, `/proc/sys` read-only, no network
  unless the settings allow it for that child, no capabilities (root's neither), no Unix
  sockets (`seccomp`), and the environment it is given (an allow-list: `child_env`). Killing
  the `bwrap` process ends every process in the namespace, `setsid` or not.
- **Fallback** (no `bwrap`, no user namespaces, `[sandbox] enabled = false`, or
  `PARLEY_SANDBOX=off`): a process group of its own, the user's rights, a parent-death
  signal; a child of a root server gets no capabilities (`setpriv`), so with the server
  non-dumpable (`make_undumpable`) it cannot read the server's `/proc/<pid>/environ`.

Either way, where the system offers a writable pids controller (cgroup v2 delegated, or v1),
each child runs in a cgroup of its own with `pids.max` (a fork loop is bounded), whose every
process is killed and which is removed when the child ends (`Launch.end`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from parley import pids_groups, sandbox_policy, seccomp
from parley.core.setting_types import Count, PathText
from parley.pids_groups import PidsGroup

logger = logging.getLogger(__name__)

SANDBOX_VARIABLE = "PARLEY_SANDBOX"  # "off" forces the fallback
# What every title of a call that would run a child unsandboxed ends with.
UNSANDBOXED_MARK = " (unsandboxed)"
PROBE_TIMEOUT_SECONDS = 5.0
# bwrap's first step when the seccomp filter applies: the filter's file ($0) opened as fd 9,
# which `--seccomp 9` reads (no spawner has to pass a descriptor).
SECCOMP_FD = 9
WITH_SECCOMP = ("/bin/sh", "-c", f'exec "$@" {SECCOMP_FD}< "$0"')


@attrs.frozen
class SandboxSettings:
    """config.toml's `[sandbox]` (config_file.py structures it; unknown keys are refused):
    whether children are sandboxed, their pids cap, which of them may use the network, what
    they may write, read and get besides the policy's."""

    enabled: bool = True  # False (or PARLEY_SANDBOX=off): every child runs unsandboxed
    pids_max: Count = Count(1024)  # processes per child, where a pids cgroup is offered; 0: no cap
    kernel_network: bool = False  # the Python kernel may use the network
    mcp_network: tuple[str, ...] = ()  # MCP servers (by name; "*": all) that may
    command_network: bool = False  # the model's shell commands (run_command) may
    # Directories children may write besides the workspace (`~/.npm` for `npx`, say);
    # those that do not exist are left out.
    writable: tuple[PathText, ...] = ()
    # Files and directories children may not even read, besides sandbox_policy's.
    hidden: tuple[PathText, ...] = ()
    # Unix-domain sockets allowed (the seccomp filter off): a project whose tests need them.
    unix_sockets: bool = False
    # Variables children get besides child_env's allow-list (never a provider's key).
    env: tuple[str, ...] = ()

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
    # Places below the roots that run later outside the sandbox, found by the turn's
    # snapshots (`sub/.envrc`, a nested `.git`): read-only to it, as each root's own are.
    runs_later: tuple[Path, ...] = ()


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
    where the system offers one. Raises FileNotFoundError when the command does not exist,
    ValueError when an argument holds a NUL character (no process can be given it)."""
    if any("\0" in word for word in spec.argv):
        raise ValueError("a command line cannot hold a NUL character")
    workspace = spec.workspace.resolve()
    command = _resolved_command(spec.argv[0], spec.env, workspace)
    argv: list[str] = [command, *spec.argv[1:]]
    sandboxed = sandbox_status(settings).sandboxed
    if sandboxed:
        layout = child_layout(spec, settings, argv)
        workspace = layout.workspace
        argv = [*_bwrap_arguments(layout, spec.network, spec.cwd), "--", *argv]
        if not settings.unix_sockets and (filter_file := _seccomp_filter()) is not None:
            bwrap, *rest = argv
            argv = [*WITH_SECCOMP, str(filter_file), bwrap, "--seccomp", str(SECCOMP_FD), *rest]
    else:
        argv = [*_fallback_wrapper(), *argv]
    group = pids_groups.new_group(spec.label, settings.pids_max)
    if group is not None:  # join the group before anything else runs, then become the child
        argv = [*pids_groups.JOIN_GROUP, str(group.procs_file), *argv]
    cwd = workspace if spec.cwd is None else spec.cwd
    return Launch(tuple(argv), dict(spec.env), cwd, sandboxed, group)


@attrs.frozen
class Layout:
    """What a sandboxed child's file system is made of, in mount order: the writable
    directories (bound over the read-only system), the directories that lead from them to a
    protected or hidden place (pinned: bound onto themselves), then the places that run later
    outside the sandbox (bound read-only again), then the hidden places (covered last, so
    no bind uncovers them)."""

    workspace: Path
    writable: tuple[Path, ...]
    pinned: tuple[Path, ...]  # bound onto themselves: mount points, never renamed
    protected: tuple[Path, ...]
    hidden: tuple[Path, ...]
    needed: tuple[Path, ...]


def child_layout(spec: ChildSpec, settings: SandboxSettings, argv: Sequence[str] = ()) -> Layout:
    """The file system `spec` gets in the sandbox (also what `parley doctor` shows)."""
    workspace = spec.workspace.resolve()
    # The roots come resolved: one that resolves elsewhere now has a symlink in its place.
    roots = [root for root in spec.writable if root.is_dir() and root.resolve() == root]
    if any(root == spec.workspace or root in spec.workspace.parents for root in roots):
        workspace = spec.workspace  # inside a writable root: its bind holds it, as named
    every_root = [workspace, *roots, *_existing_directories(settings.writable)]
    writable = _outermost(every_root)
    found = spec.runs_later
    protected = [path for path, _ in sandbox_policy.protected_paths(every_root, found=found)]
    hidden = [  # never over a writable directory or what holds one: it would hide it
        path
        for path in sandbox_policy.hidden_paths(settings.hidden)
        if not any(path == root or path in root.parents for root in writable)
    ]
    pinned = _pinned(writable, [*protected, *hidden])
    needed = needed_under_tmp(argv) if argv else []
    return Layout(
        workspace, tuple(writable), tuple(pinned), tuple(protected), tuple(hidden), tuple(needed)
    )


def _pinned(writable: Sequence[Path], places: Sequence[Path]) -> list[Path]:
    """The directories between a writable root and a protected or hidden place in it, outer
    first: each is bound onto itself, a mount point, which no child can rename (`mv .config
    .c` would carry the hide below it away, and leave the name free for another)."""
    pinned: list[Path] = []
    for place in places:
        for root in writable:
            if root not in place.parents:
                continue
            between = [d for d in place.parents if root in d.parents]
            for directory in reversed(between):
                if directory not in pinned and directory.is_dir():
                    pinned.append(directory)
    return sorted(pinned, key=lambda directory: len(directory.parts))


# --- the sandbox ---------------------------------------------------------------------------


def _hiding(hidden: Sequence[Path]) -> list[str]:
    """bwrap's arguments that put an empty directory (or /dev/null) over each hidden path."""
    arguments: list[str] = []
    for path in hidden:
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


def _bwrap_arguments(layout: Layout, network: bool, chdir: Path | None = None) -> list[str]:
    arguments = [
        _bwrap() or "bwrap",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        # bwrap means to cover these read-only, but not everywhere (seen: a root's /proc/sys
        # left writable, and core_pattern with it): covered here, whatever it does.
        "--ro-bind", "/proc/sys", "/proc/sys",
        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
        "--tmpfs", "/tmp",
    ]  # fmt: skip
    for path in layout.needed:  # read-only, and before the workspace, whose own bind then wins
        arguments += ["--ro-bind", str(path), str(path)]
    # After /tmp: a workspace (or a writable directory) under /tmp is bound into the private one.
    for directory in (*layout.writable, *layout.pinned):
        arguments += ["--bind", str(directory), str(directory)]
    for path in layout.protected:  # after the binds, which would cover them
        arguments += ["--ro-bind", str(path), str(path)]
    arguments += _hiding(layout.hidden)  # last: no bind uncovers them
    arguments += [
        "--chdir", str(chdir or layout.workspace),
        "--unshare-pid",
        "--unshare-ipc",
        "--new-session",  # no controlling terminal to push input into
        "--die-with-parent",
        # Root keeps every capability in bwrap unless told: it could unmount the hidden
        # places, remount / writable or enter the server's namespaces.
        "--cap-drop", "ALL",
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
    # The children's own arguments (nothing bound writable, nothing hidden): what works
    # here is what they get.
    nothing = Layout(Path("/"), (), (), (), (), ())
    failure = _failure_of([*_bwrap_arguments(nothing, network=False), "true"])
    return None if failure is None else f"bwrap cannot run here (no user namespaces?): {failure}"


def _failure_of(argv: Sequence[str]) -> str | None:
    """None when `argv` runs and exits 0; else the last line it wrote, or why it did not."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"])[0]
    return None


@functools.cache
def _seccomp_filter() -> Path | None:
    """The seccomp filter's file when bwrap applies it here (probed once), else None."""
    why_not = seccomp_problem()
    if why_not is not None:
        logger.warning("No seccomp filter for sandboxed children: %s", why_not)
        return None
    return seccomp.filter_file()


@functools.cache
def seccomp_problem() -> str | None:
    """Why sandboxed children can open Unix-domain sockets here, or None (they cannot)."""
    filter_file = seccomp.filter_file()
    if filter_file is None:
        return f"no seccomp filter for this architecture ({os.uname().machine})"
    bwrap = _bwrap() or "bwrap"
    probe = [
        *WITH_SECCOMP, str(filter_file), bwrap, "--seccomp", str(SECCOMP_FD), "--ro-bind",
        "/", "/", "--dev", "/dev", "--unshare-net", "--cap-drop", "ALL", "true",
    ]  # fmt: skip
    failure = _failure_of(probe)
    return None if failure is None else f"bwrap could not apply it: {failure}"


def sandbox_status(
    settings: SandboxSettings, environ: Mapping[str, str] | None = None
) -> SandboxStatus:
    environ = os.environ if environ is None else environ
    base = pids_groups.pids_base()
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
    how = "bubblewrap: own PID namespace, no capabilities, read-only system"
    return SandboxStatus(True, how, pids, capped)


def _capabilities_note() -> str:
    """What the fallback does about this process's capabilities (root's)."""
    if not _has_capabilities():
        return ""
    if shutil.which("setpriv"):
        return (
            "; children get no capabilities (setpriv), but as root they can still leave "
            "their pids group and write what root owns"
        )
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


# --- the fallback: no capabilities, no orphans -----------------------------------------------

_DROP_CAPABILITIES = (
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
)


def _fallback_wrapper() -> list[str]:
    """What starts an unsandboxed child: `setpriv` with a parent-death signal (the child is
    killed when the server dies, even by `kill -9`), and for a server that holds
    capabilities (root: it could read the server's environ even when it is not dumpable)
    none of them. Nothing where setpriv is missing (`parley doctor` says so)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    dropped = _DROP_CAPABILITIES if _has_capabilities() else ()
    return [setpriv, "--pdeathsig", "KILL", *dropped, "--"]


def _has_capabilities() -> bool:
    """Whether this process holds capabilities a child would inherit (root does)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16) != 0
    return os.geteuid() == 0 if hasattr(os, "geteuid") else False


def policy_lines(settings: SandboxSettings, workspace: Path) -> list[str]:
    """The sandbox's effective policy for a child run in `workspace`, a line a subject, as
    `parley doctor` prints it: what it may write, what it may not even read, what runs later
    and is read-only, its capabilities and sockets."""
    if not sandbox_status(settings).sandboxed:
        return []
    spec = ChildSpec(("true",), workspace, {}, label="doctor")
    where = child_layout(spec, settings)
    sockets = "open ([sandbox] unix_sockets = true)"
    if not settings.unix_sockets:
        problem = seccomp_problem()
        sockets = "closed (a seccomp filter)" if problem is None else f"OPEN: {problem}"
    return [
        "capabilities: none, root's too (--cap-drop ALL); no new privileges; /proc/sys read-only",
        f"unix sockets: {sockets}",
        "writable: " + _listed(where.writable),
        "read-only, as they run later outside the sandbox: " + _listed(where.protected),
        "hidden: " + _listed(where.hidden),
    ]


def _listed(paths: Sequence[Path]) -> str:
    return ", ".join(str(path) for path in paths) or "none here"
