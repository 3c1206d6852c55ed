"""ACP v2 (a draft), behind a switch: what a client that negotiated `protocolVersion: 2` is sent.

The server builds every message in ACP v1's shapes (`core/updates.py`, `permission.py`, the
handlers' answers). A connection that negotiated v2 has them reshaped here, in one place, as
they leave: the v2 draft's tool calls as upserts (`tool_call_update` creates a call, content
items are appended with `tool_call_content_chunk`, a command's live output goes to an
agent-owned display terminal), `plan_update`, modes as a config option only, `configId`,
structured diffs, the permission request's `title` and `subject`, the prompt's state updates.

The switch: the server offers v2 only when the environment sets `PARLEY_ACP_V2=1` (the draft
asks implementers to gate it behind the version negotiation *and* a flag), and then only to a
client whose `initialize` asks for `protocolVersion` 2 or later; every other client gets v1,
exactly as before. docs/protocol.md ("ACP v2 (behind a switch)") says what is and is not done.
"""

from __future__ import annotations

import base64
import difflib
import os
from collections.abc import Mapping
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from parley.protocol.params import ClientCapabilities, parse_params

SWITCH = "PARLEY_ACP_V2"  # "1": a client may negotiate v2
VERSION = 2
MAIN_PLAN = "main"  # the plan's id: the draft's synthetic id for a single plan
# The replay cursor of Parley's own (an extension: `_`-prefixed), from a turn on.
TURN_CURSOR = "_parley/turn"
# Above this many characters, old and new together, a diff carries no patch text: it is made
# on the event loop, and difflib grows faster than the file (at 32 K, 16 ms at worst, measured:
# 126 ms at 64 K). The draft allows a diff without `patch`.
PATCH_LIMIT = 32 * 1024


def negotiated(requested: int, environ: Mapping[str, str] = os.environ) -> int:
    """The protocol version a connection speaks: 2 only when the switch is on and the client
    asked for 2 or later, else 1 (the draft's rule: the agent's latest it supports)."""
    return VERSION if requested >= VERSION and environ.get(SWITCH) == "1" else 1


def client_capabilities(raw: Any) -> ClientCapabilities:
    """A v2 client's `capabilities`: only Parley's `_meta` is read (v2 has no client files
    nor terminals: v1's `fs` and `terminal` there are ignored); -32602 when they are not an
    object, or that `_meta` not Parley's shape."""
    if raw is None:
        return ClientCapabilities()
    if not isinstance(raw, dict):
        raise JsonRpcInvalidParams(f"capabilities: must be an object, not {type(raw).__name__}")
    meta = raw.get("_meta")
    return parse_params(ClientCapabilities, {} if meta is None else {"_meta": meta})


# --- answers ----------------------------------------------------------------------------------


def initialize_result(v1: dict[str, Any]) -> dict[str, Any]:
    """v1's `initialize` answer as v2 spells it: `info`, one `capabilities` with the session
    group (list, resume and close are its baseline), support markers as objects."""
    return {
        "protocolVersion": VERSION,
        "info": v1["agentInfo"],
        "capabilities": {
            "session": {
                "prompt": {"image": {}, "embeddedContext": {}},
                "mcp": {"stdio": {}, "http": {}},
                "delete": {},
                "additionalDirectories": {},
            }
        },
        "authMethods": [],
        "_meta": v1["_meta"],
    }


def session_answer(v1: dict[str, Any]) -> dict[str, Any]:
    """The answer to `session/new`, `session/resume` or `session/set_config_option`: no
    `modes` (the mode is the `mode` config option), each option named by `configId`."""
    answer = {name: value for name, value in v1.items() if name != "modes"}
    if "configOptions" in answer:
        answer["configOptions"] = [config_option(option) for option in answer["configOptions"]]
    return answer


def config_option(option: dict[str, Any]) -> dict[str, Any]:
    return {("configId" if name == "id" else name): value for name, value in option.items()}


def permission_request(v1: dict[str, Any]) -> dict[str, Any]:
    """The question about a tool call: its `title` (the call's), the call as the `tool_call`
    subject, shaped as a `tool_call_update` is."""
    call = tool_call_fields(v1["toolCall"])
    return {
        "sessionId": v1["sessionId"],
        "title": call.get("title", ""),
        "subject": {"type": "tool_call", "toolCall": call},
        "options": v1["options"],
    }


def replay_start(cursor: Any) -> int | None:
    """The turn a `session/resume`'s `replayFrom` starts at (1: the first), or None: no
    replay (omitted or null). `{"type": "start"}` is the first turn; `{"type":
    "_parley/turn", "turn": N}` turn N (Parley's cursor); anything else is -32602, as the
    draft asks (never another cursor, nor no replay)."""
    if cursor is None:
        return None
    kind = cursor.get("type") if isinstance(cursor, dict) else None
    if kind == "start":
        return 1
    if kind == TURN_CURSOR:
        turn = cursor.get("turn")
        if type(turn) is int and turn >= 1:
            return turn
        raise JsonRpcInvalidParams(f"replayFrom.turn: a turn number from 1, not {repr(turn)[:60]}")
    shown = repr(kind) if isinstance(kind, str) else "no type"
    raise JsonRpcInvalidParams(
        f"replayFrom: {shown[:60]} is not a cursor Parley knows "
        f'(`{{"type": "start"}}`, or `{{"type": "{TURN_CURSOR}", "turn": N}}`)'
    )


# --- the prompt's lifecycle -------------------------------------------------------------------


def user_message(message_id: str, content: list[Any]) -> dict[str, Any]:
    """The prompt as inserted into the conversation, echoed to its client."""
    return {"sessionUpdate": "user_message", "messageId": message_id, "content": content}


def state_update(state: str, **fields: Any) -> dict[str, Any]:
    """Foreground work started (`running`) or ended (`idle`, with its `stopReason`)."""
    return {"sessionUpdate": "state_update", "state": state, **fields}


# --- session updates --------------------------------------------------------------------------


class UpdateReshaper:
    """A v2 connection's `session/update`s: each v1 update as the v2 draft's (none, one or
    several). Keeps what a command's display terminal needs (its command and directory,
    from the call's input and location) while the call runs."""

    def __init__(self) -> None:
        # (session, tool call) → the terminal's first update (command, cwd) while it runs.
        self._commands: dict[tuple[str, str], dict[str, Any]] = {}
        self._terminals: set[tuple[str, str]] = set()  # calls whose terminal is shown

    def reshape(self, session_id: str, update: dict[str, Any]) -> list[dict[str, Any]]:
        kind = update.get("sessionUpdate")
        if kind in ("tool_call", "tool_call_update"):
            return self._tool_call(session_id, update)
        if kind == "plan":
            return [plan_update(update["entries"])]
        if kind == "current_mode_update":
            return []  # said by `config_option_update`: v2 has modes only as an option
        if kind == "available_commands_update":
            commands = [available_command(command) for command in update["availableCommands"]]
            return [{**update, "availableCommands": commands}]
        if kind == "config_option_update":
            options = [config_option(option) for option in update["configOptions"]]
            return [{**update, "configOptions": options}]
        return [update]

    def _tool_call(self, session_id: str, update: dict[str, Any]) -> list[dict[str, Any]]:
        key = (session_id, update["toolCallId"])
        self._remember_command(key, update)
        appended = _appended_output(update)
        if appended is not None:
            return [*self._terminal_shown(key), terminal_chunk(key[1], appended)]
        reshaped = [{**tool_call_fields(update), "sessionUpdate": "tool_call_update"}]
        if update.get("status") in ("completed", "failed"):
            ended = self._terminal_ended(key, update.get("rawOutput"))
            self._commands.pop(key, None)
            return [*ended, *reshaped]
        return reshaped

    def _remember_command(self, key: tuple[str, str], update: dict[str, Any]) -> None:
        raw_input = update.get("rawInput")
        if isinstance(raw_input, dict) and isinstance(raw_input.get("command"), str):
            self._commands.setdefault(key, {})["command"] = raw_input["command"]
        locations = update.get("locations")
        if key in self._commands and locations:
            self._commands[key]["cwd"] = locations[0]["path"]  # run_command's: where it runs

    def _terminal_shown(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        """The first output of a call: its terminal, appended to the call's content (what
        the call showed before stays), and described (the command, where it runs)."""
        if key in self._terminals:
            return []
        self._terminals.add(key)
        terminal_id = terminal_id_of(key[1])
        return [
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": key[1],
                "content": {"type": "terminal", "terminalId": terminal_id},
            },
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id,
                **self._commands.get(key, {}),
            },
        ]

    def _terminal_ended(self, key: tuple[str, str], raw_output: Any) -> list[dict[str, Any]]:
        """The call ended: its terminal's process exited (with its code or signal)."""
        if key not in self._terminals:
            return []
        self._terminals.discard(key)
        exit_status: dict[str, Any] = {}
        if isinstance(raw_output, dict):
            exit_status = {
                name: raw_output[name]
                for name in ("exitCode", "signal")
                if raw_output.get(name) is not None
            }
        return [
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id_of(key[1]),
                "exitStatus": exit_status,
            }
        ]


def _appended_output(update: dict[str, Any]) -> str | None:
    """The output a running command added (run_command's live update), else None."""
    parley = (update.get("_meta") or {}).get("parley") or {}
    output = parley.get("commandOutput")
    return output.get("append") if isinstance(output, dict) else None


def terminal_id_of(tool_call_id: str) -> str:
    return f"term_{tool_call_id}"


def terminal_chunk(tool_call_id: str, text: str) -> dict[str, Any]:
    data = base64.b64encode(text.encode("utf-8", "replace")).decode("ascii")
    return {
        "sessionUpdate": "terminal_output_chunk",
        "terminalId": terminal_id_of(tool_call_id),
        "data": data,
    }


def tool_call_fields(call: dict[str, Any]) -> dict[str, Any]:
    """A v1 tool call (or update) as v2's `ToolCallUpdate` holds it: its diffs structured."""
    fields = {name: value for name, value in call.items() if name != "sessionUpdate"}
    if isinstance(fields.get("content"), list):
        fields["content"] = [content_item(item) for item in fields["content"]]
    return fields


def content_item(item: dict[str, Any]) -> dict[str, Any]:
    """One item of a call's content: a v1 diff (`oldText`/`newText`) as v2's `changes` and
    git patch; anything else as it is."""
    if item.get("type") != "diff" or "changes" in item:
        return item
    path, old, new = item["path"], item.get("oldText"), item["newText"]
    change = {"operation": "add" if old is None else "modify", "path": path}
    diff: dict[str, Any] = {"type": "diff", "changes": [change]}
    if len(old or "") + len(new) <= PATCH_LIMIT:
        diff["patch"] = {"format": "git_patch", "text": git_patch(path, old, new)}
    return diff


def git_patch(path: str, old: str | None, new: str) -> str:
    """`git diff`'s text for one file (`old` None: the file is new)."""
    name = path.lstrip("/")
    header = [f"diff --git a/{name} b/{name}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    before = "/dev/null" if old is None else f"a/{name}"
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        before,
        f"b/{name}",
    )
    body = [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]
    return "".join(header + body)


def plan_update(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole plan, replacing the one shown: v2's item plan, Parley's one plan `main`."""
    return {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": MAIN_PLAN, "entries": entries},
    }


def available_command(command: dict[str, Any]) -> dict[str, Any]:
    """A slash command as v2 lists it: `type: command`, its input typed `text`."""
    reshaped = {"type": "command", **command}
    if isinstance(command.get("input"), dict):
        reshaped["input"] = {"type": "text", **command["input"]}
    return reshaped
