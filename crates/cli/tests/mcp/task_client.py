"""A client for Holdpoint's tests of upstream tools that must be called as tasks, on the official
Python SDK: connects to `holdpoint mcp` over stdio, or to the server's `/mcp/{world}` when
$HOLDPOINT_MCP_URL is set (as client.py does), and prints what happens as JSON lines. Task
requests (MCP 2025-11-25) are sent as plain JSON-RPC requests through the session.

    task_client.py list
        Prints {"execution": {NAME: EXECUTION}} for every tool listed (null when it has none).
    task_client.py call NAME ARGUMENTS_JSON
        Calls the tool plainly (without `task`); prints {"result": ...} or {"error": {code,
        message}}.
    task_client.py task NAME ARGUMENTS_JSON
        Calls the tool as a task and prints {"created": ...}; then {"result": ...} from
        tasks/result, and {"task": ...} from tasks/get.
    task_client.py task-cancel NAME ARGUMENTS_JSON
        Calls the tool as a task and prints {"created": ...}; waits for a line on standard
        input, cancels the task, and prints {"canceled": ...} from tasks/cancel and
        {"task": ...} from tasks/get.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation


def say(value) -> None:
    print(json.dumps(value), flush=True)


async def main() -> None:
    if "HOLDPOINT_MCP_URL" in os.environ:
        headers = {"Authorization": f"Bearer {os.environ['HOLDPOINT_TOKEN']}"}
        gateway = streamable_http_client(
            os.environ["HOLDPOINT_MCP_URL"], http_client=create_mcp_http_client(headers=headers)
        )
    else:
        gateway = StdioServerParameters(
            command=os.environ["HOLDPOINT_BIN"],
            args=["mcp", "--world", os.environ["HOLDPOINT_WORLD"]],
            env=dict(os.environ),
        )
    step = sys.argv[1]
    client = Client(gateway, client_info=Implementation(name="task-test", version="1"))
    async with client:
        dispatcher = client.session._dispatcher

        async def request(method: str, params: dict) -> dict:
            return await dispatcher.send_raw_request(method, params, {})

        if step == "list":
            listed = await request("tools/list", {})
            say({"execution": {t["name"]: t.get("execution") for t in listed["tools"]}})
            return
        name, arguments = sys.argv[2], json.loads(sys.argv[3])
        if step == "call":
            try:
                say({"result": await request("tools/call", {"name": name, "arguments": arguments})})
            except MCPError as e:
                say({"error": {"code": e.error.code, "message": e.error.message}})
            return
        created = await request(
            "tools/call", {"name": name, "arguments": arguments, "task": {"ttl": 600000}}
        )
        say({"created": created})
        task_id = created["task"]["taskId"]
        if step == "task":
            say({"result": await request("tasks/result", {"taskId": task_id})})
        else:
            await anyio.to_thread.run_sync(sys.stdin.readline)
            say({"canceled": await request("tasks/cancel", {"taskId": task_id})})
        say({"task": await request("tasks/get", {"taskId": task_id})})


anyio.run(main)
