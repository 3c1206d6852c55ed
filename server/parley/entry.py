"""The `parley` command's entry point: `parley serve` through the warm process when one can
serve it (`warm_start`, a start in tens of milliseconds), everything else — a cold start
included — through the CLI (`cli`)."""

from __future__ import annotations

import sys


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        from parley.warm_start import serve_warm

        status = serve_warm(argv)
        if status is not None:
            return status
    from parley.cli import main as cli_main

    return cli_main(argv)
