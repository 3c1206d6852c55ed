"""What the client's answers to Parley's own requests mean: one place decides, for every
client-side method Parley calls (`fs/*`, `terminal/*`; the permission answer is
`protocol/permission.py`'s), whether an answer is a success and what it carries.

Real clients answer differently within the protocol: the official ACP Python SDK lets a
client's handler return `None`, which goes on the wire as `"result": null`, and its agent side
takes that as success; CodeCompanion answers `fs/write_text_file` with `null`; the TypeScript
SDK, agent-shell (acp.el) and Zed answer `{}`, some with `_meta` or fields a later version
adds. So a method whose ACP response carries nothing Parley needs succeeds on `null` or any
object; a method whose response carries a value Parley needs (a file's content, a terminal's
id) succeeds only when that value is there. An error response, a timeout or a closed
connection fails before an answer reaches these functions (the request raises).
"""

from __future__ import annotations

from typing import Any

# Shown in a failure's message: enough of the answer to recognise it.
SHOWN_CHARS = 60


class ClientAnswerError(ValueError):
    """The client answered, but not with what the method's response must carry."""


def is_acknowledgement(answer: Any) -> bool:
    """An answer to a method whose response carries nothing Parley needs: `null` (the ACP
    Python SDK's `None`) or an object (`{}`, with `_meta` or fields of a later version)."""
    return answer is None or isinstance(answer, dict)


def check_written(answer: Any) -> None:
    """`fs/write_text_file`'s answer: the write happened, or ClientAnswerError."""
    if not is_acknowledgement(answer):
        raise ClientAnswerError(
            f"the editor's answer to fs/write_text_file was {answer!r:.{SHOWN_CHARS}}"
        )


def file_content(answer: Any) -> str:
    """`fs/read_text_file`'s answer: the text of the file (its buffer)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("content"), str):
        raise ClientAnswerError("the editor's answer to fs/read_text_file had no content")
    return answer["content"]


def terminal_id(answer: Any) -> str:
    """`terminal/create`'s answer: the id of the editor's new terminal."""
    if not isinstance(answer, dict) or not isinstance(answer.get("terminalId"), str):
        raise ClientAnswerError("the editor's answer to terminal/create had no terminalId")
    return answer["terminalId"]


def terminal_fields(answer: Any) -> dict[str, Any]:
    """`terminal/output`, `wait_for_exit`, `kill` or `release`: the answer's fields (none for
    `null`; the callers read each field they need with a default)."""
    return answer if isinstance(answer, dict) else {}
