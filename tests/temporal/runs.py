"""How the Temporal tests run an agent: started on a task queue and read to its end, and the same
conversation in one process beside it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import anyio
from temporalio.client import Client

import agentloop as al
from agentloop.temporal import TemporalAgent, start_agent, stream_events, worker
from agentloop.wire import EventEnvelope

from ..durable_checks import PROMPT, check_envelopes, comparable, in_process
from . import agents


async def start(client: Client, agent: TemporalAgent, queue: str) -> Any:
    """Start a run of `agent` on `queue` (a worker must hold it); its handle."""
    return await start_agent(client, agent.name, [PROMPT], id=f"{agent.name}-{uuid.uuid4().hex}", task_queue=queue)


async def durable_run(client: Client, agent: TemporalAgent, queue: str) -> tuple[list[EventEnvelope], Any]:
    """Start `agent` on `queue` (a worker must hold it) and read its events to the end."""
    handle = await start(client, agent, queue)
    envelopes = [e async for e in stream_events(handle)]
    return envelopes, handle


async def run_on_worker(
    client: Client,
    queue: str,
    agent: TemporalAgent,
    *,
    seconds: float = 30,
    held: Sequence[TemporalAgent] = agents.UNSTORED,
    **worker_options: Any,
) -> tuple[list[EventEnvelope], Any, Any]:
    """Run `agent` to its end on a worker holding `held` (with `worker_options`), reading its
    events meanwhile, and check that its envelopes are well formed. Returns the envelopes, the
    workflow handle and its result."""
    with anyio.fail_after(seconds):
        async with worker(client, task_queue=queue, agents=held, **worker_options):
            envelopes, handle = await durable_run(client, agent, queue)
            result = await handle.result()
    check_envelopes(envelopes)
    return envelopes, handle, result


async def run_as_in_process(
    client: Client, queue: str, agent: TemporalAgent, **run: Any
) -> tuple[list[EventEnvelope], Any, Any, list[al.AgentMessage]]:
    """Run `agent` on a worker (`run_on_worker`, with `run`) and in one process; check that the
    durable run's events are those of the run in one process. Returns the envelopes, the
    workflow handle, its result and the in-process messages."""
    expected, expected_messages = await in_process(agent)
    envelopes, handle, result = await run_on_worker(client, queue, agent, **run)
    got = comparable([e.event for e in envelopes], ends_in_id_order=True)
    assert got == comparable(expected, ends_in_id_order=True)
    return envelopes, handle, result, expected_messages
