"""A Google ADK agent served over A2A (google-adk 2.13.0, `to_a2a`), for
crates/server/tests/suite/remote_agents.rs: Holdpoint calls it as a remote agent.

Its one tool, `transfer`, needs confirmation (`require_confirmation=True`), so ADK asks its
caller with an `adk_request_confirmation` before running it. Each run of the tool appends a
line to the file named by $RUNS_FILE, so the test counts the runs.

Its model is a scripted OpenAI-compatible endpoint in this same process (LiteLlm pointed at
it with `api_base`): a tool call `transfer(amount=5)`, then, once the tool's result is in the
conversation, a text that quotes it.

Run: .venv-adk/bin/python adk_agent.py — prints `PORT <n>` once it listens on loopback.
"""

import json
import os
import socket
import sys
import threading
import time
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

warnings.filterwarnings("ignore")
os.environ.setdefault("OPENAI_API_KEY", "sk-test")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

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
            message = {"role": "assistant", "content": f"Final: tool said {last.get('content')}"}
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

import uvicorn  # noqa: E402
from google.adk.a2a.utils.agent_to_a2a import to_a2a  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402


def transfer(amount: int) -> dict:
    """Transfer money. Args: amount: how much."""
    with open(RUNS_FILE, "a") as f:
        f.write(f"transfer {amount}\n")
    return {"status": "ok", "transferred": amount}


agent = LlmAgent(
    name="banker",
    description="Moves money after confirmation",
    model=LiteLlm(
        model="openai/scripted",
        api_base=f"http://127.0.0.1:{llm.server_address[1]}/v1",
        api_key="sk-test",
    ),
    instruction="Use the transfer tool.",
    tools=[FunctionTool(transfer, require_confirmation=True)],
)

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
port = sock.getsockname()[1]
app = to_a2a(agent, host="127.0.0.1", port=port)
print(f"PORT {port}", flush=True)
server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
server.run(sockets=[sock])
sys.exit(0)
