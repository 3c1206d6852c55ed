"""`python -m parley.fakellm`: the fake LLM as a process, for tests not written in Python.

    python -m parley.fakellm [--host 127.0.0.1] [--port 0] [--port-file PATH]
                             [--script FILE.json] [--exit-on-stdin-eof]

Prints the base URL (`http://127.0.0.1:PORT`) as one line on stdout once it accepts
connections (and on stderr, the variables that point Parley at it: `OPENAI_BASE_URL` with
`/v1`, `ANTHROPIC_BASE_URL` without), writes the bare port number to --port-file when
given, then serves until it is killed (SIGTERM or SIGINT end it cleanly). With
--exit-on-stdin-eof it also ends when its stdin closes, so it cannot outlive a parent that
holds the other end of a pipe.
Drive it with `POST /_fake/script` and `GET /_fake/requests`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from parley.fakellm.codec import replies_from_json
from parley.fakellm.server import FakeLLM


def _parse_arguments(argv: list[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the port number here")
    parser.add_argument(
        "--script",
        type=Path,
        help="a JSON list of replies; relative raw_stream/raw_json paths are taken "
        "relative to this file",
    )
    parser.add_argument(
        "--exit-on-stdin-eof", action="store_true", help="also stop when stdin closes"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, prog: str = "python -m parley.fakellm") -> int:
    """`prog`: how the user called it (`parley fake-llm` hands its arguments on)."""
    arguments = _parse_arguments(argv, prog)
    replies = []
    if arguments.script is not None:
        script_data = json.loads(arguments.script.read_text(encoding="utf-8"))
        replies = replies_from_json(script_data, base_dir=arguments.script.parent)

    stop_requested = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop_requested.set())
    signal.signal(signal.SIGINT, lambda _signum, _frame: stop_requested.set())
    if arguments.exit_on_stdin_eof:

        def stop_at_stdin_eof() -> None:
            while sys.stdin.buffer.read1(65536):
                pass
            stop_requested.set()

        threading.Thread(target=stop_at_stdin_eof, daemon=True).start()

    with FakeLLM(script=replies, host=arguments.host, port=arguments.port) as fake:
        if arguments.port_file is not None:
            # Written whole under another name, then renamed, so a reader never sees half.
            partial = arguments.port_file.with_name(arguments.port_file.name + ".partial")
            partial.write_text(f"{fake.port}\n", encoding="utf-8")
            partial.replace(arguments.port_file)
        print(fake.url, flush=True)
        # For a person trying Parley offline: the OpenAI SDK's base URL ends in /v1.
        print(
            f"fake LLM: OPENAI_BASE_URL={fake.url}/v1 (OpenAI's wire) or "
            f"ANTHROPIC_BASE_URL={fake.url} (Anthropic's); any API key will do",
            file=sys.stderr,
            flush=True,
        )
        # A timed wait keeps the main thread responsive to signals.
        while not stop_requested.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
