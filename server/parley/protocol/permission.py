"""ACP's `session/request_permission`: the question about a tool call, and its answer."""

from __future__ import annotations

from typing import Any

from parley.core.choices import PermissionDecision
from parley.core.conversation import ToolCall

METHOD = "session/request_permission"

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def permission_request(session_id: str, call: ToolCall, kind: str) -> dict[str, Any]:
    return {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": call.wire_id,
            "title": call.name,
            "kind": kind,
            "rawInput": call.arguments,
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
