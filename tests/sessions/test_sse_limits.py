"""AgentSSEApp is safe by default: loopback hosts without a token, bounded sessions, clients and
writes, idle sessions evicted, event-stream tickets instead of the token in a URL, and an
`authorize` hook per session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop._serve._app import AgentSSEApp
from agentloop.sessions import JSONLSessionStore

from .test_sse_app import client, event_stream, factory

EVIL = {"Host": "attacker.example:8000", "Origin": "http://attacker.example:8000"}


async def test_without_a_token_only_loopback_hosts_are_served(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("hi"))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            for method, path in [
                ("GET", "/sessions"),
                ("GET", f"/sessions/{sid}"),
                ("POST", f"/sessions/{sid}/prompt"),
                ("DELETE", f"/sessions/{sid}"),
            ]:
                refused = await http.request(method, path, headers=EVIL, json={"text": "x"})
                assert refused.status_code == 400, (method, path)
                assert "loopback" in refused.json()["error"]
            for host in ("localhost:8000", "127.0.0.1:9", "[::1]:8000", "app.localhost", "127.0.0.1"):
                assert (await http.get("/sessions", headers={"Host": host})).status_code == 200, host
    tokened = AgentSSEApp(factory("hi"), token="s3cret")
    async with tokened.running(), client(tokened) as http:
        auth = {"Authorization": "Bearer s3cret", "Host": "chat.example"}
        assert (await http.get("/sessions", headers=auth)).status_code == 200  # the token guards it


async def test_a_last_event_id_with_thousands_of_digits_is_a_400(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("hi"))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            answer = await http.get(f"/sessions/{sid}/events", headers={"Last-Event-ID": "abc-" + "9" * 5000})
            assert answer.status_code == 400 and "Last-Event-ID" in answer.json()["error"]


async def test_sessions_are_capped_and_the_least_recently_used_idle_one_evicted(
    anyio_backend: object, tmp_path: Path
) -> None:
    bare = AgentSSEApp(factory("hi"), max_sessions=2)
    with anyio.fail_after(20):
        async with bare.running(), client(bare) as http:
            for _ in range(2):
                assert (await http.post("/sessions")).status_code == 201
            full = await http.post("/sessions")
            assert full.status_code == 503 and "max_sessions" in full.json()["error"]
    stored = AgentSSEApp(factory("hi"), max_sessions=2, store=JSONLSessionStore(tmp_path))
    with anyio.fail_after(20):
        async with stored.running(), client(stored) as http:
            first, second = [(await http.post("/sessions")).json()["id"] for _ in range(2)]
            assert (await http.get(f"/sessions/{first}")).status_code == 200  # second is now the oldest
            third = (await http.post("/sessions")).json()["id"]
            assert set(stored._sessions) == {first, third}
            assert (await http.get(f"/sessions/{second}")).status_code == 200  # resumed from the store


async def test_idle_sessions_are_evicted(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("hi"), idle_timeout=0.2)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events"):
                await anyio.sleep(0.5)
                assert sid in app._sessions  # an open event stream keeps it
            await anyio.sleep(0.5)
            assert (await http.get(f"/sessions/{sid}")).status_code == 404


async def test_clients_per_session_are_capped(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("hi"), max_clients=2)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events"), event_stream(app, f"/sessions/{sid}/events"):
                await anyio.sleep(0.1)
                third = await http.get(f"/sessions/{sid}/events")
                assert third.status_code == 429 and "max_clients" in third.json()["error"]


async def test_a_replay_is_sent_in_bounded_writes(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("x" * 300), send_bytes=1024, compact=False)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            ended = anyio.Event()
            sizes: list[int] = []
            body = b""

            async def receive() -> Any:
                if not sizes:
                    return {"type": "http.request", "body": b"", "more_body": False}
                await ended.wait()
                return {"type": "http.disconnect"}

            async def send(message: Any) -> None:
                nonlocal body
                if message["type"] == "http.response.body" and message.get("body"):
                    sizes.append(len(message["body"]))
                    body += message["body"]
                    if b"agent_end" in body:
                        ended.set()

            assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})).status_code == 202
            await app._sessions[sid].agent.wait_for_idle()  # the whole run is in the replay log
            async with anyio.create_task_group() as tg:
                tg.start_soon(app, _scope(f"/sessions/{sid}/events"), receive, send)
                await ended.wait()
            frames = [len(frame) for _, frame in app._sessions[sid].log]
            assert sum(frames) > 4 * 1024 and len(sizes) > 4
            assert max(sizes) <= max(1024, *frames)


def _scope(path: str) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [(b"host", b"localhost")]}


async def test_a_ticket_opens_one_event_stream_of_its_session(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("hi"), token="s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions", headers=auth)).json()["id"]
            other = (await http.post("/sessions", headers=auth)).json()["id"]
            assert (await http.post(f"/sessions/{sid}/ticket")).status_code == 401
            ticket = (await http.post(f"/sessions/{sid}/ticket", headers=auth)).json()["ticket"]
            assert (await http.get(f"/sessions/{other}/events?ticket={ticket}")).status_code == 401
            fresh = (await http.post(f"/sessions/{sid}/ticket", headers=auth)).json()["ticket"]
            async with event_stream(app, f"/sessions/{sid}/events?ticket={fresh}") as stream:
                await anyio.sleep(0.1)
                assert stream.status == 200
            again = await http.get(f"/sessions/{sid}/events?ticket={fresh}")
            assert again.status_code == 401 and "ticket" in again.json()["error"]
            assert (await http.get(f"/sessions/{sid}?ticket={fresh}")).status_code == 401  # events only


async def test_authorize_decides_each_request_for_a_session(anyio_backend: object) -> None:
    asked: list[str | None] = []

    async def authorize(scope: object, session_id: str | None) -> bool:
        asked.append(session_id)
        return session_id is None or session_id.startswith("a")

    app = AgentSSEApp(factory("hi"), authorize=authorize)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            expected = 200 if sid.startswith("a") else 403
            assert (await http.get(f"/sessions/{sid}")).status_code == expected
            assert asked == [None, sid]
    with pytest.raises(TypeError, match="authorize must be callable"):
        AgentSSEApp(factory(), authorize="yes")  # type: ignore[arg-type]
