"""A worker process SIGKILLed in the middle of a tool call; a second worker resumes the run.

The model is not called again for the turn that had finished, the tool is retried (with the
same idempotency key), the caller streaming the events sees each one once, in order, and the
final transcript equals an uninterrupted run's. The Replayer passes on the recorded history.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import anyio
import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

import agentloop as al
from agentloop.temporal import AgentLoopPlugin, start_agent, stream_events
from agentloop.wire import EventEnvelope, to_json

from .. import durable_checks
from ..durable_checks import PROMPT, check_envelopes, comparable, kill, lines, normalized
from . import agents


def spawn_worker(address: str, queue: str, log: Path, tool_seconds: str, stored: bool = False) -> subprocess.Popen[str]:
    """A worker process holding the agents without a store, or (`stored`) those with it."""
    args = [address, queue, *(["stored"] if stored else [])]
    return durable_checks.spawn_worker("tests.temporal.worker_process", *args, log=log, tool_seconds=tool_seconds)


@pytest.mark.parametrize("agent", ["slow", "slow_by_reference"])
async def test_a_worker_killed_mid_tool_is_replaced_and_the_run_resumes(
    client: Client, temporal_address: str, tmp_path: Path, workers: list[subprocess.Popen[str]], agent: str
) -> None:
    """With `slow_by_reference` (a context store in a directory both workers see), the second
    worker rebuilds the context of the first's model call from the store."""
    queue = f"kill-{uuid.uuid4().hex}"
    log = tmp_path
    stored = agent == "slow_by_reference"
    workers.append(spawn_worker(temporal_address, queue, log, tool_seconds="600", stored=stored))
    handle = await start_agent(client, agent, [PROMPT], id=f"kill-{uuid.uuid4().hex}", task_queue=queue)
    envelopes: list[EventEnvelope] = []

    async def read_events() -> None:
        async for envelope in stream_events(handle):
            envelopes.append(envelope)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(read_events)
            while not lines(log / "tool_starts"):  # noqa: ASYNC110 (written by the worker process)
                await anyio.sleep(0.05)
            killed_at = time.monotonic()
            kill(workers[0])
            seen_before_kill = len(envelopes)
            workers.append(spawn_worker(temporal_address, queue, log, tool_seconds="0", stored=stored))
            result = await handle.result()
        resumed_in = time.monotonic() - killed_at

    model_calls = lines(log / "model_calls")
    tool_starts = lines(log / "tool_starts")
    print(f"\nevents seen before the kill: {seen_before_kill}, after: {len(envelopes) - seen_before_kill}")
    print(f"model calls (by assistant messages in context): {model_calls}")
    print(f"tool starts: {tool_starts}")
    print(f"kill to result: {resumed_in:.1f} s")
    assert model_calls == ["0", "1"]  # the first call was not repeated by the second worker
    assert len(tool_starts) == 2  # the interrupted call was retried...
    assert tool_starts[0] == tool_starts[1] == f"slow_lookup x {handle.id}/s1"  # ...with the same idempotency key
    check_envelopes(envelopes)  # every event once, in order (seq 0..n-1), a well-formed run
    assert 0 < seen_before_kill < len(envelopes)

    # An uninterrupted run of the same conversation, on the surviving worker.
    clean = await start_agent(client, agent, [PROMPT], id=f"clean-{uuid.uuid4().hex}", task_queue=queue)
    with anyio.fail_after(30):
        clean_envelopes = [e async for e in stream_events(clean)]
        clean_result = await clean.result()
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in clean_result])
    assert comparable([e.event for e in envelopes], ends_in_id_order=True) == comparable(
        [e.event for e in clean_envelopes], ends_in_id_order=True
    )

    history = await handle.fetch_history()
    held = agents.STORED if stored else agents.UNSTORED
    await Replayer(workflows=[], plugins=[AgentLoopPlugin(held)]).replay_workflow(history)
    if stored:
        model_inputs = [
            e.activity_task_scheduled_event_attributes.input.payloads[0].data
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name.endswith(".model")
        ]
        assert b'"base":null' not in model_inputs[1].replace(b" ", b"")  # the second call went by reference
        assert len(list((log / "contexts").iterdir())) >= 2  # the contexts both workers wrote


async def test_an_approval_pending_when_the_worker_is_killed_is_still_pending_on_the_next(
    client: Client, temporal_address: str, tmp_path: Path, workers: list[subprocess.Popen[str]]
) -> None:
    from agentloop.temporal import approve, pending_approvals

    queue = f"kill-approval-{uuid.uuid4().hex}"
    log = tmp_path
    workers.append(spawn_worker(temporal_address, queue, log, tool_seconds="0"))
    handle = await start_agent(client, "guarded", [PROMPT], id=f"kill-approval-{uuid.uuid4().hex}", task_queue=queue)
    envelopes: list[EventEnvelope] = []

    async def read_events() -> None:
        async for envelope in stream_events(handle):
            envelopes.append(envelope)

    async def pending() -> list[str]:
        while not (requests := await pending_approvals(handle)):  # noqa: ASYNC110 (a query to the workflow)
            await anyio.sleep(0.05)
        return [r.tool_call_id for r in requests]

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(read_events)
            assert await pending() == ["g1"]
            await approve(handle, "g1")
            assert await pending() == ["g3"]
            kill(workers[0])
            seen_before_kill = len(envelopes)
            workers.append(spawn_worker(temporal_address, queue, log, tool_seconds="0"))
            assert await pending() == ["g3"]  # rebuilt from the history by the new worker
            await approve(handle, "g3", approved=False, reason="not /etc")
            result = await handle.result()

    model_calls = lines(log / "model_calls")
    tool_starts = lines(log / "tool_starts")
    print(f"\nevents seen before the kill: {seen_before_kill}, after: {len(envelopes) - seen_before_kill}")
    print(f"model calls: {model_calls}, tool starts: {tool_starts}")
    assert model_calls == ["0", "1"]  # the first model call was not repeated after the kill
    assert sorted(tool_starts) == ["delete /tmp/a", "lookup x"]  # g1 ran once, g3 never (denied)
    check_envelopes(envelopes)
    assert 0 < seen_before_kill < len(envelopes)
    denied = next(m for m in result if isinstance(m, al.ToolResultMessage) and m.tool_call_id == "g3")
    assert denied.is_error and denied.content[0] == al.TextContent("not /etc")
    history = await handle.fetch_history()
    await Replayer(workflows=[], plugins=[AgentLoopPlugin(agents.UNSTORED)]).replay_workflow(history)
