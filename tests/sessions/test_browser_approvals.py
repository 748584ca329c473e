"""Approvals in a real browser: headless Chromium answers a session's tool calls over HTTP.

The page (served from the app's origin) holds the app's bearer token as a browser client would,
asks for an event-stream ticket, opens an EventSource, and for each `tool_execution_start` lists
`GET /sessions/{id}/approvals` until that call waits, then answers it with `POST .../approve`:
the first approved with an edited path, the second denied with a reason. At `agent_end` it
reads the transcript, writes all it saw into the page, and posts the page's text to `/report`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.serve import AgentSSEApp
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from ..support import served
from .helpers import MODEL, chromium

TOKEN = "browser-s3cret"

# A real browser: Debian's Chromium, installed by .ci/run (apt-get install chromium).
pytestmark = pytest.mark.servers

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>approvals</title></head>
<body>
<p id="status">starting</p>
<pre id="seen"></pre>
<script>
const auth = { "Authorization": "Bearer " + __TOKEN__ };  // the app's bearer token, as a client holds it
const seen = { unauthorised: null, starts: [], listed: {}, answers: {}, ends: [], transcript: [], error: null };
let session = null;

function show() { document.getElementById("seen").textContent = JSON.stringify(seen); }

async function call(method, path, body) {
  const init = { method, headers: { ...auth } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  return { status: response.status, data: response.status === 204 ? null : await response.json() };
}

// A call's tool_execution_start comes before it waits: list the approvals until it is there.
async function waiting(id) {
  for (;;) {
    const { status, data } = await call("GET", `/sessions/${session}/approvals`);
    if (status !== 200) throw new Error(`GET approvals: ${status}`);
    const request = data.approvals.find(a => a.toolCallId === id);
    if (request) return request;
    await new Promise(resolve => setTimeout(resolve, 10));
  }
}

async function answer(id) {
  const request = await waiting(id);
  seen.listed[id] = { toolName: request.toolName, arguments: request.arguments };
  const decision = id === "c1"
    ? { toolCallId: id, approved: true, arguments: { path: "old-draft.txt" } }
    : { toolCallId: id, approved: false, reason: "Never touch /etc." };
  const { status, data } = await call("POST", `/sessions/${session}/approve`, decision);
  seen.answers[id] = { status, approved: data.approved };
  show();
}

async function finish() {
  const { data } = await call("GET", `/sessions/${session}`);
  seen.transcript = data.messages.filter(m => m.role === "toolResult" || m.role === "assistant").map(m =>
    m.role === "toolResult"
      ? { toolCallId: m.toolCallId, text: m.content[0].text, isError: m.isError }
      : { text: m.content.filter(b => b.type === "text").map(b => b.text).join("") });
  document.getElementById("status").textContent = "done";
  report();
}

function report() {
  show();
  const body = JSON.stringify({ seen, page: document.body.innerText });
  fetch("/report", { method: "POST", headers: { "content-type": "application/json" }, body });
}

async function start() {
  session = (await call("POST", "/sessions", { title: "approvals" })).data.id;
  seen.unauthorised = (await fetch(`/sessions/${session}/approvals`)).status;  // no header: refused
  const { ticket } = (await call("POST", `/sessions/${session}/ticket`, {})).data;
  const source = new EventSource(`/sessions/${session}/events?ticket=${encodeURIComponent(ticket)}`);
  source.onmessage = (message) => {
    const event = JSON.parse(message.data).event;
    if (event.type === "tool_execution_start") {
      seen.starts.push({ id: event.toolCallId, name: event.toolName, args: event.args });
      answer(event.toolCallId).catch(fail);
    } else if (event.type === "tool_execution_end") {
      const text = event.result.content.map(b => b.text).join("");
      seen.ends.push({ id: event.toolCallId, text, isError: event.isError });
    } else if (event.type === "agent_end") {
      source.close();
      finish().catch(fail);
    }
    show();
  };
  source.addEventListener("error", (message) => { if (message.data) fail(new Error(message.data)); });
  await new Promise(resolve => { source.onopen = resolve; });
  const prompted = await call("POST", `/sessions/${session}/prompt`, { text: "Tidy up." });
  if (prompted.status !== 202) throw new Error(`prompt: ${prompted.status}`);
}

function fail(error) { seen.error = String(error && error.message || error); report(); }
start().catch(fail);
</script>
</body></html>
"""


def build_app(deleted: list[str], on_report: Any) -> Any:
    """The page at `/`, `/report` for the test, everything else served by an AgentSSEApp."""

    @al.tool
    async def delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    def factory(session_id: str) -> al.Agent:
        calls = [
            ScriptedToolCall("c1", "delete", {"path": "draft.txt"}),
            ScriptedToolCall("c2", "delete", {"path": "/etc/passwd"}),
        ]
        model = ScriptedModel([Response(content=calls), "Done."])
        return al.Agent(model=MODEL, tools=[delete], stream_fn=model, needs_approval=["delete"])

    agents = AgentSSEApp(factory, token=TOKEN)
    page = PAGE.replace("__TOKEN__", json.dumps(TOKEN)).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/":
            headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(page)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": page})
        elif scope["type"] == "http" and scope["path"] == "/report":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            on_report(json.loads(body))
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
        else:
            await agents(scope, receive, send)

    return app


@pytest.mark.timeout(120)
async def test_chromium_lists_approves_with_edited_arguments_and_denies_with_a_reason(
    anyio_backend: object, tmp_path: Path
) -> None:
    reports: list[Any] = []
    reported = anyio.Event()

    def on_report(data: Any) -> None:
        reports.append(data)
        reported.set()

    deleted: list[str] = []
    with anyio.fail_after(90):  # a bound on a browser that never reports, not a margin
        async with served(build_app(deleted, on_report)) as url, chromium(f"{url}/", tmp_path):
            await reported.wait()
    report = reports[0]
    seen = report["seen"]
    assert seen["error"] is None, seen["error"]
    assert seen["unauthorised"] == 401  # the approval routes are authorised like the rest
    assert seen["starts"] == [
        {"id": "c1", "name": "delete", "args": {"path": "draft.txt"}},
        {"id": "c2", "name": "delete", "args": {"path": "/etc/passwd"}},
    ]
    assert seen["listed"] == {
        "c1": {"toolName": "delete", "arguments": {"path": "draft.txt"}},
        "c2": {"toolName": "delete", "arguments": {"path": "/etc/passwd"}},
    }
    assert seen["answers"] == {"c1": {"status": 200, "approved": True}, "c2": {"status": 200, "approved": False}}
    assert deleted == ["old-draft.txt"]  # the tool ran once, on the edited arguments
    assert sorted(seen["ends"], key=lambda end: end["id"]) == [
        {"id": "c1", "text": "deleted old-draft.txt", "isError": False},
        {"id": "c2", "text": "Never touch /etc.", "isError": True},
    ]
    assert seen["transcript"] == [
        {"text": ""},
        {"toolCallId": "c1", "text": "deleted old-draft.txt", "isError": False},
        {"toolCallId": "c2", "text": "Never touch /etc.", "isError": True},
        {"text": "Done."},
    ]
    assert "Never touch /etc." in report["page"] and "deleted old-draft.txt" in report["page"]
