"""An upstream MCP server for Holdpoint's gateway tests, on the official Python SDK.

Every call it runs is appended as a JSON line to the file named by $UPSTREAM_LOG, so a test
can tell exactly which calls reached it, with which arguments (and which never did).
"""

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("upstream")


def ran(tool: str, **arguments) -> None:
    with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Returns the text it was given."""
    ran("echo", text=text)
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def write_note(name: str, text: str) -> str:
    """Writes a note (destructive)."""
    ran("write_note", name=name, text=text)
    return f"wrote {name}: {text}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_all(confirm: bool) -> str:
    """Deletes everything (destructive)."""
    ran("delete_all", confirm=confirm)
    return "deleted everything"


@server.tool()
def fail(message: str) -> str:
    """Always fails, with the message."""
    ran("fail", message=message)
    raise ToolError(message)


if __name__ == "__main__":
    server.run("stdio")
