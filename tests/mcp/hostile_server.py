"""A hostile MCP server over stdio, speaking raw JSON-RPC: `python hostile_server.py MODE`.

Modes: `silent` never answers `initialize`; `garbage` answers every tool call with a result
that is not a tool result; `regex` has a tool whose `outputSchema` pattern backtracks for ages
in `re`, and answers with content that makes it; `task` has a tool that runs only as a task.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
TOOLS = [
    {"name": "plain", "inputSchema": {"type": "object"}},
    {
        "name": "slow_check",
        "inputSchema": {"type": "object"},
        "outputSchema": {
            "type": "object",
            "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
        },
    },
    {"name": "task_only", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue  # a notification
    if method == "initialize":
        if MODE == "silent":
            continue
        result: object = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
            "instructions": "Be careful.",
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and MODE == "garbage":
        result = "oops"
    elif method == "tools/call" and MODE == "regex":
        word = "a" * 28 + "b"
        result = {"content": [{"type": "text", "text": word}], "structuredContent": {"word": word}}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ok"}]}
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": ident, "result": result})
