"""Which shell commands "allow always" may cover: the prefixes a user may choose for a
command (`git status`, `pytest`), and whether stored prefixes cover a command.

Only a *simple* command can be covered: one program with its arguments, nothing the shell
would run besides it or compute at run time. Anything this module cannot prove simple is
compound, and is asked about every time. The proof is deliberately blunt:

- no character that lets `/bin/sh` do more than split words and remove quotes: operators
  and redirections (`; & | < > ( )`), expansions and substitutions (`$`, backtick), escapes
  (backslash), comments (`#`), line breaks or other control characters — anywhere, quoted
  or not, so that no reading of the quotes can differ from the shell's; nor more than
  MAX_COMMAND_CHARS characters;
- `shlex` splits the rest into words (POSIX rules; unbalanced quotes: compound);
- the first word is a plain program name or path (no `=`: not a leading `VAR=value`; no
  glob or `~`), and not a program that runs another command line or code given on its own
  command line (`bash`, `env`, `sudo`, `xargs`, `python`, `uv run` …), nor any of its
  words an option or subcommand known to run a command it is given (`git -c`, `--exec` …).

A prefix is at most two plain words, the words before the first option, path or `=`
argument; a rule covers a command when the rule is one of the command's prefixes.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable

# The tool whose calls these rules cover (tools/run_command.py): never allowed by name.
COMMAND_TOOL = "run_command"

# A prefix has at most this many words.
MAX_PREFIX_WORDS = 2

# Characters that make the shell do more than run one program with its words (line breaks
# and every other control character included).
SHELL_SPECIAL = re.compile(r"[;&|<>()$`\\#\x00-\x08\x0a-\x1f\x7f-\x9f]")
# Longer commands are not looked into (shlex reads a character at a time): compound.
MAX_COMMAND_CHARS = 4096

# The program word: a name or a path of plain characters, with a letter or digit in it.
PROGRAM_WORD = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_.+/-]*")
# A later word of a prefix: a subcommand (`status`, `run-tests`), not an option or a path.
SUBCOMMAND_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")

# Programs (by their name without a version: `python3.12` is `python`) that run another
# command line, or code given on their command line: never covered, whatever the rules.
COMMAND_RUNNERS = frozenset(
    {
        # shells and the shell's own ways to run something else
        *("sh", "bash", "zsh", "dash", "ksh", "mksh", "pdksh", "yash", "fish", "csh"),
        *("tcsh", "ash", "busybox", "rbash", "elvish", "nu", "xonsh", "pwsh"),
        *("exec", "eval", "source", "command", "builtin", "trap", "coproc", "time"),
        *("fc", "enable", "alias", "function", "if", "while", "until", "for", "case"),
        # programs that run the command line they are given
        *("env", "sudo", "doas", "su", "runuser", "pkexec", "xargs", "nohup", "nice"),
        *("ionice", "timeout", "stdbuf", "setsid", "setpriv", "chroot", "unshare"),
        *("nsenter", "strace", "ltrace", "gdb", "lldb", "valgrind", "flock", "watch"),
        *("parallel", "script", "expect", "ssh", "systemd-run", "firejail", "bwrap"),
        *("chrt", "taskset", "prlimit", "cpulimit", "caffeinate", "faketime", "fakeroot"),
        *("proot", "torsocks", "proxychains", "entr", "npx", "uvx", "pipx", "bunx"),
        *("find", "nix-shell", "direnv", "dotenv", "with-contenv", "sg", "newgrp"),
        # interpreters, which take code as an argument (`-c`, `-e`, `--eval` …)
        *("python", "pypy", "ipython", "node", "nodejs", "deno", "bun", "perl", "ruby"),
        *("php", "lua", "luajit", "tclsh", "wish", "rscript", "r", "julia", "osascript"),
        *("awk", "gawk", "mawk", "nawk", "sed", "jshell", "groovy", "scala", "guile"),
        *("racket", "sbcl", "clisp", "emacs", "vim", "nvim", "vi", "ex", "select"),
    }
)

# Interpreters also known under longer names (`python3.12-dbg`, `perl5.36-x86_64`).
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
        *(("git", "mergetool"), ("tar", "-I"), ("rsync", "-e")),
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
    (`git status --short` → `("git status", "git")`); empty when it is not simple."""
    words = _simple_words(command)
    if words is None:
        return ()
    prefix = [words[0]]
    for word in words[1:MAX_PREFIX_WORDS]:
        if not SUBCOMMAND_WORD.fullmatch(word):
            break
        prefix.append(word)
    return tuple(" ".join(prefix[:size]) for size in range(len(prefix), 0, -1))


def covered(command: str, prefixes: Iterable[str]) -> bool:
    """Whether a stored prefix covers `command`: only a simple command, and only by one of
    its own offered prefixes (so a rule `""`, `"*"` or `"bash"` covers nothing)."""
    offered = offered_prefixes(command)
    return bool(offered) and any(prefix in offered for prefix in prefixes)


def _simple_words(command: str) -> list[str] | None:
    """The words of `command` when it is simple; None when it is not (or may not be)."""
    if len(command) > MAX_COMMAND_CHARS or SHELL_SPECIAL.search(command):
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
    """A plain program name or path: not `.` (source), no `=` (an assignment), no glob."""
    return bool(PROGRAM_WORD.fullmatch(word)) and any(char.isalnum() for char in word)


def _runs_other_commands(words: list[str]) -> bool:
    name = _program_name(words[0])
    if name in COMMAND_RUNNERS or name.startswith(INTERPRETER_STEMS):
        return True
    # Anywhere after the program: options may come first (`npm --yes exec …`).
    return any(
        (name, word) in RUNNER_SUBCOMMANDS or word.partition("=")[0] in RUNNER_OPTIONS
        for word in words[1:]
    )


def _program_name(word: str) -> str:
    """A program's name without its directory, case or version (`/usr/bin/Python3.12` →
    `python`): the name a runner is known by."""
    base = posixpath.basename(word).lower()
    return re.sub(r"[0-9.]+$", "", base) or base
