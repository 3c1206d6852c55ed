"""Which shell commands "allow always" may cover: the prefixes a user may choose for a
command (`git status`, `pytest`), and whether stored prefixes cover a command.

Only a *coverable* command can be covered: one program with its arguments, nothing the
shell would run besides it or compute at run time, and every argument understood. Anything
this module cannot prove coverable is asked about every time. The proof is deliberately
blunt:

- no character that lets `/bin/sh` do more than split words and remove quotes: operators
  and redirections (`; & | < > ( )`), expansions and substitutions (`$`, backtick), globs,
  braces and the tilde (`* ? [ ] { } ~`), escapes (backslash), comments (`#`), line breaks
  or other control characters — anywhere, quoted or not, so that no reading of the quotes
  can differ from the shell's; nor more than MAX_COMMAND_CHARS characters;
- `shlex` splits the rest into words (POSIX rules; unbalanced quotes: not coverable);
- the first word is a plain program name or path (no `=`: not a leading `VAR=value`), and
  not a program that runs another command line or code given on its own command line
  (`bash`, `env`, `sudo`, `xargs`, `python3.12-dbg`, `micropython`, `tar` …, whatever its
  directory, version or build), nor any of its words a subcommand or option known to
  (`uv run`, `--exec` …);
- every later word is understood by tools/command_policy.py: a plain positional word, or an
  option its table lists as harmless for that program and subcommand (`git log --oneline`
  is, `git log --output=…` and `git config` are not; a program it does not know: plain
  words only).

A prefix is at most two words: the program, and the word after it when that is a plain
word (`git status`, `make test`); a rule covers a command when the command is coverable and
the rule is one of its own prefixes.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable

from parley.tools.command_policy import PROGRAMS, UNKNOWN, understood

# The tool whose calls these rules cover (tools/run_command.py): never allowed by name.
COMMAND_TOOL = "run_command"

# A prefix has at most this many words.
MAX_PREFIX_WORDS = 2

# Characters that make the shell do more than run one program with its words (line breaks
# and every other control character included).
SHELL_SPECIAL = re.compile(r"[;&|<>()$`\\#\x00-\x08\x0a-\x1f\x7f-\x9f]")
# Characters `/bin/sh` may expand into other words (globs; braces in bash; `~`), anywhere.
SHELL_EXPANDING = re.compile(r"[*?\[\]{}~]")
# Longer commands are not looked into (shlex reads a character at a time): compound.
MAX_COMMAND_CHARS = 4096

# The program word: a name or a path of plain characters, with a letter or digit in it.
PROGRAM_WORD = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_.+/-]*")
# A later word of a prefix: a subcommand (`status`, `run-tests`), not an option or a path.
SUBCOMMAND_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")

# Programs (by their name's leading letters, lowercased: `python3.12-dbg` is `python`,
# `bash-5.2` is `bash`) that run another command line, or code given on their command line,
# or that take plain words as commands: never covered, whatever the rules.
COMMAND_RUNNERS = frozenset(
    {
        # shells and the shell's own ways to run something else
        *("sh", "bash", "zsh", "dash", "ksh", "mksh", "pdksh", "yash", "fish", "csh"),
        *("tcsh", "ash", "busybox", "rbash", "elvish", "nu", "xonsh", "pwsh", "powershell"),
        *("exec", "eval", "source", "command", "builtin", "trap", "coproc", "time"),
        *("fc", "enable", "alias", "function", "if", "while", "until", "for", "case"),
        # programs that run the command line they are given
        *("env", "sudo", "doas", "su", "runuser", "pkexec", "xargs", "nohup", "nice"),
        *("ionice", "timeout", "stdbuf", "setsid", "setpriv", "chroot", "unshare"),
        *("nsenter", "strace", "ltrace", "gdb", "lldb", "valgrind", "flock", "watch"),
        *("parallel", "script", "expect", "ssh", "systemd", "firejail", "bwrap"),
        *("chrt", "taskset", "prlimit", "cpulimit", "caffeinate", "faketime", "fakeroot"),
        *("proot", "torsocks", "proxychains", "entr", "npx", "uvx", "pipx", "bunx"),
        *("find", "nix", "direnv", "dotenv", "with", "sg", "newgrp", "flatpak", "host"),
        *("distrobox", "toolbox"),
        # programs whose plain words are commands: `tar xIf CMD` (options without a dash),
        # `sqlite3 db '.shell CMD'`; or that hand a command to a service outside the sandbox
        *("tar", "bsdtar", "sqlite", "duckdb", "tmux", "screen", "systemctl", "busctl"),
        *("dbus", "gdbus", "at", "batch", "crontab", "dc"),
        # interpreters, which take code as an argument (`-c`, `-e`, `--eval` …)
        *("python", "pypy", "ipython", "node", "nodejs", "deno", "bun", "perl", "ruby"),
        *("php", "lua", "luajit", "tclsh", "wish", "rscript", "r", "julia", "osascript"),
        *("awk", "gawk", "mawk", "nawk", "sed", "jshell", "groovy", "scala", "guile"),
        *("racket", "sbcl", "clisp", "emacs", "vim", "nvim", "vi", "ex", "select", "irb"),
        *("erl", "elixir", "iex", "swipl", "gnuplot", "m"),
    }
)

# Interpreters also known under longer names (`python3.12-dbg`, `micropython`,
# `x86_64-linux-gnu-python3`, `nodemon`, `lualatex`): a program whose name holds one of these
# anywhere is never covered.
INTERPRETER_STEMS = ("python", "pypy", "perl", "ruby", "node", "php", "lua")

# Subcommands that run another command line: `uv run CMD`, `docker exec … CMD`.
RUNNER_SUBCOMMANDS = frozenset(
    {
        *(("uv", "run"), ("uv", "tool"), ("poetry", "run"), ("pipenv", "run")),
        *(("pdm", "run"), ("hatch", "run"), ("conda", "run"), ("mamba", "run")),
        *(("micromamba", "run"), ("npm", "exec"), ("npm", "x"), ("pnpm", "exec")),
        *(("pnpm", "dlx"), ("yarn", "exec"), ("yarn", "dlx"), ("bun", "x")),
        *(("docker", "run"), ("docker", "exec"), ("podman", "run"), ("podman", "exec")),
        *(("kubectl", "exec"), ("kubectl", "run"), ("nix", "run"), ("nix", "develop")),
        *(("nix", "shell"), ("cargo", "script"), ("go", "run"), ("git", "submodule")),
        *(("git", "bisect"), ("git", "filter-branch"), ("git", "difftool"), ("git", "-c")),
        *(("git", "mergetool"), ("tar", "-I"), ("rsync", "-e"), ("bundle", "exec")),
        *(("rustup", "run"), ("pixi", "run"), ("rye", "run"), ("stack", "exec")),
        *(("cabal", "exec"), ("opam", "exec"), ("guix", "shell"), ("dotnet", "exec")),
    }
)

# Options that make a program run a command it is given (`--exec=…` too), whatever the
# program: `git rebase --exec`, `git --exec-path`, `tar --to-command`, `rsync --rsh`.
RUNNER_OPTIONS = frozenset(
    {
        *("--exec", "-exec", "-execdir", "-ok", "-okdir", "--exec-path", "--to-command"),
        *("--checkpoint-action", "--use-compress-program", "--rsh", "--upload-pack"),
        *("--receive-pack", "--config-env", "--ext-diff", "--extcmd", "--tool"),
    }
)


def offered_prefixes(command: str) -> tuple[str, ...]:
    """The prefixes a user may choose to always allow for `command`, most specific first
    (`git status --short` → `("git status", "git")`); empty when it is not coverable."""
    words = coverable_words(command)
    if words is None:
        return ()
    prefix = [words[0]]
    for word in words[1:MAX_PREFIX_WORDS]:
        if not SUBCOMMAND_WORD.fullmatch(word):
            break
        prefix.append(word)
    return tuple(" ".join(prefix[:size]) for size in range(len(prefix), 0, -1))


def covered(command: str, prefixes: Iterable[str]) -> bool:
    """Whether a stored prefix covers `command`: only a coverable command, and only by one
    of its own offered prefixes (so a rule `""`, `"*"` or `"bash"` covers nothing)."""
    offered = offered_prefixes(command)
    return bool(offered) and any(prefix in offered for prefix in prefixes)


def coverable_words(command: str) -> list[str] | None:
    """The words of `command` when it is coverable; None when it is not (or may not be)."""
    words = _simple_words(command)
    if words is None:
        return None
    policy = PROGRAMS.get(posixpath.basename(words[0]), UNKNOWN)
    return words if understood(policy, words[1:]) else None


def _simple_words(command: str) -> list[str] | None:
    """The words of `command` when it is one program with its words, none of which the
    shell would change; None otherwise."""
    if len(command) > MAX_COMMAND_CHARS or SHELL_SPECIAL.search(command):
        return None
    if SHELL_EXPANDING.search(command):
        return None
    try:
        words = shlex.split(command, comments=False, posix=True)
    except ValueError:  # an unbalanced quote
        return None
    if not words or not _is_program(words[0]):
        return None
    if _runs_other_commands(words):
        return None
    return words


def _is_program(word: str) -> bool:
    """A plain program name or path: not `.` (source), no `=` (an assignment), no glob, not
    a directory (`bash/`: its name would be lost)."""
    plain = PROGRAM_WORD.fullmatch(word) and not word.endswith("/")
    return bool(plain) and any(char.isalnum() for char in word)


def _runs_other_commands(words: list[str]) -> bool:
    base = posixpath.basename(words[0]).lower()
    if runner_stem(base) in COMMAND_RUNNERS or any(stem in base for stem in INTERPRETER_STEMS):
        return True
    # Anywhere after the program: options may come first (`npm --yes exec …`).
    name = posixpath.basename(words[0])
    return any(
        (name, word) in RUNNER_SUBCOMMANDS or word.partition("=")[0] in RUNNER_OPTIONS
        for word in words[1:]
    )


def runner_stem(name: str) -> str:
    """A program's name up to its first character that is not a letter (`python3.12-dbg`
    → `python`, `bash-5.2` → `bash`, `sqlite3` → `sqlite`): the name a runner is known by
    whatever version or build it names."""
    return re.sub(r"[^a-z].*", "", name.lower(), flags=re.DOTALL)
