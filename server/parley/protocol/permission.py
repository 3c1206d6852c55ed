"""ACP's `session/request_permission`: the question about a tool call, and its answer."""

from __future__ import annotations

import unicodedata
from typing import Any

from parley.core import updates
from parley.core.call_view import CallView
from parley.core.choices import AllowPrefix, CommandOffer, PermissionDecision, RejectWithNote
from parley.core.conversation import ToolCall
from parley.core.unsandboxed import unsandboxed_warning

METHOD = "session/request_permission"

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]

# The most characters of a rejection's note (`_meta.parley.note`) the model is shown.
NOTE_MAX_CHARS = 2000
# Kept in a note: newline and tab; any other control, format (bidi overrides) or surrogate
# character is dropped, so that nothing in it can hide words or drive a terminal.
_NOTE_KEPT_CONTROLS = frozenset("\n\t")
_NOTE_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})

# A command's "allow always" option: this prefix followed by the prefix allowed.
ALLOW_PREFIX = "allow_always:"
# Said in the question about a command no prefix can cover (tools/command_rules.py).
NOT_COVERABLE = (
    '"Always allow" is not offered: only a plain command (a program and plain words: no '
    "operators, redirections, variables, globs or interpreter) can be allowed always."
)


def permission_request(
    session_id: str,
    call: ToolCall,
    kind: str,
    view: CallView,
    command: CommandOffer | None = None,
) -> dict[str, Any]:
    """The question about `call`, showing what it would do (`view`: its title, the files it
    touches, the code it would run). A shell command's (`command`) offers to always allow
    its prefixes instead of the tool, and says so when it would run unsandboxed."""
    shown = updates.call_view(view)
    if command is not None and command.unsandboxed is not None:
        warning = f'{unsandboxed_warning(command.unsandboxed)} "Always allow" is not offered.'
        shown["content"] = [*shown.get("content", []), updates.text_content(warning)]
    elif command is not None and not command.prefixes:
        shown["content"] = [*shown.get("content", []), updates.text_content(NOT_COVERABLE)]
    return {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": call.wire_id,
            "kind": kind,
            "rawInput": call.arguments,
            **shown,
            # Which tool asks ("restore": a restore overwriting the user's own changes).
            "_meta": {"parley": {"tool": call.name}},
        },
        "options": permission_options(command),
    }


def permission_options(command: CommandOffer | None = None) -> list[dict[str, Any]]:
    """Once, always (a tool; or each prefix a command offers), reject."""
    if command is None:
        return PERMISSION_OPTIONS
    once, _, reject = PERMISSION_OPTIONS
    always = [] if command.unsandboxed is not None else command.prefixes
    return [
        once,
        *(
            {
                "optionId": f"{ALLOW_PREFIX}{prefix}",
                "name": f"Always allow `{prefix}` here",
                "kind": "allow_always",
            }
            for prefix in always
        ),
        reject,
    ]


def permission_decision(answer: Any, command: CommandOffer | None = None) -> PermissionDecision:
    """The client's answer: ACP's `cancelled` outcome stops the turn (the user asked to stop,
    not to go on without the call); anything else but a selected allow option the question
    offered rejects the call (a client cannot invent a prefix to allow)."""
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if isinstance(outcome, dict) and outcome.get("outcome") == "cancelled":
        return "cancelled"
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return "reject"
    option = outcome.get("optionId")
    offered = {o["optionId"] for o in permission_options(command)}
    if isinstance(option, str) and option in offered and option.startswith(ALLOW_PREFIX):
        return AllowPrefix(option.removeprefix(ALLOW_PREFIX))
    if isinstance(option, str) and option in offered and option.startswith("allow_"):
        return "allow_always" if option == "allow_always" else "allow_once"
    note = user_note(answer)
    return RejectWithNote(note) if note else "reject"


def user_note(answer: dict[str, Any]) -> str | None:
    """The user's words for the model that came with a rejection: ACP's permission response
    has no field for them, so Parley's clients send `_meta.parley.note` (docs/protocol.md).
    Any other type there is no note; a string is cleaned of control characters, stripped,
    and cut at `NOTE_MAX_CHARS`."""
    meta = answer.get("_meta")
    parley = meta.get("parley") if isinstance(meta, dict) else None
    note = parley.get("note") if isinstance(parley, dict) else None
    if not isinstance(note, str):
        return None
    kept = "".join(
        c
        for c in note
        if c in _NOTE_KEPT_CONTROLS or unicodedata.category(c) not in _NOTE_DROPPED_CATEGORIES
    )
    return kept.strip()[:NOTE_MAX_CHARS].strip() or None
