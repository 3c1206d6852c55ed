"""Which words of a simple shell command "allow always" understands: for each program it
knows, the subcommands and options that only read, report or run the project's own tests
and builds; for any other program, plain words only (tools/command_rules.py decides the
rest: the shell, the runners, the prefixes).

A word after the program is understood when it is

- a plain positional word: not starting with `-`, without `=` (`make CC=sh` would set a
  variable; `dd of=x` would write), and at most as many as the subcommand takes;
- or an option this table lists for the program (and subcommand): a flag (`-q`, `--stat`),
  an option with a value (`-k EXPR`, `-kEXPR`, `--tb=short`, `--tb short`), or an option
  whose value may only be glued (`--color=always`, `-uno`: never the next word).

Short options may be clustered (`-xvs`); a cluster is read as getopt reads it: a letter that
takes a value takes the rest of the cluster, so `-nO<cmd>` is `-n` and an unlisted `-O`. A
value given as its own word must pass as a positional word, so whether an option takes the
next word never decides what is safe. Long options are listed by their full names: an
abbreviation (`--out` for git's `--output`) or a negation (`--no-…`) is not listed, so it is
not understood. Every listed option must be harmless with any value: nothing that writes a
file it is given (`--output`, `sort -o`, `tree -o`), runs a command or program (`--pre`,
`-O`, `--exec`, `-toolexec`), reads another configuration or directory (`git -c`, `-C`,
`--git-dir`, `pytest -c`, `-p`, `--rootdir`, `make -f`, `cargo --config`) or changes where
a tool writes (`--basetemp`, `--target-dir`, `--cache-dir`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs


@attrs.frozen
class Options:
    """What may follow a program (or its subcommand)."""

    flags: frozenset[str] = frozenset()  # take no value
    valued: frozenset[str] = frozenset()  # take a value: glued, after `=`, or the next word
    optional: frozenset[str] = frozenset()  # may take a value, glued or after `=` only
    numbers: bool = False  # `-5` is a count (`head -5`, `git log -3`)
    max_positionals: int | None = None  # None: any number (`uniq IN OUT` writes OUT)


@attrs.frozen
class Program:
    """A program's policy: its own options, and its subcommands' (None: it has none)."""

    options: Options = Options()
    subcommands: Mapping[str, Options] | None = None
    # Options are single-dash words (`go test -run X -count=1`), never clusters.
    single_dash_long: bool = False


def options(
    flags: str = "",
    valued: str = "",
    optional: str = "",
    *,
    numbers: bool = False,
    max_positionals: int | None = None,
) -> Options:
    """Options given as space-separated names, so the table below reads as a list."""
    return Options(
        frozenset(flags.split()),
        frozenset(valued.split()),
        frozenset(optional.split()),
        numbers,
        max_positionals,
    )


def join(*parts: Options, numbers: bool = False, max_positionals: int | None = None) -> Options:
    """The union of several option sets (a subcommand's own and those it shares)."""
    return Options(
        frozenset().union(*(part.flags for part in parts)),
        frozenset().union(*(part.valued for part in parts)),
        frozenset().union(*(part.optional for part in parts)),
        numbers,
        max_positionals,
    )


# --- git: read-only subcommands; before the subcommand only `--no-pager` -------------------

# How a diff or a commit is shown (log, show, diff): never `--output`, `--ext-diff`,
# `--textconv` or a `--no-…` form.
_GIT_DIFF_SHOWN = options(
    "-p --patch -u -s --no-patch --raw --patch-with-raw --stat --numstat --shortstat "
    "--summary --name-only --name-status --no-color --full-index --binary -R -w -b "
    "--ignore-all-space --ignore-space-change --ignore-blank-lines --minimal --patience "
    "--histogram --no-renames --check -z --no-prefix --exit-code --quiet --cc -m --",
    "--diff-filter --src-prefix --dst-prefix -S -G --stat-width --unified -U",
    "--color --word-diff --abbrev --relative -M -C --find-renames --find-copies --dirstat",
)
# Which commits a log walks, and how each is shown.
_GIT_LOG = join(
    _GIT_DIFF_SHOWN,
    options(
        "--oneline --graph --all --branches --tags --remotes --reverse --first-parent "
        "--no-merges --merges --follow --abbrev-commit --no-abbrev-commit --relative-date "
        "--topo-order --date-order --author-date-order --left-right --cherry-pick "
        "--boundary --source --full-history --no-walk --no-decorate "
        "--name-only --walk-reflogs -g -i --regexp-ignore-case --all-match --invert-grep",
        "-n --max-count --skip --since --after --until --before --author --committer "
        "--grep --date --format",
        "--pretty --decorate",
    ),
    numbers=True,
)
_GIT_SUBCOMMANDS: dict[str, Options] = {
    "status": options(
        "-s --short -b --branch --long -v --verbose -z --no-renames --show-stash "
        "--ahead-behind --no-ahead-behind --",
        "",
        "--porcelain -u --untracked-files --ignored --column",
    ),
    "log": _GIT_LOG,
    "show": _GIT_LOG,
    "diff": join(_GIT_DIFF_SHOWN, options("--cached --staged --merge-base")),
    # Listing only: a positional word would name a branch to create.
    "branch": options(
        "-a --all -r --remotes -v --verbose --list -l --show-current --no-color",
        "--contains --no-contains --merged --no-merged --points-at --sort --format",
        "--color --abbrev",
        max_positionals=0,
    ),
    "rev-parse": options(
        "--show-toplevel --show-prefix --show-cdup --git-dir --absolute-git-dir "
        "--is-inside-work-tree --is-inside-git-dir --is-bare-repository --verify -q "
        "--quiet --symbolic --symbolic-full-name --all --branches --tags --remotes "
        "--show-superproject-working-tree",
        "",
        "--short --abbrev-ref",
    ),
    "ls-files": options(
        "-c --cached -m --modified -o --others -d --deleted -s --stage -u --unmerged "
        "-i --ignored --directory --no-empty-directory --exclude-standard -z --full-name "
        "--error-unmatch -t -v --eol --",
        "-x --exclude",
        "--abbrev",
    ),
    "blame": options(
        "-w -s -l -t -e -c -f -n -p --porcelain --line-porcelain --root --show-email "
        "--show-name --show-number -b --incremental --",
        "-L --date",
        "-M -C --abbrev --color-lines --color-by-age",
    ),
    "describe": options(
        "--tags --all --always --long --exact-match --first-parent --contains",
        "--match --exclude --candidates",
        "--dirty --broken --abbrev",
    ),
    "shortlog": options(
        "-s --summary -n --numbered -e --email -c --committer --all --no-merges --merges",
        "--since --after --until --before --author --group --format",
        "",
        numbers=True,
    ),
    # Never `-O` / `--open-files-in-pager`: it runs the pager it is given.
    "grep": options(
        "-n --line-number -i --ignore-case -w --word-regexp -v --invert-match -l "
        "--files-with-matches -L --files-without-match -c --count -E --extended-regexp "
        "-F --fixed-strings -G --basic-regexp -P --perl-regexp -h -H --full-name "
        "--cached --untracked -I -W --function-context -p --show-function --heading "
        "--break -o --only-matching -q --quiet --and --or --not --all-match -z --null "
        "--column -a --text -r --recursive --no-color --",
        "-e -A --after-context -B --before-context -C --context -m --max-count --max-depth -f",
        "--color",
        numbers=True,
    ),
    "ls-tree": options("-r -d -t -l --long -z --name-only --name-status --full-name --"),
    "rev-list": join(_GIT_LOG, options("--count --objects --parents --children")),
    "merge-base": options("--all --octopus --is-ancestor --independent --fork-point"),
    "cat-file": options("-p -t -s -e", max_positionals=2),
    # Listing only: a positional word would name a remote or a tag to make.
    "remote": options("-v --verbose", max_positionals=0),
    "tag": options("-l --list", "--contains --points-at --merged --sort", "-n", max_positionals=0),
}

# --- build and test tools ---------------------------------------------------------------------

# Never `-p` (loads a plugin), `-c`/`--config-file`, `-o` (overrides ini: `addopts`),
# `--rootdir`, `--confcutdir`, `--basetemp` (emptied by pytest), `--junitxml`, `--log-file`.
_PYTEST = options(
    "-x --exitfirst -q --quiet -v --verbose -s -l --showlocals --lf --last-failed --ff "
    "--failed-first --nf --new-first --sw --stepwise --co --collect-only --no-header "
    "--no-summary --disable-warnings --strict-markers --cache-clear --runxfail "
    "--setup-show --full-trace",
    "-k -m -n -r --tb --maxfail --durations --durations-min --dist --color --import-mode --timeout",
    "",
)
# Never `-f`, `-C`, `-e`, `-I`, `--eval`, `-o`, `-W`; a `VAR=…` word is never positional.
_MAKE = options(
    "-k --keep-going -n --dry-run --just-print --recon -s --silent --quiet -B --always-make "
    "-q --question --no-print-directory -w --print-directory -S --no-keep-going",
    "-l --load-average",
    "-j --jobs",
)
_CARGO_SHARED = options(
    "-q --quiet -v --verbose --release -r --all-targets --all-features "
    "--no-default-features --workspace --all --lib --bins --tests --examples --benches "
    "--locked --offline --frozen --keep-going",
    "-p --package -F --features -j --jobs --bin --test --example --bench --exclude "
    "--message-format --color --profile --target",
    "",
)
# What `--` passes on to the test harness or to clippy.
_CARGO_TEST = join(
    _CARGO_SHARED,
    options(
        "--no-fail-fast --no-run --doc -- --nocapture --ignored --include-ignored --exact "
        "--show-output",
        "--test-threads --skip",
    ),
)
_CARGO_CLIPPY = join(_CARGO_SHARED, options("-- --fix --allow-dirty --no-deps", "-D -W -A"))
# Go's flags are single-dash words. Never `-o`, `-exec`, `-toolexec`, `-vettool`, `-C`,
# `-ldflags`, `-gcflags`, `-asmflags` (an external linker), `-overlay`, `-modfile`, `-args`.
_GO = options(
    "-v -race -short -cover -benchmem -failfast -json -trimpath -a -n -x",
    "-run -skip -count -timeout -bench -benchtime -tags -p -parallel -cpu -shuffle "
    "-covermode -list",
    "",
)
# A package script by name: never `--script-shell`, `--prefix`, `--node-options`, `--`.
_PACKAGE_SCRIPTS = {
    "test": options("--silent --if-present"),
    "run": options("--silent --if-present"),
}
_RUFF_SHARED = options(
    "-q --quiet --no-cache --preview --diff --check --statistics --show-fixes --fix "
    "--no-fix --exit-zero -n",
    "--select --ignore --extend-select --output-format --target-version --line-length",
    "",
)

# --- the table ------------------------------------------------------------------------------

PROGRAMS: dict[str, Program] = {
    "git": Program(options("--no-pager -P"), _GIT_SUBCOMMANDS),
    "ls": Program(
        options(
            "-l -a -A -h -R -1 -t -r -S -d -F -i -s -C -x -n -g -o -X -v -p -L -U -c -u "
            "--all --almost-all --human-readable --recursive --reverse --classify "
            "--directory --group-directories-first --full-time --si --inode --size",
            "-w --width -I --ignore --hide --sort --time-style --time --format --block-size -T",
            "--color --indicator-style",
        )
    ),
    "cat": Program(options("-n -b -A -e -E -s -t -T -v -u --number --show-all")),
    "head": Program(
        options("-q -v -z --quiet --silent --verbose", "-n -c --lines --bytes", "", numbers=True)
    ),
    # Never `-f`/`--follow`: it would run until the timeout.
    "tail": Program(
        options("-q -v -z --quiet --silent --verbose", "-n -c --lines --bytes", "", numbers=True)
    ),
    "wc": Program(options("-l -w -c -m -L --lines --words --bytes --chars --max-line-length")),
    "grep": Program(
        options(
            "-r -R -n -i -y -l -L -c -v -w -x -E -F -G -P -o -h -H -s -q -I -a -b -z -Z -T "
            "--recursive --dereference-recursive --line-number --ignore-case --no-ignore-case "
            "--files-with-matches --files-without-match --count --invert-match "
            "--word-regexp --line-regexp --extended-regexp --fixed-strings --basic-regexp "
            "--perl-regexp --only-matching --no-filename --with-filename --no-messages "
            "--quiet --silent --text --byte-offset --null --null-data --initial-tab",
            "-e -f -A -B -C -m --regexp --file --after-context --before-context --context "
            "--max-count --include --exclude --exclude-dir --label --binary-files",
            "--color --colour",
            numbers=True,
        )
    ),
    # Never `--pre`, `--pre-glob` (run a program on each file), `--hostname-bin`.
    "rg": Program(
        options(
            "-n -N -i -S -s -l -c -v -w -x -F -u -z -L -o -P -U -H -I -q -0 -a -b "
            "--hidden --no-ignore --no-ignore-vcs --files --json --vimgrep --no-heading "
            "--heading --count --count-matches --only-matching --pcre2 --follow "
            "--search-zip --multiline --line-number --no-line-number --ignore-case "
            "--smart-case --case-sensitive --files-with-matches --files-without-match "
            "--invert-match --fixed-strings --word-regexp --line-regexp --stats "
            "--with-filename --no-filename --quiet --null --text --byte-offset "
            "--no-messages --trim --column --no-config",
            "-e -f -g -t -T -A -B -C -m -M -d -j -E -r --regexp --file --glob --iglob "
            "--type --type-not --after-context --before-context --context --max-count "
            "--max-columns --max-depth --threads --encoding --replace --sort --sortr "
            "--color --max-filesize",
            "",
        )
    ),
    "pwd": Program(options("-L -P")),
    "echo": Program(options("-n -e -E")),
    "which": Program(options("-a -s")),
    "file": Program(
        options(
            "-b -i -L -h -k -z -Z -N --brief --mime --mime-type --mime-encoding "
            "--keep-going --dereference --no-dereference --uncompress --no-pad"
        )
    ),
    "stat": Program(
        options("-L -f -t --dereference --file-system --terse", "-c --format --printf")
    ),
    "du": Program(
        options(
            "-h -s -a -c -k -m -b -x -l -L -D -H --summarize --human-readable --all --total "
            "--apparent-size --one-file-system --count-links --dereference --si --bytes",
            "-d --max-depth --exclude -t --threshold -B --block-size",
        )
    ),
    "df": Program(
        options(
            "-h -H -T -a -i -k -l -P --human-readable --si --all --inodes --local "
            "--print-type --portability --total",
            "-t --type -x --exclude-type -B --block-size",
            "--output",
        )
    ),
    # Never `-o` (writes its output there) nor `-R`/`-H` (writes HTML files).
    "tree": Program(
        options(
            "-a -d -f -i -l -h -s -C -F -p -u -g -D -q -N -Q -v -t -r -x -n -A -J -X "
            "--noreport --gitignore --dirsfirst --du --prune --matchdirs --ignore-case",
            "-L -I -P --filelimit --sort --charset",
        )
    ),
    "diff": Program(
        options(
            "-u -r -q -N -b -w -B -i -a -s -y -t -c -p -E -Z -d --brief --recursive "
            "--new-file --unidirectional-new-file --ignore-all-space --ignore-space-change "
            "--ignore-blank-lines --ignore-case --text --report-identical-files "
            "--side-by-side --strip-trailing-cr --expand-tabs --minimal --show-c-function "
            "--ignore-tab-expansion --ignore-trailing-space --suppress-common-lines",
            "-U -C -W -x -X -I --width --exclude --exclude-from --ignore-matching-lines "
            "--label --tabsize",
            "--unified --context --color",
            max_positionals=2,
        )
    ),
    # Never `-o`/`--output` (writes there), `-T` (its temporary files' place),
    # `--compress-program` (runs it).
    "sort": Program(
        options(
            "-n -r -u -f -h -V -b -d -g -i -M -R -s -z -c -C --numeric-sort --reverse "
            "--unique --ignore-case --human-numeric-sort --version-sort --stable "
            "--zero-terminated --check --dictionary-order --general-numeric-sort "
            "--ignore-nonprinting --month-sort --random-sort --ignore-leading-blanks",
            "-k -t --key --field-separator",
        )
    ),
    # One file at most: `uniq IN OUT` writes OUT.
    "uniq": Program(
        options(
            "-c -d -D -u -i -z --count --repeated --unique --ignore-case --zero-terminated",
            "-f -s -w --skip-fields --skip-chars --check-chars",
            "--all-repeated --group",
            max_positionals=1,
        )
    ),
    "cut": Program(
        options(
            "-s -z -n --only-delimited --complement --zero-terminated",
            "-d -f -c -b --delimiter --fields --characters --bytes --output-delimiter",
        )
    ),
    "nl": Program(
        options(
            "-p --no-renumber",
            "-b -n -w -s -v -i -h -f -d -l --body-numbering --number-format --number-width "
            "--number-separator --starting-line-number --line-increment",
        )
    ),
    "pytest": Program(_PYTEST),
    "make": Program(_MAKE),
    "cargo": Program(
        options("-q --quiet -v --verbose --locked --offline --frozen"),
        {
            "test": _CARGO_TEST,
            "build": _CARGO_SHARED,
            "check": _CARGO_SHARED,
            "clippy": _CARGO_CLIPPY,
        },
    ),
    "go": Program(
        subcommands={"test": _GO, "build": _GO, "vet": _GO},
        single_dash_long=True,
    ),
    "npm": Program(subcommands=_PACKAGE_SCRIPTS),
    "pnpm": Program(subcommands=_PACKAGE_SCRIPTS),
    "yarn": Program(subcommands=_PACKAGE_SCRIPTS),
    # Never `--config`, `--cache-dir`, `--output-file`, `--stdin-filename`.
    "ruff": Program(subcommands={"check": _RUFF_SHARED, "format": _RUFF_SHARED}),
    # Never `--config-file`, `--install-types` (pip), `--cache-dir`, a report's directory.
    "mypy": Program(
        options(
            "--strict --pretty --show-error-codes --hide-error-codes --no-error-summary "
            "--ignore-missing-imports --check-untyped-defs --warn-unused-ignores "
            "--warn-return-any --disallow-untyped-defs --no-incremental "
            "--show-column-numbers --no-color-output --explicit-package-bases "
            "--namespace-packages --no-namespace-packages --show-traceback",
            "-p --package -m --module --python-version --follow-imports --exclude --platform",
        )
    ),
    # Never `--config`.
    "black": Program(
        options(
            "--check --diff -q --quiet -v --verbose --color --no-color --fast --safe "
            "--preview -S --skip-string-normalization -C --skip-magic-trailing-comma",
            "-l --line-length -t --target-version --include --exclude --extend-exclude",
        )
    ),
    # Never `--outDir`, `--outFile`, `--build`, `--watch`, `--plugins`.
    "tsc": Program(
        options(
            "--noEmit --pretty --strict --listFiles --noUnusedLocals --noUnusedParameters "
            "--skipLibCheck --incremental",
            "-p --project --target --module --lib --jsx --moduleResolution",
        )
    ),
}

# A program this table does not know: plain positional words only.
UNKNOWN = Program()


def understood(program: Program, arguments: Sequence[str]) -> bool:
    """Whether every word after the program is understood (see the module's doc)."""
    if program.subcommands is None:
        return _scan(program.options, arguments, program.single_dash_long) == len(arguments)
    # The program's own options, then its subcommand (the first positional word), then the
    # subcommand's options and words.
    at = _scan(program.options, arguments, program.single_dash_long, to_subcommand=True)
    if at is None or at >= len(arguments) or arguments[at] not in program.subcommands:
        return False
    rest = arguments[at + 1 :]
    own = program.subcommands[arguments[at]]
    return _scan(own, rest, program.single_dash_long) == len(rest)


def _scan(
    allowed: Options, words: Sequence[str], single_dash_long: bool, to_subcommand: bool = False
) -> int | None:
    """Where the words stop being understood: their length when all are, the first
    positional word's place `to_subcommand`, None at a word that is not."""
    at, positionals = 0, 0
    while at < len(words):
        word = words[at]
        if not word.startswith("-") or word == "-":
            if to_subcommand:
                return at
            if not plain_value(word):
                return None
            positionals += 1
            at += 1
            continue
        following = words[at + 1] if at + 1 < len(words) else None
        taken = _option_words(allowed, word, following, single_dash_long)
        if not taken:
            return None
        at += taken
    if allowed.max_positionals is not None and positionals > allowed.max_positionals:
        return None
    return at


def plain_value(word: str) -> bool:
    """A positional word, or an option's value given as its own word: nothing a program
    could take as an option or an assignment."""
    return not word.startswith("-") and "=" not in word


def _option_words(allowed: Options, word: str, following: str | None, single_dash: bool) -> int:
    """How many words the option `word` takes (1, or 2 with its value); 0 when it is not
    understood."""
    if word.startswith("--") or single_dash:
        return _long_option(allowed, word, following)
    if allowed.numbers and word[1:].isascii() and word[1:].isdigit():
        return 1
    return _short_cluster(allowed, word, following)


def _long_option(allowed: Options, word: str, following: str | None) -> int:
    name, equals, _ = word.partition("=")
    if equals:
        return 1 if name in allowed.valued or name in allowed.optional else 0
    if name in allowed.flags or name in allowed.optional:
        return 1
    if name in allowed.valued and following is not None and plain_value(following):
        return 2
    return 0


def _short_cluster(allowed: Options, word: str, following: str | None) -> int:
    """`-xvs`, `-kEXPR`, `-k EXPR`, `-uno`: as getopt reads them, letter by letter."""
    for index in range(1, len(word)):
        option = "-" + word[index]
        glued = word[index + 1 :]
        if option in allowed.valued:
            if glued:
                return 1
            return 2 if following is not None and plain_value(following) else 0
        if option in allowed.optional:
            return 1  # the rest of the cluster, if any, is its value
        if option not in allowed.flags:
            return 0
    return 1
