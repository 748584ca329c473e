"""`AgentSSEApp` at its edges: bodies that nest too deeply, a token, other origins, a log bounded
in bytes."""

from __future__ import annotations

import anyio
import pytest

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.testing import Response

from .test_sse_app import client, event_stream, factory

TOKEN = "sse-t0ken-4f1e"


async def test_a_deeply_nested_body_is_a_400(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("x"), max_body_size=1 << 22)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            deep = b'{"text": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
            response = await http.post(
                f"/sessions/{sid}/prompt", content=deep, headers={"content-type": "application/json"}
            )
            assert response.status_code == 400
            assert "nests too deeply" in response.json()["error"]
            body = b'{"message": {"role": "user", "content": "x", "timestamp": 1, "extra": '
            body += b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"}}"
            response = await http.post(
                f"/sessions/{sid}/prompt", content=body, headers={"content-type": "application/json"}
            )
            assert response.status_code == 400


async def test_a_token_is_required_when_set(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("x"), token=TOKEN)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
                refused = await http.post("/sessions", headers=headers)
                assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
                assert (await http.get("/sessions", headers=headers)).status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            sid = (await http.post("/sessions", headers=auth)).json()["id"]
            assert (await http.get(f"/sessions/{sid}", headers=auth)).status_code == 200
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                await events.done.wait()
            assert events.status == 401
            async with event_stream(app, f"/sessions/{sid}/events?token={TOKEN}") as events:  # EventSource
                await http.post(f"/sessions/{sid}/prompt", json={"text": "go"}, headers=auth)
                await events.until("agent_end")
            assert events.status == 200
    with pytest.raises(ValueError, match="token"):
        AgentSSEApp(factory(), token="")


async def test_cross_origin_requests_are_refused_unless_allowed(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("x", "y"))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            evil = {"Origin": "https://evil.example"}
            refused = await http.post("/sessions", headers=evil)
            assert refused.status_code == 403 and "origin" in refused.json()["error"]
            sid = (await http.post("/sessions", headers={"Origin": "http://localhost"})).json()["id"]  # same origin
            assert (await http.post(f"/sessions/{sid}/abort", headers=evil)).status_code == 403
            async with event_stream(app, f"/sessions/{sid}/events", Origin="https://evil.example") as events:
                await events.done.wait()
            assert events.status == 403
            assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})).status_code == 202  # no Origin
    friendly = AgentSSEApp(factory("x"), allowed_origins=["https://chat.example"])
    with anyio.fail_after(20):
        async with friendly.running(), client(friendly) as http:
            assert (await http.post("/sessions", headers={"Origin": "https://chat.example"})).status_code == 201
            assert (await http.post("/sessions", headers={"Origin": "https://evil.example"})).status_code == 403


async def test_the_replay_log_is_bounded_in_bytes(anyio_backend: object) -> None:
    big = Response(content=[al.testing.ScriptedText(["x" * 10_000] * 30)], chunk_delay=0)
    app = AgentSSEApp(factory(big), replay_bytes=1_000_000)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
            live = app._sessions[sid]
            while live.busy:
                await live.changes().wait()
            kept = sum(len(frame) for _, frame in live.log)
            assert kept <= 1_000_000, kept
            assert len(live.log) >= 2
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                assert (await events.next()).event == "reset"  # the log dropped events: the client knows
    with pytest.raises(ValueError, match="replay_bytes"):
        AgentSSEApp(factory(), replay_bytes=0)


async def test_a_non_ascii_token_works_in_the_header_and_the_query(anyio_backend: object) -> None:
    from urllib.parse import quote

    token = "tøken-ü-∑"
    app = AgentSSEApp(factory("x"), token=token)
    raw = token.encode()
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            header = {"Authorization": b"Bearer " + raw}
            response = await http.post("/sessions", headers=header)  # type: ignore[arg-type]
            assert response.status_code == 201
            sid = response.json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events?token={quote(token)}") as events:
                await http.post(f"/sessions/{sid}/prompt", json={"text": "go"}, headers=header)  # type: ignore[arg-type]
                await events.until("agent_end")
            assert events.status == 200


async def test_allowed_hosts_refuse_other_host_names(anyio_backend: object) -> None:
    app = AgentSSEApp(factory("x"), allowed_hosts=["localhost", "app.example:8000"])
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            assert (await http.post("/sessions")).status_code == 201  # httpx sends Host: localhost
            rebound = await http.post("/sessions", headers={"Host": "evil.example"})
            assert rebound.status_code == 400 and "allowed_hosts" in rebound.json()["error"]
            assert (await http.post("/sessions", headers={"Host": "APP.example:8000"})).status_code == 201
    with pytest.raises(TypeError, match="allowed_hosts"):
        AgentSSEApp(factory(), allowed_hosts="app")
