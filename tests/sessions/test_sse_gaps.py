"""Every gap in an SSE event stream is announced: a client never misses events without a reset.

- A client slower than `replay_limit` events falls behind while connected: `event: reset` comes
  before the oldest event still kept.
- A client that connects without `Last-Event-ID` after the log dropped events gets a reset first.
- Ids carry the app's epoch: after a restart, an id from before it is not taken for a new one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.sessions import JSONLSessionStore
from agentloop.testing import Response

from .test_sse_app import EventStream, SSEMessage, client, factory


@asynccontextmanager
async def slow_event_stream(app: AgentSSEApp, path: str, **headers: str) -> AsyncIterator[EventStream]:
    """An event stream whose reader takes nothing until asked (the app's sends wait for it)."""
    stream = EventStream(app, path, headers)
    stream.send_chunk.close()
    stream.chunks.close()
    stream.send_chunk, stream.chunks = anyio.create_memory_object_stream[bytes](0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.run)
        try:
            yield stream
        finally:
            stream.disconnect.set()
            tg.cancel_scope.cancel()
            stream.chunks.close()


async def until_idle(app: AgentSSEApp, session_id: str) -> None:
    """Return once the session's run is over (the app sets `busy` before the POST is answered)."""
    live = app._sessions[session_id]
    while live.busy:
        await live.changes().wait()


def numbers(messages: list[SSEMessage]) -> list[int]:
    return [int(m.id.rpartition("-")[2]) for m in messages if m.event == "message"]


def check_no_silent_gap(messages: list[SSEMessage]) -> int:
    """Ids go up by one, except right after a reset; returns how many resets there were."""
    resets = 0
    previous: int | None = None
    after_reset = False
    for message in messages:
        if message.event == "reset":
            resets += 1
            after_reset = True
            continue
        number = int(message.id.rpartition("-")[2])
        if previous is not None and not after_reset:
            assert number == previous + 1, f"ids jump from {previous} to {number} with no reset"
        previous = number
        after_reset = False
    return resets


async def test_a_client_that_falls_behind_gets_a_reset(anyio_backend: object) -> None:
    text = Response(content=[al.testing.ScriptedText(["w"] * 60)], chunk_delay=0)
    app = AgentSSEApp(factory(text), replay_limit=8)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with slow_event_stream(app, f"/sessions/{sid}/events") as events:
                await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
                messages = [await events.next()]  # then the client stalls until the run is over
                await until_idle(app, sid)
                while messages[-1].event != "message" or messages[-1].json["event"]["type"] != "agent_end":
                    messages.append(await events.next())
            assert check_no_silent_gap(messages) >= 1
            state = (await http.get(f"/sessions/{sid}")).json()
            for i, message in enumerate(messages):
                if message.event != "reset":
                    continue
                # A reset names the log's last event when it was sent (the run may have gone on).
                assert numbers_of(message.json["lastEventId"]) <= numbers_of(state["lastEventId"])
                if messages[i + 1].event != "reset":
                    # What follows is the oldest event kept, as announced (a reset may follow a
                    # reset when the log turned over again while the first was being sent).
                    assert messages[i + 1].id == message.json["oldestEventId"]
            assert numbers(messages)[-1] == numbers_of(state["lastEventId"])


async def test_connecting_without_an_id_after_the_log_dropped_events_gets_a_reset(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("a b c d e f"), replay_limit=3)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
            await until_idle(app, sid)
            async with slow_event_stream(app, f"/sessions/{sid}/events") as events:
                first = await events.next()
                assert first.event == "reset" and first.json["asked"] is None
                kept = [await events.next() for _ in range(3)]
            assert check_no_silent_gap([first, *kept]) == 1


async def test_an_id_from_before_a_restart_gets_a_reset(anyio_backend: object, tmp_path: Path) -> None:
    words = Response(content=[al.testing.ScriptedText(["x"] * 30)], chunk_delay=0)
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            app = AgentSSEApp(factory(words), store=store)
            async with app.running(), client(app) as http:
                sid = (await http.post("/sessions")).json()["id"]
                await http.post(f"/sessions/{sid}/prompt", json={"text": "one"})
                await until_idle(app, sid)
                state = (await http.get(f"/sessions/{sid}")).json()
                seen_before = str(state["lastEventId"])
                halfway = str(seen_before).replace(str(numbers_of(seen_before)), str(numbers_of(seen_before) // 2))
        async with JSONLSessionStore(tmp_path) as store:  # the server restarted
            app = AgentSSEApp(factory(words), store=store)
            async with app.running(), client(app) as http:
                await http.post(f"/sessions/{sid}/prompt", json={"text": "two"})
                await until_idle(app, sid)
                for old in (seen_before, halfway):
                    async with slow_event_stream(app, f"/sessions/{sid}/events", **{"Last-Event-ID": old}) as events:
                        first = await events.next()
                        assert first.event == "reset", f"{old!r} from before the restart was taken as new"
                        assert first.json["asked"] == old
                        assert numbers([await events.next()]) == [1]  # the whole log of this run follows


def numbers_of(event_id: object) -> int:
    return int(str(event_id).rpartition("-")[2])
