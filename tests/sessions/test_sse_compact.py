"""`AgentSSEApp` sends the compact wire form: bytes linear in the answer, every event rebuilt
exactly (from the start, and after a `Last-Event-ID` resume in the middle of a message), and the
full form on request."""

from __future__ import annotations

import anyio

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.testing import Response, ScriptedModel, ScriptedText
from agentloop.wire import CompactDecoder, from_json

from .helpers import MODEL
from .test_sse_app import SSEMessage, client, event_stream

DELTAS = 500


class Recorded:
    """A factory of agents that answer with DELTAS text deltas; keeps what the agent emitted."""

    def __init__(self) -> None:
        self.events: list[al.AgentEvent] = []

    def __call__(self, session_id: str) -> al.Agent:
        answer = Response(content=[ScriptedText(["abc "] * DELTAS)])
        agent = al.Agent(model=MODEL, stream_fn=ScriptedModel([answer]))
        agent.subscribe(lambda event, signal: self.events.append(event))
        return agent


async def run_once(app: AgentSSEApp) -> tuple[str, list[SSEMessage]]:
    """A session with one finished run; its whole event log, read back."""
    async with client(app) as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        async with event_stream(app, f"/sessions/{sid}/events") as events:
            assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})).status_code == 202
            messages = await events.until("agent_end")
    return sid, messages


def rebuilt(messages: list[SSEMessage], decoder: CompactDecoder | None = None) -> list[al.AgentEvent]:
    decoder = decoder or CompactDecoder()
    return [decoder.from_json(m.json["event"]) for m in messages if m.event == "message"]


def sse_bytes(messages: list[SSEMessage]) -> int:
    return sum(len(f"id: {m.id}\ndata: {m.data}\n\n".encode()) for m in messages)


async def test_the_stream_is_compact_and_rebuilds_every_event_exactly(anyio_backend: object) -> None:
    recorded = Recorded()
    app = AgentSSEApp(recorded)
    with anyio.fail_after(20):
        async with app.running():
            sid, messages = await run_once(app)
            log = app._sessions[sid].log
            log_bytes = sum(len(data) for _, data in log)
    updates = [m.json["event"] for m in messages if m.json["event"]["type"] == "message_update"]
    assert len(updates) >= DELTAS and all("message" not in u for u in updates)
    assert rebuilt(messages) == recorded.events
    assert sse_bytes(messages) < DELTAS * 300  # linear: a few hundred bytes per delta, envelope included
    assert log_bytes == sse_bytes(messages)


async def test_resume_in_the_middle_of_a_message_rebuilds_the_rest(anyio_backend: object) -> None:
    recorded = Recorded()
    app = AgentSSEApp(recorded)
    with anyio.fail_after(20):
        async with app.running():
            sid, _ = await run_once(app)
            async with event_stream(app, f"/sessions/{sid}/events") as first:
                head = [await first.next() for _ in range(60)]  # well inside the answer's deltas
            assert head[-1].json["event"]["type"] == "message_update"
            async with event_stream(app, f"/sessions/{sid}/events", **{"Last-Event-ID": head[-1].id}) as second:
                rest = await second.until("agent_end")
    decoder = CompactDecoder()  # the client's state lives on across the reconnection
    assert rebuilt(head, decoder) + rebuilt(rest, decoder) == recorded.events


async def test_compact_false_sends_the_full_form(anyio_backend: object) -> None:
    recorded = Recorded()
    app = AgentSSEApp(recorded, compact=False)
    with anyio.fail_after(20):
        async with app.running():
            _, messages = await run_once(app)
    events = [m.json["event"] for m in messages]
    assert [from_json(e) for e in events] == recorded.events  # the codec's own form, as is
    update = next(e for e in events if e["type"] == "message_update")
    assert set(update) == {"type", "message", "assistantMessageEvent"}
    assert sse_bytes(messages) > 1_000_000  # the whole message again with every delta
