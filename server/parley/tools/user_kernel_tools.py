"""The Python tools of a session attached to the user's own kernel (`user_kernel.py`).

They take the place of Parley's `python_eval`, `python_describe`, `python_source`,
`python_members` and `python_last_error` (same names, so the model's habits hold):

- `python_eval` runs in the user's kernel, outside Parley's sandbox: its question says so,
  and it is asked every time (`ToolSpec.always_asks`: no "always allow", no mode, no
  `autoApprove` skips it).
- The read-only ones ask the kernel through the Jupyter protocol's own introspection,
  which runs no code of Parley's: `inspect_request` (describe; `detail_level: 1`, the
  source) and `complete_request` (members). What the kernel does not find is read from
  the workspace's source, as without a kernel (the tool they replace answers it).
- `python_last_error` is the last error the kernel reported to its frontends since Parley
  attached: a cell of the user's or an evaluation of Parley's.

`python_apropos` and `python_who_calls` stay Parley's: they read the source.
"""

from __future__ import annotations

from typing import Any

from parley.tools.arguments import NoArguments
from parley.tools.base import CallView, DeclaredTool, ToolContext, ToolResult, declared_spec, quoted
from parley.tools.command_output import strip_ansi
from parley.tools.kernel_images import image_content
from parley.tools.python_tools import EvalArguments, MembersArguments, TargetArguments
from parley.tools.user_kernel import KernelUnavailable, UserKernel, bounded

# Said in the eval's title and question, and in the tools' descriptions.
IN_YOUR_KERNEL = "in your kernel, not sandboxed"
ATTACHED_TOOLS = (
    "python_eval",
    "python_describe",
    "python_source",
    "python_members",
    "python_last_error",
)
MAX_MEMBERS = 300
LAST_CELLS = 5  # of the user's history, when no error was seen


class UserKernelTool(DeclaredTool):
    """A tool on the user's kernel; `replaced` is Parley's tool of the same name, which
    comes back when the session leaves the kernel (and answers from the source what the
    kernel does not know)."""

    def __init__(self, kernel: UserKernel, replaced: Any = None) -> None:
        self.kernel = kernel
        self.replaced = replaced

    def _said(self, *parts: str | None) -> str:
        return "\n".join(filter(None, [*self.kernel.take_notes(), *parts]))

    async def aclose(self) -> None:
        await self.kernel.aclose()  # idempotent: the registry closes every tool


class UserEvalTool(UserKernelTool):
    Arguments = EvalArguments
    spec = declared_spec(
        "python_eval",
        (
            "Run Python code in the user's own Jupyter kernel (their live namespace: the "
            "variables and objects they work with), outside Parley's sandbox. The user is "
            "asked every time. Not kept in their In[]/Out[] history. Returns stdout, stderr, "
            "the last expression's value, or the traceback."
        ),
        Arguments,
        kind="execute",
        needs_permission=True,
        always_asks=True,
    )

    def view(self, arguments: EvalArguments) -> CallView:
        note = (
            f"This runs in your own kernel ({self.kernel.where}), outside Parley's sandbox, "
            "with everything that kernel can reach. Parley asks every time."
        )
        return CallView(f"Run Python {IN_YOUR_KERNEL}", content=(arguments.code, note))

    async def execute(self, arguments: EvalArguments, context: ToolContext) -> ToolResult:
        try:
            result = await self.kernel.execute(arguments.code)
        except KernelUnavailable as error:
            return ToolResult(self._said(str(error)), is_error=True)
        body = "\n".join(result.parts) or ("(no output and no value)" if result.ok else "")
        text = self._said(result.note, body)
        shown = tuple(image_content(image) for image in result.images)
        return ToolResult(text or "(no output)", is_error=not result.ok, shown_first=shown)


class UserInspectTool(UserKernelTool):
    """describe and source: the kernel's `inspect_request` at `detail_level`."""

    Arguments = TargetArguments
    detail_level = 0
    title = "Describe {target} in your kernel"

    def view(self, arguments: TargetArguments) -> CallView:
        return CallView(self.title.format(target=quoted(arguments.target)))

    async def execute(self, arguments: TargetArguments, context: ToolContext) -> ToolResult:
        target = arguments.target.strip()
        content = {"code": target, "cursor_pos": len(target), "detail_level": self.detail_level}
        try:
            reply = await self.kernel.request("inspect_request", content)
        except KernelUnavailable as error:
            return ToolResult(self._said(str(error)), is_error=True)
        data = reply.get("data")
        text = data.get("text/plain") if isinstance(data, dict) else None
        if reply.get("status") == "ok" and reply.get("found") is True and isinstance(text, str):
            body = bounded(strip_ansi(text).strip(), self.kernel.settings.output_limit)
            return ToolResult(self._said(f"{target} (live, from your kernel):\n{body}"))
        if self.replaced is None:
            return ToolResult(self._said(f"Your kernel does not know {target!r}."), True)
        static = await self.replaced.run({"target": target}, context)
        note = f"Your kernel does not know {target!r}; from the workspace's source:"
        return ToolResult(self._said(note, static.content), static.is_error, static.raw_output)


class UserDescribeTool(UserInspectTool):
    spec = declared_spec(
        "python_describe",
        (
            "Describe a Python object as the user's kernel sees it (type, value, signature, "
            "docstring, file), through the kernel's own introspection (runs no code); what "
            "the kernel does not know is read from the workspace's source."
        ),
        TargetArguments,
        kind="read",
    )


class UserSourceTool(UserInspectTool):
    spec = declared_spec(
        "python_source",
        (
            "Show the source of a function, class or method as the user's kernel has it "
            "(the kernel's own introspection, which runs no code; else the workspace's files)."
        ),
        TargetArguments,
        kind="read",
    )
    detail_level = 1
    title = "Show the source of {target} in your kernel"


class UserMembersTool(UserKernelTool):
    Arguments = MembersArguments
    spec = declared_spec(
        "python_members",
        (
            "List the attributes of an object, module or class in the user's kernel, with "
            "their kinds and signatures where the kernel gives them (its completion, which "
            "runs no code); else read from the workspace's source."
        ),
        Arguments,
        kind="read",
    )

    def view(self, arguments: MembersArguments) -> CallView:
        return CallView(f"List the members of {quoted(arguments.target)} in your kernel")

    async def execute(self, arguments: MembersArguments, context: ToolContext) -> ToolResult:
        target = arguments.target.strip()
        code = f"{target}."
        try:
            reply = await self.kernel.request(
                "complete_request", {"code": code, "cursor_pos": len(code)}
            )
        except KernelUnavailable as error:
            return ToolResult(self._said(str(error)), is_error=True)
        members = completed_members(reply, len(code))
        if members:
            lines = [f"{target} (live, from your kernel), {len(members)} members:"]
            lines += [f"  {line}" for line in members[:MAX_MEMBERS]]
            if len(members) > MAX_MEMBERS:
                lines.append(f"[… {len(members) - MAX_MEMBERS:,} more members not shown]")
            return ToolResult(self._said("\n".join(lines)))
        if self.replaced is None:
            return ToolResult(self._said(f"Your kernel lists no members of {target!r}."), True)
        static = await self.replaced.run({"target": target}, context)
        note = f"Your kernel lists no members of {target!r}; from the workspace's source:"
        return ToolResult(self._said(note, static.content), static.is_error, static.raw_output)


def completed_members(reply: dict[str, Any], at: int) -> list[str]:
    """A `complete_reply`'s names after the dot, with IPython's types and signatures where
    it sends them (`_jupyter_types_experimental`); dunders left out."""
    matches = reply.get("matches")
    if reply.get("status") != "ok" or not isinstance(matches, list):
        return []
    metadata = reply.get("metadata")
    typed = metadata.get("_jupyter_types_experimental") if isinstance(metadata, dict) else None
    details: dict[str, tuple[str, str]] = {}
    for entry in typed if isinstance(typed, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("text"), str):
            kind, signature = entry.get("type"), entry.get("signature")
            details[entry["text"]] = (
                kind if isinstance(kind, str) else "",
                signature if isinstance(signature, str) else "",
            )
    start = reply.get("cursor_start")
    cut = at - start if type(start) is int and 0 <= start <= at else 0
    members = []
    for match in matches:
        if not isinstance(match, str) or len(match) > 1000:
            continue
        name = match.rsplit(".", 1)[-1] if "." in match else match[cut:] or match
        if name.startswith("__") or not name:
            continue
        kind, signature = details.get(match, ("", ""))
        shown = f"{name}  [{kind}]" if kind else name
        members.append(f"{shown} {signature}" if signature else shown)
    return sorted(set(members))


class UserLastErrorTool(UserKernelTool):
    Arguments = NoArguments
    spec = declared_spec(
        "python_last_error",
        (
            "Show the last exception the user's kernel reported since Parley attached: from "
            "a cell the user ran or from python_eval, with its traceback and cell."
        ),
        Arguments,
        kind="read",
    )

    def view(self, arguments: NoArguments) -> CallView:
        return CallView("Show the last Python error in your kernel")

    async def execute(self, arguments: NoArguments, context: ToolContext) -> ToolResult:
        error = self.kernel.last_error
        if error is None:
            none = (
                "No exception has been reported by your kernel since Parley attached to it "
                "(an earlier one is not sent to Parley)."
            )
            return ToolResult(self._said(none, await self._last_cells()))
        who = "python_eval" if error.by_parley else "your cell"
        parts = [f"{who} at {error.at} raised {error.name}: {error.value}"]
        if error.code:
            parts.append(f"The cell:\n{error.code}")
        parts.append(error.traceback)
        return ToolResult(self._said(*parts))

    async def _last_cells(self) -> str | None:
        """The user's last cells, from the kernel's own history (`history_request`, which runs
        nothing): what they ran before Parley attached."""
        content = {"output": False, "raw": True, "hist_access_type": "tail", "n": LAST_CELLS}
        try:
            reply = await self.kernel.request("history_request", content)
        except KernelUnavailable:
            return None
        history = reply.get("history")
        cells = [
            entry
            for entry in (history if isinstance(history, list) else [])
            if isinstance(entry, list)
            and len(entry) == 3
            and type(entry[1]) is int
            and isinstance(entry[2], str)
        ]
        # IPython's tail spans its earlier sessions too: only the kernel's own, the latest.
        latest = max((entry[0] for entry in cells if type(entry[0]) is int), default=None)
        cells = [entry for entry in cells if latest is not None and entry[0] == latest]
        if not cells:
            return None
        limit = self.kernel.settings.output_limit // LAST_CELLS
        shown = [f"In [{entry[1]}]:\n{bounded(entry[2], limit)}" for entry in cells]
        return "Your last cells (the kernel's history):\n" + "\n".join(shown)


def user_kernel_tools(kernel: UserKernel, parleys: dict[str, Any]) -> list[UserKernelTool]:
    """The tools that take the place of Parley's Python tools of the same names
    (`parleys`, by name)."""
    return [
        UserEvalTool(kernel, parleys.get("python_eval")),
        UserDescribeTool(kernel, parleys.get("python_describe")),
        UserSourceTool(kernel, parleys.get("python_source")),
        UserMembersTool(kernel, parleys.get("python_members")),
        UserLastErrorTool(kernel, parleys.get("python_last_error")),
    ]
