"""agentloop's loop as a Temporal workflow: the same events as in one process, tools as
activities (parallel, a barrier, a failing one), steering and abort as signals, bounded
history (continue-as-new) that the caller does not see, and the Replayer on recorded histories.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio import exceptions as temporal_exceptions
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.worker import Replayer

import agentloop as al
from agentloop.temporal import (
    AgentLoopPlugin,
    AgentWorkflow,
    EventsLostError,
    TemporalAgent,
    approve,
    pending_approvals,
    start_agent,
    stream_events,
    worker,
)
from agentloop.wire import EventEnvelope, to_json

from ..durable_checks import PROMPT, check_envelopes, normalized, run_example
from ..support import as_assistant, text
from . import agents
from .runs import run_as_in_process, run_on_worker


async def tool_activity_steps(handle: Any) -> list[tuple[str, str]]:
    """The tool activities' scheduled and completed events, in history order, by tool call id."""
    import json

    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    steps = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            if ".tool." in attributes.activity_type.name:
                call_id = json.loads(attributes.input.payloads[0].data)["toolCall"]["id"]
                scheduled[event.event_id] = call_id
                steps.append(("scheduled", call_id))
        elif event.HasField("activity_task_completed_event_attributes"):
            call_id = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id)
            if call_id is not None:
                steps.append(("completed", call_id))
    return steps


async def test_a_run_with_a_tool_gives_the_events_of_the_in_process_loop(client: Client, queue: str) -> None:
    _, _, result, expected_messages = await run_as_in_process(client, queue, agents.one_tool)
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected_messages])
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]


async def test_parallel_tools_a_barrier_and_a_failing_tool_as_in_process(client: Client, queue: str) -> None:
    _, handle, result, _ = await run_as_in_process(client, queue, agents.parallel)
    # In the history: the barrier's activity is scheduled after p1's has completed, and p3 and p4
    # (scheduled together, in parallel) after the barrier's has completed.
    steps = await tool_activity_steps(handle)
    assert steps[:6] == [
        ("scheduled", "p1"),
        ("completed", "p1"),
        ("scheduled", "p2"),
        ("completed", "p2"),
        ("scheduled", "p3"),
        ("scheduled", "p4"),
    ]
    assert sorted(steps[6:]) == [("completed", "p3"), ("completed", "p4")]
    broken = next(m for m in result if m.role == "toolResult" and m.tool_call_id == "p4")
    assert broken.is_error and broken.content[0].text == "'no such key: d'"


async def test_an_abort_signal_cuts_the_tool_activity_and_ends_the_run(
    client: Client, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOW_TOOL_SECONDS", "600")
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "slow", [PROMPT], id=f"abort-{uuid.uuid4().hex}", task_queue=queue)
            envelopes = []
            async for envelope in stream_events(handle):
                envelopes.append(envelope)
                if envelope.type == "tool_execution_start":
                    await handle.signal(AgentWorkflow.abort)
            result = await handle.result()
    check_envelopes(envelopes)
    end = next(e.event for e in envelopes if isinstance(e.event, al.ToolExecutionEnd))
    assert end.is_error and text(end.result.content[0]) == "Operation aborted"
    # as in one process: the next model call sees the aborted signal and ends at once, aborted
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]
    assert as_assistant(result[-1]).stop_reason == "aborted"
    assert envelopes[-1].type == "agent_end"


async def test_a_steering_signal_reaches_the_next_turn(
    client: Client, queue: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    monkeypatch.setenv("TOOL_GATE", str(gate))
    steer = al.UserMessage(content="also check y", timestamp=2)
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "slow", [PROMPT], id=f"steer-{uuid.uuid4().hex}", task_queue=queue)
            envelopes = []
            async for envelope in stream_events(handle):
                envelopes.append(envelope)
                if envelope.type == "tool_execution_start":
                    await handle.signal(AgentWorkflow.steer, steer)
                    await anyio.Path(gate).touch()  # the tool returns
            result = await handle.result()
    check_envelopes(envelopes)
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert result[3] == steer
    types = [(e.type, e.turn) for e in envelopes]
    assert types.index(("turn_start", 2)) < [e.event for e in envelopes].index(al.MessageStart(steer))


async def test_a_follow_up_signal_is_taken_when_the_agent_would_stop(
    client: Client, queue: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    monkeypatch.setenv("TOOL_GATE", str(gate))
    follow = al.UserMessage(content="and y?", timestamp=3)
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "follow_up", [PROMPT], id=f"fu-{uuid.uuid4().hex}", task_queue=queue)
            async for envelope in stream_events(handle):
                if envelope.type == "tool_execution_start":
                    await handle.signal(AgentWorkflow.follow_up, follow)
                    await anyio.Path(gate).touch()  # the tool returns
            result = await handle.result()
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert result[4] == follow
    assert as_assistant(result[5]).text == "y is 43"


async def test_cancelling_the_workflow_mid_tool_cancels_it_and_is_no_tool_result(
    client: Client, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal's own cancellation ends the run; it never becomes an error result the model answers."""
    monkeypatch.setenv("SLOW_TOOL_SECONDS", "600")
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "slow", [PROMPT], id=f"cancel-{uuid.uuid4().hex}", task_queue=queue)
            async for envelope in stream_events(handle):
                if envelope.type == "tool_execution_start":
                    await handle.cancel()
                    break
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
            # a caller that comes later gets the events, then the workflow's failure
            later: list[EventEnvelope] = []
            with pytest.raises(WorkflowFailureError):
                async for envelope in stream_events(handle):
                    later.append(envelope)
    assert isinstance(failure.value.cause, temporal_exceptions.CancelledError)
    assert later[-1].type == "tool_execution_start" and [e.seq for e in later] == list(range(len(later)))
    model_activities = [
        e
        for e in (await handle.fetch_history()).events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "slow.model"
    ]
    assert len(model_activities) == 1  # no second model call answering a tool error


async def test_continue_as_new_after_n_turns_is_one_run_to_the_caller_and_replays(client: Client, queue: str) -> None:
    envelopes, handle, result, expected_messages = await run_as_in_process(client, queue, agents.many_turns, seconds=60)
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected_messages])
    assert max(e.turn for e in envelopes) == 6
    # 6 turns, 2 per history: three workflow runs, the first two continued as new
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{handle.id}'")]
    statuses = sorted(r.status for r in runs if r.status is not None)
    assert statuses.count(WorkflowExecutionStatus.CONTINUED_AS_NEW) == 2
    assert statuses.count(WorkflowExecutionStatus.COMPLETED) == 1
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.UNSTORED)])
    for run in runs:
        history = await client.get_workflow_handle(handle.id, run_id=run.run_id).fetch_history()
        await replayer.replay_workflow(history)


async def test_max_turns_counts_the_turns_of_every_history(client: Client, queue: str) -> None:
    _, _, result, expected_messages = await run_as_in_process(client, queue, agents.capped, seconds=60)
    assert len([m for m in result if m.role == "assistant"]) == 4
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected_messages])


async def test_a_caller_that_reconnects_gets_each_event_once_in_order(client: Client, queue: str) -> None:
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "many_turns", [PROMPT], id=f"rc-{uuid.uuid4().hex}", task_queue=queue)
            first: list[EventEnvelope] = []
            async for envelope in stream_events(handle):
                first.append(envelope)
                if len(first) == 7:
                    break  # the caller goes away
            rest = [e async for e in stream_events(handle, after_seq=first[-1].seq)]
            await handle.result()
            # after the end, from the query: the last history's events are kept, earlier ones are not
            tail = [e async for e in stream_events(handle, after_seq=(first + rest)[-3].seq)]
            with pytest.raises(EventsLostError, match=r"events 0 to [0-9]+ of workflow"):
                [e async for e in stream_events(handle, after_seq=-1)]
    whole = first + rest
    check_envelopes(whole)
    assert [e.event.type for e in whole].count("agent_start") == 1
    assert tail == whole[-2:]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_the_helpers_fail_at_once(temporal_address: str) -> None:
    with pytest.raises(RuntimeError, match="Temporal's Python SDK runs on asyncio only, not on trio"):
        await start_agent(None, "one_tool", [PROMPT], id="x", task_queue="q")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="asyncio only"):
        worker(None, task_queue="q", agents=[])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"agentloop\.temporal\.approve needs asyncio"):
        await approve(None, "c1")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"agentloop\.temporal\.pending_approvals needs asyncio"):
        await pending_approvals(None)  # type: ignore[arg-type]


def test_the_docs_temporal_example_runs_as_written(temporal_address: str) -> None:
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "durable.md").read_text(encoding="utf-8")
    code = re.search(r"```python \{ \.notest \}\n(.*?)```", page, re.S)
    assert code is not None
    program = (
        code.group(1).replace("127.0.0.1:7233", temporal_address).replace('"calc-1"', f'"calc-{uuid.uuid4().hex}"')
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    # Temporal's SDK can crash in its own runtime's teardown once the interpreter exits, after the
    # program has finished (sdk-python issue 300: SIGSEGV, or SIGABRT with "Python runtime state:
    # finalizing"; about one run in five here): the run itself must have succeeded, which the
    # output below shows whole.
    assert result.returncode in (0, -signal.SIGSEGV, -signal.SIGABRT), result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "0 agent_start" and lines[-2] == "15 agent_end"
    assert lines[-1] == "['user', 'assistant', 'toolResult', 'assistant']"


def test_the_example_worker_and_client_run_as_written(temporal_address: str) -> None:
    result = run_example("temporal_agent.py", {"TEMPORAL_ADDRESS": temporal_address}, ready="worker polling")
    assert result.returncode == 0, result.stderr
    assert "add -> 5" in result.stdout and "'2 + 3 = 5.'" in result.stdout
    assert result.stdout.splitlines()[-1].endswith("agent_end")


async def test_a_model_activity_that_keeps_failing_ends_the_run_with_an_error_message(
    client: Client, queue: str
) -> None:
    _, handle, result = await run_on_worker(client, queue, agents.failing)
    assert result[-1].stop_reason == "error"
    assert result[-1].error_message == "The model call failed: RuntimeError: provider exploded"
    attempts = [
        e for e in (await handle.fetch_history()).events if e.HasField("activity_task_started_event_attributes")
    ]
    assert attempts[0].activity_task_started_event_attributes.attempt == 2  # retried once, as configured


@pytest.mark.parametrize("name", ["refused_beating", "refused_quiet"])
async def test_a_tool_refusing_for_good_runs_once_and_the_model_sees_its_message(
    client: Client, queue: str, name: str
) -> None:
    agent = getattr(agents, name)
    _, handle, result = await run_on_worker(client, queue, agent)
    tool_result = result[2]
    assert isinstance(tool_result, al.ToolResultMessage) and tool_result.is_error
    assert text(tool_result.content[0]) == "account a-1 is closed"
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in (await handle.fetch_history()).events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert attempts == [1, 1, 1]  # the model, the tool (not retried), the model


async def test_a_run_of_an_agent_its_worker_does_not_hold_waits_for_a_worker_that_holds_it(
    client: Client, queue: str
) -> None:
    """A rolling deploy: the run lands on an old worker without the agent, then a new one takes it."""
    with anyio.fail_after(90):
        async with worker(client, task_queue=queue, agents=[agents.parallel]):
            run_id = f"newcomer-{uuid.uuid4().hex}"
            handle = await start_agent(client, "newcomer", [PROMPT], id=run_id, task_queue=queue)
            while not (failed := await workflow_task_failures(handle)):  # noqa: ASYNC110 (the server's history)
                await anyio.sleep(0.05)
        async with worker(client, task_queue=queue, agents=[agents.newcomer]):
            result = await handle.result()
    assert "no TemporalAgent named 'newcomer' on this worker" in failed[0]
    assert "the run waits for a worker that holds it" in failed[0]
    assert [m.role for m in result] == ["user", "assistant", "toolResult", "assistant"]


async def workflow_task_failures(handle: Any) -> list[str]:
    """The messages of the run's failed workflow tasks, in history order."""
    history = await handle.fetch_history()
    return [
        e.workflow_task_failed_event_attributes.failure.message
        for e in history.events
        if e.HasField("workflow_task_failed_event_attributes")
    ]


async def test_a_workflow_started_with_input_the_worker_cannot_decode_fails_at_once(client: Client, queue: str) -> None:
    unknown_block = {"kind": "run", "agent": "one_tool", "prompts": [{"role": "user", "content": [{"type": "sound"}]}]}
    inputs: list[Any] = [
        {"agent": 5},  # plain JSON, not an AgentRun
        RawValue(Payload(metadata={"encoding": b"json/agentloop"}, data=json.dumps(unknown_block).encode())),
    ]
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            for arg in inputs:
                handle = await client.start_workflow(
                    "agentloop.AgentWorkflow", arg, id=f"bad-{uuid.uuid4().hex}", task_queue=queue
                )
                with pytest.raises(WorkflowFailureError) as failure:
                    await handle.result()
                assert "this worker cannot decode the run's input" in str(failure.value.cause)
                with pytest.raises(WorkflowFailureError):
                    [e async for e in stream_events(handle)]


async def test_a_run_without_prompts_continues_the_transcript_or_fails_saying_why(client: Client, queue: str) -> None:
    asked = al.UserMessage(content="go", timestamp=1)
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(
                client, "one_tool", [], messages=[asked], id=f"cont-{uuid.uuid4().hex}", task_queue=queue
            )
            result = await handle.result()
            answered = [*result]
            stuck = await start_agent(
                client, "one_tool", [], messages=[asked, *answered], id=f"stuck-{uuid.uuid4().hex}", task_queue=queue
            )
            with pytest.raises(WorkflowFailureError) as failure:
                await stuck.result()
    assert [m.role for m in result] == ["assistant", "toolResult", "assistant"]  # the prompt was already there
    assert "Cannot continue from message role: assistant" in str(failure.value.cause)


@pytest.mark.parametrize("agent", [agents.parallel, agents.many_turns, agents.by_reference], ids=lambda a: a.name)
async def test_a_worker_without_a_workflow_cache_replays_every_step_to_the_same_run(
    client: Client, queue: str, agent: TemporalAgent
) -> None:
    """`max_cached_workflows=0`: every workflow task rebuilds the run from its history (replay)."""
    held = agents.STORED if agent.contexts is not None else agents.UNSTORED
    _, _, result, expected_messages = await run_as_in_process(
        client, queue, agent, seconds=60, held=held, max_cached_workflows=0
    )
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected_messages])


async def test_a_run_that_does_not_exist_is_an_error_at_once(client: Client) -> None:
    from temporalio.service import RPCError

    handle = client.get_workflow_handle(f"no-such-run-{uuid.uuid4().hex}")
    with anyio.fail_after(10):
        with pytest.raises(RPCError, match="not found"):
            [e async for e in stream_events(handle)]
        with pytest.raises(RPCError, match="not found"):
            await pending_approvals(handle)
        with pytest.raises(ValueError, match="takes no decisions"):
            await approve(handle, "c1")
