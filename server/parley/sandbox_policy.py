"""What a sandboxed child may reach, declared once: the places it may not read (credentials,
Parley's own data and configuration) and the places it may not write although they lie in
a writable root, because something **outside** the sandbox runs or loads them later (git's
configuration and hooks, direnv's `.envrc`, an editor's workspace settings, shell start-up
files when a root is the home).

The launcher (`sandbox.prepare`) mounts from it, the file tools' gate refuses what it hides
(`tools/confined.py`), and the permission point asks before an edit of what it protects
even where edits are accepted (agent/tool_permission.py). docs/security.md's threat model
names each entry's reason; tests/test_sandbox_policy.py plants every entry and checks it from
a sandboxed child, so a new entry is covered by construction.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# Where the user's credentials usually are, relative to the home directory: hidden from
# every sandboxed child (an empty directory, or /dev/null, in their place) and refused by the
# file tools, so an approved command, an eval or an MCP server cannot read them and hand
# them to the model.
HIDDEN_IN_HOME = (
    ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
    ".config/hub", ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass",
    ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".vault-token",
    ".password-store", ".local/share/keyrings", ".terraform.d/credentials.tfrc.json",
)  # fmt: skip

# System places that hold the user's sockets and session secrets (ssh-agent, gpg-agent,
# the session D-Bus, keyrings): hidden too. (A socket anywhere else is closed by the
# seccomp filter: `parley/seccomp.py`.)
HIDDEN_SYSTEM = ("/run/user",)

# Inside every writable root: what something outside the sandbox runs or loads later, so
# mounted read-only in the sandbox and never edited unasked. Each with the reason the user
# is shown.
RUNS_LATER_IN_ROOT: Mapping[str, str] = {
    ".git": "git runs its hooks and the commands its configuration names (core.fsmonitor, "
    "core.pager, aliases) when you next use git here, and so may your editor in the background",
    ".envrc": "direnv runs it when you next enter this directory",
    ".vscode": "VS Code applies its settings and tasks when it opens this folder",
    ".idea": "JetBrains IDEs apply its settings and run configurations when they open it",
    ".devcontainer": "a dev container is built and started from it",
    ".husky": "git runs its hooks on your next commit",
}

# When a root is the home directory or holds it: the shell's and editors' start-up files
# and the programs on the user's PATH. Relative to the home.
RUNS_LATER_IN_HOME: Mapping[str, str] = {
    name: "your shell runs it when it starts"
    for name in (
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
        ".zshenv", ".zprofile", ".zlogin", ".config/fish", ".inputrc", ".pythonrc",
    )
} | {
    ".gitconfig": "git runs the commands it names everywhere",
    ".config/git": "git runs the commands it names everywhere",
    ".local/bin": "your shell runs the programs in it",
    ".emacs": "Emacs loads it when it starts",
    ".emacs.d": "Emacs loads it when it starts",
    ".config/emacs": "Emacs loads it when it starts",
    ".vimrc": "Vim loads it when it starts",
    ".config/nvim": "Neovim loads it when it starts",
    ".config/autostart": "your desktop runs it when you log in",
    ".config/systemd": "systemd runs the services it names",
    ".config/Code": "VS Code loads its settings and extensions",
}  # fmt: skip


def home(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("HOME") or Path.home())


def parley_places(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Parley's own data (`PARLEY_HOME`: every project's conversations, the command rules)
    and configuration (providers, MCP servers' headers): never readable nor writable by a
    child or a file tool."""
    environ = os.environ if environ is None else environ
    user_home = home(environ)
    data = environ.get("PARLEY_HOME") or Path(
        environ.get("XDG_DATA_HOME") or user_home / ".local" / "share", "parley"
    )
    config = Path(environ.get("XDG_CONFIG_HOME") or user_home / ".config", "parley")
    places = [Path(data), config]
    if explicit := environ.get("PARLEY_CONFIG"):
        places.append(Path(explicit))
    return places


def hidden_paths(extra: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[Path]:
    """What exists of HIDDEN_IN_HOME, HIDDEN_SYSTEM, the runtime directory, Parley's own places
    and the `extra` paths (config.toml's `[sandbox] hidden`), resolved."""
    environ = os.environ if environ is None else environ
    named = [home(environ) / name for name in HIDDEN_IN_HOME]
    named += [Path(path) for path in HIDDEN_SYSTEM]
    if runtime := environ.get("XDG_RUNTIME_DIR"):
        named.append(Path(runtime))
    named += parley_places(environ)
    named += [Path(path).expanduser() for path in extra]
    return _existing_resolved(named)


# In a repository's own configuration: the keys whose value names a place git runs or
# reads commands from (`core.hooksPath = .githooks`, husky's; `[include] path = …`).
GIT_CONFIG_PLACE = re.compile(r"^\s*(hookspath|path)\s*=\s*(.+?)\s*$", re.IGNORECASE)
GIT_CONFIG_MAX_BYTES = 1 << 20
GIT_REFERENCE_REASON = "git runs or reads it: the repository's configuration names it"


def git_config_places(root: Path) -> list[Path]:
    """The places inside `root` that its repository's `.git/config` names as hooks or as
    included configuration: as writable as any file of the root, but run by git."""
    try:
        with open(root / ".git" / "config", "rb") as file:
            text = file.read(GIT_CONFIG_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    places = []
    for line in text.splitlines():
        match = GIT_CONFIG_PLACE.match(line)
        if match is None:
            continue
        value = match.group(2).strip('"')
        named = Path(value).expanduser()
        # git takes a relative hooksPath from the work tree, an include from the .git dir.
        base = root if match.group(1).lower() == "hookspath" else root / ".git"
        place = Path(os.path.realpath(named if named.is_absolute() else base / named))
        if _inside(place, Path(os.path.realpath(root))):
            places.append(place)
    return places


def protected_paths(
    writable: Iterable[Path], environ: Mapping[str, str] | None = None
) -> list[tuple[Path, str]]:
    """The existing places inside the `writable` directories (resolved) that run later
    outside the sandbox, each with its reason: RUNS_LATER_IN_ROOT in each of them, and
    RUNS_LATER_IN_HOME wherever one of them holds it (a root at the home, `~/.config` made
    writable). Only those whose real place is writable (a symlink leading out already leads
    to a read-only place)."""
    writable = [Path(os.path.realpath(directory)) for directory in writable]
    named = [(root / name, why) for root in writable for name, why in RUNS_LATER_IN_ROOT.items()]
    named += [(home(environ) / name, why) for name, why in RUNS_LATER_IN_HOME.items()]
    named += [
        (place, GIT_REFERENCE_REASON) for root in writable for place in git_config_places(root)
    ]
    found: list[tuple[Path, str]] = []
    for path, why in named:
        if not (path.exists() or path.is_symlink()):
            continue
        real = Path(os.path.realpath(path))
        writable_here = any(_inside(real, directory) for directory in writable)
        if writable_here and real not in [known for known, _ in found]:
            found.append((real, why))
    return found


def runs_later(
    place: Path, roots: Iterable[Path], environ: Mapping[str, str] | None = None
) -> str | None:
    """Why `place` (absolute, resolved: as the gate gives it) runs later outside the sandbox,
    or None: it is, or is inside, an entry of RUNS_LATER_IN_ROOT of a root holding it (a
    nested repository's `.git` too; whether it exists yet or not) or of RUNS_LATER_IN_HOME."""
    user_home = Path(os.path.realpath(home(environ)))
    for root in (Path(os.path.realpath(root)) for root in roots):
        if not _inside(place, root):
            continue
        for name, why in RUNS_LATER_IN_ROOT.items():
            if name in place.relative_to(root).parts:
                return why
        if any(_inside(place, named) for named in git_config_places(root)):
            return GIT_REFERENCE_REASON
    for name, why in RUNS_LATER_IN_HOME.items():
        if _inside(place, user_home / name):
            return why
    return None


def never_through_tools(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The places the file tools refuse, whatever the roots: the credentials' usual places
    and Parley's own (absolute and resolved, as text)."""
    environ = os.environ if environ is None else environ
    keys = ("HOME", "PARLEY_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PARLEY_CONFIG")
    return _never_through_tools(tuple(environ.get(key) or "" for key in keys))


@functools.lru_cache(maxsize=8)
def _never_through_tools(key: tuple[str, ...]) -> tuple[str, ...]:
    names = ("HOME", "PARLEY_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PARLEY_CONFIG")
    environ = {name: value for name, value in zip(names, key, strict=True) if value}
    places = [home(environ) / name for name in HIDDEN_IN_HOME] + parley_places(environ)
    return tuple(os.path.realpath(place) for place in places)


def refused_to_tools(place: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the file tools refuse `place` (absolute, resolved)."""
    return any(_inside_text(place, hidden) for hidden in never_through_tools(environ))


def _inside(place: Path, directory: Path) -> bool:
    return place == directory or directory in place.parents


def _inside_text(place: str, directory: str) -> bool:
    return place == directory or place.startswith(directory.rstrip("/") + "/")


def _existing_resolved(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_absolute() and (path.exists() or path.is_symlink()):
            real = Path(os.path.realpath(path))
            if real not in found:
                found.append(real)
    return found


# The system's own directories: never a workspace root (a child could write them, as root
# the whole system's configuration), nor anything inside those whose every file is the
# system's (`/etc/nginx`); a project under `/usr/local/src` or `/var/www` may be one.
SYSTEM_DIRECTORIES = (
    *("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/var", "/opt", "/dev", "/run"),
)
SYSTEM_TREES = ("/etc", "/boot", "/proc", "/sys")


def too_broad(root: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """Why `root` (resolved) may not be a workspace root, or None: `/`, a directory that
    holds the home (every file of the user's, other users' homes too), the system's own
    directories, or one inside Parley's own places (which no child may see). The home itself
    may be one: what runs later there is read-only to children, the credentials hidden."""
    user_home = Path(os.path.realpath(home(environ)))
    if root == Path("/"):
        return "it is the root of the file system"
    if root in user_home.parents:
        return f"it holds your home directory ({user_home})"
    if str(root) in SYSTEM_DIRECTORIES or any(_inside(root, Path(t)) for t in SYSTEM_TREES):
        return "it is the system's own directory"
    for place in parley_places(environ):
        real = Path(os.path.realpath(place))
        if _inside(root, real):  # a root that holds them is fine: they stay hidden in it
            return f"it is inside Parley's own data or configuration ({real})"
    return None
