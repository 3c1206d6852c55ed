"""The `parley` command: serve | chat | demo | sessions | export | bench | doctor | fake-llm."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import parley
from parley.child_env import CHILD_VARIABLES
from parley.config import ConfigError, Settings, load_settings
from parley.core.redact import redact, remember_secrets
from parley.sandbox import policy_lines, sandbox_status
from parley.undumpable import make_undumpable
from parley.warm_start import warm_start_status

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FAKE_LLM = "fake-llm"  # the subcommand that runs parley.fakellm


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parley", description="An AI coding agent behind your editor."
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=os.environ.get("PARLEY_LOG_LEVEL", "WARNING").upper(),
        help="log level on stderr (default: $PARLEY_LOG_LEVEL, else WARNING)",
    )
    parser.add_argument(
        "--version", action="version", version=f"parley {parley.__version__} (parley-code)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="speak JSON-RPC (ACP) on stdin/stdout")
    serve.add_argument(
        "--framing",
        choices=["lsp", "ndjson"],
        default="lsp",
        help="Content-Length frames (jsonrpc.el, vscode-jsonrpc) or one JSON per line (ACP)",
    )

    chat = commands.add_parser(
        "chat",
        help="ask once, the answer streamed to stdout; with no prompt, on a terminal: a chat",
    )
    chat.add_argument(
        "prompt",
        nargs="?",
        help="what to ask; text piped in follows it as a ```stdin block; - reads the whole "
        "prompt from stdin; none, on a terminal: an interactive chat, turn after turn",
    )
    chat.add_argument("--model", help="provider:model, or 'demo' for the scripted model")
    chat.add_argument(
        "--session", help="continue this session: its id, a unique start of it, or 'last'"
    )
    chat.add_argument("--json", action="store_true", help="print each update as a JSON line")
    chat.add_argument(
        "--yes",
        action="store_true",
        help="allow every tool call without asking (never a restore over your own changes)",
    )
    chat.add_argument(
        "--command",
        dest="slash_command",
        action="store_true",
        help="run the prompt as a slash command (/undo, /compact, /cost, /model); without "
        "it, only a prompt typed at a terminal runs one",
    )
    chat.add_argument(
        "--store",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the session afterwards, so `parley sessions` lists it (default: yes, or "
        "config.toml's [chat] store); --no-store: a throwaway run, deleted at the end",
    )
    chat.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="for scripts: nothing on stderr but what went wrong (no thoughts, tool calls, "
        "summary)",
    )
    chat.add_argument("--cwd", help="the workspace (default: the current directory)")
    chat.add_argument(
        "--tool-policy", choices=["hybrid", "stream", "sync"], help="how tool rounds are fetched"
    )
    chat.add_argument(
        "--kernel",
        metavar="FILE|URL",
        help="run the Python tools in your own Jupyter kernel: its connection file (see "
        "`parley kernels`) or its URL on a Jupyter Server (http://host:8888/api/kernels/ID, "
        "the token in $JUPYTER_TOKEN or --kernel-token-env)",
    )
    chat.add_argument(
        "--kernel-token-env",
        default="JUPYTER_TOKEN",
        metavar="NAME",
        help="the environment variable holding the Jupyter Server's token (JUPYTER_TOKEN)",
    )

    kernels = commands.add_parser("kernels", help="list the Jupyter kernels running here")
    kernels.add_argument("--json", action="store_true", help="as a JSON array")

    commands.add_parser("demo", help="a full hybrid turn with a tool call, offline (scripted)")

    sessions = commands.add_parser("sessions", help="list the stored sessions, newest first")
    sessions.add_argument("--json", action="store_true", help="as a JSON array")
    sessions.add_argument("--limit", type=int, default=50, help="at most this many (50)")
    sessions.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="no line of column names (printed only to a terminal anyway)",
    )
    export = commands.add_parser("export", help="write a session's transcript to stdout")
    export.add_argument(
        "session", help="the session: its id, a unique start of it, or 'last' (the newest)"
    )
    export.add_argument("--format", choices=["markdown", "json"], default="markdown")

    bench = commands.add_parser("bench", help="measure speed against the bare SDK; prints a table")
    bench.add_argument("--quick", action="store_true", help="fewer repetitions")
    bench.add_argument(
        "--session-load",
        action="store_true",
        help="only row 7: loading long sessions (with --quick, only the 5,000-message one)",
    )
    bench.add_argument(
        "--streaming",
        action="store_true",
        help="only rows 1, 2, 1a and 2a: streaming into a client",
    )
    bench.add_argument(
        "--snapshots", action="store_true", help="only row 11: the snapshots `/undo` restores"
    )
    bench.add_argument(
        "--profile",
        action="store_true",
        help="instead of the table: the start's phases and its import tree to `initialize`",
    )
    commands.add_parser(
        "doctor", help="say whether the kernel and MCP servers run sandboxed, and why not"
    )
    # Its options are its own module's (`python -m parley.fakellm`): handed on as they are.
    commands.add_parser(
        FAKE_LLM,
        help="a local fake LLM for trying Parley offline: plays a script of replies "
        "(--script FILE.json; --help for more)",
        add_help=False,
    )
    return parser


def _drop_client_errors(record: logging.LogRecord) -> bool:
    """pygls's lines about a request the client got wrong: the client is told in the
    answer, so stderr (which ACP clients show their users) need not say it again. Its
    traceback is dropped; its "unknown method" line becomes INFO."""
    from pygls.exceptions import JsonRpcException

    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, JsonRpcException):
        return False
    message = record.getMessage()
    if record.name == "pygls.server" and "Method Not Found" in message:
        return False
    if record.name.startswith("pygls") and "unknown method" in message:
        record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger().isEnabledFor(logging.INFO)
    return True


class RedactingFormatter(logging.Formatter):
    """Log lines without secrets: whatever a library logs (an SDK at DEBUG, a traceback
    quoting a provider's error) passes through `redact` on its way to stderr."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _set_up_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    # pygls logs every message at INFO (noise, on the per-token path), and a traceback for
    # each request the client got wrong (which the client is told in the error response).
    # (On the handler: a logger's filter would not see its children's records.)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLogger().level))
    handler.addFilter(_drop_client_errors)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _reader_gone()
    finally:
        # What is left is only the exit: without this, the interpreter's last collection
        # goes through every object the SDKs and pygls made (half a second, per process).
        gc.freeze()


def _reader_gone() -> int:
    """stdout's reader went away (`parley sessions | head -1`): end quietly, as `cat` does.
    stdout is pointed at /dev/null so that the interpreter's last flush of what is still
    buffered fails no more (Python's own advice for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE  # 141, what a shell reports for a command ended by a closed pipe


def _main(argv: list[str] | None) -> int:
    # Before anything else: this process (the server, or `parley chat` that starts it) holds
    # the keys, and a child without CAP_SYS_PTRACE cannot read a non-dumpable process's environ.
    make_undumpable()
    parser = _build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == FAKE_LLM:  # a test double: no settings, no store
        from parley.fakellm.__main__ import main as fake_llm

        return fake_llm(rest, prog=f"{parser.prog} {FAKE_LLM}")
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.log_level not in LOG_LEVELS:  # a bad $PARLEY_LOG_LEVEL (argparse checks only flags)
        parser.error(f"PARLEY_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}")
    if args.command == "chat" and args.session is not None and args.store is False:
        parser.error("--no-store starts a new session: it cannot continue one (--session)")
    _set_up_logging(args.log_level)
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"parley: {error}", file=sys.stderr)
        return 2
    # A key in a variable config.toml names (not called *_KEY) is a secret all the same.
    remember_secrets(
        settings.api_key(provider)
        for provider in settings.providers.values()
        if provider.api_key_env
    )

    from parley.store import StoreUnavailable

    try:
        return _run(args, settings)
    except StoreUnavailable as error:  # PARLEY_HOME missing and uncreatable, read-only ...
        print(f"parley: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "serve":
        from parley.server import run_stdio

        # Probed once, in a thread (a bwrap run: ~20 ms the server's start need not wait for).
        threading.Thread(target=_log_sandbox_status, args=(settings,), daemon=True).start()
        run_stdio(settings, args.framing)
        return 0
    if args.command == "doctor":
        return _doctor(settings)
    if args.command == "kernels":
        from parley.kernels_command import list_kernels

        return list_kernels(args.json)
    if args.command in ("chat", "demo"):
        try:
            from parley.chat_command import run_chat
            from parley.demo import run_demo
            from parley.store import Store
            from parley.transcript import UnknownSession, find_session

            if args.command == "demo":
                return run_demo(settings.home)
            store = Store.open_in(settings.home)  # its server would fail on it: say why here
            try:
                if args.session is not None:
                    stored = find_session(store, args.session)
                    args.session, args.session_model = stored.id, stored.settings.model
                    args.session_title = stored.title  # (the interactive chat names it)
            except UnknownSession as error:
                print(f"parley: {error}", file=sys.stderr)
                return 1
            finally:
                store.close()
            return run_chat(args, settings)
        except KeyboardInterrupt:  # Ctrl-C before the chat's own handler is in place
            print("Cancelled.", file=sys.stderr)
            return 130  # 128 + SIGINT, as the chat itself exits on Ctrl-C
    if args.command in ("sessions", "export"):
        return _read_store(args, settings)

    if args.command == "bench":
        if args.profile:
            from parley.bench.profile import run_profile

            return run_profile()
        from parley.bench import run_benchmarks

        return run_benchmarks(
            quick=args.quick,
            only_session_load=args.session_load,
            only_streaming=args.streaming,
            only_snapshots=args.snapshots,
        )
    return 2


def _log_sandbox_status(settings: Settings) -> None:
    status = sandbox_status(settings.sandbox)
    log = logging.getLogger("parley.sandbox")
    (log.info if status.sandboxed else log.warning)("%s", status.summary())


def _doctor(settings: Settings) -> int:
    """What protects the user here, in a few lines; always exits 0 (it reports, it does not
    judge)."""
    status = sandbox_status(settings.sandbox)
    if status.sandboxed:
        print(f"sandbox: yes — the kernel, commands and MCP servers run in {status.reason}")
    else:
        print(f"sandbox: NO — children run unsandboxed: {status.reason}")
        print("  (install bubblewrap, `apt-get install bubblewrap`, where user namespaces work)")
    for line in policy_lines(settings.sandbox, Path.cwd()):
        print(f"  {line}")
    names = ", ".join(sorted(CHILD_VARIABLES | set(settings.sandbox.env)))
    print(f"environment: children get only {names} (none that looks like a secret)")
    cap = status.pids_cap if status.pids_capped else f"none ({status.pids_cap})"
    print(f"pids cap: {cap}")
    network = settings.sandbox
    kernel = "allowed" if network.kernel_network else "off"
    mcp = ", ".join(network.mcp_network) or "none"
    print(f"network: the kernel's is {kernel}; MCP servers allowed it: {mcp}")
    print(f"warm start: {warm_start_status(os.environ)}")
    return 0


def _for_stdout(text: str) -> str:
    """A stored text (a model's answer, a command's output) as stdout may get it: on a
    terminal, with no escape sequence or control that could drive it (`terminal_text`); to
    a file or a pipe, as it was stored."""
    if not sys.stdout.isatty():
        return text
    from parley.terminal_text import terminal_text

    return terminal_text(text)


def _read_store(args: argparse.Namespace, settings: Settings) -> int:
    from parley.agent.export import export_json, export_markdown
    from parley.store import Store
    from parley.transcript import (
        NO_SESSIONS,
        UnknownSession,
        find_session,
        sessions_json,
        sessions_table,
    )

    store = Store.open_in(settings.home)
    try:
        if args.command == "sessions":
            if args.json:
                listing = sessions_json(store, limit=args.limit)
            else:  # the columns' names are for a person, not for `| head -1`
                header = args.header and sys.stdout.isatty()
                listing = sessions_table(store, limit=args.limit, header=header)
            if not listing:
                print(NO_SESSIONS, file=sys.stderr)
                return 0
            print(_for_stdout(listing))
            sys.stdout.flush()
            return 0
        try:
            session = find_session(store, args.session)
        except UnknownSession as error:
            print(f"parley: {error}", file=sys.stderr)
            return 1
        render = export_json if args.format == "json" else export_markdown
        print(_for_stdout(render(store, session)))
        sys.stdout.flush()  # a closed pipe is found here, inside `main`'s handler
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
