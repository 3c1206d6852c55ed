"""`python -m parley.scriptllm serve|build`: run llama.cpp's server on the script model, or
build it and print its path."""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m parley.scriptllm")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run llama.cpp's server until killed")
    serve.add_argument("--model", type=Path, required=True)
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--ctx", type=int, default=4096)
    serve.add_argument("--template", choices=("qwen2.5", "qwen3", "none"), default="qwen2.5")
    serve.add_argument("--no-prefill-assistant", action="store_true")
    serve.add_argument("--parallel", type=int, default=1)
    commands.add_parser("build", help="build (or find cached) the script model; print its path")
    args = parser.parse_args(argv)
    if args.command == "serve":
        from parley.scriptllm.serve import serve_forever

        template = None if args.template == "none" else args.template
        serve_forever(
            args.model, args.port, args.ctx, template, not args.no_prefill_assistant, args.parallel
        )
    else:
        from parley.scriptllm.model import built_model

        print(built_model())


if __name__ == "__main__":
    main()
