#!/usr/bin/env bash
# Streaming benchmark of the Emacs chat buffer: prints a Markdown table.
#   elisp/bench.sh            (PARLEY_BENCH_CHUNKS, default 20000; PARLEY_VENV, default .venv)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PARLEY_VENV="${PARLEY_VENV:-$repo/.venv}"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
cp "$repo"/elisp/*.el "$build"/
# Measure the byte-compiled package, as users run it.
emacs --batch -Q -L "$build" -f batch-byte-compile "$build"/*.el 2>/dev/null
exec emacs --batch -Q -L "$build" -l "$repo/elisp/bench/parley-bench.el" -f parley-bench-main
