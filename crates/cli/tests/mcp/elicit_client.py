"""A client for Holdpoint's elicitation and task tests, on the official Python SDK: connects to
`holdpoint mcp` over stdio (as client.py does) and prints what happens as JSON lines.

    elicit_client.py call NAME ARGUMENTS_JSON
        Calls the tool. With $ELICIT set, the client declares elicitation and answers each
        elicitation request with the next of the ';'-separated answers in $ELICIT:
        `accept:JSON` (the form's content), `decline`, `cancel`, or `stdin` (the answer is the
        next line of standard input, in the same words). Each request is printed as
        {"elicited": {"message", "schema"}}, and a request the server withdraws as
        {"elicitation_canceled": true}.
    elicit_client.py task NAME ARGUMENTS_JSON
        Prints the server's tasks capability and the tool's `execution` as listed
        ({"declared": {"tasks", "execution"}}), calls the tool as a task (MCP 2025-11-25),
        prints the task, then prints the tool's result from tasks/result and the task's last
        state from tasks/get. Elicitations that arrive meanwhile are answered as for `call`;
        each is printed with the task it says it belongs to (`related`) and that task's state
        from tasks/get while it is open (`task`). The call asks for progress notifications:
        those received are printed last ({"progress": [...]}, each with its `_meta`).
    elicit_client.py task-cancel NAME ARGUMENTS_JSON
        Calls the tool as a task, polls tasks/get until the task says it waits for a hold,
        cancels it with tasks/cancel, and prints what tasks/cancel and tasks/get answered.

As client.py does, it reaches the server's `/mcp/{world}` instead when $HOLDPOINT_MCP_URL is
set, sending $HOLDPOINT_APPROVER_TOKEN (if set) as `Holdpoint-Approver-Token`; over stdio the
gateway reads that variable itself.

The SDK has the task types of 2025-11-25 but no task calls of its own: they are sent as plain
JSON-RPC requests through the session.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitResult, Implementation


def say(value) -> None:
    print(json.dumps(value), flush=True)


def dump(result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def answer_of(words: str) -> ElicitResult:
    if words.startswith("accept:"):
        return ElicitResult(action="accept", content=json.loads(words[len("accept:"):]))
    return ElicitResult(action=words)


async def main() -> None:
    if "HOLDPOINT_MCP_URL" in os.environ:
        headers = {"Authorization": f"Bearer {os.environ['HOLDPOINT_TOKEN']}"}
        if "HOLDPOINT_APPROVER_TOKEN" in os.environ:
            headers["Holdpoint-Approver-Token"] = os.environ["HOLDPOINT_APPROVER_TOKEN"]
        gateway = streamable_http_client(
            os.environ["HOLDPOINT_MCP_URL"], http_client=create_mcp_http_client(headers=headers)
        )
    else:
        gateway = StdioServerParameters(
            command=os.environ["HOLDPOINT_BIN"],
            args=["mcp", "--world", os.environ["HOLDPOINT_WORLD"]],
            env=dict(os.environ),
        )
    step, name, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    answers = [a for a in os.environ.get("ELICIT", "").split(";") if a]

    tasks = {}

    async def on_elicit(context, params):
        elicited = {"message": params.message, "schema": params.requested_schema}
        related = (dump(params).get("_meta") or {}).get("io.modelcontextprotocol/related-task")
        if related is not None:
            elicited["related"] = related["taskId"]
            elicited["task"] = await tasks["request"]("tasks/get", {"taskId": related["taskId"]})
        say({"elicited": elicited})
        words = answers.pop(0) if answers else "cancel"
        try:
            if words == "stdin":
                words = (
                    await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                ).strip()
        except anyio.get_cancelled_exc_class():
            say({"elicitation_canceled": True})
            raise
        say({"answered": words})
        return answer_of(words)

    progress = []

    async def on_message(message) -> None:
        if getattr(message, "method", None) == "notifications/progress":
            progress.append(dump(message.params))

    client = Client(
        gateway,
        client_info=Implementation(name="elicit-test", version="1.2"),
        elicitation_callback=on_elicit if "ELICIT" in os.environ else None,
        message_handler=on_message,
    )
    async with client:
        session = client.session
        dispatcher = session._dispatcher

        async def request(method: str, params: dict) -> dict:
            return await dispatcher.send_raw_request(method, params, {})

        tasks["request"] = request

        if step == "call":
            result = await client.call_tool(name, arguments)
            say({"result": dump(result)})
        elif step == "task":
            listed = {t.name: t for t in (await client.list_tools()).tools}
            execution = listed[name].execution if name in listed else None
            say({"declared": {
                "tasks": dump(client.server_capabilities).get("tasks"),
                "execution": dump(execution) if execution else None,
            }})
            created = await request("tools/call", {
                "name": name, "arguments": arguments, "task": {"ttl": 600000},
                "_meta": {"progressToken": "task-progress"},
            })
            say({"created": created})
            task_id = created["task"]["taskId"]
            result = await request("tasks/result", {"taskId": task_id})
            say({"result": result})
            say({"task": await request("tasks/get", {"taskId": task_id})})
            say({"progress": progress})
        elif step == "task-cancel":
            created = await request(
                "tools/call", {"name": name, "arguments": arguments, "task": {"ttl": 600000}}
            )
            say({"created": created})
            task_id = created["task"]["taskId"]
            while True:
                task = await request("tasks/get", {"taskId": task_id})
                if "hold" in (task.get("statusMessage") or ""):
                    break
                await anyio.sleep(task.get("pollInterval", 100) / 1000)
            say({"canceled": await request("tasks/cancel", {"taskId": task_id})})
            say({"task": await request("tasks/get", {"taskId": task_id})})


anyio.run(main)
