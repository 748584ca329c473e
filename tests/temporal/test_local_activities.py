"""Calls as local activities (`ActivityOptions(local=True)`): the same run as with activities,
recorded as markers in the workflow's history (which replays), and an abort still cuts a
running call."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import anyio
import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

import agentloop as al
from agentloop.temporal import ActivityOptions, AgentLoopPlugin, AgentWorkflow, start_agent, stream_events, worker

from ..support import as_assistant, text
from . import agents
from .test_temporal_run import PROMPT, check_envelopes, comparable, durable_run, in_process


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex}"


def test_a_local_activity_takes_no_heartbeat_timeout() -> None:
    with pytest.raises(ValueError, match="local activity does not heartbeat"):
        ActivityOptions(local=True, heartbeat_timeout=timedelta(seconds=5))
    with pytest.raises(TypeError, match="local must be a bool"):
        ActivityOptions(local="yes")  # type: ignore[arg-type]
    assert "heartbeat_timeout" not in ActivityOptions(local=True).as_kwargs()


async def test_local_calls_give_the_events_of_the_in_process_loop_and_are_markers_in_the_history(
    client: Client, queue: str
) -> None:
    expected, expected_messages = await in_process(agents.local_calls)
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            envelopes, handle = await durable_run(client, agents.local_calls, queue)
            result = await handle.result()
    check_envelopes(envelopes)
    assert comparable([e.event for e in envelopes]) == comparable(expected)
    assert [m.role for m in result] == [m.role for m in expected_messages]
    history = await handle.fetch_history()
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    # two model calls and the four tool calls of the parallel script
    assert len(markers) == 6
    await Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.UNSTORED)]).replay_workflow(history)


async def test_an_abort_cuts_a_running_local_call(client: Client, queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOW_TOOL_SECONDS", "600")
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            # A short workflow task timeout: while a local call runs, the task completes (and
            # the caller's events and the abort get through) every 80% of it.
            handle = await start_agent(
                client,
                "local_slow",
                [PROMPT],
                id=f"local-abort-{uuid.uuid4().hex}",
                task_queue=queue,
                task_timeout=timedelta(seconds=2),
            )
            envelopes = []
            aborted_at = 0.0
            async for envelope in stream_events(handle):
                envelopes.append(envelope)
                if envelope.type == "tool_execution_start":
                    await handle.signal(AgentWorkflow.abort)
                    aborted_at = time.monotonic()
            result = await handle.result()
            took = time.monotonic() - aborted_at
    check_envelopes(envelopes)
    end = next(e.event for e in envelopes if isinstance(e.event, al.ToolExecutionEnd))
    assert end.is_error and text(end.result.content[0]) == "Operation aborted"
    assert as_assistant(result[-1]).stop_reason == "aborted"
    assert took < 10  # the tool would have slept 600 s
