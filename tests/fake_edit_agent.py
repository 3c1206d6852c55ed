"""A stand-in for `parley serve` that makes one edit per prompt, for `parley chat`'s tests.

It speaks the protocol as the server does (LSP framing on stdin/stdout): a prompt announces
an `edit` tool call of `notes.txt` in the session's workspace, asks permission with the edit's
ACP `diff` content, and writes the file only when allowed; then answers "Done.".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OLD = "first line\nsecond line\n"
NEW = "first line\nsecond line, edited\nthird line\n"


def read_message() -> dict[str, Any] | None:
    length = None
    while True:
        header = sys.stdin.buffer.readline()
        if not header:
            return None
        if header in (b"\r\n", b"\n"):
            break
        name, _, value = header.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None
    return json.loads(sys.stdin.buffer.read(length))


def send(message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def update(session_id: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def answer_to(request_id: int) -> dict[str, Any]:
    """Wait for the client's answer to our request (nothing else comes meanwhile)."""
    while True:
        message = read_message()
        assert message is not None
        if message.get("id") == request_id and "method" not in message:
            return message.get("result") or {}


def prompt(session_id: str, workspace: Path) -> dict[str, Any]:
    path = str(workspace / "notes.txt")
    diff = {"type": "diff", "path": path, "oldText": OLD, "newText": NEW}
    new_file = {
        "type": "diff",
        "path": str(workspace / "new.txt"),
        "oldText": None,
        "newText": "x\n",
    }
    call = {"toolCallId": "call_1", "title": "Edit notes.txt", "kind": "edit"}
    update(session_id, {"sessionUpdate": "tool_call", **call, "status": "pending"})
    raw_input = {
        "path": "notes.txt",
        "old_text": "second line\n",
        "new_text": "second line, edited\nthird line\n",
    }
    send(
        {
            "id": 900,
            "method": "session/request_permission",
            "params": {
                "sessionId": session_id,
                "toolCall": {**call, "rawInput": raw_input, "content": [diff, new_file]},
                "options": [
                    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                ],
            },
        }
    )
    outcome = answer_to(900).get("outcome", {})
    allowed = outcome.get("optionId") == "allow_once"
    if allowed:
        (workspace / "notes.txt").write_text(NEW)
        (workspace / "new.txt").write_text("x\n")
    update(
        session_id,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "completed" if allowed else "failed",
            "locations": [{"path": path}],
            "content": [diff, new_file] if allowed else [],
        },
    )
    update(
        session_id,
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "msg_1",
            "content": {"type": "text", "text": "Done." if allowed else "Not edited."},
        },
    )
    usage = {"inputTokens": 1, "outputTokens": 1}
    turn = {"model": "fake:edit", "rounds": 1, "toolCalls": 1, "discardedStreams": 0, "cost": None}
    return {"stopReason": "end_turn", "_meta": {"parley": {"usage": usage, "turn": turn}}}


def main() -> None:
    workspace = Path(".")
    while (message := read_message()) is not None:
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            model = {"id": "fake:edit", "provider": "fake", "available": True}
            result: Any = {"_meta": {"parley": {"models": [model], "defaultModel": "fake:edit"}}}
        elif method == "session/new":
            workspace = Path(message["params"]["cwd"])
            result = {"sessionId": "sess_fake"}
        elif method == "session/prompt":
            result = prompt(message["params"]["sessionId"], workspace)
        elif method == "shutdown":
            result = None
        elif request_id is None:
            continue
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
            continue
        send({"id": request_id, "result": result})


if __name__ == "__main__":
    main()
