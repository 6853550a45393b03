"""The agent `kagent-adk run bank --local` serves (kagent-adk 0.10.4, on google-adk 1.x and
a2a-sdk 0.3), for crates/server/tests/suite/remote_kagent.rs: Holdpoint calls it as a remote
agent. The test copies this package into a directory of its own beside an agent-card.json
that names the port it serves on.

Its one tool, `transfer`, needs confirmation (`require_confirmation=True`), so kagent asks its
caller with ADK's `adk_request_confirmation`, marked `kagent_type`, and reads the answer only
in its own shape (`decision_type`). Each run of the tool appends a line to the file named by
$RUNS_FILE, so the test counts the runs.

Its model is a scripted OpenAI-compatible endpoint in this same process (kagent's own OpenAI
model pointed at it with `base_url`): a tool call `transfer(amount=5)`, then, once the tool's
result is in the conversation, a text that quotes it.
"""

import json
import os
import threading
import time
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

warnings.filterwarnings("ignore")
os.environ.setdefault("OPENAI_API_KEY", "sk-test")

RUNS_FILE = os.environ["RUNS_FILE"]


class ScriptedLlm(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: a tool call, or text once a tool result is there."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        messages = body.get("messages", [])
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            message = {"role": "assistant", "content": f"Final: tool said {json.dumps(last)}"}
            finish = "stop"
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_" + uuid.uuid4().hex[:8],
                        "type": "function",
                        "function": {"name": "transfer", "arguments": json.dumps({"amount": 5})},
                    }
                ],
            }
            finish = "tool_calls"
        model = body.get("model", "scripted")
        cid = "chatcmpl-" + uuid.uuid4().hex[:8]
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            delta = dict(message)
            if "tool_calls" in delta:
                delta["tool_calls"] = [dict(tc, index=0) for tc in delta["tool_calls"]]
            for choice in (
                {"index": 0, "delta": delta, "finish_reason": None},
                {"index": 0, "delta": {}, "finish_reason": finish},
            ):
                chunk = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": model, "choices": [choice]}
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            return
        out = {
            "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


llm = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedLlm)
threading.Thread(target=llm.serve_forever, daemon=True).start()

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from kagent.adk.models import OpenAI  # noqa: E402


def transfer(amount: int) -> dict:
    """Transfer money. Args: amount: how much."""
    with open(RUNS_FILE, "a") as f:
        f.write(f"transfer {amount}\n")
    return {"status": "ok", "transferred": amount}


root_agent = LlmAgent(
    name="banker",
    description="Moves money after confirmation",
    model=OpenAI(
        type="openai",
        model="scripted",
        base_url=f"http://127.0.0.1:{llm.server_address[1]}/v1",
        api_key="sk-test",
    ),
    instruction="Use the transfer tool.",
    tools=[FunctionTool(transfer, require_confirmation=True)],
)
