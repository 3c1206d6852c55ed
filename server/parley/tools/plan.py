"""`update_plan`: the model's task list, shown to the user as ACP `plan` updates.

Each call gives the whole plan (every entry with its status now): the client replaces the
plan it shows (ACP's `Plan`). The call is stored like any other; `session/load` replays its
plan update where it came (agent/replay.py reads it back with `read_plan`).

Its arguments hold a list of objects, which `arguments.py` does not declare: the tool
reads them itself (`read_plan`), with the same kind of error for each wrong one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import attrs

from parley.core import updates
from parley.core.call_view import CallView
from parley.tools.arguments import InvalidArguments
from parley.tools.base import DeclaredTool, ToolContext, ToolResult, ToolSpec

NAME = "update_plan"
STATUSES = ("pending", "in_progress", "completed")
PRIORITIES = ("high", "medium", "low")
DEFAULT_PRIORITY = "medium"
# A plan is for a person to follow: this many entries at most, each this long at most.
MAX_ENTRIES = 50
MAX_ENTRY_CHARS = 500

DESCRIPTION = (
    "Show the user your plan for a task of several steps, as a checklist they follow. "
    "Give the whole plan each time (every entry with its current status): call it when you "
    "start such a task and whenever an entry starts or is completed."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entries": {
            "type": "array",
            "description": "The whole plan, in order.",
            "maxItems": MAX_ENTRIES,
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "What this step does."},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "priority": {
                        "type": "string",
                        "enum": list(PRIORITIES),
                        "description": f"Default: {DEFAULT_PRIORITY}.",
                    },
                },
                "required": ["content", "status"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["entries"],
    "additionalProperties": False,
}


@attrs.frozen
class PlanEntry:
    content: str
    status: str  # one of STATUSES
    priority: str = DEFAULT_PRIORITY  # one of PRIORITIES

    def to_wire(self) -> dict[str, str]:
        """ACP's `PlanEntry`."""
        return {"content": self.content, "priority": self.priority, "status": self.status}


@attrs.frozen
class UpdatePlanArguments:
    entries: tuple[PlanEntry, ...]


def read_plan(arguments: Any) -> UpdatePlanArguments:
    """A call's arguments as a plan; `InvalidArguments` names the first thing wrong."""
    entries = arguments.get("entries") if isinstance(arguments, Mapping) else None
    if not isinstance(entries, list):
        raise InvalidArguments(
            "'entries' must be a list of {content, status, priority} objects (the whole plan)"
        )
    if len(entries) > MAX_ENTRIES:
        raise InvalidArguments(
            f"'entries' has {len(entries)} entries: a plan has at most {MAX_ENTRIES}"
        )
    return UpdatePlanArguments(
        tuple(_entry(entry, f"entries[{i}]") for i, entry in enumerate(entries))
    )


def _entry(entry: Any, where: str) -> PlanEntry:
    if not isinstance(entry, Mapping):
        raise InvalidArguments(f"'{where}' must be an object with content, status, priority")
    content = entry.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidArguments(f"'{where}.content' must be a non-empty string")
    if len(content) > MAX_ENTRY_CHARS:
        raise InvalidArguments(
            f"'{where}.content' has {len(content):,} characters: at most {MAX_ENTRY_CHARS}"
        )
    status = entry.get("status")
    priority = entry.get("priority")
    if priority is None:
        priority = DEFAULT_PRIORITY
    for field, value, allowed in (("status", status, STATUSES), ("priority", priority, PRIORITIES)):
        if not isinstance(value, str) or value not in allowed:
            raise InvalidArguments(
                f"'{where}.{field}' must be one of {', '.join(allowed)}, not {_shown(value)}"
            )
    return PlanEntry(content, status, priority)


def _shown(value: Any) -> str:
    """A wrong value as an error quotes it: short."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def plan_update(plan: UpdatePlanArguments) -> dict[str, Any]:
    """The `session/update` that shows the plan (ACP's `plan`: the whole plan each time)."""
    return updates.plan([entry.to_wire() for entry in plan.entries])


# What Parley knows of a plan it was given: it went to the editor, which may not show plans
# (CodeCompanion does not).
PLAN_SENT = "The plan was sent to the editor"


def summary(plan: UpdatePlanArguments) -> str:
    """What the model is told of the plan it gave: how many entries, by status."""
    if not plan.entries:
        return f"{PLAN_SENT}: no entries."
    counts = Counter(entry.status for entry in plan.entries)
    by_status = ", ".join(
        f"{counts[status]} {status.replace('_', ' ')}" for status in STATUSES if counts[status]
    )
    total = len(plan.entries)
    return f"{PLAN_SENT}: {total} entr{'y' if total == 1 else 'ies'} ({by_status})."


class UpdatePlanTool(DeclaredTool):
    """Sends the plan to the editor; runs nothing, so it needs no permission (and Plan mode
    offers it)."""

    spec = ToolSpec(NAME, DESCRIPTION, SCHEMA, kind="think", needs_permission=False)
    Arguments = UpdatePlanArguments

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            plan = read_plan(arguments)
        except InvalidArguments as error:
            return ToolResult(str(error), is_error=True)
        return await self.execute(plan, context)

    async def execute(self, arguments: UpdatePlanArguments, context: ToolContext) -> ToolResult:
        if context.send_update is not None:
            context.send_update(plan_update(arguments))
        return ToolResult(summary(arguments))

    def describe_call(self, arguments: dict[str, Any]) -> CallView:
        try:
            plan = read_plan(arguments)
        except InvalidArguments:
            return CallView(NAME)
        return self.view(plan)

    def view(self, arguments: UpdatePlanArguments) -> CallView:
        done = sum(entry.status == "completed" for entry in arguments.entries)
        return CallView(f"Update the plan ({done}/{len(arguments.entries)} done)")
