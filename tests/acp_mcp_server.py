"""A stdio MCP server for the conformance tests (the official MCP SDK): one tool, `shout`."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def shout(text: str) -> str:
    """The text in capital letters."""
    return text.upper()


if __name__ == "__main__":
    server.run("stdio")
