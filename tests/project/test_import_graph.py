"""The layers of `server/parley` and the imports allowed between them.

Every module is parsed (not imported) with `ast`; every `import parley...` counts, at module
level, in a function or under `TYPE_CHECKING`. A module may import only what its layer's row
below allows (by module-name prefix), and the graph has no cycle. docs/architecture.md
draws the same table.
"""

from __future__ import annotations

import ast
from pathlib import Path

import parley

PACKAGE_DIR = Path(parley.__file__).parent

# The layer a module belongs to: the longest prefix of its name listed here.
LAYERS = {
    "parley.core": "core",
    "parley.child_env": "core",  # a leaf like core: the environment a child gets
    "parley.display": "core",  # a leaf like core: the display rules (docs/display.md)
    "parley.sandbox": "core",  # a leaf like core: how every child process is started
    "parley.undumpable": "core",  # a leaf like core: a process whose memory no child reads
    "parley.sandbox_policy": "core",  # what a sandboxed child may reach, declared once
    "parley.seccomp": "core",  # the sandbox's seccomp filter
    "parley.pids_groups": "core",  # each child's pids cgroup
    "parley.tools": "tools",
    "parley.config": "config",
    "parley.config_file": "config",  # config.toml's shape, structured by cattrs
    "parley.store": "store",
    "parley.store_schema": "store",  # the store's migrations
    "parley.store_fork": "store",  # a session's copy for `session/fork`
    "parley.store_checkpoint": "store",  # the store's checkpoints, in a thread
    "parley.store_connection": "store",  # the store's connection, one thread at a time
    "parley.store_messages": "store",  # a message's stored form
    "parley.providers": "providers",
    "parley.protocol": "protocol",
    "parley.agent": "agent",
    "parley.server": "server",
    "parley.server_mcp": "server",  # the MCP servers a client lists, started and told
    "parley.client": "client",
    "parley.fakellm": "fakellm",
    "parley.scriptllm": "scriptllm",  # a test double too: a real llama.cpp server's model
    # The commands: each puts the layers together for one use; nothing imports them.
    "parley.cli": "commands",
    "parley.chat": "commands",  # a turn from the command line
    "parley.chat_command": "commands",  # `parley chat`'s options
    "parley.chat_input": "commands",  # the interactive chat's line editor
    "parley.chat_loop": "commands",  # the interactive chat: turn after turn in one session
    "parley.chat_markdown": "commands",  # the answer's Markdown drawn for the terminal
    "parley.chat_prompt": "commands",  # the prompt: the words and what is piped in
    "parley.chat_question": "commands",  # the permission question on the terminal
    "parley.chat_view": "commands",  # the turn on stdout and stderr
    "parley.terminal_text": "commands",  # what `parley chat` may send a terminal
    "parley.demo": "commands",
    "parley.transcript": "commands",
    "parley.kernels_command": "commands",  # `parley kernels`, `parley chat --kernel`
    "parley.bench": "commands",
    "parley.bench_llamacpp": "commands",
    "parley.__main__": "commands",
    "parley.entry": "commands",  # the `parley` script: `serve` warm where it can
    "parley.warm_start": "commands",  # `parley serve` handed to the warm process
    "parley.warm_process": "commands",  # the warm process: imports all, forks servers
    "parley.warm_server": "commands",  # its forked child: reads the request, serves
}

# What each layer may import (module-name prefixes), bottom to top. Its own layer is allowed;
# `parley` itself (the version) is open to all.
ALLOWED: dict[str, tuple[str, ...]] = {
    "core": (),
    "tools": ("parley.core", "parley.child_env", "parley.sandbox", "parley.sandbox_policy"),
    "config": ("parley.core", "parley.sandbox"),
    "store": ("parley.core",),
    "providers": ("parley.core", "parley.config", "parley.tools.base"),
    "protocol": ("parley.core", "parley.tools.base"),
    "agent": (
        "parley.core",
        "parley.display",
        "parley.sandbox",  # whether commands run sandboxed (what "allow always" may cover)
        "parley.sandbox_policy",  # which files run later outside the sandbox (always asked)
        "parley.config",
        "parley.store",
        "parley.store_fork",
        "parley.store_messages",  # a message's stored form (an export shows it)
        "parley.providers",
        "parley.tools",
    ),
    "server": (
        "parley.core",
        "parley.sandbox_policy",  # the `[sandbox] hidden` places, for the file tools' gate
        "parley.config",
        "parley.store",
        "parley.providers",
        "parley.tools",
        "parley.protocol",
        "parley.agent",
    ),
    "client": ("parley.core", "parley.protocol"),
    "fakellm": (),
    "scriptllm": (),
    "commands": ("parley",),  # anything
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The parley modules `path` imports, wherever the import statement is."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                # `from parley.tools import registry` imports a module; `from x import y` a name.
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return {target for target in found if target == "parley" or target.startswith("parley.")}


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE_DIR.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = {module_name(path): imports_of(path, modules) for path in paths}
    return {module: targets - {module} for module, targets in graph.items()}


def layer_of(module: str) -> str | None:
    prefixes = [prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        layer = layer_of(module)
        if layer is None:
            if module != "parley":
                problems.append(f"{module} is in no layer: add it to LAYERS")
            continue
        own = tuple(prefix for prefix, name in LAYERS.items() if name == layer)
        for target in sorted(targets):
            if target != "parley" and not _within(target, own + ALLOWED[layer]):
                problems.append(f"{module} ({layer}) imports {target} ({layer_of(target)})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path for each cycle found by a depth-first walk."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            found.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return found


# --- the checks ---------------------------------------------------------------------------


def test_every_import_goes_down_the_layers() -> None:
    assert layer_violations(import_graph()) == []


def test_there_is_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_core_imports_nothing_of_parley() -> None:
    graph = import_graph()
    core = {module: targets for module, targets in graph.items() if layer_of(module) == "core"}
    assert "parley.core.conversation" in core and "parley.core.errors" in core
    # The leaves beside core (the launcher and its policy) import only each other and core.
    assert all(layer_of(target) == "core" for targets in core.values() for target in targets)


def test_the_command_rules_are_pure() -> None:
    # What "allow always" covers for shell commands is decided by the rules and their table
    # of programs alone (the standard library and attrs), nothing else of Parley.
    graph = import_graph()
    assert graph["parley.tools.command_rules"] == {"parley.tools.command_policy"}
    assert graph["parley.tools.command_policy"] == set()


def test_only_the_commands_import_the_script_model() -> None:
    # parley.scriptllm serves the tests and `parley bench`; the server never loads it.
    graph = import_graph()
    importers = {m for m, targets in graph.items() if _within_any(targets, "parley.scriptllm")}
    assert {layer_of(module) for module in importers} <= {"scriptllm", "commands"}


def _within_any(modules: set[str], prefix: str) -> bool:
    return any(_within(module, (prefix,)) for module in modules)


def test_the_graph_sees_in_function_imports() -> None:
    # cli.py imports the server inside `main`, so `parley chat` does not load pygls.
    assert "parley.server" in import_graph()["parley.cli"]


# --- the checker catches what it must -------------------------------------------------------


def test_an_upward_import_is_reported() -> None:
    graph = import_graph()
    graph["parley.core.usage"] = graph["parley.core.usage"] | {"parley.agent.turn"}
    graph["parley.providers.base"] = graph["parley.providers.base"] | {"parley.store"}

    assert layer_violations(graph) == [
        "parley.core.usage (core) imports parley.agent.turn (agent)",
        "parley.providers.base (providers) imports parley.store (store)",
    ]


def test_a_cycle_is_reported() -> None:
    graph = import_graph()
    graph["parley.providers.errors"] = graph["parley.providers.errors"] | {"parley.providers.base"}

    assert cycles(graph) == [
        ["parley.providers.base", "parley.providers.errors", "parley.providers.base"]
    ]


def test_a_module_in_no_layer_is_reported() -> None:
    graph = import_graph() | {"parley.newthing": set()}

    assert layer_violations(graph) == ["parley.newthing is in no layer: add it to LAYERS"]
