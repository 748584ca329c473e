"""Context by reference: with a `context_store`, a model activity carries what is new since the
previous call and a key, the run is the in-process run, a store that lost the context costs a
resend (never the run), and a worker that has nothing cached reads it from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

import agentloop as al
from agentloop.temporal import (
    AgentLoopPlugin,
    AgentWorkflow,
    ContextStore,
    FileContextStore,
    MemoryContextStore,
    TemporalAgent,
    worker,
)
from agentloop.wire import to_json
from tests import durable_scripts as scripts

from ..durable_checks import comparable, in_process, normalized
from . import agents
from .runs import durable_run, run_as_in_process


async def model_requests(client: Client, workflow_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Every model activity's input in every history of the workflow: (`scheduled` or
    `failed`, request) in order; a failed one is followed by the request that replaced it."""
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    out: list[tuple[str, dict[str, Any]]] = []
    for run in sorted(runs, key=lambda r: r.start_time):
        history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                attributes = event.activity_task_scheduled_event_attributes
                if attributes.activity_type.name.endswith(".model"):
                    out.append(("scheduled", json.loads(attributes.input.payloads[0].data)))
            elif event.HasField("activity_task_failed_event_attributes"):
                out.append(("failed", {}))
    return out


async def test_calls_carry_only_what_is_new_and_the_run_is_the_in_process_run(client: Client, queue: str) -> None:
    _, handle, result, expected_messages = await run_as_in_process(
        client, queue, agents.by_reference, seconds=60, held=agents.STORED
    )
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected_messages])
    requests = [request["context"] for kind, request in await model_requests(client, handle.id)]
    assert len(requests) == 6  # six turns over two histories (four turns each at most)
    assert requests[0]["base"] is None and [m["role"] for m in requests[0]["messages"]] == ["user"]
    for later in requests[1:]:  # the key of the last context, and the tool result added since
        assert later["base"] is not None and [m["role"] for m in later["messages"]] == ["toolResult"]
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.STORED)])
    async for run in client.list_workflows(f"WorkflowId = '{handle.id}'"):
        await replayer.replay_workflow(await client.get_workflow_handle(handle.id, run_id=run.run_id).fetch_history())


async def test_a_worker_with_nothing_cached_reads_the_context_from_the_store(client: Client, queue: str) -> None:
    contexts = agents.by_reference.contexts
    assert contexts is not None
    reads = agents.STORE.reads
    contexts.cache_size = 0  # as if every call landed on a fresh worker
    try:
        with anyio.fail_after(60):
            async with worker(client, task_queue=queue, agents=agents.STORED):
                envelopes, handle = await durable_run(client, agents.by_reference, queue)
                await handle.result()
    finally:
        contexts.cache_size = 256
    expected, _ = await in_process(agents.by_reference)
    assert comparable([e.event for e in envelopes], ends_in_id_order=True) == comparable(
        expected, ends_in_id_order=True
    )
    assert agents.STORE.reads - reads >= 5  # every call after the first
    assert [kind for kind, _ in await model_requests(client, handle.id)] == ["scheduled"] * 6


async def test_a_store_that_lost_the_context_costs_a_resend_not_the_run(client: Client, queue: str) -> None:
    contexts = agents.by_reference.contexts
    assert contexts is not None
    contexts.cache_size = 0
    agents.STORE.forgetting = True
    try:
        with anyio.fail_after(60):
            async with worker(client, task_queue=queue, agents=agents.STORED):
                envelopes, handle = await durable_run(client, agents.by_reference, queue)
                result = await handle.result()
    finally:
        contexts.cache_size = 256
        agents.STORE.forgetting = False
    expected, expected_messages = await in_process(agents.by_reference)
    assert comparable([e.event for e in envelopes], ends_in_id_order=True) == comparable(
        expected, ends_in_id_order=True
    )
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected_messages])
    requests = await model_requests(client, handle.id)
    # each call by reference fails (the store has nothing) and is sent again whole
    assert [kind for kind, _ in requests[:4]] == ["scheduled", "scheduled", "failed", "scheduled"]
    resent = requests[3][1]["context"]
    assert resent["base"] is None and [m["role"] for m in resent["messages"]] == ["user", "assistant", "toolResult"]


async def test_the_stores_keep_what_they_are_given_under_its_digest(tmp_path: Path) -> None:
    import hashlib

    data = b'{"base":null,"messages":[]}'
    key = hashlib.sha256(data).hexdigest()
    for store in (MemoryContextStore(), FileContextStore(tmp_path / "contexts")):
        assert isinstance(store, ContextStore)
        assert await store.get(key) is None
        await store.put(key, data)
        await store.put(key, data)  # again: harmless
        assert await store.get(key) == data
    assert [p.name for p in (tmp_path / "contexts").iterdir()] == [key]  # no temporary file left
    with pytest.raises(ValueError, match=r"a context key is a SHA-256 hex digest, got '\.\./x'"):
        await FileContextStore(tmp_path).get("../x")


def test_context_store_is_checked_where_the_agent_is_made() -> None:
    with pytest.raises(TypeError, match=r"context_store must have async put\(key, data\) and get\(key\) methods"):
        TemporalAgent("a", model=scripts.MODEL, context_store={})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="FileContextStore needs a directory path, got int"):
        FileContextStore(3)  # type: ignore[arg-type]


def model_request(base: str | None, messages: list[al.AgentMessage], *, by_reference: bool = True) -> dict[str, Any]:
    context: dict[str, Any] = {"systemPrompt": "", "messages": [to_json(m) for m in messages], "tools": ["lookup"]}
    if by_reference:
        context["base"] = base
    return {"model": {"id": "scripted", "api": "scripted", "provider": "scripted"}, "context": context, "options": {}}


def echo_agent(store: ContextStore | None) -> TemporalAgent:
    """An agent whose model answers with the number of messages it was given."""

    def stream(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        return al.testing.ScriptedModel([f"{len(context.messages)} messages"])(model, context, options)

    return TemporalAgent("echo", model=scripts.MODEL, tools=[scripts.lookup], stream_fn=stream, context_store=store)


async def test_a_long_chain_is_flattened_so_a_cold_worker_reads_a_few_blobs() -> None:
    from temporalio.testing import ActivityEnvironment

    store = agents.SharedStore()
    agent = echo_agent(store)
    assert agent.contexts is not None
    agent.contexts.cache_size = 0
    call_model = agent.activities[0]
    environment = ActivityEnvironment()
    key = None
    for turn in range(40):  # each call adds a user message; the model answers
        prompt = al.UserMessage(content=f"turn {turn}", timestamp=turn)
        reads = store.reads
        out = await environment.run(call_model, model_request(key, [prompt]))
        assert out["message"]["content"][0]["text"] == f"{2 * turn + 1} messages"
        assert store.reads - reads <= 16  # never one read per turn
        key = out["contextKey"]
    assert len(store.memory) == 40
    blobs = [json.loads(data) for data in store.memory._blobs.values()]
    assert sum(1 for blob in blobs if blob["base"] is None) == 3  # the first, and a flattened one every 16


async def test_a_worker_without_the_store_asks_for_the_whole_context_and_answers_it() -> None:
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    call_model = echo_agent(None).activities[0]
    prompt = al.UserMessage(content="hi", timestamp=1)
    with pytest.raises(ApplicationError) as missing:
        await ActivityEnvironment().run(call_model, model_request("ab" * 32, [prompt]))
    assert missing.value.type == "AgentLoopContextMissing" and missing.value.non_retryable
    out = await ActivityEnvironment().run(call_model, model_request(None, [prompt]))
    assert out["role"] == "assistant"  # a plain message: the workflow takes either shape


async def test_agents_with_and_without_a_store_on_one_worker_are_refused_saying_why(client: Client) -> None:
    with pytest.raises(ValueError, match=r"agents with a context_store and agents without \(one_tool\) cannot share"):
        worker(client, task_queue="mixed", agents=[agents.one_tool, agents.by_reference])
    with pytest.raises(ValueError, match="run them on workers of their own"):
        AgentLoopPlugin([agents.by_reference, agents.one_tool])
