"""The sandbox's policy as data, over all of it (issues 36 and 44): every place
`parley/sandbox_policy.py` hides is planted and checked unreadable from a sandboxed child,
every place it protects (what runs later outside the sandbox) planted and checked
unwritable and unmovable though it lies in a writable root — the tables are read from the
policy itself, so a new entry is covered by construction. As root and as an unprivileged
user (`setpriv`), for any root layout (the home as the root, a project in the home, one
outside it, a symlinked root, a second root, a writable `~/.config`).

Then what the sandbox takes away from every child whoever runs it: capabilities (root's
too), `/proc/sys`, mounts, Unix-domain sockets; and the environment's allow-list.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parley import sandbox_policy
from parley.child_env import CHILD_VARIABLES, child_environment, mcp_server_environment
from parley.sandbox import ChildSpec, SandboxSettings, child_layout, sandbox_status
from sandbox_probe import NOBODY, probe, run_in_sandbox

SECRET = "SECRET-CONTENT-0123"
_here = sandbox_status(SandboxSettings(), environ={})
needs_bwrap = pytest.mark.skipif(
    not _here.sandboxed, reason=f"bubblewrap cannot run here: {_here.reason}"
)
pytestmark = needs_bwrap

# Each case as root (the suite's user here) and as an unprivileged user.
USERS = [pytest.param(None, id="root"), pytest.param(NOBODY, id="unprivileged")]
# No pids group: an unprivileged child cannot join root's.
NO_PIDS = SandboxSettings(pids_max=0)


@contextlib.contextmanager
def base_directory() -> Iterator[Path]:
    """A directory outside /tmp (the sandbox's /tmp is private: what lies there is not even
    seen), every user may enter, removed at the end."""
    base = Path(f"/var/tmp/parley-policy-{uuid.uuid4().hex}")
    base.mkdir(mode=0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def plant(path: Path, as_directory: bool) -> None:
    """`path` as a directory holding a secret file, or as a secret file."""
    if as_directory:
        path.mkdir(parents=True, exist_ok=True)
        (path / "secret").write_text(SECRET)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SECRET)


def give_to(base: Path, uid: int | None) -> None:
    if uid is not None:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(base)], check=True)


def use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Parley's places as a user with this home has them (defaults under it)."""
    monkeypatch.setenv("HOME", str(home))
    for name in ("PARLEY_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PARLEY_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


# What docs/security.md promises at the least, whatever the policy's tables say: an entry
# taken out of them by mistake is still planted and checked.
PROMISED_HIDDEN = (
    ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass",
)  # fmt: skip
PROMISED_IN_ROOT = (".git", ".envrc", ".vscode", ".idea", ".devcontainer")
PROMISED_IN_HOME = (".bashrc", ".profile", ".zshrc", ".gitconfig", ".config/git", ".local/bin")


def planted_policy(home: Path, roots: list[Path], as_directory: bool) -> tuple[list, list]:
    """Every hidden place of the policy (in `home`, and Parley's own) and every place it
    protects (in each root, and in the home), planted; (hidden, protected) paths."""
    hidden_names = {*sandbox_policy.HIDDEN_IN_HOME, *PROMISED_HIDDEN}
    hidden = [home / name for name in sorted(hidden_names)]
    hidden += sandbox_policy.parley_places()
    in_root = {*sandbox_policy.RUNS_LATER_IN_ROOT, *PROMISED_IN_ROOT}
    in_home = {*sandbox_policy.RUNS_LATER_IN_HOME, *PROMISED_IN_HOME}
    protected = [root / name for root in roots for name in sorted(in_root)]
    protected += [home / name for name in sorted(in_home)]
    for path in [*hidden, *protected]:
        plant(path, as_directory)
    return hidden, protected


def assert_hidden(path: Path, answer: str) -> None:
    assert SECRET not in answer and "secret" not in answer.split(), (path, answer)


def assert_protected(path: Path, write: str, rename: str, read: str) -> None:
    assert write != "ok", f"{path} was writable"
    assert rename != "ok", f"{path} could be moved aside"
    still_readable = SECRET in read or "secret" in read.split()  # a file's text, a listing
    assert read.startswith("ok:") and still_readable, (path, read)


def check_layout(
    home: Path,
    roots: list[Path],
    hidden: list[Path],
    protected: list[Path],
    settings: SandboxSettings,
    uid: int | None,
    writable_home_dirs: list[Path] = (),  # type: ignore[assignment]
) -> None:
    """From a child in the sandbox of `roots`: each hidden place unreadable; each protected
    one that lies in a writable directory unwritable, unmovable, readable; an ordinary file
    of each root writable."""
    writable = [*roots, *writable_home_dirs]
    in_writable = [p for p in protected if any(d == p or d in p.parents for d in writable)]
    ordinary = [root / "src.py" for root in roots]
    for path in ordinary:
        path.write_text("x = 1\n")
    give_to(home.parent, uid)
    checks = [("read", str(p)) for p in hidden]
    for path in in_writable:
        checks += [("write", str(path)), ("rename", str(path)), ("read", str(path))]
    checks += [("write", str(path)) for path in ordinary]
    answers = iter(probe(checks, roots[0], settings, writable=roots[1:], uid=uid))
    for path in hidden:
        assert_hidden(path, next(answers))
    for path in in_writable:
        assert_protected(path, next(answers), next(answers), next(answers))
    assert [next(answers) for _ in ordinary] == ["ok"] * len(ordinary)
    for path in in_writable:  # and nothing reached the host
        text = (path / "secret") if path.is_dir() else path
        assert text.read_text() == SECRET and not (path / "planted").exists()


@pytest.mark.parametrize("as_directory", [True, False], ids=["directories", "files"])
@pytest.mark.parametrize("uid", USERS)
def test_with_the_home_as_the_root_every_hidden_place_stays_hidden_and_protected_read_only(
    monkeypatch: pytest.MonkeyPatch, uid: int | None, as_directory: bool
) -> None:
    """The hardest layout: the root is the home, so its writable bind covers every place the
    policy names; the hides and the protections must come after it."""
    with base_directory() as base:
        home = base / "home"
        use_home(monkeypatch, home)
        hidden, protected = planted_policy(home, [home], as_directory)
        configured = home / "project-secrets"
        plant(configured, as_directory)
        settings = SandboxSettings(pids_max=0, hidden=(str(configured),))
        check_layout(home, [home], [*hidden, configured], protected, settings, uid)


LAYOUTS = st.fixed_dictionaries(
    {
        "where": st.sampled_from(["home", "in-home", "outside-home"]),
        "symlinked": st.booleans(),
        "second_root": st.booleans(),
        "writable_config": st.booleans(),
        "as_directory": st.booleans(),
        "uid": st.sampled_from([None, NOBODY]),
    }
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(layout=LAYOUTS)
def test_for_any_root_layout_no_hidden_place_is_readable_nor_protected_one_writable(
    monkeypatch: pytest.MonkeyPatch, layout: dict
) -> None:
    with base_directory() as base:
        home = base / "home"
        home.mkdir()
        use_home(monkeypatch, home)
        root = {"home": home, "in-home": home / "proj", "outside-home": base / "proj"}
        workspace = root[layout["where"]]
        workspace.mkdir(exist_ok=True)
        roots = [workspace]
        if layout["second_root"]:
            roots.append(base / "other")
            roots[-1].mkdir()
        hidden, protected = planted_policy(home, roots, layout["as_directory"])
        writable_home = [home / ".config"] if layout["writable_config"] else []
        settings = SandboxSettings(pids_max=0, writable=tuple(map(str, writable_home)))
        if layout["symlinked"]:  # the root named through a symlink: the launcher resolves it
            link = base / "link"
            link.symlink_to(workspace)
            roots[0] = link.resolve()
        check_layout(
            home,
            roots,
            hidden,
            protected,
            settings,
            layout["uid"],
            writable_home_dirs=writable_home,
        )


def test_a_protected_symlink_is_protected_where_it_leads_inside_the_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`.envrc` as a symlink to a file in the root: that file is what direnv runs."""
    with base_directory() as base:
        use_home(monkeypatch, base / "home")
        workspace = base / "proj"
        plant(workspace / "tools" / "env.sh", False)
        (workspace / ".envrc").symlink_to("tools/env.sh")
        answers = probe(
            [("write", str(workspace / "tools" / "env.sh")), ("write", str(workspace / "x"))],
            workspace,
            NO_PIDS,
        )
        assert answers[0] != "ok" and answers[1] == "ok"


def test_what_the_repositorys_git_config_names_is_protected_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """husky's `core.hooksPath = .husky`-like settings and an `[include]` of a work-tree
    file: git runs (or reads commands from) those places, so they are read-only too."""
    with base_directory() as base:
        use_home(monkeypatch, base / "home")
        workspace = base / "proj"
        (workspace / ".git").mkdir(parents=True)
        (workspace / ".git" / "config").write_text(
            '[core]\n\thooksPath = .githooks\n[include]\n\tpath = "../gitconfig.local"\n'
        )
        plant(workspace / ".githooks", True)
        plant(workspace / "gitconfig.local", False)
        places = [workspace / ".githooks", workspace / "gitconfig.local"]
        checks = [("write", str(place)) for place in places] + [("write", str(workspace / "x"))]
        answers = probe(checks, workspace, NO_PIDS)
        assert answers[0] != "ok" and answers[1] != "ok" and answers[2] == "ok", answers
        why = sandbox_policy.runs_later(workspace / ".githooks" / "pre-commit", [workspace])
        assert why == sandbox_policy.GIT_REFERENCE_REASON


# --- what every child loses -----------------------------------------------------------------

KERNEL_SURFACES = r"""
grep -E '^(CapEff|CapPrm|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
(echo core > /proc/sys/kernel/core_pattern) 2>/dev/null && echo WROTE-CORE-PATTERN
umount -l /proc 2>/dev/null && echo UNMOUNTED
mount -o remount,bind,rw / 2>/dev/null && echo REMOUNTED
(echo x > /sys/kernel/uevent_helper) 2>/dev/null && echo WROTE-SYS
nsenter -t 1 -m -n true 2>/dev/null && echo ENTERED
echo done
"""


@pytest.mark.parametrize("uid", USERS)
def test_no_child_keeps_a_capability_or_writes_the_kernels_settings(
    monkeypatch: pytest.MonkeyPatch, uid: int | None
) -> None:
    with base_directory() as base:
        use_home(monkeypatch, base)  # the user's own home (root's is not the other user's)
        give_to(base, uid)
        before = Path("/proc/sys/kernel/core_pattern").read_text()
        done = run_in_sandbox(KERNEL_SURFACES, base, NO_PIDS, uid)
    status = dict(line.split(":\t") for line in done.stdout.splitlines() if ":\t" in line)
    assert status["CapEff"] == status["CapPrm"] == status["CapAmb"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    assert done.stdout.splitlines()[-1] == "done", done.stdout
    for escaped in ("WROTE-CORE-PATTERN", "UNMOUNTED", "REMOUNTED", "WROTE-SYS", "ENTERED"):
        assert escaped not in done.stdout
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


@contextlib.contextmanager
def unix_server(path: Path) -> Iterator[None]:
    """A Unix-domain socket listening at `path` that answers every connection with SECRET
    (an ssh-agent, a D-Bus, a docker.sock would answer with worse)."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o777)
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.sendall(SECRET.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        server.close()


CONNECT = (
    '/usr/bin/python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); '
    's.connect(sys.argv[1]); print(s.recv(100).decode())" {path} 2>&1 | tail -n 1'
)
STILL_WORKS = (
    '/usr/bin/python3 -c "import socket, asyncio; a, b = socket.socketpair(); '
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
    "c = socket.create_connection(s.getsockname()); asyncio.run(asyncio.sleep(0)); "
    "print('pairs, loopback and asyncio work')\""
)


def test_no_child_reaches_a_unix_socket_wherever_it_lies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket in the workspace itself and one elsewhere on the machine: no connection,
    by the seccomp filter (no mount could hide every socket); `[sandbox] unix_sockets =
    true` opens them (so the test sees the difference)."""
    with base_directory() as base:
        use_home(monkeypatch, base / "home")
        outside = base / "agent.sock"
        inside = tmp_path / "app.sock"
        with unix_server(outside), unix_server(inside):
            script = "\n".join(CONNECT.format(path=path) for path in (outside, inside))
            blocked = run_in_sandbox(f"{script}\n{STILL_WORKS}", tmp_path, NO_PIDS)
            allowed = run_in_sandbox(
                script, tmp_path, SandboxSettings(pids_max=0, unix_sockets=True)
            )
    lines = blocked.stdout.splitlines()
    assert SECRET not in blocked.stdout
    assert lines[:2] == ["PermissionError: [Errno 13] Permission denied"] * 2, blocked.stdout
    assert lines[2] == "pairs, loopback and asyncio work", blocked.stderr
    assert allowed.stdout.splitlines() == [SECRET, SECRET], allowed.stderr


# --- the environment ------------------------------------------------------------------------

# Credentials whose names no secret-looking pattern catches (issue 36's red team).
UNPATTERNED_SECRETS = (
    "API_KEYS", "GITHUB_PAT", "GH_PAT", "MYSQL_PWD", "SENTRY_DSN", "SLACK_WEBHOOK_URL",
    "NPM_CONFIG__AUTH", "SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY",
    "XDG_RUNTIME_DIR", "GPG_AGENT_INFO", "KRB5CCNAME", "DOCKER_HOST",
)  # fmt: skip

NAMES = st.one_of(
    st.sampled_from(sorted(CHILD_VARIABLES) + list(UNPATTERNED_SECRETS) + ["OPENAI_API_KEY"]),
    st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(
    environ=st.dictionaries(NAMES, st.text(max_size=20), max_size=12),
    extra=st.lists(NAMES, max_size=3),
)
def test_a_child_gets_only_the_allowed_variables_and_never_a_providers_key(
    environ: dict[str, str], extra: list[str]
) -> None:
    given_to_child = child_environment(["MY_KEY_VAR"], environ, extra)
    for name, value in given_to_child.items():
        assert name in CHILD_VARIABLES or name in extra
        assert environ[name] == value
        assert not name.upper().startswith(("OPENAI_", "ANTHROPIC_")) and name != "MY_KEY_VAR"
    for name in UNPATTERNED_SECRETS:
        assert name in extra or name not in given_to_child


def test_the_variables_the_user_names_pass_but_not_a_providers_key() -> None:
    environ = {"PATH": "/bin", "JIRA_URL": "https://jira", "OPENAI_API_KEY": "sk-0123"}
    extra = ("JIRA_URL", "OPENAI_API_KEY")
    assert child_environment((), environ, extra) == {"PATH": "/bin", "JIRA_URL": "https://jira"}


def test_even_an_allowed_or_named_variable_is_left_out_when_it_looks_like_a_credential() -> None:
    environ = {
        "PATH": "/bin",
        "https_proxy": "http://user:hunter2@proxy:3128",  # allowed, but a URL with a password
        "HTTP_PROXY": "http://proxy:3128",  # allowed, no password: kept
        "JIRA_TOKEN": "t-0123",  # named by the user, but a token's name
        "OPENAI_ORG": "org-0123",  # named by the user, but a provider's variable
    }
    given = child_environment((), environ, ("JIRA_TOKEN", "OPENAI_ORG"))
    assert given == {"PATH": "/bin", "HTTP_PROXY": "http://proxy:3128"}


def test_an_mcp_server_gets_a_minimal_base_and_what_the_client_listed() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "GITHUB_PAT": "p", "LANG": "postgres://u:pw@h/d"}
    listed = {"API_KEY": "the user's own, for this server", "PATH": "/opt/bin"}
    assert mcp_server_environment(listed, environ) == {
        "PATH": "/opt/bin",
        "HOME": "/h",
        "API_KEY": "the user's own, for this server",
    }


def test_an_edit_asks_where_a_root_holds_what_the_home_runs_later(tmp_path: Path) -> None:
    """The home cannot be a root, but a directory of it can (`~/.config` as an additional
    root): git's configuration there is asked about, an ordinary file is not."""
    home = tmp_path / "home"
    config = home / ".config"
    (config / "git").mkdir(parents=True)
    environ = {"HOME": str(home)}
    why = sandbox_policy.runs_later(config / "git" / "config", [config], environ)
    assert why == sandbox_policy.RUNS_LATER_IN_HOME[".config/git"]
    assert sandbox_policy.runs_later(config / "app.toml", [config], environ) is None
    assert sandbox_policy.too_broad(home, environ) is not None
    assert sandbox_policy.too_broad(config, environ) is None


def test_the_file_tools_refuse_the_credentials_and_parleys_places_by_the_environment(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    environ = {"HOME": str(home), "PARLEY_HOME": str(tmp_path / "data")}
    for refused in (home / ".ssh" / "id_ed25519", home / ".aws", tmp_path / "data" / "x.db"):
        assert sandbox_policy.refused_to_tools(str(refused), environ), refused
    for allowed in (home / "project" / "a.py", home / ".sshx", tmp_path / "database"):
        assert not sandbox_policy.refused_to_tools(str(allowed), environ), allowed


def test_git_places_are_found_as_git_finds_them(tmp_path: Path) -> None:
    """A `.git` file's `gitdir:` (relative or absolute), `core.hooksPath` after other keys and
    sections, `[include]`/`[includeIf]` paths; never a submodule's `path`, nor a place
    outside the root."""
    root = tmp_path / "proj"
    (root / ".bare").mkdir(parents=True)
    (root / ".git").write_text("gitdir: ./.bare\n")
    (root / ".bare" / "config").write_text(
        "[core]\n\tbare = false\n\trepositoryformatversion = 0\n"
        '[submodule "vendor"]\n\tpath = vendor\n'
        "[core]\n\thooksPath = .githooks\n"
        '[includeIf "gitdir:~/work/"]\n\tpath = ../shared.gitconfig\n'
        "[include]\n\tpath = /etc/outside.gitconfig\n"
    )
    places = sandbox_policy.git_places(root)
    real = root.resolve()
    assert places == [real / ".bare", real / ".githooks", real / "shared.gitconfig"]
    elsewhere = tmp_path / "elsewhere.git"
    (root / ".git").write_text(f"gitdir: {elsewhere}\n")
    assert sandbox_policy.git_places(root) == []  # outside the root: read-only anyway
    (root / ".git").write_text("not a pointer\n")
    assert sandbox_policy.git_places(root) == []


def test_runs_later_looks_in_every_root_and_where_git_looks(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    (second / ".git").mkdir(parents=True)
    (second / ".git" / "config").write_text("[core]\n\tbare = false\n\thooksPath = hooks\n")
    first.mkdir()
    roots = [first, second]
    assert sandbox_policy.runs_later(second / ".envrc", roots) is not None
    assert sandbox_policy.runs_later(second / "hooks" / "pre-push", roots) == (
        sandbox_policy.GIT_REFERENCE_REASON
    )
    assert sandbox_policy.runs_later(second / "src" / "hooks.py", roots) is None
    assert sandbox_policy.runs_later(first / ".venv" / "bin" / "parley", roots) == (
        sandbox_policy.PARLEY_ENVIRONMENT_REASON
    )
    assert sandbox_policy.runs_later(tmp_path / "c" / ".envrc", roots) is None


def test_only_what_lies_in_a_writable_directory_is_protected(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".bashrc").parent.mkdir(parents=True)
    (home / ".bashrc").write_text("# rc\n")
    (project / ".envrc").parent.mkdir(parents=True)
    (project / ".envrc").write_text("")
    environ = {"HOME": str(home)}
    protected = [path for path, _ in sandbox_policy.protected_paths([project], environ)]
    assert protected == [project.resolve() / ".envrc"]
    protected = [path for path, _ in sandbox_policy.protected_paths([project, home], environ)]
    assert home.resolve() / ".bashrc" in protected


def test_a_virtualenv_holding_parley_is_protected_and_another_is_not(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "parley").write_text("#!/bin/sh\n")
    (project / "venv" / "bin").mkdir(parents=True)  # the project's own: no Parley in it
    environ = {"HOME": str(tmp_path / "home")}
    protected = dict(sandbox_policy.protected_paths([project], environ))
    assert protected == {project.resolve() / ".venv": sandbox_policy.PARLEY_ENVIRONMENT_REASON}


def test_the_layout_binds_each_writable_root_once_and_pins_the_way_to_each_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`child_layout`, in-process: a root inside another is bound through the outer one
    only; a root given through a symlink (or gone) is left out; the directories leading to a
    hidden place in any root are pinned once each, outer first; a hidden place that holds a
    root is not hidden (it would hide the root)."""
    use_home(monkeypatch, tmp_path / "home")
    outer, other = tmp_path / "outer", tmp_path / "other"
    inner = outer / "inner"
    key, secret = inner / "a" / "b" / "key", other / "x" / "secret"
    beside = inner / "a" / "token"  # shares the way to `key`: pinned once
    for place in (key, beside, secret, outer / ".envrc"):
        plant(place, False)
    (tmp_path / "link").symlink_to(other)
    writable = (inner, other, tmp_path / "link", tmp_path / "gone")
    spec = ChildSpec(("true",), outer, {}, writable=writable)
    hidden = (str(tmp_path), str(key), str(beside), str(secret))
    layout = child_layout(spec, SandboxSettings(pids_max=0, hidden=hidden))
    assert sorted(layout.writable) == sorted([outer, other])  # inner: through outer
    assert layout.pinned == (inner, other / "x", inner / "a", inner / "a" / "b")
    assert layout.protected == (outer / ".envrc",)
    assert tmp_path not in layout.hidden and {key, secret} <= set(layout.hidden)
