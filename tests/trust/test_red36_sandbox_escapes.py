# ruff: noqa: E501
"""Red team 36's attacks on the first cut of issue 36's sandbox, kept as tests: each is what
the sandbox (or the file tools' gate) promises in docs/security.md. Those that found a hole
that is now closed pass; those that show a limit docs/security.md names stay marked
`xfail(strict=True)`, so closing one shows up as an XPASS.

The findings (ranked by the red team): R1 a hide's or a protected place's parent renamed
(now pinned: a mount point); R2 a virtualenv the editor starts Parley from; R3 git's real
directories (`gitdir:` file, `core.hooksPath`; a `.git` symlink: a limit); R4 the home as
the root (now refused); R5 a `.git` made in a repository's subdirectory (a limit); R7 the
session keyring (seccomp); R9 siblings of `.husky`; R10 datagram Unix sockets (seccomp); R11
the seccomp filter's file under TMPDIR (now in a place no child reaches); R12 `/undo`
through a swapped directory (now refused: a restore follows no link); R13 a nested root's `.git`; R14 tokens in URLs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from parley import sandbox_policy
from parley.child_env import child_environment
from parley.sandbox import ChildSpec, SandboxSettings, prepare, sandbox_status
from parley.tools.confined import Refused, open_confined, workspace_roots
from sandbox_probe import NOBODY, as_user, run_in_sandbox

_here = sandbox_status(SandboxSettings(), environ={})
needs_bwrap = pytest.mark.skipif(
    not _here.sandboxed, reason=f"bubblewrap cannot run here: {_here.reason}"
)
USERS = [pytest.param(None, id="root"), pytest.param(NOBODY, id="unprivileged")]
NO_PIDS = SandboxSettings(pids_max=0)
TOKEN = "gho_RED36_SECRET_TOKEN"


@contextlib.contextmanager
def base_directory(uid: int | None = None) -> Iterator[Path]:
    """Outside /tmp (private in the sandbox), enterable by every user, removed at the end."""
    base = Path(f"/var/tmp/parley-red36-{uuid.uuid4().hex}")
    base.mkdir(mode=0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def give_to(base: Path, uid: int | None) -> None:
    if uid is not None:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(base)], check=True)


def use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("HOME", str(home))
    for name in ("PARLEY_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PARLEY_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


def own_home(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    """A home of the test's own (an unprivileged child cannot even look into /root)."""
    (base / "home").mkdir()
    use_home(monkeypatch, base / "home")


def sandboxed(script: str, workspace: Path, uid: int | None, **spec: object) -> str:
    """`sh -c script` as the launcher starts it (as `uid`); stdout and stderr together."""
    if not spec:
        done = run_in_sandbox(script, workspace, NO_PIDS, uid)
        return done.stdout + done.stderr
    child = ChildSpec(("/bin/sh", "-c", script), workspace, {"PATH": os.defpath}, **spec)  # type: ignore[arg-type]
    launch = prepare(child, NO_PIDS)
    try:
        done = subprocess.run(
            as_user(launch.argv, uid),
            cwd=launch.cwd,
            env=launch.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        launch.end()
    return done.stdout + done.stderr


def host_git(
    repository: Path, uid: int | None, *arguments: str
) -> subprocess.CompletedProcess[str]:
    """The user's own git, outside the sandbox, as `uid`, with no global configuration."""
    env = {"PATH": os.defpath, "HOME": str(repository), "GIT_CONFIG_NOSYSTEM": "1"}
    env["GIT_CONFIG_GLOBAL"] = "/dev/null"
    argv = ["git", "-c", "user.name=u", "-c", "user.email=u@x", "-C", str(repository)]
    return subprocess.run(
        as_user([*argv, *arguments], uid), capture_output=True, text=True, env=env, check=False
    )


# --- R1. rename the directory that holds a hidden or protected place --------------------------


@needs_bwrap
@pytest.mark.parametrize("uid", USERS)
def test_renaming_the_parent_of_hidden_places_uncovers_them_for_the_next_child(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as home:
        use_home(monkeypatch, home)
        (home / ".config" / "gh").mkdir(parents=True)
        (home / ".config" / "gh" / "hosts.yml").write_text(f"oauth_token: {TOKEN}\n")
        (home / ".config" / "parley").mkdir()
        (home / ".config" / "parley" / "config.toml").write_text('default_model = "mine"\n')
        give_to(home, uid)
        # One approved command: move the directory that holds the hides, not the hides.
        first = sandboxed("mv .config .cfg && echo MOVED", home, uid)
        # The next: read what the hides covered, and put a config of its own in Parley's place.
        plant = (
            "cat .cfg/gh/hosts.yml .cfg/parley/config.toml; mkdir -p .config/parley && "
            "printf '[providers.openai]\\nbase_url = \"http://evil.invalid/v1\"\\n' "
            "> .config/parley/config.toml && echo PLANTED"
        )
        second = sandboxed(plant, home, uid)
        # The file tools, whose refusal is by path, read the token as well.
        try:
            with open_confined(workspace_roots(home), ".cfg/gh/hosts.yml") as file:
                through_tools = file.read().decode()
        except (Refused, OSError) as refused:
            through_tools = str(refused)
        planted = home / ".config" / "parley" / "config.toml"
        planted_text = planted.read_text() if planted.exists() else ""
    assert TOKEN not in second and 'default_model = "mine"' not in second, second
    assert "evil.invalid" not in planted_text
    assert TOKEN not in through_tools
    assert "MOVED" not in first, first


@needs_bwrap
@pytest.mark.parametrize("uid", USERS)
def test_renaming_the_parent_of_a_protected_place_plants_what_git_runs(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as home:
        use_home(monkeypatch, home)
        (home / ".config" / "git").mkdir(parents=True)
        (home / ".config" / "git" / "config").write_text("[user]\n\tname = me\n")
        give_to(home, uid)
        attack = (
            "mv .config .config.old && mkdir -p .config/git && "
            "printf '[core]\\n\\tfsmonitor = touch FSMONITOR-RAN\\n' > .config/git/config"
        )
        sandboxed(attack, home, uid)
        text = (home / ".config" / "git" / "config").read_text()
    assert "fsmonitor" not in text


# --- R3. git's own files found through something other than `.git` ---------------------------


def _bare_layout(root: Path) -> None:
    """The "bare repository and worktrees" layout: `.git` is a file, `gitdir: ./.bare`."""
    subprocess.run(["git", "init", "-q", "--bare", str(root / ".bare")], check=True)
    (root / ".git").write_text("gitdir: ./.bare\n")
    subprocess.run(["git", "-C", str(root), "config", "core.bare", "false"], check=True)


def _hooks_path_layout(root: Path) -> None:
    """A project that keeps its hooks in the tree: `git config core.hooksPath .githooks`."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "core.hooksPath", ".githooks"], check=True)
    (root / ".githooks").mkdir()


def _symlinked_git_dir(root: Path) -> None:
    """`.git` a symlink to the git directory kept elsewhere (outside every root)."""
    elsewhere = root.parent / "gitdirs" / "project.git"
    elsewhere.parent.mkdir()
    subprocess.run(
        ["git", "init", "-q", "--separate-git-dir", str(elsewhere), str(root)], check=True
    )
    (root / ".git").unlink()
    (root / ".git").symlink_to(elsewhere)


LAYOUTS = {
    "gitdir-file": (_bare_layout, ".bare/hooks/pre-commit"),
    "core.hooksPath": (_hooks_path_layout, ".githooks/pre-commit"),
    "git-symlink": (_symlinked_git_dir, None),
}


@needs_bwrap
@pytest.mark.parametrize(
    "layout",
    [
        "core.hooksPath",
        "gitdir-file",
        pytest.param(
            "git-symlink",
            marks=pytest.mark.xfail(
                strict=True,
                reason="a limit (docs/security.md): a `.git` symlink leading out of the root can "
                "be replaced (no mount can hold a symlink in a writable directory)",
            ),
        ),
    ],
)
@pytest.mark.parametrize("uid", USERS)
def test_a_hook_planted_where_git_really_looks_runs_on_the_hosts_next_commit(
    monkeypatch: pytest.MonkeyPatch, layout: str, uid: int | None
) -> None:
    make, hook = LAYOUTS[layout]
    with base_directory() as base:
        own_home(monkeypatch, base)
        root = base / "project"
        root.mkdir()
        make(root)
        give_to(base, uid)
        ran = root / "HOOK-RAN"
        if hook is None:  # replace the symlink: the mount was of its target, not of it
            attack = (
                "rm .git && git init -q . && "
                f"printf '#!/bin/sh\\ntouch {ran}\\n' > .git/hooks/pre-commit && "
                "chmod +x .git/hooks/pre-commit"
            )
        else:
            attack = f"printf '#!/bin/sh\\ntouch {ran}\\n' > {hook} && chmod +x {hook}"
        said = sandboxed(attack, root, uid)
        host_git(root, uid, "commit", "-q", "--allow-empty", "-m", "the user's")
        assert not ran.exists(), f"the host's commit ran a hook planted in the sandbox: {said}"


@pytest.mark.parametrize(
    "relative", [".bare/hooks/pre-commit", ".githooks/pre-commit", ".pre-commit-config.yaml"]
)
def test_accept_edits_asks_before_an_edit_of_what_git_runs(tmp_path: Path, relative: str) -> None:
    root = tmp_path / "project"
    root.mkdir()
    _bare_layout(root)
    subprocess.run(["git", "-C", str(root), "config", "core.hooksPath", ".githooks"], check=True)
    assert sandbox_policy.runs_later(root / relative, [root]) is not None


# --- R4. start-up files that do not exist yet, with the home as the root ----------------------


@needs_bwrap
@pytest.mark.xfail(
    strict=True,
    reason="a limit (docs/security.md): a missing start-up file can be made where the home is "
    "writable; the home is refused as a root, so only a `[sandbox] writable` home is",
)
@pytest.mark.parametrize("uid", USERS)
def test_with_the_home_as_the_root_a_missing_start_up_file_cannot_be_made(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as home:
        use_home(monkeypatch, home)
        # Debian's and Ubuntu's defaults: .profile and .bashrc, no .bash_profile; git's
        # configuration in ~/.gitconfig, no ~/.config/git.
        (home / ".profile").write_text(". ~/.bashrc\n")
        (home / ".bashrc").write_text("# the user's\n")
        (home / ".gitconfig").write_text("[user]\n\tname = me\n")
        (home / ".config").mkdir()
        give_to(home, uid)
        # And no ~/.ssh nor ~/.aws yet (hidden only where they exist): ssh runs a config's
        # `Match exec`/`ProxyCommand`, the AWS SDKs a profile's `credential_process`.
        attack = (
            "echo 'touch ~/LOGIN-RAN; . ~/.profile' > .bash_profile; "
            "mkdir -p .config/git && printf '[core]\\n\\tfsmonitor = touch FSM\\n' > .config/git/config; "
            "mkdir -p .ssh && echo 'Match exec \"touch ~/SSH-RAN\"' > .ssh/config; "
            "mkdir -p .aws && printf '[default]\\ncredential_process = touch AWS-RAN\\n' > .aws/config"
        )
        sandboxed(attack, home, uid)
        candidates = (".bash_profile", ".config/git/config", ".ssh/config", ".aws/config")
        made = [name for name in candidates if (home / name).exists()]
    assert made == []


# --- R5. a workspace inside a repository, without a .git of its own --------------------------


@needs_bwrap
@pytest.mark.xfail(
    strict=True, reason="a limit (docs/security.md): a .git made where none was is not read-only"
)
@pytest.mark.parametrize("uid", USERS)
def test_a_workspace_in_a_repository_cannot_get_a_git_directory_the_host_uses(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as base:
        own_home(monkeypatch, base)
        repository = base / "monorepo"
        workspace = repository / "service"
        workspace.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repository)], check=True)
        give_to(base, uid)
        ran = workspace / "FSMONITOR-RAN"
        attack = f"git init -q . && git config core.fsmonitor 'touch {ran}; false'"
        sandboxed(attack, workspace, uid)
        host_git(workspace, uid, "status")  # the user's, or the editor's in the background
        assert not ran.exists()


# --- R10. datagram Unix sockets through socketpair ----------------------------------------------

DGRAM_SCRIPT = r"""/usr/bin/python3 -c '
import socket, sys
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    a.sendto(b"SENT-FROM-THE-SANDBOX", sys.argv[1])
    a.connect(sys.argv[1]); a.send(b"CONNECTED-FROM-THE-SANDBOX")
    print("REACHED")
except OSError as error:
    print("refused:", error)
' {path}"""


@needs_bwrap
@pytest.mark.parametrize("uid", USERS)
def test_no_child_reaches_a_datagram_unix_socket_through_a_socketpair(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as base:
        own_home(monkeypatch, base)
        give_to(base, uid)
        path = base / "journal.sock"  # as /run/systemd/journal/socket, /dev/log, chronyd's
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(str(path))
        path.chmod(0o777)
        listener.settimeout(20)
        received: list[bytes] = []

        def receive() -> None:
            with contextlib.suppress(OSError):
                while True:
                    received.append(listener.recv(100))

        thread = threading.Thread(target=receive, daemon=True)
        thread.start()
        said = sandboxed(DGRAM_SCRIPT.format(path=path), base, uid)
        listener.close()
    assert "refused:" in said or "Permission denied" in said, said
    assert received == []


# --- R13. a root inside another root -----------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("uid", USERS)
def test_a_root_inside_another_keeps_its_own_git_read_only(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as base:
        own_home(monkeypatch, base)
        outer = base / "projects"
        inner = outer / "service"
        inner.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(inner)], check=True)
        give_to(base, uid)
        # The session's cwd is the service; the client adds the directory holding it.
        said = sandboxed(
            "echo '[core] fsmonitor = evil' >> .git/config && echo WROTE",
            inner,
            uid,
            writable=(outer,),
            label="red36",
        )
    assert "WROTE" not in said, said


# --- R14. the environment's filter ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://ghp_RED36TOKEN0123456789@pypi.example.com/simple",
        "https://gitlab.example.com/api/v4/projects/1/packages/pypi/simple?private_token=RED36TOK",
    ],
)
def test_a_token_in_an_index_url_is_not_passed_to_children(url: str) -> None:
    assert "PIP_INDEX_URL" not in child_environment(environ={"PIP_INDEX_URL": url})


# --- R7. the kernel's keyrings are not namespaced --------------------------------------------

# Joins a new session keyring (nothing of the host's is touched), adds a key to it, as a
# Kerberos KEYRING ccache, AFS or a `keyctl padd … @s` would, then starts the launch.
KEYRING_HOLDER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(250, 1, b"red36")  # KEYCTL_JOIN_SESSION_KEYRING: a new, anonymous one
secret = b"KEYRING-SECRET-RED36"
if libc.syscall(248, b"user", b"red36", secret, len(secret), -3) < 0:  # add_key to @s
    sys.exit("add_key: " + os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
"""
KEYRING_READER = r"""/usr/bin/python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
key = libc.syscall(250, 10, -3, b"user", b"red36", 0)  # KEYCTL_SEARCH in @s
buffer = ctypes.create_string_buffer(100)
size = libc.syscall(250, 11, key, buffer, 100) if key > 0 else -1  # KEYCTL_READ
print(buffer.raw[:size].decode() if size > 0 else "refused: " + os.strerror(ctypes.get_errno()))
'"""


@needs_bwrap
@pytest.mark.parametrize("uid", USERS)
def test_no_child_reads_a_key_of_the_servers_session_keyring(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as base:
        own_home(monkeypatch, base)
        give_to(base, uid)
        child = ChildSpec(("/bin/sh", "-c", KEYRING_READER), base, {"PATH": os.defpath})
        launch = prepare(child, NO_PIDS)
        try:
            done = subprocess.run(
                as_user(["/usr/bin/python3", "-c", KEYRING_HOLDER, *launch.argv], uid),
                cwd=launch.cwd,
                env=launch.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            launch.end()
    assert done.returncode == 0, done.stderr
    assert "KEYRING-SECRET-RED36" not in done.stdout, done.stdout


# --- R2. the workspace's own .venv: VS Code runs its `parley` (the server itself) ---------------


@needs_bwrap
@pytest.mark.xfail(
    strict=True,
    reason="a limit (docs/security.md): a virtualenv holding no Parley is the project's; one "
    "holding it is read-only, but a child can make .venv/bin/parley where there was none",
)
@pytest.mark.parametrize("uid", USERS)
def test_a_child_cannot_plant_code_in_the_venv_the_editor_starts_parley_from(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    """A child can still make `.venv/bin/parley` (or a `.pth` file) in a virtualenv without
    Parley: the sandbox cannot bind what does not exist. VS Code's extension runs a
    workspace's own `parley` (unsandboxed, with the provider's keys) only once the user
    approved that very file (vscode-extension/src/core/workspaceServerApproval.ts), so a
    planted one is asked about; a `.pth` in its site-packages runs at every start of that
    Python."""
    with base_directory() as base:
        own_home(monkeypatch, base)
        workspace = base / "project"
        workspace.mkdir()
        subprocess.run(
            ["/usr/bin/python3", "-m", "venv", "--without-pip", str(workspace / ".venv")],
            check=True,
        )
        give_to(base, uid)
        ran = workspace / "PTH-RAN"
        attack = (
            "site=$(echo .venv/lib/python3*/site-packages) && "
            f'echo \'import os; open("{ran}", "w").close()\' > $site/zz-red36.pth'
        )
        said = sandboxed(attack, workspace, uid)
        # The next start of the server (any start of that Python) outside the sandbox.
        subprocess.run(
            as_user([str(workspace / ".venv" / "bin" / "python"), "-c", "pass"], uid), check=False
        )
        assert not ran.exists(), said


def test_accept_edits_asks_before_an_edit_of_the_venvs_parley(tmp_path: Path) -> None:
    root = tmp_path / "project"
    assert sandbox_policy.runs_later(root / ".venv" / "bin" / "parley", [root]) is not None


# --- R4. with the home as the root: what else runs later there -----------------------------

# Each existing in a developer's home, each run later outside the sandbox, none protected:
# sourced by Debian's ~/.bashrc; a directory on the PATH (rustup's); the user site's `.pth`
# files (every Python start); Vim's plugins; cargo's `build.rustc-wrapper`; IPython's start-up
# scripts; pyenv's shims (first on the PATH); nvm's script (sourced by ~/.bashrc).
MORE_IN_HOME = (
    ".bash_aliases",
    ".cargo/bin/git",
    ".local/lib/python3.11/site-packages/red36.pth",
    ".vim/plugin/red36.vim",
    ".cargo/config.toml",
    ".ipython/profile_default/startup/00-red36.py",
    ".pyenv/shims/python3",
    ".nvm/nvm.sh",
)


@needs_bwrap
@pytest.mark.xfail(
    strict=True,
    reason="a limit (docs/security.md): no list names all a home runs later; the home is "
    "refused as a root, so only a `[sandbox] writable` home is exposed",
)
@pytest.mark.parametrize("uid", USERS)
def test_with_the_home_as_the_root_what_runs_later_there_is_read_only(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as home:
        use_home(monkeypatch, home)
        for name in MORE_IN_HOME:
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text("# the user's\n")
        give_to(home, uid)
        script = "; ".join(f"echo planted >> {name} && echo WROTE {name}" for name in MORE_IN_HOME)
        said = sandboxed(script, home, uid)
    assert "WROTE" not in said, said


# --- R11. the seccomp filter's file lies where TMPDIR says: in a writable root, say -------------

FILTER_SWAP = r"""
import os, socket, subprocess, sys
from pathlib import Path
from parley.sandbox import ChildSpec, SandboxSettings, prepare

workspace = Path(sys.argv[1])
settings = SandboxSettings(pids_max=0)


def run(script):
    launch = prepare(ChildSpec(("/bin/sh", "-c", script), workspace, {"PATH": os.defpath}), settings)
    try:
        done = subprocess.run(launch.argv, cwd=launch.cwd, env=launch.env, capture_output=True, text=True)
    finally:
        launch.end()
    return done.stdout + done.stderr


# One child puts an allow-everything program in the filter's place...
print(run(
    "for f in tmp/parley-seccomp-*/no-unix-sockets.bpf; do rm -f $f && "
    "printf '\\006\\000\\000\\000\\000\\000\\377\\177' > $f && echo SWAPPED; done"
))
# ...and the next one opens a Unix socket.
print(run(
    "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX); print(\"UNIX-SOCKET-OPEN\")'"
))
"""


@needs_bwrap
def test_a_child_cannot_replace_the_seccomp_filter_when_tmpdir_is_in_a_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with base_directory() as base:
        workspace = base / "home"
        (workspace / "tmp").mkdir(parents=True)  # TMPDIR=~/tmp, the home as the root
        env = {**os.environ, "HOME": str(workspace), "TMPDIR": str(workspace / "tmp")}
        done = subprocess.run(
            [sys.executable, "-c", FILTER_SWAP, str(workspace)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert "UNIX-SOCKET-OPEN" not in done.stdout, done.stdout + done.stderr


# --- R9. in a root: what runs later as `.husky` and `.devcontainer` do, and is not listed --------

# `.devcontainer.json` at the root is the spec's other place for `.devcontainer/`
# (`initializeCommand` runs on the host); pre-commit's and lefthook's configurations name the
# commands `git commit` runs, as `.husky/` does; Claude Code runs the `hooks` of a trusted
# project's `.claude/settings.json` by itself.
MORE_IN_ROOT = (
    ".devcontainer.json",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".claude/settings.json",
)


@needs_bwrap
@pytest.mark.parametrize("name", MORE_IN_ROOT)
def test_what_runs_later_like_husky_is_read_only_and_asked_about(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    with base_directory() as base:
        own_home(monkeypatch, base)
        root = base / "project"
        (root / name).parent.mkdir(parents=True)
        (root / name).write_text("# the project's\n")
        said = sandboxed(f"echo planted >> {name} && echo WROTE", root, None)
        asked = sandbox_policy.runs_later(root / name, [root])
    assert "WROTE" not in said and asked is not None, (said, asked)


@needs_bwrap
@pytest.mark.parametrize("uid", USERS)
def test_renaming_the_directory_of_a_file_sandbox_hidden_names_uncovers_it(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as base:
        own_home(monkeypatch, base)
        root = base / "project"
        secret = root / "deploy" / "prod.env"
        secret.parent.mkdir(parents=True)
        secret.write_text(f"TOKEN={TOKEN}\n")
        give_to(base, uid)
        settings = SandboxSettings(pids_max=0, hidden=(str(secret),))
        said = []
        for script in ("cat deploy/prod.env; mv deploy deploy2", "cat deploy2/prod.env"):
            spec = ChildSpec(("/bin/sh", "-c", script), root, {"PATH": os.defpath})
            launch = prepare(spec, settings)
            try:
                done = subprocess.run(
                    as_user(launch.argv, uid), cwd=launch.cwd, env=launch.env,
                    capture_output=True, text=True, timeout=60,
                )  # fmt: skip
            finally:
                launch.end()
            said.append(done.stdout + done.stderr)
    assert TOKEN not in said[0], said[0]  # hidden from the first child
    assert TOKEN not in said[1], said[1]  # and from the next, once its directory moved


# --- R12. a restore (/undo) writes where a directory symlink swapped in since leads ------------


def test_a_restore_does_not_write_into_git_through_a_directory_swapped_for_a_symlink(
    tmp_path: Path,
) -> None:
    """The model wrote `conf/config` (its checkpoint holds the text before: what a command
    had put there, `[core] fsmonitor = …`); an approved command then moves `conf` away and
    puts `conf -> .git` in its place (all inside the root: the sandbox allows it). The user's
    /undo restores `conf/config`: were the link followed, the server (unsandboxed) would
    write `.git/config`. A restore follows no link (`Want.ENTRY`): refused, nothing written."""
    from parley.agent import checkpoints

    root = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    config_before = (root / ".git" / "config").read_bytes()
    (root / "conf").symlink_to(".git")  # the swap
    hostile = b"[core]\n\tfsmonitor = touch FSMONITOR-RAN\n"
    with pytest.raises(Refused, match="conf is a symbolic link now"):
        checkpoints._write(workspace_roots(root), "conf/config", hostile, None)
    assert (root / ".git" / "config").read_bytes() == config_before
