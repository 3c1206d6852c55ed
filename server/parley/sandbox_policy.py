"""What a sandboxed child may reach, declared once: the places it may not read (credentials,
Parley's own data and configuration) and the places it may not write although they lie in
a writable root, because something **outside** the sandbox runs or loads them later (git's
configuration and hooks, direnv's `.envrc`, an editor's workspace settings, shell start-up
files when a root is the home).

The launcher (`sandbox.prepare`) mounts from it, the file tools' gate refuses what it hides
(`tools/confined.py`), and the permission point asks before an edit of what it protects
even where edits are accepted (agent/tool_permission.py). docs/security.md's threat model
names each entry's reason; tests/trust/test_sandbox_policy.py plants every entry and checks it from
a sandboxed child, so a new entry is covered by construction.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
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
    ".devcontainer.json": "a dev container is built and started from it",
    ".husky": "git runs its hooks on your next commit",
    ".pre-commit-config.yaml": "pre-commit runs the hooks it names on your next commit",
    "lefthook.yml": "lefthook runs the hooks it names on your next commit",
    ".lefthook.yml": "lefthook runs the hooks it names on your next commit",
    ".claude": "Claude Code runs the hooks its settings name",
    ".zed": "Zed applies its settings and tasks when it opens this folder",
    ".dir-locals.el": "Emacs applies its variables (and may evaluate them) in this folder",
    ".exrc": "Vim runs it when it starts here (with 'exrc' set)",
    ".nvim.lua": "Neovim runs it when it starts here (with 'exrc' set)",
    "mise.toml": "mise runs its hooks and tasks in this folder",
    ".mise.toml": "mise runs its hooks and tasks in this folder",
}
# How many of the places found below the roots a command's sandbox keeps read-only (the
# first found): each is a mount, and so is each folder on its way (pinned), and a sandbox's
# start grows with its mounts (200 took 0.3 s here, 400 over a second).
FOUND_AT_MOST = 100
# And at most this many mounts, and this many bytes of their paths, for them all: the places
# and the folders pinned on their way (100 places twelve long folders deep made 1,300 mounts
# whose paths passed what the kernel takes on bwrap's command line, and no command started).
FOUND_MOUNTS_AT_MOST = 300
FOUND_PATH_BYTES_AT_MOST = 128 * 1024
# A virtualenv of a root that holds Parley itself: the editor may start Parley's server from
# it (VS Code's extension prefers a trusted workspace's own), with the user's keys.
PARLEY_ENVIRONMENTS = (".venv", "venv")
PARLEY_ENVIRONMENT_REASON = "Parley's server may be started from it, with your keys"
# Where an editor looks for Parley's server in a workspace (even before it exists there).
PARLEY_COMMANDS = tuple(f"{environment}/bin/parley" for environment in PARLEY_ENVIRONMENTS)

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
GIT_CONFIG_SECTION = re.compile(r"^\s*\[([^\]]+)\]")
GIT_CONFIG_MAX_BYTES = 1 << 20
GIT_REFERENCE_REASON = "git runs or reads it: the repository's configuration names it"


def git_directories(root: Path) -> list[Path]:
    """The repository's git directories that git finds from `root`: `.git` itself, or the
    one a `.git` file points to (`gitdir: ./.bare`)."""
    dot_git = root / ".git"
    if os.path.isdir(dot_git):
        return [dot_git]
    try:
        with open(dot_git, "rb") as file:
            first = file.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return []
    if not first.startswith("gitdir:"):
        return []
    named = Path(first.removeprefix("gitdir:").strip())
    return [named if named.is_absolute() else root / named]


def _config_places(text: str) -> Iterator[tuple[str, Path]]:
    """(key, place) of each `hooksPath` of a git config's text, and each `path` of its
    `[include]` and `[includeIf …]` sections (a submodule's `path` names no commands)."""
    section = ""
    for line in text.splitlines():
        header = GIT_CONFIG_SECTION.match(line)
        if header is not None:
            section = header.group(1).strip().lower()
            continue
        match = GIT_CONFIG_PLACE.match(line)
        if match is None:
            continue
        key = match.group(1).lower()
        if key == "hookspath" or section.startswith("include"):
            yield key, Path(match.group(2).strip('"')).expanduser()


def git_places(root: Path) -> list[Path]:
    """The places inside `root` that git runs or reads commands from, found the way git
    finds them: its git directory (a `.git` file's `gitdir:` too) and what that directory's
    `config` names as hooks (`core.hooksPath`, from the work tree) or includes (`[include]
    path`, from the git directory). Resolved."""
    real_root = Path(os.path.realpath(root))
    return [place for place in git_places_anywhere(root) if _inside(place, real_root)]


def git_places_anywhere(root: Path) -> list[Path]:
    """`git_places` of the repository whose work tree is `root`, wherever they are."""
    places: list[Path] = []
    for directory in git_directories(root):
        places.append(directory)
        try:
            with open(directory / "config", "rb") as file:
                text = file.read(GIT_CONFIG_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        places += [
            named if named.is_absolute() else (root if key == "hookspath" else directory) / named
            for key, named in _config_places(text)
        ]
    return [Path(os.path.realpath(place)) for place in places]


def parley_environments(root: Path) -> list[Path]:
    """The virtualenvs inside `root` that hold Parley (`.venv/bin/parley`), and the one this
    server runs from when it lies inside `root` (a checkout of Parley itself)."""
    real_root = Path(os.path.realpath(root))
    found = [
        root / name
        for name in PARLEY_ENVIRONMENTS
        if os.path.lexists(root / name / "bin" / "parley")
    ]
    found.append(Path(sys.prefix))
    resolved = [Path(os.path.realpath(place)) for place in found]
    return [place for place in resolved if _inside(place, real_root)]


def _later_places(root: Path) -> list[tuple[Path, str]]:
    """What runs later in `root` besides RUNS_LATER_IN_ROOT's names: git's places and the
    virtualenvs Parley starts from."""
    places = [(place, GIT_REFERENCE_REASON) for place in git_places(root)]
    places += [(place, PARLEY_ENVIRONMENT_REASON) for place in parley_environments(root)]
    return places


def protected_paths(
    writable: Iterable[Path],
    environ: Mapping[str, str] | None = None,
    *,
    found: Iterable[Path] = (),
) -> list[tuple[Path, str]]:
    """The existing places inside the `writable` directories (resolved) that run later
    outside the sandbox, each with its reason: RUNS_LATER_IN_ROOT in each of them, and
    RUNS_LATER_IN_HOME wherever one of them holds it (a root at the home, `~/.config` made
    writable); and the places `found` deeper (by the turn's snapshots: `sub/.envrc`, a
    nested repository's `.git`), each named in RUNS_LATER_IN_ROOT. Only those whose real
    place is writable (a symlink leading out already leads to a read-only place)."""
    writable = [Path(os.path.realpath(directory)) for directory in writable]
    named = [(root / name, why) for root in writable for name, why in RUNS_LATER_IN_ROOT.items()]
    named += [(home(environ) / name, why) for name, why in RUNS_LATER_IN_HOME.items()]
    named += [place for root in writable for place in _later_places(root)]
    protected: list[tuple[Path, str]] = []
    for path, why in named:
        real = _real_place(path)
        writable_here = real is not None and any(_inside(real, d) for d in writable)
        if writable_here and real not in [known for known, _ in protected]:
            protected.append((real, why))
    return protected + _found_places(found, writable, [known for known, _ in protected])


def _found_places(
    found: Iterable[Path], writable: Sequence[Path], known: list[Path]
) -> list[tuple[Path, str]]:
    """The first FOUND_AT_MOST of the places `found` below the roots that exist and really
    lie in a `writable` directory, with a nested repository's own git places (its hooks
    path, a `.git` file's git directory): each taken while the mounts it adds, itself and
    the folders on its way, keep within FOUND_MOUNTS_AT_MOST and FOUND_PATH_BYTES_AT_MOST."""
    protected: list[tuple[Path, str]] = []
    pinned: set[Path] = set()
    mounts = path_bytes = 0
    for place in itertools.islice(found, FOUND_AT_MOST):
        if place.name not in RUNS_LATER_IN_ROOT:
            continue
        named = [(place, RUNS_LATER_IN_ROOT[place.name])]
        if place.name == ".git":
            named += [(git, GIT_REFERENCE_REASON) for git in git_places_anywhere(place.parent)]
        for path, why in named:
            real = _real_place(path)
            root = next((d for d in writable if real is not None and _inside(real, d)), None)
            if real is None or root is None or real in known:
                continue
            folders = {d for d in real.parents if root in d.parents} - pinned
            mounts += 1 + len(folders)
            path_bytes += sum(len(str(d)) for d in (real, *folders))
            if mounts > FOUND_MOUNTS_AT_MOST or path_bytes > FOUND_PATH_BYTES_AT_MOST:
                return protected
            pinned |= folders
            known.append(real)
            protected.append((real, why))
    return protected


def _real_place(path: Path) -> Path | None:
    """Where `path` really is, or None when nothing is there: not there (to this process: a
    directory it cannot enter), or a link to nothing (bwrap cannot bind what is not)."""
    if not os.path.lexists(path):
        return None
    real = Path(os.path.realpath(path))
    return real if os.path.exists(real) else None


def runs_later(
    place: Path, roots: Iterable[Path], environ: Mapping[str, str] | None = None
) -> str | None:
    """Why `place` (absolute, resolved: as the gate gives it) runs later outside the sandbox,
    or None: it is, or is inside, an entry of RUNS_LATER_IN_ROOT of a root holding it (a
    nested repository's `.git` too; whether it exists yet or not), of what git runs for a
    repository whose work tree holds it (a nested one's hooks path), or of RUNS_LATER_IN_HOME."""
    user_home = Path(os.path.realpath(home(environ)))
    for root in (Path(os.path.realpath(root)) for root in roots):
        if not _inside(place, root):
            continue
        for name, why in RUNS_LATER_IN_ROOT.items():
            if name in place.relative_to(root).parts:
                return why
        if any(_inside(place, root / command) for command in PARLEY_COMMANDS):
            return PARLEY_ENVIRONMENT_REASON
        for named, why in _later_places(root):
            if _inside(place, named):
                return why
        if _in_nested_git_places(place, root):
            return GIT_REFERENCE_REASON
    for name, why in RUNS_LATER_IN_HOME.items():
        if _inside(place, user_home / name):
            return why
    return None


def _in_nested_git_places(place: Path, root: Path) -> bool:
    """Whether `place` is in what git runs for a repository below `root` whose work tree
    holds it (`lib/.githooks` when `lib`'s configuration sets it as its hooks path)."""
    for folder in place.parents:
        if folder == root or root not in folder.parents:
            return False
        if os.path.lexists(folder / ".git") and any(
            _inside(place, named) for named in git_places_anywhere(folder)
        ):
            return True
    return False


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


# config.toml's `[sandbox] hidden`, resolved, as the server was configured
# (`configure_hidden`): the file tools refuse them too.
_configured_hidden: tuple[str, ...] = ()


def configure_hidden(paths: Sequence[str]) -> None:
    """The `[sandbox] hidden` paths of this server's configuration, for the file tools."""
    global _configured_hidden
    expanded = (os.path.expanduser(path) for path in paths)
    _configured_hidden = tuple(os.path.realpath(path) for path in expanded if os.path.isabs(path))


def refused_to_tools(place: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the file tools refuse `place` (absolute, resolved)."""
    hidden = (*never_through_tools(environ), *_configured_hidden)
    return any(_inside_text(place, directory) for directory in hidden)


def _inside(place: Path, directory: Path) -> bool:
    return place == directory or directory in place.parents


def _inside_text(place: str, directory: str) -> bool:
    return place == directory or place.startswith(directory.rstrip("/") + "/")


def _existing_resolved(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_absolute() and os.path.lexists(path):
            real = Path(os.path.realpath(path))
            if real not in found:
                found.append(real)
    return found


# The system's own directories: never a workspace root (a child could write them, as root
# the whole system's configuration), nor anything inside those whose every file is the
# system's (`/etc/nginx`); a project under `/usr/local/src` or `/var/www` may be one.
SYSTEM_DIRECTORIES = (
    *("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/var", "/opt", "/dev", "/run"),
    *("/tmp", "/var/tmp"),
)
SYSTEM_TREES = ("/etc", "/boot", "/proc", "/sys")


def too_broad(root: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """Why `root` (resolved) may not be a workspace root, or None: `/`, a directory that
    holds the home (every file of the user's, other users' homes too), the system's own
    directories, or one inside Parley's own places (which no child may see); nor the home
    itself, whose start-up files and credentials no list can name them all of."""
    user_home = Path(os.path.realpath(home(environ)))
    if root == Path("/"):
        return "it is the root of the file system"
    if root == user_home:
        return "it is your home directory (every start-up file and credential of yours)"
    if root in user_home.parents:
        return f"it holds your home directory ({user_home})"
    if str(root) in SYSTEM_DIRECTORIES or any(_inside(root, Path(t)) for t in SYSTEM_TREES):
        return "it is the system's own directory"
    for place in parley_places(environ):
        real = Path(os.path.realpath(place))
        if _inside(root, real):  # a root that holds them is fine: they stay hidden in it
            return f"it is inside Parley's own data or configuration ({real})"
    return None
