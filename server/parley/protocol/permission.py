"""ACP's `session/request_permission`: the question about a tool call, and its answer."""

from __future__ import annotations

from typing import Any

from parley.core.choices import PermissionDecision
from parley.core.conversation import ToolCall
from parley.protocol import updates
from parley.tools.base import CallView

METHOD = "session/request_permission"

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def permission_request(
    session_id: str, call: ToolCall, kind: str, view: CallView
) -> dict[str, Any]:
    """The question about `call`, showing what it would do (`view`: its title, the files it
    touches, the code it would run)."""
    return {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": call.wire_id,
            "kind": kind,
            "rawInput": call.arguments,
            **updates.call_view(view),
            # Which tool asks ("restore": a restore overwriting the user's own changes).
            "_meta": {"parley": {"tool": call.name}},
        },
        "options": PERMISSION_OPTIONS,
    }


def permission_decision(answer: Any) -> PermissionDecision:
    """The client's answer; anything but a selected allow option rejects the call."""
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
        option = outcome.get("optionId")
        if option == "allow_always" or option == "allow_once":
            return option
    return "reject"
