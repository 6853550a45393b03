"""An upstream MCP server whose tools are what the official SDKs would not let a server list,
for Holdpoint's tests of the names it is given: plain JSON-RPC on standard input and output,
one message a line, without an SDK.

$ODD_TOOLS is a JSON list of the names it lists, as they are (duplicates, dots, spaces,
non-ASCII, any length). A call of any of them answers "ran NAME" (NAME as it reached the
server), after two progress notifications when the call gave a progress token. A call of
"change" answers too, and then tells the client that its tools changed
(`notifications/tools/list_changed`), listing $ODD_TOOLS_LATER from then on.

Every call is appended as a JSON line to the file named by $UPSTREAM_LOG, when it is set.
"""

import json
import os
import sys

tools = json.loads(os.environ.get("ODD_TOOLS", "[]"))


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def listed() -> list:
    return [
        {"name": name, "description": "a tool", "inputSchema": {"type": "object"}}
        for name in tools
    ]


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    method = message.get("method")
    if "id" not in message or method is None:
        continue  # a notification, or an answer
    params = message.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "odd", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": listed()}
    elif method == "tools/call":
        name = params.get("name")
        if "UPSTREAM_LOG" in os.environ:
            with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps({"tool": name, "arguments": params.get("arguments")}) + "\n")
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:
            for step in (1, 2):
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": step,
                            "total": 2,
                            "message": f"step {step} of {name}",
                        },
                    }
                )
        result = {"content": [{"type": "text", "text": f"ran {name}"}], "isError": False}
        if name == "change":
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            tools = json.loads(os.environ.get("ODD_TOOLS_LATER", "[]"))
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            continue
    elif method == "ping":
        result = {}
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": f"no method {method}"},
            }
        )
        continue
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})
