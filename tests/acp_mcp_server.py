"""A small MCP server for the tests, written with the official MCP SDK.

Tools: `shout` (the text in capitals), `environment` (the names of the variables the server
sees, for the no-secrets check), `crash` (the process exits mid-call), `hang` (never answers),
`find_in_environs` (which processes' /proc/<pid>/environ hold a text: the sandbox's check),
`start_daemon` (a `setsid` grandchild that no process group holds), `rewrite` (files written,
removed and chmodded: what `/undo` must put back).
With MCP_PID_FILE set, the server appends its pid to that file (where it can); with
MCP_START_DELAY, it first sleeps that many seconds (a server slow to start).

    python acp_mcp_server.py                  # stdio
    python acp_mcp_server.py --http PORT      # streamable HTTP on 127.0.0.1:PORT at /mcp
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def shout(text: str) -> str:
    """The text in capital letters."""
    return text.upper()


@server.tool()
def environment() -> str:
    """The names of the environment variables this server sees, one a line."""
    return "\n".join(sorted(os.environ))


@server.tool()
def find_in_environs(text: str) -> str:
    """Reads every /proc/<pid>/environ it can, its parent's first: which hold `text`."""
    pids = [str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]
    readable, found = 0, []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                data = environ.read()
        except OSError:
            continue
        readable += 1
        if text.encode() in data:
            found.append(pid)
    return f"parent {os.getppid()}; {readable} environs read; holding it: {sorted(set(found))}"


@server.tool()
def start_daemon(seconds: str) -> str:
    """Starts `sleep seconds` in a session of its own (setsid), as a daemon would."""
    import subprocess

    daemon = subprocess.Popen(["setsid", "sleep", seconds], start_new_session=True)
    return f"started {daemon.pid}"


@server.tool()
def rewrite(write: str, text: str, remove: str, chmod: str) -> str:
    """Writes `text` to the file `write`, removes the file `remove`, makes `chmod` 0o700."""
    with open(write, "w") as file:
        file.write(text)
    os.remove(remove)
    os.chmod(chmod, 0o700)
    return "rewritten"


@server.tool()
def crash() -> str:
    """Exits the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never returns (blocks the server)."""
    while True:
        time.sleep(60)


if __name__ == "__main__":
    # A server slow to start (MCP_START_DELAY seconds before it answers anything).
    time.sleep(float(os.environ.get("MCP_START_DELAY", "0")))
    if pid_file := os.environ.get("MCP_PID_FILE"):  # the tests check no server outlives Parley
        try:
            with open(pid_file, "a") as pids:
                pids.write(f"{os.getpid()}\n")
        except OSError:  # in the sandbox, outside the workspace is read-only
            pass
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run("stdio")
