"""Tool `details` that JSON cannot hold (tuple keys, a cycle, very deep nesting) never stop a run.

Sessions store what JSON cannot hold as its `str()` (the README's promise), the attached agent
keeps recording, and the SSE app sends that `tool_execution_end` with the same fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.sessions import open_agent
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall
from agentloop.wire import EventEnvelope, dumps_envelope, envelope_from_json

from .helpers import MODEL, make_store
from .test_sse_app import client, envelopes, event_stream


def tuple_keys() -> Any:
    return {("a", 1): "x", "plain": [1, 2]}


def cycle() -> Any:
    value: dict[str, Any] = {"name": "loop"}
    value["self"] = value
    return value


def deep() -> Any:
    value: Any = "bottom"
    for _ in range(100_000):
        value = [value]
    return {"deep": value, "kept": 1}


ODD: dict[str, Callable[[], Any]] = {"tuple_keys": tuple_keys, "cycle": cycle, "deep": deep}


def check_stored(case: str, details: Any) -> None:
    """What a store (or the SSE app) wrote for the odd details of `case`."""
    assert isinstance(details, dict)
    if case == "tuple_keys":
        assert details == {"('a', 1)": "x", "plain": [1, 2]}
    elif case == "cycle":
        assert details["name"] == "loop"
        assert details["self"] == str(cycle())
    else:
        assert details["kept"] == 1
        nested = details["deep"]
        depth = 0
        while isinstance(nested, list):
            (nested,) = nested
            depth += 1
        assert isinstance(nested, str) and depth < 1000  # cut where it nests too deeply, as text


def odd_tool(case: str) -> al.AgentTool:
    @al.tool
    async def odd() -> al.AgentToolResult:
        """Return details JSON cannot hold."""
        return al.AgentToolResult(content=(al.TextContent("ok"),), details=ODD[case]())

    return odd


def script() -> ScriptedModel:
    return ScriptedModel(
        [Response(content=[ScriptedToolCall("t1", "odd", {})]), "first done", "second done"],
    )


@pytest.mark.parametrize("case", sorted(ODD))
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_odd_details_are_stored_as_text_and_recording_goes_on(
    anyio_backend: object, kind: str, case: str, tmp_path: Path
) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            async with open_agent(store, model=MODEL, tools=[odd_tool(case)], stream_fn=script()) as agent:
                await agent.prompt("odd")
                assert agent.state.error_message is None
                await agent.prompt("again")
                assert agent.state.error_message is None
                count = len(agent.state.messages)
            (info,) = await store.list()
            data = await store.load(info.id)
            assert len(data.messages) == count == 6
            result = data.messages[2]
            assert isinstance(result, al.ToolResultMessage)
            check_stored(case, result.details)


@pytest.mark.parametrize("case", sorted(ODD))
async def test_the_sse_app_sends_the_tool_execution_end_of_odd_details(anyio_backend: object, case: str) -> None:
    def make(session_id: str) -> al.Agent:
        return al.Agent(model=MODEL, tools=[odd_tool(case)], stream_fn=script())

    app = AgentSSEApp(make)
    with anyio.fail_after(20):
        async with app.running(), client(app) as http:
            sid = (await http.post("/sessions")).json()["id"]
            async with event_stream(app, f"/sessions/{sid}/events") as events:
                assert (await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})).status_code == 202
                messages = await events.until("agent_end")
            ends = [e["event"] for e in envelopes(messages) if e["event"]["type"] == "tool_execution_end"]
            assert len(ends) == 1
            check_stored(case, ends[0]["result"]["details"])
            state = (await http.get(f"/sessions/{sid}")).json()
            assert [m["role"] for m in state["messages"]] == ["user", "assistant", "toolResult", "assistant"]


@pytest.mark.parametrize("case", sorted(ODD))
def test_dumps_envelope_writes_odd_details_as_text(case: str) -> None:
    result = al.AgentToolResult(content=(al.TextContent("ok"),), details=ODD[case]())
    event = al.ToolExecutionEnd(tool_call_id="t1", tool_name="odd", result=result, is_error=False)
    envelope = EventEnvelope(event=event, run_id="r", seq=1, turn=1, timestamp=0)
    data = envelope_from_json(__import__("json").loads(dumps_envelope(envelope)))
    assert isinstance(data.event, al.ToolExecutionEnd)
    check_stored(case, data.event.result.details)
