"""The official A2A Python SDK's client (a2a-sdk 1.3.0, installed into .venv-a2a by
scripts/test) against Holdpoint's A2A endpoint, for crates/server/tests/suite/a2a_sdk.rs.

    client.py SCENARIO URL

URL is the agent's endpoint (…/a2a/lab/helper); HP_AGENT_TOKEN and HP_APPROVER_TOKEN are an
agent's and an approver's tokens. The card is fetched with the SDK's resolver; every call then
goes through the SDK's streaming client, its token set by the SDK's AuthInterceptor from the
card's security scheme. The agent's token starts the task; the scenario says who replies and
how. Prints one JSON object a line ({"step": …, …}, each event as the SDK parsed it); the Rust
test asserts on them. Anything unexpected raises, and the script exits non-zero.

Scenarios: approve_adk, deny, agent_refused, subscribe (after the line {"step": "subscribed"}
the test decides through the REST API), cancel.
"""

import asyncio
import json
import os
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict
from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
    InMemoryContextCredentialStore,
)
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError

# No scenario waits this long unless something hangs.
PATIENCE = 60

AGENT = ClientCallContext(state={"sessionId": "agent"})
APPROVER = ClientCallContext(state={"sessionId": "approver"})


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def state_of(event):
    if event.HasField("task"):
        return event.task.status
    if event.HasField("status_update"):
        return event.status_update.status
    return None


class Session:
    def __init__(self, url, http, client):
        self.url = url
        self.http = http
        self.client = client
        # The last JSON body the server answered with (not a stream's), as it came.
        self.wire = None

    async def stream(self, step, request, context):
        """Sends `request`, printing each event; the last one."""
        last = None
        async for event in self.client.send_message(request, context=context):
            emit(step, event=MessageToDict(event))
            last = event
        if last is None:
            raise SystemExit(f"{step}: the stream ended with no event")
        return last

    async def ask(self, text="Ship it"):
        """Starts a task with the agent's token; the task, input-required, and its holds."""
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[new_text_part(text)],
        )
        last = await self.stream("ask", SendMessageRequest(message=message), AGENT)
        status = state_of(last)
        if status is None or status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            raise SystemExit(f"ask: the stream ended in {MessageToDict(last)}, not input-required")
        update = last.status_update
        held = [MessageToDict(p) for p in status.message.parts]
        return update.task_id, update.context_id, held

    def reply(self, task_id, context_id, part):
        return SendMessageRequest(
            message=Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                task_id=task_id,
                context_id=context_id,
                parts=[part],
            )
        )


def data_part(data, metadata=None):
    part = new_data_part(data)
    if metadata:
        part.metadata.update(metadata)
    return part


def holdpoint_holds(held):
    for part in held:
        data = part.get("data")
        if isinstance(data, dict) and "holdpoint" in data:
            return data["holdpoint"]["holds"]
    raise SystemExit(f"no Holdpoint part among {held}")


async def approve_adk(s):
    task, context, held = await s.ask()
    confirmation = next(
        p["data"] for p in held if p.get("data", {}).get("name") == "adk_request_confirmation"
    )
    # ADK's function_response to its adk_request_confirmation call, as ADK's own client sends it.
    part = data_part(
        {"name": "adk_request_confirmation", "id": confirmation["id"], "response": {"confirmed": True}},
        {"adk_type": "function_response"},
    )
    await s.stream("reply", s.reply(task, context, part), APPROVER)
    got = await s.client.get_task(GetTaskRequest(id=task), context=AGENT)
    emit("get", task=MessageToDict(got))


async def deny(s):
    task, context, _ = await s.ask()
    part = data_part({"decision_type": "reject", "rejection_reason": "not on a Friday"})
    await s.stream("reply", s.reply(task, context, part), APPROVER)


async def agent_refused(s):
    task, context, held = await s.ask()
    emit("held", hold=holdpoint_holds(held)[0]["id"])
    part = data_part({"decision_type": "approve"})
    try:
        await s.stream("reply", s.reply(task, context, part), AGENT)
    except A2AError as e:
        emit("refused", error=type(e).__name__, message=str(e), sdk_data=e.data, wire=s.wire)
    else:
        raise SystemExit("an agent's approval was not refused")
    got = await s.client.get_task(GetTaskRequest(id=task), context=AGENT)
    emit("get", task=MessageToDict(got))


async def subscribe(s):
    task, _, held = await s.ask()
    emit("held", hold=holdpoint_holds(held)[0]["id"])
    first = True
    async for event in s.client.subscribe(SubscribeToTaskRequest(id=task), context=AGENT):
        emit("subscribed" if first else "follow", event=MessageToDict(event))
        first = False
    emit("ended")


async def cancel(s):
    task, _, held = await s.ask()
    emit("held", hold=holdpoint_holds(held)[0]["id"])
    canceled = await s.client.cancel_task(CancelTaskRequest(id=task), context=AGENT)
    emit("canceled", task=MessageToDict(canceled))
    got = await s.client.get_task(GetTaskRequest(id=task), context=AGENT)
    emit("get", task=MessageToDict(got))


SCENARIOS = {f.__name__: f for f in (approve_adk, deny, agent_refused, subscribe, cancel)}


async def main(scenario, url):
    agent, approver = os.environ["HP_AGENT_TOKEN"], os.environ["HP_APPROVER_TOKEN"]
    session = None

    async def keep_json(response):
        if "text/event-stream" not in response.headers.get("content-type", ""):
            await response.aread()
            if session is not None:
                session.wire = response.json()

    async with httpx.AsyncClient(timeout=PATIENCE, event_hooks={"response": [keep_json]}) as http:
        # The card needs a token too: the resolver sends the agent's.
        card = await A2ACardResolver(http, url).get_agent_card(
            http_kwargs={"headers": {"Authorization": f"Bearer {agent}"}}
        )
        emit("card", card=MessageToDict(card))
        credentials = InMemoryContextCredentialStore()
        await credentials.set_credentials("agent", "bearer", agent)
        await credentials.set_credentials("approver", "bearer", approver)
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(
            card, interceptors=[AuthInterceptor(credentials)]
        )
        session = Session(url, http, client)
        await SCENARIOS[scenario](session)


if __name__ == "__main__":
    scenario, url = sys.argv[1], sys.argv[2]
    try:
        asyncio.run(asyncio.wait_for(main(scenario, url), PATIENCE))
    except TimeoutError:
        sys.exit(f"{scenario}: no end after {PATIENCE}s")
