"""A client for Holdpoint's tests of upstreams that come up late, on the official Python SDK:
connects to `holdpoint mcp` over stdio (or to `/mcp/{world}` when $HOLDPOINT_MCP_URL is set,
as client.py does) and prints what happens as JSON lines.

    tools_client.py wait-for NAME ARGUMENTS_JSON
        Prints the tools listed ({"tools": [names]}) and the result of calling NAME at once
        ({"early": result}); then waits (at most $WAIT_SECONDS, default 60) for the server's
        notifications/tools/list_changed ({"list_changed": n}, how many arrived; with
        $WAIT_FOR_TOOL, until that tool is listed), lists the tools again and calls NAME again
        ({"tools": [...]}, {"late": result}).
"""

import json
import os
import sys

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def say(value) -> None:
    print(json.dumps(value), flush=True)


def dump(result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    if "HOLDPOINT_MCP_URL" in os.environ:
        token = os.environ["HOLDPOINT_TOKEN"]
        gateway = streamable_http_client(
            os.environ["HOLDPOINT_MCP_URL"],
            http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}),
        )
    else:
        gateway = StdioServerParameters(
            command=os.environ["HOLDPOINT_BIN"],
            args=["mcp", "--world", os.environ["HOLDPOINT_WORLD"]],
            env=dict(os.environ),
        )
    step, name, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    assert step == "wait-for", step
    changed = anyio.Event()
    count = 0

    async def on_message(message) -> None:
        nonlocal count
        if isinstance(message, types.ToolListChangedNotification):
            count += 1
            changed.set()
        await anyio.lowlevel.checkpoint()

    async def tools(client) -> list:
        return [t.name for t in (await client.list_tools()).tools]

    async with Client(gateway, message_handler=on_message) as client:
        say({"tools": await tools(client)})
        say({"early": dump(await client.call_tool(name, arguments))})
        # With $WAIT_FOR_TOOL, notifications are waited for until that tool is listed: a
        # server may be announced more than once (it came up, then changed its tools).
        wanted = os.environ.get("WAIT_FOR_TOOL")
        listed = []
        with anyio.move_on_after(float(os.environ.get("WAIT_SECONDS", "60"))):
            while True:
                await changed.wait()
                changed = anyio.Event()
                if wanted is None:
                    break
                listed = await tools(client)
                if wanted in listed:
                    break
        say({"list_changed": count})
        say({"tools": listed if wanted in listed else await tools(client)})
        say({"late": dump(await client.call_tool(name, arguments))})


anyio.run(main)
