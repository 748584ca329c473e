"""boto3 as the oracle of the Bedrock wire: what its `converse_stream` makes of our requests and of
the recorded answers. Its findings are kept in `boto3.json`, which test_bedrock_oracle.py checks
agentloop against (boto3 is not a dependency of the tests).

    python -m venv /tmp/boto3-venv && /tmp/boto3-venv/bin/pip install boto3
    python -m tests.providers.bedrock_wire.request_cases          # requests.json (agentloop's bodies)
    /tmp/boto3-venv/bin/python tests/providers/bedrock_wire/boto3_oracle.py   # boto3.json

* requests: each body of `requests.json` is passed to `converse_stream` as its parameters (bytes
  decoded from base64), so botocore validates it against the Bedrock model (shapes, enums,
  required members) and serializes it; the request it would send is caught before sending.
* signature: one request signed by boto3 at a fixed time with fixed credentials.
* streams: each recording is served on loopback and read by `converse_stream`; what its events
  add up to (blocks by `contentBlockIndex`, stop reason, usage, or the error it raised).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.server
import json
import sys
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EventStreamError
from botocore.parsers import ResponseParserError

HERE = Path(__file__).parent
SIGNED_AT = datetime.datetime(2026, 1, 2, 3, 4, 5)
CREDENTIALS = {
    "aws_access_key_id": "AKIDEXAMPLE",
    "aws_secret_access_key": "secret/key+example",
    "aws_session_token": "session-token",
}


def client(endpoint: str | None = None) -> Any:
    session = boto3.Session(region_name="us-east-1", **CREDENTIALS)
    config = Config(retries={"max_attempts": 1}, read_timeout=10, connect_timeout=5)
    return session.client("bedrock-runtime", endpoint_url=endpoint, config=config)


def as_parameters(body: dict[str, Any]) -> dict[str, Any]:
    """A JSON body as boto3 parameters: blobs (images, redacted reasoning) as bytes."""

    def convert(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: convert(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        if key in ("bytes", "redactedContent") and isinstance(value, str):
            return base64.b64decode(value)
        return value

    parameters: dict[str, Any] = convert(body)
    return parameters


class Caught(Exception):
    pass


def caught_request(model_id: str, body: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def before_send(request: Any, **_: Any) -> None:
        seen["url"] = request.url
        seen["headers"] = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        seen["body"] = request.body.decode()
        raise Caught

    bedrock = client()
    bedrock.meta.events.register("before-send.bedrock-runtime.ConverseStream", before_send)
    with contextlib.suppress(Caught):
        bedrock.converse_stream(modelId=model_id, **as_parameters(body))
    return seen


def requests() -> dict[str, Any]:
    out = {}
    for name, case in json.loads((HERE / "requests.json").read_text()).items():
        try:
            seen = caught_request(case["modelId"], case["body"])
        except BotoCoreError as exc:  # a parameter boto3 rejects
            out[name] = {"valid": False, "error": str(exc)}
            continue
        out[name] = {"valid": True, "url": seen["url"], "body": json.loads(seen["body"])}
    return out


def signature() -> dict[str, Any]:
    case = json.loads((HERE / "requests.json").read_text())["claude-budget"]
    with mock.patch("botocore.auth.get_current_datetime", return_value=SIGNED_AT):
        seen = caught_request(case["modelId"], case["body"])
    keep = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token", "Content-Type")
    return {"url": seen["url"], "body": seen["body"], "headers": {k: seen["headers"][k] for k in keep}}


def serve(bodies: dict[str, bytes]) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = bodies[self.path.strip("/").split("/")[0]]
            self.send_response(200)
            self.send_header("content-type", "application/vnd.amazon.eventstream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def read(url: str) -> dict[str, Any]:
    """What one answer adds up to, read the way a boto3 user reads it."""
    blocks: dict[int, dict[str, Any]] = {}
    result: dict[str, Any] = {"events": []}
    try:
        answer = client(url).converse_stream(modelId="replay", messages=[{"role": "user", "content": [{"text": "hi"}]}])
        for event in answer["stream"]:
            ((name, data),) = event.items()
            result["events"].append(name)
            index = data.get("contentBlockIndex")
            if name == "contentBlockStart" and "toolUse" in data["start"]:
                tool = data["start"]["toolUse"]
                blocks[index] = {"type": "toolUse", "id": tool["toolUseId"], "name": tool["name"], "input": ""}
            elif name == "contentBlockDelta":
                delta = data["delta"]
                kind = {"text": "text", "toolUse": "toolUse", "reasoningContent": "reasoning"}[next(iter(delta))]
                if index in blocks and blocks[index]["type"] != kind:
                    continue  # a delta of another kind than its block: not content
                if kind == "text":
                    blocks.setdefault(index, {"type": "text", "text": ""})["text"] += delta["text"]
                elif kind == "toolUse":
                    blocks[index]["input"] += delta["toolUse"].get("input", "")
                else:
                    block = blocks.setdefault(index, {"type": "reasoning", "text": "", "signature": "", "redacted": ""})
                    reasoning = delta["reasoningContent"]
                    block["text"] += reasoning.get("text", "")
                    block["signature"] += reasoning.get("signature", "")
                    if "redactedContent" in reasoning:
                        redacted = base64.b64decode(block["redacted"]) + reasoning["redactedContent"]
                        block["redacted"] = base64.b64encode(redacted).decode()
            elif name == "messageStop":
                result["stopReason"] = data.get("stopReason")
            elif name == "metadata":
                result["usage"] = data.get("usage")
    except EventStreamError as exc:
        result["error"] = {"code": exc.response["Error"]["Code"], "message": exc.response["Error"]["Message"]}
    except (BotoCoreError, ClientError, ResponseParserError) as exc:
        result["error"] = {"code": type(exc).__name__, "message": str(exc)}
    result["blocks"] = [blocks[i] for i in sorted(blocks)]
    return result


def streams() -> dict[str, Any]:
    recordings = {p.stem: p.read_bytes() for p in sorted((HERE / "recordings").glob("*.eventstream"))}
    server, url = serve(recordings)
    try:
        return {name: read(f"{url}/{name}") for name in recordings}
    finally:
        server.shutdown()


if __name__ == "__main__":
    found = {
        "boto3": boto3.__version__,
        "botocore": botocore.__version__,
        "requests": requests(),
        "signature": signature(),
        "streams": streams(),
    }
    (HERE / "boto3.json").write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    print(
        f"boto3 {boto3.__version__}: {len(found['requests'])} requests, {len(found['streams'])} streams",
        file=sys.stderr,
    )
