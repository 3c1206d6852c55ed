"""The Python tools: run the program in the session's kernel, and inspect it without running it.

`python_eval` (asked permission for) runs code in one shared `PythonKernel`, the workspace's own
interpreter, started by the first eval. The read-only tools (describe, source, members,
apropos, last_error) never import and never start the kernel: a target the running kernel has
already loaded is answered live from it; everything else statically, from the source, by
`static_python.py`. `python_who_calls` is static too: it reads the workspace's files (AST).
"""

from __future__ import annotations

import ast
import asyncio
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from parley.core.call_view import CallView
from parley.core.unsandboxed import unsandboxed_warning
from parley.sandbox import UNSANDBOXED_MARK, sandbox_status
from parley.tools.arguments import NoArguments, argument
from parley.tools.base import DeclaredTool, ToolContext, ToolResult, declared_spec, quoted
from parley.tools.confined import Roots, open_confined, printable_name, resolved_roots
from parley.tools.kernel import NOT_RUNNING_NOTE, KernelReply, PythonKernel
from parley.tools.workspace import SEARCH_MAX_FILE_BYTES, files_in_roots

if TYPE_CHECKING:
    from parley.tools.static_python import StaticIntrospector

WHO_CALLS_MAX_SITES = 200
APROPOS_MAX_HITS = 200  # as in the kernel and static_python


STATIC_NOTE = "(read from the source: nothing was imported or run)"


@attrs.frozen
class EvalArguments:
    code: str = argument("Python statements.", blank=True)


@attrs.frozen
class TargetArguments:
    target: str = argument(
        "A dotted path, e.g. 'geometry.Shape.area', or a name defined by python_eval."
    )


@attrs.frozen
class MembersArguments(TargetArguments):
    target: str = argument("A module or class, e.g. 'geometry' or 'geometry.Shape'.")


@attrs.frozen
class AproposArguments:
    pattern: str = argument("A Python regular expression.")
    package: str | None = argument(
        "Search this package's modules (from their source).", default=None
    )


@attrs.frozen
class WhoCallsArguments:
    name: str = argument("The function's name; 'area' also matches 'x.area(...)'.")


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


class KernelTool(DeclaredTool):
    """A tool that runs in the shared kernel. Closing any of them closes the kernel."""

    def __init__(self, kernel: PythonKernel) -> None:
        self.kernel = kernel

    async def aclose(self) -> None:
        await self.kernel.aclose()  # idempotent: the registry may close every tool


class PythonEvalTool(KernelTool):
    Arguments = EvalArguments
    spec = declared_spec(
        "python_eval",
        (
            "Run Python code in the workspace's live kernel (a persistent namespace; the "
            "project's modules import by name). Returns stdout, stderr, the last "
            "expression's value, or the traceback."
        ),
        Arguments,
        kind="execute",
        needs_permission=True,
    )

    def view(self, arguments: EvalArguments) -> CallView:
        status = sandbox_status(self.kernel.settings.sandbox)
        if status.sandboxed:
            return CallView("Run Python", content=(arguments.code,))
        # The user decides knowing the code runs with what the user's account can reach.
        note = unsandboxed_warning(status.reason)
        return CallView("Run Python" + UNSANDBOXED_MARK, content=(arguments.code, note))

    async def execute(self, arguments: EvalArguments, context: ToolContext) -> ToolResult:
        if context.edit_journal is not None:  # for the kernel this call may start
            self.kernel.runs_later = context.edit_journal.runs_later_found()
        reply = await self.kernel.call("eval", code=arguments.code)
        value = reply.result.get("value")
        if value is None:
            quiet = not (reply.stdout or reply.stderr or reply.process_output)
            body = "(no output and no value)" if quiet else None
        else:
            body = _section("value", value) if "\n" in value else f"value: {value}"
        return format_reply(reply, body)


class NoStaticAnswer(Exception):
    """The source does not answer (a name not found, a file that cannot be read): one
    sentence for the model."""


class StaticSource:
    """The session's `StaticIntrospector`, made on first use in a worker thread: importing
    griffe takes about 0.1 s, which neither the server's start nor its event loop should pay."""

    def __init__(self, workspace: Path, output_limit: int) -> None:
        self.workspace = workspace
        self.output_limit = output_limit
        self._lock = threading.Lock()
        self._introspector: StaticIntrospector | None = None

    async def ask(self, operation: str, *args: Any) -> dict[str, Any]:
        """Run `operation` (describe, source, members, apropos) off the event loop."""
        return await asyncio.to_thread(self._ask, operation, *args)

    def _ask(self, operation: str, *args: Any) -> dict[str, Any]:
        from parley.tools import static_python

        with self._lock:
            if self._introspector is None:
                self._introspector = static_python.StaticIntrospector(
                    self.workspace, self.output_limit
                )
        try:
            return getattr(self._introspector, operation)(*args)
        except static_python.StaticLookupError as exc:
            raise NoStaticAnswer(str(exc)) from None


class ReadOnlyTool(KernelTool):
    """A tool that reads the program without running any of it: it asks a running kernel
    about what it has loaded, and the source about the rest."""

    def __init__(self, kernel: PythonKernel, static: StaticSource) -> None:
        super().__init__(kernel)
        self.static = static

    async def ask_live(self, operation: str, **args: Any) -> tuple[KernelReply | None, str | None]:
        """The kernel's answer, or None and what to tell about the kernel (its death, say)
        when the answer must come from the source: the kernel is not running (it is not
        started for this), or the target is not loaded there (it is not imported)."""
        reply = await self.kernel.call(operation, start=False, **args)
        error_type = (reply.error or {}).get("type")
        if reply.ok or (error_type is not None and error_type != "NotLoaded"):
            return reply, None
        note = reply.kernel_note if reply.kernel_note != NOT_RUNNING_NOTE else None
        return None, note


class TargetTool(ReadOnlyTool):
    """A read-only tool about one `target` (a dotted path or a name eval defined): the
    operation `operation` finds it, live or in the source; `render` says what was found."""

    Arguments = TargetArguments
    operation: str
    title: str  # of a call, with `{target}`: "Describe {target}"

    def view(self, arguments: TargetArguments) -> CallView:
        return CallView(self.title.format(target=quoted(arguments.target)))

    def render(self, target: str, found: dict[str, Any]) -> str:
        raise NotImplementedError

    async def execute(self, arguments: TargetArguments, context: ToolContext) -> ToolResult:
        target = arguments.target
        reply, kernel_note = await self.ask_live(self.operation, target=target)
        if reply is not None:
            return format_reply(reply, self.render(target, reply.result))
        try:
            found = await self.static.ask(self.operation, target)
        except NoStaticAnswer as exc:
            return ToolResult("\n".join(filter(None, [kernel_note, str(exc)])), is_error=True)
        text = "\n".join(filter(None, [kernel_note, self.render(target, found), STATIC_NOTE]))
        return ToolResult(text, raw_output={"static": True, **found})


class PythonDescribeTool(TargetTool):
    spec = declared_spec(
        "python_describe",
        (
            "Describe a Python object (function, class, method, module, ...): kind, "
            "signature, docstring, defining file and line. Read from the source, or from the "
            "live kernel for what python_eval has loaded; never imports."
        ),
        TargetArguments,
        kind="read",
    )

    operation = "describe"
    title = "Describe {target}"

    def render(self, target: str, found: dict[str, Any]) -> str:
        lines = [f"{target}: {found.get('kind')} ({found.get('type')})"]
        if found.get("signature"):
            lines.append(f"signature: {target.rsplit('.', 1)[-1]}{found['signature']}")
        if found.get("kind") == "data" and "repr" in found:
            lines.append(f"value: {found['repr']}")
        elif found.get("value_source"):
            lines.append(f"value (in source): {found['value_source']}")
        if found.get("imported_from"):
            lines.append(f"imported from: {found['imported_from']}")
        if found.get("file"):
            line = f":{found['line']}" if found.get("line") else ""
            lines.append(f"defined in: {found['file']}{line}")
        lines.append(_section("doc", found["doc"]) if found.get("doc") else "doc: (none)")
        return "\n".join(lines)


class PythonSourceTool(TargetTool):
    spec = declared_spec(
        "python_source",
        (
            "Show the source of a function, class, method or module, with file and line "
            "(read from the files; never imports)."
        ),
        TargetArguments,
        kind="read",
    )

    operation = "source"
    title = "Show the source of {target}"

    def render(self, target: str, found: dict[str, Any]) -> str:
        header = f"{found.get('file')}, lines {found.get('line')}-{found.get('end_line')}:"
        if found.get("note"):
            header = f"{found['note']}\n{header}"
        return f"{header}\n{found.get('source', '')}"


class PythonMembersTool(TargetTool):
    Arguments = MembersArguments
    spec = declared_spec(
        "python_members",
        (
            "List the members of a module or class, with their kinds (function, class, "
            "method, property, module, data) and signatures. Read from the source, or from "
            "the live kernel for what python_eval has loaded; never imports."
        ),
        Arguments,
        kind="read",
    )

    operation = "members"
    title = "List the members of {target}"

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


class PythonAproposTool(ReadOnlyTool):
    Arguments = AproposArguments
    spec = declared_spec(
        "python_apropos",
        (
            "Find names matching a regular expression (case-insensitive) in a package and all "
            "its submodules, or else in the workspace's own modules and the modules the "
            "kernel has loaded. Read from the source; never imports."
        ),
        Arguments,
        kind="search",
    )

    def view(self, arguments: AproposArguments) -> CallView:
        title = f"Find names matching {quoted(arguments.pattern)}"
        return CallView(title + (f" in {arguments.package}" if arguments.package else ""))

    async def execute(self, arguments: AproposArguments, context: ToolContext) -> ToolResult:
        pattern = arguments.pattern
        package = arguments.package or None
        try:
            # First from the source: it also checks the pattern before the kernel is asked.
            found = await self.static.ask("apropos", pattern, package)
        except NoStaticAnswer as exc:
            return ToolResult(str(exc), is_error=True)
        where = f"package {package}" if package else "the workspace's modules"
        reply = None
        if package is None:
            reply, _ = await self.ask_live("apropos", pattern=pattern)
            if reply is not None and not reply.ok:
                return format_reply(reply, None)
            if reply is not None:
                found = merge_hits(reply.result, found)
                where = "the workspace's modules and the kernel's loaded modules"
        body = render_apropos(pattern, where, found)
        if reply is not None:
            return format_reply(reply, body)
        return ToolResult(f"{body}\n{STATIC_NOTE}", raw_output={"static": True, **found})


def merge_hits(live: dict[str, Any], static: dict[str, Any]) -> dict[str, Any]:
    """The kernel's hits, and the source's hits about modules the kernel has not loaded."""
    shown = {hit["name"] for hit in live.get("hits", [])}
    extra = [hit for hit in static.get("hits", []) if hit["name"] not in shown]
    hits = sorted(live.get("hits", []) + extra, key=lambda hit: hit["name"])
    return {
        "modules_searched": live.get("modules_searched", 0) + static.get("modules_searched", 0),
        "total": live.get("total", 0) + len(extra),
        "hits": hits[:APROPOS_MAX_HITS],
        "unreadable": static.get("unreadable", []),
    }


def render_apropos(pattern: str, where: str, found: dict[str, Any]) -> str:
    hits = found.get("hits", [])
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
    unreadable = found.get("unreadable") or []
    if unreadable:
        body += "\nModules that could not be read:\n" + "\n".join(f"  {u}" for u in unreadable)
    return body


class PythonLastErrorTool(KernelTool):
    Arguments = NoArguments
    spec = declared_spec(
        "python_last_error",
        "Show the last exception raised in the kernel (by python_eval or any "
        "Python tool), with its traceback.",
        Arguments,
        kind="read",
    )

    def view(self, arguments: NoArguments) -> CallView:
        return CallView("Show the last Python error")

    async def execute(self, arguments: NoArguments, context: ToolContext) -> ToolResult:
        failure = self.kernel.last_failure
        before = f"\nWhat last happened to the kernel itself: {failure}" if failure else ""
        # Do not start a kernel only to learn that it has no error.
        reply = await self.kernel.call("last_error", start=False)
        if reply.kernel_note == NOT_RUNNING_NOTE:
            return ToolResult(f"No exception is recorded: the kernel is not running.{before}")
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


def find_call_sites(workspace: Roots | Path, name: str) -> tuple[list[CallSite], list[str]]:
    """Every call of `name` in the Python files of every root of the workspace, and the
    files that did not parse (or were too large to read). Files are opened as the file
    tools open them: no symlink followed, regular files only."""
    sites: list[CallSite] = []
    unparsable: list[str] = []
    root = resolved_roots(workspace)
    for relative in files_in_roots(root):
        if not relative.endswith(".py"):
            continue
        shown = printable_name(relative)
        try:
            with open_confined(root, relative) as file:
                if os.fstat(file.fileno()).st_size > SEARCH_MAX_FILE_BYTES:
                    raise ValueError("too large to parse")
                source = file.read().decode("utf-8", "replace")
            tree = ast.parse(source, shown)
        except (OSError, SyntaxError, ValueError):  # Refused is a ValueError
            unparsable.append(shown)
            continue
        finder = _CallFinder(name, shown, source.splitlines())
        finder.visit(tree)
        sites.extend(finder.sites)
    return sites, unparsable


class PythonWhoCallsTool(DeclaredTool):
    Arguments = WhoCallsArguments
    spec = declared_spec(
        "python_who_calls",
        (
            "Find the call sites of a function or method in the workspace's Python files "
            "(static, by syntax): file, line, calling function, and the line."
        ),
        Arguments,
        kind="search",
    )

    def __init__(self, workspace: Roots | Path) -> None:
        self.workspace = resolved_roots(workspace)

    def view(self, arguments: WhoCallsArguments) -> CallView:
        return CallView(f"Find the calls of {quoted(arguments.name)}")

    async def execute(self, arguments: WhoCallsArguments, context: ToolContext) -> ToolResult:
        # A dotted name matches on its last part: calls are found by syntax, not binding.
        name = arguments.name.strip().rsplit(".", 1)[-1]
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


def python_tools(kernel: PythonKernel, workspace: Roots | Path) -> list[Any]:
    """The seven Python tools; all but who_calls share `kernel`, and the read-only ones
    one `StaticSource` (its cache of parsed modules, the cwd's root's)."""
    roots = resolved_roots(workspace)
    static = StaticSource(roots.cwd, kernel.settings.output_limit)
    return [
        PythonEvalTool(kernel),
        PythonDescribeTool(kernel, static),
        PythonSourceTool(kernel, static),
        PythonMembersTool(kernel, static),
        PythonAproposTool(kernel, static),
        PythonWhoCallsTool(roots),
        PythonLastErrorTool(kernel),
    ]
