"""An upstream MCP server that fails on purpose, for Holdpoint's tests of upstream faults, on
the official Python SDK.

    crash  exits in the middle of the call, answering nothing
    hang   never answers (until canceled)
    huge   answers with about `megabytes` MB of text
    echo   answers with the text it was given

With $FAULT_START_ONCE set to a path, it starts once: later starts find the file there and
exit at once. With $FAULT_FAIL_STARTS set to N and $FAULT_STARTS to a path, its first N
starts exit at once (each appends a line to that file, which counts them). With
$FAULT_START_WHEN set to a path, it answers nothing (not even `initialize`) until that file
exists: a server slow to start.

What happens to it is appended as JSON lines to the file named by $UPSTREAM_LOG: each start,
each call, and each call canceled.
"""

import json
import os
import time

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("fault")


def log(**event) -> None:
    with open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as out:
        out.write(json.dumps(event) + "\n")


@server.tool()
async def crash() -> str:
    """Exits while the call runs."""
    log(tool="crash")
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answers."""
    log(tool="hang")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        log(tool="hang", canceled=True)
        raise
    return "unreachable"


@server.tool()
async def huge(megabytes: int = 5) -> str:
    """Answers with about `megabytes` MB of text."""
    log(tool="huge", megabytes=megabytes)
    return "x" * (megabytes * 1000 * 1000)


@server.tool()
async def echo(text: str) -> str:
    """Answers with the text it was given."""
    log(tool="echo", text=text)
    return f"echo: {text}"


if __name__ == "__main__":
    once = os.environ.get("FAULT_START_ONCE")
    if once:
        if os.path.exists(once):
            log(refused_to_start=os.getpid())
            raise SystemExit(1)
        open(once, "w", encoding="utf-8").close()
    failing = int(os.environ.get("FAULT_FAIL_STARTS", "0"))
    if failing:
        counter = os.environ["FAULT_STARTS"]
        with open(counter, "a+", encoding="utf-8") as starts:
            starts.seek(0)
            before = len(starts.readlines())
            starts.write("start\n")
        if before < failing:
            log(refused_to_start=os.getpid())
            raise SystemExit(1)
    when = os.environ.get("FAULT_START_WHEN")
    if when:
        while not os.path.exists(when):
            time.sleep(0.05)
    log(started=os.getpid())
    server.run("stdio")
