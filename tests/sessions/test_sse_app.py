"""The ASGI SSE app: POSTs through httpx's ASGI transport, event streams through a small harness.

httpx's `ASGITransport` collects the whole response body before it returns, so it cannot read
an event stream that stays open; `EventStream` below plays the server's part for those requests
(it hands the app ASGI `receive`/`send` and yields the body chunks as they are sent).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.sessions import JSONLSessionStore, SQLiteSessionStore
from agentloop.testing import Response, ScriptedModel, check_events
from agentloop.wire import CompactDecoder, from_json

from .helpers import MODEL, TOOLS, check_transcript, step_script
from .test_envelope import SCHEMA

ENVELOPE = jsonschema.Draft202012Validator(SCHEMA)


class SSEMessage:
    def __init__(self, fields: dict[str, str]) -> None:
        self.id = fields.get("id", "")
        self.number = int(self.id.rpartition("-")[2]) if self.id else -1
        """The event's number in its epoch (ids are `<epoch>-<number>`)."""
        self.event = fields.get("event", "message")
        self.data = fields.get("data", "")

    @property
    def json(self) -> Any:
        return json.loads(self.data)


class EventStream:
    """A GET of an event stream, driven the way an ASGI server would drive it."""

    def __init__(self, app: AgentSSEApp, path: str, headers: dict[str, str]) -> None:
        self.app = app
        self.path, _, self.query = path.partition("?")
        self.headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self.send_chunk, self.chunks = anyio.create_memory_object_stream[bytes](1000)
        self.disconnect = anyio.Event()
        self.done = anyio.Event()
        self.status: int | None = None
        self.response_headers: dict[bytes, bytes] = {}
        self.buffer = ""
        self.comments: list[str] = []
        self.ended = False

    async def run(self) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": self.query.encode(),
            "root_path": "",
            "headers": self.headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        sent_request = False

        async def receive() -> Any:
            nonlocal sent_request
            if not sent_request:
                sent_request = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await self.disconnect.wait()
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.response_headers = dict(message["headers"])
            else:
                if message.get("body"):
                    await self.send_chunk.send(message["body"])
                if not message.get("more_body", False):
                    self.ended = True
                    self.send_chunk.close()

        try:
            await self.app(scope, receive, send)
        finally:
            self.send_chunk.close()
            self.done.set()

    async def next(self) -> SSEMessage:
        """The next SSE message (comments are collected in `comments`)."""
        while True:
            if "\n\n" in self.buffer:
                block, self.buffer = self.buffer.split("\n\n", 1)
                fields: dict[str, str] = {}
                for line in block.split("\n"):
                    if line.startswith(":"):
                        self.comments.append(line)
                        continue
                    name, _, value = line.partition(": ")
                    fields[name] = value
                if "data" in fields:  # a block of only `retry:` or comments dispatches nothing
                    return SSEMessage(fields)
                continue
            self.buffer += (await self.chunks.receive()).decode()

    async def until(self, event_type: str) -> list[SSEMessage]:
        """Messages up to and including the first envelope of this event type."""
        out = []
        while True:
            message = await self.next()
            out.append(message)
            if message.event == "message" and message.json["event"]["type"] == event_type:
                return out


@asynccontextmanager
async def event_stream(app: AgentSSEApp, path: str, **headers: str) -> AsyncIterator[EventStream]:
    stream = EventStream(app, path, headers)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.run)
        try:
            yield stream
        finally:
            stream.disconnect.set()  # the client goes away
            with anyio.fail_after(5):
                await stream.done.wait()
            stream.chunks.close()


def client(app: AgentSSEApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


def factory(*responses: Response | str) -> Any:
    def make(session_id: str) -> al.Agent:
        return al.Agent(model=MODEL, system_prompt="web", tools=TOOLS, stream_fn=ScriptedModel(list(responses)))

    return make


def envelopes(messages: list[SSEMessage]) -> list[dict[str, Any]]:
    return [m.json for m in messages if m.event == "message"]


def expanded(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The envelopes with their events in the full form (rebuilt from the compact wire form)."""
    decoder = CompactDecoder()
    return [{**envelope, "event": decoder.expand(envelope["event"])} for envelope in data]


async def test_prompt_streams_the_run_and_last_event_id_resumes(anyio_backend: object) -> None:
    app = AgentSSEApp(factory(*step_script(1, chunk_delay=0.001)))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            created = await http.post("/sessions", json={"title": "t"})
            assert created.status_code == 201
            sid = created.json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                response = await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
                assert response.status_code == 202
                messages = await events.until("agent_end")
                assert events.status == 200
                assert events.response_headers[b"content-type"].startswith(b"text/event-stream")
            ids = [m.number for m in messages]
            assert ids == list(range(1, len(ids) + 1))
            assert len({m.id.rpartition("-")[0] for m in messages}) == 1
            data = expanded(envelopes(messages))  # message_update comes in the compact form
            for envelope in data:
                ENVELOPE.validate(envelope)
            assert [e["seq"] for e in data] == list(range(len(data)))
            assert len({e["runId"] for e in data}) == 1
            check_events([from_json(e["event"]) for e in data])
            types = [e["event"]["type"] for e in data]
            assert "message_update" in types and "tool_execution_end" in types
            # Reconnect after event 10: exactly the events after it, header or query.
            tenth = messages[9].id
            for path, headers in (
                (f"/sessions/{sid}/events", {"Last-Event-ID": tenth}),
                (f"/sessions/{sid}/events?lastEventId={tenth}", {}),
            ):
                async with event_stream(app, path, **headers) as again:
                    rest = await again.until("agent_end")
                assert [m.number for m in rest] == ids[10:]
                assert [m.data for m in rest] == [m.data for m in messages[10:]]
            state = (await http.get(f"/sessions/{sid}")).json()
            assert state["lastEventId"] == messages[-1].id and not state["isStreaming"]
            assert [m["role"] for m in state["messages"]][:2] == ["user", "assistant"]
            check_transcript([from_json(m) for m in state["messages"]], complete=True)
            listing = (await http.get("/sessions")).json()["sessions"]
            assert listing == [{"id": sid, "title": None, "messageCount": len(state["messages"]), "isStreaming": False}]


async def test_steer_follow_up_abort_and_continue(anyio_backend: object) -> None:
    slow = Response(content=[al.testing.ScriptedText(["a"] * 200)], chunk_delay=0.01)
    app = AgentSSEApp(factory(slow, "steered answer", "follow-up answer", slow, "continued"))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "slow"})).status_code == 202
                await events.until("message_update")
                busy = await http.post(f"/sessions/{sid}/prompt", json={"text": "again"})
                assert busy.status_code == 409 and "running" in busy.json()["error"]
                steer = await http.post(f"/sessions/{sid}/steer", json={"message": {"role": "user", "content": "turn"}})
                assert steer.status_code == 202 and steer.json() == {"queued": True, "running": True}
                custom = {"role": "note", "text": "later", "timestamp": 5}
                follow = await http.post(f"/sessions/{sid}/follow-up", json={"messages": [custom]})
                assert follow.status_code == 202
                await events.until("agent_end")
                state = (await http.get(f"/sessions/{sid}")).json()
                roles = [m["role"] for m in state["messages"]]
                assert roles == ["user", "assistant", "user", "assistant", "note", "assistant"]
                # Abort a run in the middle of its stream.
                assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "slow again"})).status_code == 202
                await events.until("message_update")
                aborted = await http.post(f"/sessions/{sid}/abort")
                assert aborted.json() == {"aborted": True}
                end = (await events.until("agent_end"))[-1].json
                assert end["event"]["messages"][-1]["stopReason"] == "aborted"
                assert (await http.post(f"/sessions/{sid}/abort")).json() == {"aborted": False}
                nothing = await http.post(f"/sessions/{sid}/continue")
                assert nothing.status_code == 409 and "send a prompt" in nothing.json()["error"]
                await http.post(f"/sessions/{sid}/follow-up", json={"text": "go on"})
                assert (await http.post(f"/sessions/{sid}/continue")).status_code == 202
                await events.until("agent_end")
            state = (await http.get(f"/sessions/{sid}")).json()
            assert state["messages"][-1]["content"][0]["text"] == "continued"


async def test_clear_client_errors(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("x"), max_body_size=100)
    with anyio.fail_after(20):
        async with client(app) as http:
            assert (await http.post("/sessions")).status_code == 503  # no lifespan yet
            async with app.running():
                sid = (await http.post("/sessions")).json()["id"]
                cases: list[tuple[str, str, dict[str, Any], int, str]] = [
                    ("GET", "/nope", {}, 404, "no route"),
                    ("GET", "/sessions/unknown", {}, 404, "no session"),
                    ("GET", "/sessions/.hidden", {}, 404, "session id must be"),
                    ("PUT", "/sessions", {}, 405, "not allowed"),
                    ("PUT", f"/sessions/{sid}", {}, 405, "not allowed"),
                    ("POST", f"/sessions/{sid}/events", {}, 405, "GET"),
                    ("GET", f"/sessions/{sid}/prompt", {}, 405, "POST"),
                    ("POST", f"/sessions/{sid}/dance", {}, 404, "no action"),
                    (
                        "POST",
                        f"/sessions/{sid}/prompt",
                        {"content": b"{", "headers": {"content-type": "application/json"}},
                        400,
                        "not JSON",
                    ),
                    ("POST", f"/sessions/{sid}/prompt", {"json": [1]}, 400, "JSON object"),
                    ("POST", f"/sessions/{sid}/prompt", {"json": {}}, 400, "send one of"),
                    ("POST", f"/sessions/{sid}/prompt", {"json": {"text": 3}}, 400, "'text' must be a string"),
                    ("POST", f"/sessions/{sid}/prompt", {"json": {"messages": []}}, 400, "non-empty list"),
                    (
                        "POST",
                        f"/sessions/{sid}/prompt",
                        {"json": {"message": {"type": "text", "text": "x"}}},
                        400,
                        "not a message",
                    ),
                    ("POST", f"/sessions/{sid}/prompt", {"json": {"message": {"role": 5}}}, 400, "message 0"),
                    (
                        "POST",
                        f"/sessions/{sid}/prompt",
                        {"content": b'{"text": "x"}', "headers": {"content-type": "text/plain"}},
                        415,
                        "JSON",
                    ),
                    ("POST", f"/sessions/{sid}/prompt", {"json": {"text": "x" * 200}}, 413, "over 100 bytes"),
                    ("POST", "/sessions", {"json": {"title": 1}}, 400, "'title' must be a string"),
                    ("POST", f"/sessions/{sid}/continue", {}, 409, "no messages"),
                    ("DELETE", "/sessions/unknown", {}, 404, "no session"),
                ]
                for method, path, options, status, fragment in cases:
                    response = await http.request(method, path, **options)
                    assert response.status_code == status, (method, path, response.text)
                    assert fragment in response.json()["error"], (path, response.json())
                async with event_stream(app, f"/sessions/{sid}/events", **{"Last-Event-ID": "x"}) as bad:
                    await bad.done.wait()
                assert bad.status == 400
                assert (await http.delete(f"/sessions/{sid}")).status_code == 204
                assert (await http.get(f"/sessions/{sid}")).status_code == 404
    with pytest.raises(ValueError, match="replay_limit"):
        AgentSSEApp(factory(), replay_limit=0)
    with pytest.raises(ValueError, match="keepalive"):
        AgentSSEApp(factory(), keepalive=0)
    with pytest.raises(TypeError, match="agent_factory"):
        AgentSSEApp(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="store"):
        AgentSSEApp(factory(), store="db")  # type: ignore[arg-type]


async def test_reset_when_the_asked_event_is_gone_and_keepalives(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("a b c"), replay_limit=3, keepalive=0.05)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                await http.post(f"/sessions/{sid}/prompt", json={"text": "x"})
                await events.until("agent_end")
            last_id = (await http.get(f"/sessions/{sid}")).json()["lastEventId"]
            epoch, _, number = last_id.rpartition("-")
            last = int(number)
            for asked in (f"{epoch}-1", f"{epoch}-{last + 5}", "1", f"0{epoch}-{last}"):
                async with event_stream(app, f"/sessions/{sid}/events", **{"Last-Event-ID": asked}) as events:
                    reset = await events.next()
                    assert reset.event == "reset"
                    assert reset.json == {
                        "lastEventId": last_id,
                        "oldestEventId": f"{epoch}-{last - 2}",
                        "asked": asked,
                    }
                    kept = [await events.next() for _ in range(3)]
                    assert [m.number for m in kept] == [last - 2, last - 1, last]
            async with event_stream(app, f"/sessions/{sid}/events", **{"Last-Event-ID": last_id}) as events:
                await anyio.sleep(0.2)
                assert events.chunks.statistics().current_buffer_used >= 2  # retry line and keepalives
                while events.chunks.statistics().current_buffer_used:
                    events.buffer += (await events.chunks.receive()).decode()
                assert ": keepalive" in events.buffer


async def test_client_disconnect_mid_run_then_resume(anyio_backend: object) -> None:
    slow = Response(content=[al.testing.ScriptedText(["w"] * 40)], chunk_delay=0.005)
    app = AgentSSEApp(factory(slow))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                await http.post(f"/sessions/{sid}/prompt", json={"text": "x"})
                seen = [await events.next() for _ in range(5)]
            assert events.done.is_set() and not events.ended  # the handler returned at the disconnect
            async with event_stream(app, f"/sessions/{sid}/events", **{"Last-Event-ID": seen[-1].id}) as again:
                rest = await again.until("agent_end")
            assert rest[0].number == seen[-1].number + 1
            assert [m.number for m in rest] == list(range(rest[0].number, rest[-1].number + 1))


async def test_lifespan_protocol_and_shutdown_ends_streams_and_runs(anyio_backend: object) -> None:
    slow = Response(content=[al.testing.ScriptedText(["z"] * 1000)], chunk_delay=0.01)
    app = AgentSSEApp(factory(slow), shutdown_timeout=2)
    to_app, app_inbox = anyio.create_memory_object_stream[dict[str, Any]](10)
    from_app, outbox = anyio.create_memory_object_stream[dict[str, Any]](10)

    async def lifespan() -> None:
        async with app_inbox, from_app:
            await app({"type": "lifespan", "asgi": {"version": "3.0"}}, app_inbox.receive, from_app.send)  # type: ignore[arg-type]

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg, to_app, outbox:
            tg.start_soon(lifespan)
            await to_app.send({"type": "lifespan.startup"})
            assert (await outbox.receive())["type"] == "lifespan.startup.complete"
            async with client(app) as http:
                sid = (await http.post("/sessions")).json()["id"]
                async with event_stream(app, f"/sessions/{sid}/events") as events:
                    await http.post(f"/sessions/{sid}/prompt", json={"text": "x"})
                    await events.until("message_update")
                    await to_app.send({"type": "lifespan.shutdown"})
                    assert (await outbox.receive())["type"] == "lifespan.shutdown.complete"
                    with anyio.fail_after(5):
                        await events.done.wait()
                    assert events.ended  # the stream was finished, not cut
                    tail = []
                    while True:
                        try:
                            tail.append(await events.next())
                        except anyio.EndOfStream:
                            break
                    kinds = [m.json["event"]["type"] for m in tail if m.event == "message"]
                    assert kinds[-1] == "agent_end"
                    assert tail[-1].json["event"]["messages"][-1]["stopReason"] == "aborted"
                assert (await http.post("/sessions")).status_code == 503  # stopped
                assert (await http.get(f"/sessions/{sid}")).status_code == 404  # sessions without a store are gone


async def test_lifespan_startup_failure_is_reported(anyio_backend: object) -> None:
    app = AgentSSEApp(factory())
    messages: list[dict[str, Any]] = []
    inbox = iter([{"type": "lifespan.startup"}])

    async def receive() -> Any:
        return next(inbox)

    async def send(message: Any) -> None:
        messages.append(message)
        if message["type"] == "lifespan.startup.complete":
            raise RuntimeError("the server broke")

    with anyio.fail_after(5):
        await app({"type": "lifespan"}, receive, send)
    assert messages[-1] == {"type": "lifespan.startup.failed", "message": "the server broke"}
    with pytest.raises(RuntimeError, match="serves HTTP"):
        await app({"type": "websocket"}, receive, send)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_sessions_persist_in_a_store(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    def store() -> Any:
        return SQLiteSessionStore(tmp_path / "s.db") if kind == "sqlite" else JSONLSessionStore(tmp_path / "s")

    with anyio.fail_after(20):
        async with store() as first_store:
            app = AgentSSEApp(factory(*step_script(1, chunk_delay=0)), store=first_store)
            async with app.running(), client(app) as http:
                sid = (await http.post("/sessions", json={"title": "kept"})).json()["id"]
                async with event_stream(app, f"/sessions/{sid}/events") as events:
                    await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
                    await events.until("agent_end")
                before = (await http.get(f"/sessions/{sid}")).json()["messages"]
                assert (await first_store.load(sid)).messages == tuple(from_json(m) for m in before)
        async with store() as second_store:
            app = AgentSSEApp(factory("resumed"), store=second_store)
            async with app.running(), client(app) as http:
                listing = (await http.get("/sessions")).json()["sessions"]
                assert listing == [{"id": sid, "title": "kept", "messageCount": len(before), "isStreaming": False}]
                async with second_store.open(sid):  # someone else writes it: the app says so
                    locked = await http.get(f"/sessions/{sid}")
                    assert locked.status_code == 409 and "open for writing" in locked.json()["error"]
                state = (await http.get(f"/sessions/{sid}")).json()
                assert state["messages"] == before and state["lastEventId"].endswith("-0")
                async with event_stream(app, f"/sessions/{sid}/events") as events:
                    await http.post(f"/sessions/{sid}/prompt", json={"text": "again"})
                    await events.until("agent_end")
                assert len((await second_store.load(sid)).messages) == len(before) + 2
                assert (await http.get("/sessions/0123")).status_code == 404
                assert (await http.delete(f"/sessions/{sid}")).status_code == 204
                assert await second_store.list() == []
                assert (await http.delete(f"/sessions/{sid}")).status_code == 404
