"""The Python tools: run and inspect the live program in the session's kernel.

All of them but `python_who_calls` work inside one shared `PythonKernel`, the workspace's own
interpreter, so what they show is the program as it is loaded right now. `python_who_calls` is
static: it reads the workspace's files (AST), with no need for the kernel.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import attrs

from parley.tools.arguments import required_string
from parley.tools.base import ToolContext, ToolResult, ToolSpec
from parley.tools.kernel import KernelReply, PythonKernel
from parley.tools.workspace import workspace_files

WHO_CALLS_MAX_SITES = 200


def _target_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"target": {"type": "string", "description": description}},
        "required": ["target"],
        "additionalProperties": False,
    }


DOTTED_TARGET = "A name in the kernel's namespace or a dotted path, e.g. 'geometry.Shape.area'."


def _section(title: str, text: str) -> str:
    return f"{title}:\n{text.rstrip()}"


def format_reply(reply: KernelReply, body: str | None) -> ToolResult:
    """What the model is sent: notes about the kernel, captured output, then the answer
    (`body`) or the exception."""
    parts: list[str] = []
    if reply.kernel_note:
        parts.append(reply.kernel_note)
    if reply.stdout:
        parts.append(_section("stdout", reply.stdout))
    if reply.stderr:
        parts.append(_section("stderr", reply.stderr))
    if reply.process_output:
        parts.append(_section("output from subprocesses or C code", reply.process_output))
    if reply.error:
        parts.append(reply.error.get("traceback") or reply.error.get("message", "failed"))
    elif reply.ok and body:
        parts.append(body)
    raw = attrs.asdict(reply)
    return ToolResult("\n".join(parts) or "(no output)", is_error=not reply.ok, raw_output=raw)


class KernelTool:
    """A tool that runs in the shared kernel. Closing any of them closes the kernel."""

    spec: ToolSpec

    def __init__(self, kernel: PythonKernel) -> None:
        self.kernel = kernel

    async def aclose(self) -> None:
        await self.kernel.aclose()  # idempotent: the registry may close every tool


class PythonEvalTool(KernelTool):
    spec = ToolSpec(
        name="python_eval",
        description=(
            "Run Python code in the workspace's live kernel (a persistent namespace; the "
            "project's modules import by name). Returns stdout, stderr, the last "
            "expression's value, or the traceback."
        ),
        input_schema={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python statements."}},
            "required": ["code"],
            "additionalProperties": False,
        },
        kind="execute",
        needs_permission=True,
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        code = arguments.get("code")
        if not isinstance(code, str):
            return ToolResult("'code' must be a string of Python code.", is_error=True)
        reply = await self.kernel.call("eval", code=code)
        value = reply.result.get("value")
        if value is None:
            quiet = not (reply.stdout or reply.stderr or reply.process_output)
            body = "(no output and no value)" if quiet else None
        else:
            body = _section("value", value) if "\n" in value else f"value: {value}"
        return format_reply(reply, body)


class TargetTool(KernelTool):
    """A kernel tool about one `target` (a name or a dotted path): the kernel operation
    `operation` finds it, `render` says what was found."""

    operation: str

    def render(self, target: str, found: dict[str, Any]) -> str:
        raise NotImplementedError

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            target = required_string(arguments, "target")
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        reply = await self.kernel.call(self.operation, target=target)
        return format_reply(reply, self.render(target, reply.result))


class PythonDescribeTool(TargetTool):
    spec = ToolSpec(
        name="python_describe",
        description=(
            "Describe a Python object in the live kernel: type, signature, docstring, "
            "defining file and line."
        ),
        input_schema=_target_schema(DOTTED_TARGET),
        kind="read",
    )

    operation = "describe"

    def render(self, target: str, found: dict[str, Any]) -> str:
        lines = [f"{target}: {found.get('kind')} ({found.get('type')})"]
        if found.get("signature"):
            lines.append(f"signature: {target.rsplit('.', 1)[-1]}{found['signature']}")
        if found.get("kind") == "data":
            lines.append(f"value: {found.get('repr')}")
        if found.get("file"):
            line = f":{found['line']}" if found.get("line") else ""
            lines.append(f"defined in: {found['file']}{line}")
        lines.append(_section("doc", found["doc"]) if found.get("doc") else "doc: (none)")
        return "\n".join(lines)


class PythonSourceTool(TargetTool):
    spec = ToolSpec(
        name="python_source",
        description="Show the source of a function, class, method or module, with file and line.",
        input_schema=_target_schema(DOTTED_TARGET),
        kind="read",
    )

    operation = "source"

    def render(self, target: str, found: dict[str, Any]) -> str:
        header = f"{found.get('file')}, lines {found.get('line')}-{found.get('end_line')}:"
        if found.get("note"):
            header = f"{found['note']}\n{header}"
        return f"{header}\n{found.get('source', '')}"


class PythonMembersTool(TargetTool):
    spec = ToolSpec(
        name="python_members",
        description=(
            "List the members of a module or class in the live kernel, with their kinds "
            "(function, class, method, property, module, data) and signatures."
        ),
        input_schema=_target_schema("A module or class, e.g. 'geometry' or 'geometry.Shape'."),
        kind="read",
    )

    operation = "members"

    def render(self, target: str, found: dict[str, Any]) -> str:
        members = found.get("members", [])
        lines = [f"{target} ({found.get('owner_kind')}), {found.get('total', 0)} members:"]
        for member in members:
            line = f"  {member['name']}  [{member['kind']}]"
            if member.get("signature"):
                line += f" {member['signature']}"
            if member.get("repr"):
                line += f" = {member['repr']}"
            if member.get("from"):
                line += f"  (from {member['from']})"
            if member.get("doc"):
                line += f"  # {member['doc']}"
            lines.append(line)
        if found.get("total", 0) > len(members):
            lines.append(f"[… {found['total'] - len(members):,} more members not shown]")
        return "\n".join(lines)


class PythonAproposTool(KernelTool):
    spec = ToolSpec(
        name="python_apropos",
        description=(
            "Find names matching a regular expression (case-insensitive) in the kernel's "
            "loaded modules, or in a package and all its submodules (which are imported)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "A Python regular expression."},
                "package": {
                    "type": "string",
                    "description": "Search this package's modules instead of loaded ones.",
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        kind="search",
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            pattern = required_string(arguments, "pattern")
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        package = arguments.get("package") or None
        if package is not None and not isinstance(package, str):
            return ToolResult("'package' must be a string.", is_error=True)
        reply = await self.kernel.call("apropos", pattern=pattern, package=package)
        found = reply.result
        hits = found.get("hits", [])
        where = f"package {package}" if package else "loaded modules"
        searched = f"{found.get('modules_searched', 0)} modules"
        if not hits:
            body = f"No names match {pattern!r} in {where} ({searched})."
        else:
            lines = [f"{found.get('total')} names match {pattern!r} in {where} ({searched}):"]
            for hit in hits:
                signature = f" {hit['signature']}" if hit.get("signature") else ""
                lines.append(f"  {hit['name']}  [{hit['kind']}]{signature}")
            if found.get("total", 0) > len(hits):
                lines.append(f"[… {found['total'] - len(hits):,} more not shown; narrow it]")
            body = "\n".join(lines)
        failures = found.get("import_failures") or []
        if failures:
            body += "\nModules that failed to import:\n" + "\n".join(f"  {f}" for f in failures)
        return format_reply(reply, body)


class PythonLastErrorTool(KernelTool):
    spec = ToolSpec(
        name="python_last_error",
        description="Show the last exception raised in the kernel (by python_eval or any "
        "Python tool), with its traceback.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        kind="read",
    )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        failure = self.kernel.last_failure
        before = f"\nWhat last happened to the kernel itself: {failure}" if failure else ""
        if not self.kernel.is_running:
            # Do not start a kernel only to learn that it has no error.
            return ToolResult(f"No exception is recorded: the kernel is not running.{before}")
        reply = await self.kernel.call("last_error")
        error = reply.result.get("error")
        if not reply.ok:
            return format_reply(reply, None)
        if not error:
            return ToolResult(f"No exception has been raised since the kernel started.{before}")
        return ToolResult(
            f"{error['during']} at {error['time']} raised {error['type']}:\n{error['traceback']}",
            raw_output=error,
        )


# --- who calls: static, over the workspace's files --------------------------------------


@attrs.frozen
class CallSite:
    file: str  # relative to the workspace, with /
    line: int
    caller: str  # qualified name of the enclosing function or class, or "<module>"
    text: str


class _CallFinder(ast.NodeVisitor):
    """Calls whose callee is `name` or ends in `.name` (`area(...)`, `self.area(...)`)."""

    def __init__(self, name: str, file: str, source_lines: list[str]) -> None:
        self.name = name
        self.file = file
        self.source_lines = source_lines
        self.scope: list[str] = []
        self.sites: list[CallSite] = []

    def _visit_scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_scope

    def visit_Call(self, node: ast.Call) -> None:
        callee = node.func
        called = (isinstance(callee, ast.Name) and callee.id == self.name) or (
            isinstance(callee, ast.Attribute) and callee.attr == self.name
        )
        if called:
            text = self.source_lines[node.lineno - 1].strip() if node.lineno else ""
            caller = ".".join(self.scope) or "<module>"
            self.sites.append(CallSite(self.file, node.lineno, caller, text[:300]))
        self.generic_visit(node)


def find_call_sites(workspace: Path, name: str) -> tuple[list[CallSite], list[str]]:
    """Every call of `name` in the workspace's Python files, and the files that did not
    parse."""
    sites: list[CallSite] = []
    unparsable: list[str] = []
    root = workspace.resolve()
    for relative in workspace_files(root):
        if not relative.endswith(".py"):
            continue
        try:
            source = (root / relative).read_text(encoding="utf-8", errors="replace")
            tree = ast.parse(source, relative)
        except (OSError, SyntaxError, ValueError):
            unparsable.append(relative)
            continue
        finder = _CallFinder(name, relative, source.splitlines())
        finder.visit(tree)
        sites.extend(finder.sites)
    return sites, unparsable


class PythonWhoCallsTool:
    spec = ToolSpec(
        name="python_who_calls",
        description=(
            "Find the call sites of a function or method in the workspace's Python files "
            "(static, by syntax): file, line, calling function, and the line."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The function's name; 'area' also matches 'x.area(...)'.",
                }
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        kind="search",
    )

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            # A dotted name matches on its last part: calls are found by syntax, not binding.
            name = required_string(arguments, "name").strip().rsplit(".", 1)[-1]
        except ValueError as exc:
            return ToolResult(str(exc), is_error=True)
        if not name.isidentifier():
            return ToolResult(f"{name!r} is not a Python name.", is_error=True)
        sites, unparsable = await asyncio.to_thread(find_call_sites, self.workspace, name)
        if not sites:
            text = f"No calls to {name}(...) found in the workspace's Python files."
        else:
            lines = [f"{len(sites)} calls to {name}(...):"]
            for site in sites[:WHO_CALLS_MAX_SITES]:
                lines.append(f"{site.file}:{site.line} in {site.caller}: {site.text}")
            if len(sites) > WHO_CALLS_MAX_SITES:
                lines.append(f"[… {len(sites) - WHO_CALLS_MAX_SITES:,} more not shown]")
            text = "\n".join(lines)
        if unparsable:
            shown = ", ".join(unparsable[:10]) + (" …" if len(unparsable) > 10 else "")
            text += f"\n({len(unparsable)} files could not be parsed: {shown})"
        return ToolResult(text)


def python_tools(kernel: PythonKernel, workspace: Path) -> list[Any]:
    """The seven Python tools; all but who_calls share `kernel`."""
    return [
        PythonEvalTool(kernel),
        PythonDescribeTool(kernel),
        PythonSourceTool(kernel),
        PythonMembersTool(kernel),
        PythonAproposTool(kernel),
        PythonWhoCallsTool(workspace),
        PythonLastErrorTool(kernel),
    ]
