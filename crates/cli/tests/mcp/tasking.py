"""An upstream MCP server whose tool `slow_write` must be called as a task (revision
2025-11-25's `execution.taskSupport: "required"`), for Holdpoint's tests of such tools: plain
JSON-RPC without an SDK (the official SDKs serve no tasks of that revision).

    tasking.py                 serves one client on standard input and output
    tasking.py --http FILE     serves streamable HTTP on 127.0.0.1 (JSON answers, or server-sent
                               events with $TASKING_SSE set), writing its port to FILE

`slow_write(name, text)` runs only as a task: it works for $TASKING_WORK_MS milliseconds
(300 by default), or until canceled when `text` is "forever", then answers "wrote NAME: TEXT".
A plain call of it is refused with -32601, as the revision asks. `echo(text)` is a plain tool.
Tasks ask to be polled every 100 ms.

Appended as JSON lines to the file named by $UPSTREAM_LOG: each call that runs
({"tool", "arguments"}, when its work starts), each task request ({"request": METHOD}), and
each task canceled ({"canceled": TASK_ID}). With $UPSTREAM_TRAFFIC set, every message read
and written is appended to the file it names, as it went, with the time ({"at", "in"} or
{"at", "out"}), so that a test that fails can show what was said, in what order.

$TASKING_CREATE_DELAY_MS delays the answer that creates a task by that many milliseconds
(after its work has started and been logged): a client that gives the call up meanwhile
knows no task to cancel until that answer comes.
"""

import datetime
import json
import os
import sys
import threading
import time
import uuid

WORK = int(os.environ.get("TASKING_WORK_MS", "300")) / 1000
CREATE_DELAY = int(os.environ.get("TASKING_CREATE_DELAY_MS", "0")) / 1000
LOCK = threading.Lock()
TASKS = {}


def log(**event) -> None:
    if "UPSTREAM_LOG" in os.environ:
        with LOCK, open(os.environ["UPSTREAM_LOG"], "a", encoding="utf-8") as out:
            out.write(json.dumps(event) + "\n")


def traffic(direction: str, line: str) -> None:
    if "UPSTREAM_TRAFFIC" in os.environ:
        with LOCK, open(os.environ["UPSTREAM_TRAFFIC"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"at": now(), direction: line.strip()}) + "\n")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


TOOLS = [
    {
        "name": "slow_write",
        "description": "Writes a note, slowly: only as a task.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
            "required": ["name", "text"],
        },
        "annotations": {"destructiveHint": True},
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "echo",
        "description": "Returns the text it was given.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
]


class Task:
    def __init__(self, ttl):
        self.id = str(uuid.uuid4())
        self.status = "working"
        self.created = now()
        self.updated = self.created
        self.ttl = ttl
        self.result = None
        self.over = threading.Event()

    def describe(self) -> dict:
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttl": self.ttl,
            "pollInterval": 100,
        }

    def end(self, status, result=None) -> bool:
        with LOCK:
            if self.over.is_set():
                return False
            self.status, self.result, self.updated = status, result, now()
            self.over.set()
            return True


def work(task: Task, arguments: dict) -> None:
    log(tool="slow_write", arguments=arguments)
    if arguments.get("text") == "forever":
        task.over.wait()
        return
    if task.over.wait(WORK):
        return
    text = f"wrote {arguments.get('name')}: {arguments.get('text')}"
    task.end("completed", {"content": [{"type": "text", "text": text}], "isError": False})


def error(message: dict, code: int, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": code, "message": text}}


def answer(message: dict) -> dict | None:
    """The answer to one request (None for a notification); it may wait (tasks/result)."""
    method = message.get("method")
    if "id" not in message or method is None:
        return None
    params = message.get("params") or {}
    result = None
    if method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "tools": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
            },
            "serverInfo": {"name": "tasking", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            log(tool="echo", arguments=arguments)
            result = {"content": [{"type": "text", "text": f"echo: {arguments.get('text')}"}]}
        elif name != "slow_write":
            return error(message, -32602, f"no tool {name}")
        elif "task" not in params:
            return error(message, -32601, "slow_write must be called as a task")
        else:
            task = Task(params["task"].get("ttl", 60000))
            TASKS[task.id] = task
            threading.Thread(target=work, args=(task, arguments), daemon=True).start()
            if CREATE_DELAY:
                time.sleep(CREATE_DELAY)
            result = {"task": task.describe()}
    elif method in ("tasks/get", "tasks/result", "tasks/cancel"):
        log(request=method)
        task = TASKS.get(params.get("taskId"))
        if task is None:
            return error(message, -32602, "no such task")
        if method == "tasks/get":
            result = task.describe()
        elif method == "tasks/cancel":
            if not task.end("cancelled"):
                return error(message, -32602, "the task is over")
            log(canceled=task.id)
            result = task.describe()
        else:
            task.over.wait()
            if task.result is None:
                return error(message, -32602, f"the task was {task.status}")
            result = dict(task.result)
            result["_meta"] = {"io.modelcontextprotocol/related-task": {"taskId": task.id}}
    else:
        return error(message, -32601, f"no method {method}")
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def serve_stdio() -> None:
    def reply(message: dict) -> None:
        answered = answer(message)
        if answered is not None:
            line = json.dumps(answered)
            traffic("out", line)
            with LOCK:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

    for line in sys.stdin:
        if line.strip():
            traffic("in", line)
            # Each request in a thread of its own: tasks/result waits for its task.
            threading.Thread(target=reply, args=(json.loads(line),), daemon=True).start()


def serve_http(port_file: str) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    events = "TASKING_SSE" in os.environ

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            traffic("in", body.decode("utf-8", "replace"))
            answered = answer(json.loads(body))
            if answered is None:
                self.send_response(202)
                self.end_headers()
                return
            data = json.dumps(answered).encode()
            traffic("out", data.decode())
            self.send_response(200)
            if events:
                data = b"event: message\ndata: " + data + b"\n\n"
                self.send_header("Content-Type", "text/event-stream")
            else:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # a request the client gave up (a poll under way when it canceled)

        def do_GET(self) -> None:
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w", encoding="utf-8") as out:
        out.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
    else:
        serve_stdio()
