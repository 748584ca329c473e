"""The SSE app's approval routes: list the calls waiting, answer them (authorised like the rest),
and answer the calls of a session taken up from the store, then continue it."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.approvals import ApprovalRequest
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from .approval_tools import LOG, TOOLS
from .helpers import MODEL, make_store

AUTH = {"Authorization": "Bearer s3cret"}


def client(app: AgentSSEApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


def script() -> ScriptedModel:
    return ScriptedModel([Response(content=[ScriptedToolCall("c1", "delete", {"path": "a"})]), "Done."])


def tool_results(state: dict[str, object]) -> list[tuple[str, bool]]:
    messages = state["messages"]
    assert isinstance(messages, list)
    return [(m["content"][0]["text"], m["isError"]) for m in messages if m["role"] == "toolResult"]


@pytest.fixture(autouse=True)
def _log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOG, str(tmp_path / "deleted.log"))


async def test_the_app_lists_and_answers_approvals(anyio_backend: object) -> None:
    asked = anyio.Event()

    def factory(session_id: str) -> al.Agent:
        return al.Agent(
            model=MODEL,
            tools=TOOLS,
            stream_fn=script(),
            needs_approval=["delete"],
            on_approval_request=lambda request: asked.set(),
        )

    app = AgentSSEApp(factory, token="s3cret")
    async with app.running(), client(app) as http:
        session_id = (await http.post("/sessions", headers=AUTH, json={})).json()["id"]
        assert (
            await http.post(f"/sessions/{session_id}/prompt", headers=AUTH, json={"text": "Tidy"})
        ).status_code == 202
        await asked.wait()
        url = f"/sessions/{session_id}"
        assert (await http.get(f"{url}/approvals")).status_code == 401
        assert (await http.post(f"{url}/approve", json={"toolCallId": "c1"})).status_code == 401
        listed = await http.get(f"{url}/approvals", headers=AUTH)
        assert listed.status_code == 200
        [request] = listed.json()["approvals"]
        assert {k: request[k] for k in ("toolCallId", "toolName", "arguments")} == {
            "toolCallId": "c1",
            "toolName": "delete",
            "arguments": {"path": "a"},
        }
        assert (await http.post(f"{url}/approvals", headers=AUTH, json={})).status_code == 405
        unknown = await http.post(f"{url}/approve", headers=AUTH, json={"toolCallId": "nope"})
        assert unknown.status_code == 409 and "no approval is pending" in unknown.json()["error"]
        bad = await http.post(f"{url}/approve", headers=AUTH, json={"toolCallId": "c1", "arguments": {"path": ["x"]}})
        assert bad.status_code == 422 and "edited arguments" in bad.json()["error"]
        wrong = await http.post(f"{url}/approve", headers=AUTH, json={"toolCallId": "c1", "approved": "yes"})
        assert wrong.status_code == 400
        answer = await http.post(f"{url}/approve", headers=AUTH, json={"toolCallId": "c1", "arguments": {"path": "b"}})
        assert answer.status_code == 200 and answer.json()["approved"] is True
        await app._sessions[session_id].agent.wait_for_idle()
        assert (await http.get(f"{url}/approvals", headers=AUTH)).json() == {"approvals": []}
        assert tool_results((await http.get(url, headers=AUTH)).json()) == [("deleted b", False)]


async def test_authorize_guards_the_approval_routes(anyio_backend: object) -> None:
    app = AgentSSEApp(lambda session_id: al.Agent(model=MODEL), authorize=lambda scope, session_id: False)
    async with app.running(), client(app) as http:
        assert (await http.get("/sessions/abc/approvals")).status_code == 403
        assert (await http.post("/sessions/abc/approve", json={"toolCallId": "c1"})).status_code == 403


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_stored_approval_is_answered_through_the_app_then_continued(
    anyio_backend: object, kind: str, tmp_path: Path
) -> None:
    async with make_store(kind, tmp_path) as store:
        # A run stopped while its call waits (its caller went away): the call stays stored.
        asked = anyio.Event()
        agent = al.Agent(
            model=MODEL,
            tools=TOOLS,
            stream_fn=script(),
            needs_approval=["delete"],
            on_approval_request=lambda request: asked.set(),
        )
        info = await store.create(agent=agent)
        async with store.open(info.id) as session:
            await session.attach(agent)
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.prompt, "Tidy")
                await asked.wait()
                tg.cancel_scope.cancel()
            assert [r.tool_call_id for r in session.pending_approvals] == ["c1"]

        ended = anyio.Event()

        def factory(session_id: str) -> al.Agent:
            resumed = al.Agent(model=MODEL, tools=TOOLS, stream_fn=ScriptedModel(["Done."]))
            resumed.subscribe(lambda event, signal: ended.set() if isinstance(event, al.AgentEnd) else None)
            return resumed

        app = AgentSSEApp(factory, store=store)
        async with app.running(), client(app) as http:
            url = f"/sessions/{info.id}"
            [request] = (await http.get(f"{url}/approvals")).json()["approvals"]
            assert ApprovalRequest.from_json(request).tool_call_id == "c1"
            early = await http.post(f"{url}/continue", json={})
            assert early.status_code == 409 and "answer them" in early.json()["error"]
            assert (await http.post(f"{url}/approve", json={"toolCallId": "c1", "approved": False})).status_code == 200
            assert (await http.post(f"{url}/continue", json={})).status_code == 202
            await ended.wait()
            await app._sessions[info.id].agent.wait_for_idle()
            state = (await http.get(url)).json()
            assert tool_results(state) == [("Tool execution was blocked", True)]
            assert state["messages"][-1]["content"][0]["text"] == "Done."
