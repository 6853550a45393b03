"""A client for Holdpoint's gateway tests, on the official Python SDK: connects to
`holdpoint mcp` over stdio (or to the server's `/mcp/{world}` over streamable HTTP) and prints
what it got as one JSON line per step.

    client.py list
    client.py call NAME ARGUMENTS_JSON     (or @FILE: the arguments read from FILE)
    client.py cancel NAME ARGUMENTS_JSON   (cancels the call at its first progress notification)
    client.py session STEPS_JSON           (runs the steps in one session, a line for each)

A step of a session is {"call": NAME, "arguments": {...}}, {"parallel": [STEP, ...]} (run
together; their results in order), or {"memory": true} (the gateway process's peak and
current resident memory, in KiB, from /proc).

The gateway is started as `$HOLDPOINT_BIN mcp --world $HOLDPOINT_WORLD`, with this process's
environment (the server, the token, the configuration file); or, when $HOLDPOINT_MCP_URL is
set, reached there over streamable HTTP with $HOLDPOINT_TOKEN.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run_step(client, step: dict) -> dict:
    if "parallel" in step:
        results = [None] * len(step["parallel"])

        async def run(i: int, inner: dict) -> None:
            results[i] = await run_step(client, inner)

        async with anyio.create_task_group() as tasks:
            for i, inner in enumerate(step["parallel"]):
                tasks.start_soon(run, i, inner)
        return {"parallel": results}
    if "memory" in step:
        return gateway_memory()
    try:
        return dump(await client.call_tool(step["call"], step.get("arguments", {})))
    except Exception as e:  # a JSON-RPC error, not a result
        return {"error": str(e)}


def gateway_memory() -> dict:
    """VmHWM and VmRSS of the gateway, this process's child."""
    children = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as f:
            children += f.read().split()
    (pid,) = children
    memory = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                memory[key] = int(value.split()[0])
    return memory


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
    step = sys.argv[1]
    async with Client(gateway) as client:
        print(json.dumps({"protocol_version": client.protocol_version}), flush=True)
        if step == "list":
            tools = await client.list_tools()
            print(json.dumps(dump(tools)), flush=True)
            return
        if step == "session":
            for each in json.loads(sys.argv[2]):
                print(json.dumps(await run_step(client, each)), flush=True)
            return
        name, arguments = sys.argv[2], sys.argv[3]
        if arguments.startswith("@"):
            with open(arguments[1:], encoding="utf-8") as file:
                arguments = file.read()
        arguments = json.loads(arguments)
        progress = []
        waiting = anyio.Event()

        async def on_progress(value, total, message):
            progress.append(message)
            waiting.set()

        if step == "call":
            result = await client.call_tool(name, arguments, progress_callback=on_progress)
            out = dump(result)
            out["progress"] = progress
            print(json.dumps(out), flush=True)
        elif step == "cancel":
            async with anyio.create_task_group() as tasks:
                async def call():
                    await client.call_tool(name, arguments, progress_callback=on_progress)
                    print(json.dumps({"finished": True}), flush=True)

                tasks.start_soon(call)
                await waiting.wait()
                tasks.cancel_scope.cancel()
            print(json.dumps({"canceled": True, "progress": progress}), flush=True)
            # Stay connected a moment, so that what withdraws the hold is the cancellation,
            # not the disconnection.
            await anyio.sleep(float(os.environ.get("CLIENT_LINGER", "0")))


anyio.run(main)
