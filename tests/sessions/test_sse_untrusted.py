"""AgentSSEApp's limits hold under concurrency and on every route, and a model's hostile
arguments end as error results without ending the app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.sessions import JSONLSessionStore
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall

from .helpers import MODEL
from .test_sse_app import client, factory

TREE = {
    "type": "object",
    "$defs": {
        "node": {"type": "object", "properties": {"value": {"type": "integer"}, "child": {"$ref": "#/$defs/node"}}}
    },
    "properties": {"root": {"$ref": "#/$defs/node"}},
}


def tree(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"value": 1}
    for _ in range(depth):
        node = {"value": 1, "child": node}
    return {"root": node}


async def test_twenty_concurrent_creations_against_max_sessions_three_give_three(anyio_backend: object) -> None:
    """The cap was checked before the factory's await: all 20 got 201 and all 20 were held."""
    gate = anyio.Event()
    waiting = 0
    answered: list[int] = []
    everyone_is_in = anyio.Event()

    def note() -> None:
        if waiting + len(answered) == 20:
            everyone_is_in.set()

    async def make(session_id: str) -> al.Agent:
        nonlocal waiting
        waiting += 1
        note()
        await gate.wait()
        return al.Agent(model=MODEL, stream_fn=ScriptedModel([]))

    app = AgentSSEApp(make, max_sessions=3)
    with anyio.fail_after(30):
        async with app.running(), client(app) as http:
            async with anyio.create_task_group() as tg:

                async def create() -> None:
                    answered.append((await http.post("/sessions")).status_code)
                    note()

                for _ in range(20):
                    tg.start_soon(create)
                await everyone_is_in.wait()  # each request is answered or inside the factory
                gate.set()
            assert sorted(answered) == [201] * 3 + [503] * 17
            assert len(app._sessions) == 3 and waiting == 3


async def test_concurrent_creations_with_a_store_hold_at_most_max_sessions(
    anyio_backend: object, tmp_path: Path
) -> None:
    """With a store, a creation past the cap evicts an idle session instead (503 when none is
    idle yet): never more than the cap held."""
    held: list[int] = []
    answered: list[int] = []

    async def make(session_id: str) -> al.Agent:
        await anyio.sleep(0.01)
        held.append(len(app._sessions))
        return al.Agent(model=MODEL, stream_fn=ScriptedModel([]))

    app = AgentSSEApp(make, max_sessions=3, store=JSONLSessionStore(tmp_path))
    with anyio.fail_after(60):
        async with app.running(), client(app) as http:
            for _ in range(4):  # four rounds of five at once
                async with anyio.create_task_group() as tg:

                    async def create() -> None:
                        answered.append((await http.post("/sessions")).status_code)
                        held.append(len(app._sessions))

                    for _ in range(5):
                        tg.start_soon(create)
    assert set(answered) <= {201, 503} and answered.count(201) >= 6
    assert max(held) <= 3


async def test_the_events_path_of_a_session_named_events_needs_the_token(anyio_backend: object) -> None:
    """`GET /sessions/events?ticket=junk` is the session `events`, not an event stream: the
    token check was skipped for it (read: 200, delete: 204)."""
    app = AgentSSEApp(factory("hi"), token="s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions", headers=auth)).json()["id"]
            for method, path in [
                ("GET", "/sessions/events?ticket=junk"),
                ("DELETE", "/sessions/events?ticket=junk"),
                ("GET", "/sessions/events/?ticket=junk"),
                ("POST", f"/sessions/{sid}/events?ticket=junk"),
                ("DELETE", f"/sessions/{sid}/events?ticket=junk"),
                ("GET", f"/sessions/{sid}/events?ticket=junk"),
                ("GET", "/sessions/events?token=junk"),
            ]:
                answer = await http.request(method, path)
                assert answer.status_code == 401, (method, path, answer.status_code)
            assert (await http.get(f"/sessions/{sid}", headers=auth)).status_code == 200


async def test_asking_for_an_unknown_session_at_the_cap_evicts_nothing(anyio_backend: object, tmp_path: Path) -> None:
    app = AgentSSEApp(factory("hi"), max_sessions=2, store=JSONLSessionStore(tmp_path))
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            ids = {(await http.post("/sessions")).json()["id"] for _ in range(2)}
            assert (await http.get("/sessions/nosuchsession")).status_code == 404
            assert set(app._sessions) == ids


@pytest.mark.parametrize("depth", [400, 10_000])
async def test_arguments_nested_too_deeply_are_an_error_result_of_a_served_run(
    anyio_backend: object, depth: int
) -> None:
    """A 400-deep tree made the `$ref` lookup's native code panic (`PanicException`, not an
    `Exception`): served in process, one prompt ended `running()` and every session with it."""

    async def walk(*args: Any) -> str:
        return "walked"

    def make(session_id: str) -> al.Agent:
        tool = al.AgentTool(name="walk", description="", parameters=TREE, execute=walk)
        script = [
            Response(content=[ScriptedToolCall("deep", "walk", tree(depth), args_chunks=["{}"])]),
            Response(content=[ScriptedText(["done"])]),
        ]
        return al.Agent(model=MODEL, tools=[tool], stream_fn=ScriptedModel(script))

    app = AgentSSEApp(make)
    with anyio.fail_after(60):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})).status_code == 202
            live = app._sessions[sid]
            while live.busy:  # until the run's task is done
                await live.changes().wait()
            state = await _state(http, sid)
            results = [m for m in state["messages"] if m["role"] == "toolResult"]
            assert len(results) == 1 and results[0]["isError"] is True
            assert "nest more than 64 arrays and objects deep" in results[0]["content"][0]["text"]
            assert state["messages"][-1]["content"][0]["text"] == "done"
            assert (await http.post("/sessions")).status_code == 201  # the app still serves


async def _state(http: httpx.AsyncClient, sid: str) -> Any:
    answer = await http.get(f"/sessions/{sid}")
    assert answer.status_code == 200
    return answer.json()
