"""What the script-playing model says: each script is text, selected by a trigger word
anywhere in the context (the last step of every generation prompt is `assistant` + newline).

Trigger words are single tokens of the small vocabulary that Parley's system prompt and tool
descriptions never contain. A round after a tool result is told by AFTER_TOOL_WORD, which
the tests' `hello.py` holds: its key outweighs every other trigger, so the user's trigger
still in the context does not replay the tool call.
"""

from __future__ import annotations

from dataclasses import dataclass

END = "<|im_end|>"


@dataclass(frozen=True)
class Script:
    name: str
    trigger: str | None  # None: the script played when no trigger is in the context
    text: str  # ends with END, or repeats forever (endless)
    key: float = 1.0  # the trigger's weight: the strongest trigger in the context wins


TOOL_WORD = " dog"
ENDLESS_WORD = " song"
TEXT_TOOL_WORD = " movie"
THINKING_WORD = " camera"
AFTER_TOOL_WORD = " paint"

STREAMED_TEXT = "Let me look."
TOOL_CALL = (
    "<tool_call>\n" + '{"name":"read_file","arguments":{"path":"hello.py"}}' + "\n</tool_call>"
)
TEXT_TOOL_CALL = (
    '<tool><tool_name>read_file</tool_name><arguments>{"path":"hello.py"}</arguments></tool>'
)
PLAIN_ANSWER = "Hello from a tiny model."
AFTER_TOOL_ANSWER = "The file says hello."
THINKING = "I should greet."
THINKING_ANSWER = "Hello."
ENDLESS_UNIT = " tick tock"
# The file the tool scripts read: it holds the after-tool trigger.
HELLO_PY = f"#{AFTER_TOOL_WORD}\nprint('hello')\n"

SCRIPTS = (
    Script("plain", None, PLAIN_ANSWER + END),
    Script("tool", TOOL_WORD, STREAMED_TEXT + TOOL_CALL + END),
    Script("text_tool", TEXT_TOOL_WORD, STREAMED_TEXT + TEXT_TOOL_CALL + END),
    Script("thinking", THINKING_WORD, f"<think>\n{THINKING}\n</think>\n\n{THINKING_ANSWER}{END}"),
    Script("endless", ENDLESS_WORD, ENDLESS_UNIT * 4),
    Script("after_tool", AFTER_TOOL_WORD, AFTER_TOOL_ANSWER + END, key=2.0),
)
