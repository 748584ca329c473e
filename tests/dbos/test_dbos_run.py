"""agentloop's loop as a DBOS workflow, in this process on SQLite: the same events as in one
process, tools as steps (parallel, a barrier, a failing one) in a deterministic order, two
operations a turn, steering, follow-up, abort and approval as DBOS messages (received only when
one was sent), DBOS's own errors propagating, and trio refused.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dbos import DBOS, DBOSClient, SetWorkflowID
from dbos import error as dbos_error

import agentloop as al
from agentloop.dbos import (
    DBOSAgent,
    _agent,
    abort,
    approve,
    follow_up,
    idempotency_key,
    result,
    start_agent,
    steer,
    stream_events,
)
from agentloop.wire import EventEnvelope, to_json
from tests import durable_scripts as scripts

from ..durable_checks import PROMPT, check_envelopes, comparable, in_process, lines, normalized, text
from . import agents, control_messages

pytestmark = pytest.mark.usefixtures("launched_dbos")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("AGENTLOOP_TEST_LOG", str(tmp_path))
    yield tmp_path


async def durable(agent: DBOSAgent) -> tuple[str, list[EventEnvelope], list[al.AgentMessage]]:
    workflow_id = await start_agent(agent, [PROMPT], id=f"{agent.name}-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    check_envelopes(envelopes)
    return workflow_id, envelopes, messages


async def steps(workflow_id: str) -> list[str]:
    return [step["function_name"] for step in await DBOS.list_workflow_steps_async(workflow_id)]


async def test_a_run_gives_the_events_and_messages_of_a_run_in_one_process() -> None:
    events, messages = await in_process(agents.one_tool)
    workflow_id, envelopes, durable_messages = await durable(agents.one_tool)
    assert comparable([e.event for e in envelopes]) == comparable(events)
    assert normalized([to_json(m) for m in durable_messages]) == normalized([to_json(m) for m in messages])
    assert {e.run_id for e in envelopes} == {workflow_id}
    assert [s for s in await steps(workflow_id) if not s.startswith("DBOS.")] == [
        "one_tool.model",
        "one_tool.tool.lookup",
        "one_tool.model",
        "one_tool.publish",
    ]


async def test_parallel_calls_and_a_barrier_are_steps_in_source_order(log: Path) -> None:
    events, messages = await in_process(agents.parallel)
    workflow_id, envelopes, durable_messages = await durable(agents.parallel)
    assert normalized([to_json(m) for m in durable_messages]) == normalized([to_json(m) for m in messages])
    assert sorted(map(str, comparable([e.event for e in envelopes]))) == sorted(map(str, comparable(events)))
    results = {m.tool_call_id: m for m in durable_messages if isinstance(m, al.ToolResultMessage)}
    assert list(results) == ["p1", "p2", "p3", "p4"]
    assert results["p4"].is_error and "no such key: d" in text(results["p4"])
    assert text(results["p2"]) == "noted b"
    assert [s for s in await steps(workflow_id) if ".tool." in s] == [
        "parallel.tool.lookup",
        "parallel.tool.barrier",  # begins after p1 is finalized...
        "parallel.tool.lookup",  # ...and p3, p4 after it
        "parallel.tool.broken",
    ]


async def test_a_turn_records_its_two_steps_and_no_recv_when_no_message_was_sent() -> None:
    """Each turn is its model step and its tool step; the run's first poll receives (a message may
    have been sent before the run began), later polls receive only when a step saw a message."""
    workflow_id, _, messages = await durable(agents.tool_turns)
    assert [m.role for m in messages] == ["user", *["assistant", "toolResult"] * 4, "assistant"]
    assert await steps(workflow_id) == [
        "DBOS.recv",
        "DBOS.sleep",  # the recv's timeout (0 s), recorded by DBOS
        *["tool_turns.model", "tool_turns.tool.lookup"] * 4,
        "tool_turns.model",
        "tool_turns.publish",
    ]
    parallel_id, _, _ = await durable(agents.parallel)  # four tool steps in one turn, none receives
    assert (await steps(parallel_id)).count("DBOS.recv") == 1


async def test_the_workflows_operations_do_not_depend_on_the_reader() -> None:
    """Events are written from inside steps, never as operations of the workflow: a run read by
    a slow caller records the same operations, in the same order, as a run nobody reads."""
    read_id, _, _ = await durable(agents.parallel)  # read while it runs
    unread_id = await start_agent(agents.parallel, [PROMPT], id=f"unread-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        await result(unread_id)
    slow_id = await start_agent(agents.parallel, [PROMPT], id=f"slow-reader-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        async for _ in stream_events(slow_id):
            await anyio.sleep(0.05)
    assert await steps(read_id) == await steps(unread_id) == await steps(slow_id)


async def test_a_reconnecting_caller_gets_the_rest_of_the_events_once() -> None:
    workflow_id, envelopes, _ = await durable(agents.one_tool)
    rest = [e async for e in stream_events(workflow_id, after_seq=4)]
    assert [e.seq for e in rest] == list(range(5, len(envelopes)))
    assert [to_json(e.event) for e in rest] == [to_json(e.event) for e in envelopes[5:]]
    with pytest.raises(ValueError, match="after_seq must be the seq of an event already seen"):
        await stream_events(workflow_id, after_seq=-2).__anext__()


async def wait_for_first_line(path: Path) -> None:
    """Until the workflow's model or tool has written its first line there (`log / "model_calls"`,
    `log / "tool_starts"`)."""
    with anyio.fail_after(10):
        while not lines(path):  # noqa: ASYNC110 (written by the workflow's model or tool)
            await anyio.sleep(0.02)


async def test_steering_during_a_tool_reaches_the_next_turn(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATE", str(log / "go"))
    workflow_id = await start_agent(agents.slow, [PROMPT], id=f"steer-{uuid.uuid4().hex}")
    await wait_for_first_line(log / "tool_starts")
    await steer(workflow_id, al.UserMessage(content="and y?", timestamp=2))
    await anyio.Path(log / "go").touch()  # the tool returns
    with anyio.fail_after(20):
        messages = await result(workflow_id)
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert text(messages[3]) == "and y?"


@pytest.mark.parametrize("name", list(agents.SLOW_ANSWERS))
async def test_steering_during_a_model_call_reaches_the_next_turn(
    name: str, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the answer: tool calls (their step sees the message), a call that fails its checks
    (no tool step: the poll receives anyway), or no tool (the model step sees it)."""
    monkeypatch.setenv("MODEL_GATE", str(log / "go"))
    workflow_id = await start_agent(agents.slow_answers[name], [PROMPT], id=f"{name}-{uuid.uuid4().hex}")
    await wait_for_first_line(log / "model_calls")
    await steer(workflow_id, al.UserMessage(content="and y?", timestamp=2))
    await anyio.Path(log / "go").touch()  # the model answers
    with anyio.fail_after(20):
        messages = await result(workflow_id)
    tool_turn = ["toolResult"] if name != "slow_text_answer" else []
    assert [m.role for m in messages] == ["user", "assistant", *tool_turn, "user", "assistant"]
    assert text(messages[-2]) == "and y?"
    assert text(messages[-1]) == "and y is 43"


async def test_a_follow_up_runs_when_the_agent_would_stop(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATE", str(log / "go"))
    workflow_id = await start_agent(agents.follow_up, [PROMPT], id=f"follow-{uuid.uuid4().hex}")
    await wait_for_first_line(log / "tool_starts")
    await follow_up(workflow_id, al.UserMessage(content="now y", timestamp=2))
    await anyio.Path(log / "go").touch()  # the tool returns
    with anyio.fail_after(20):
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    check_envelopes(envelopes)
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert text(messages[-1]) == "y is 43"


async def test_an_abort_ends_the_run_aborted_at_the_next_step(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATE", str(log / "go"))
    workflow_id = await start_agent(agents.slow, [PROMPT], id=f"abort-{uuid.uuid4().hex}")
    await wait_for_first_line(log / "tool_starts")
    await abort(workflow_id)
    await anyio.Path(log / "go").touch()  # the tool returns
    with anyio.fail_after(20):
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    check_envelopes(envelopes)
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "aborted"
    assert text(messages[2]) == "x=42"  # the running tool finished
    assert lines(log / "model_calls") == ["0"]  # no model call after the abort
    assert envelopes[-1].type == "agent_end"


async def test_a_follow_up_sent_during_the_last_model_call_runs(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_GATE", str(log / "go"))
    agent = agents.slow_answers["slow_text_answer"]
    workflow_id = await start_agent(agent, [PROMPT], id=f"last-follow-{uuid.uuid4().hex}")
    await wait_for_first_line(log / "model_calls")
    await follow_up(workflow_id, al.UserMessage(content="and y?", timestamp=2))
    await anyio.Path(log / "go").touch()  # the model answers
    with anyio.fail_after(20):
        messages = await result(workflow_id)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert text(messages[-1]) == "and y is 43"


async def test_the_look_for_control_messages_reads_the_mark_the_senders_set() -> None:
    """`_control_mark` reads the run's workflow attribute (on SQLite here; on PostgreSQL below)."""
    assert await control_messages.answers() == control_messages.EXPECTED


async def test_the_look_for_control_messages_reads_the_mark_the_senders_set_on_postgres(postgres_url: str) -> None:
    url = postgres_url.rsplit("/", 1)[0] + f"/control_{uuid.uuid4().hex[:8]}"  # a database of its own
    command = [sys.executable, "-m", "tests.dbos.control_messages", url]
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == control_messages.EXPECTED


def test_the_look_for_control_messages_finds_a_new_mark_when_it_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DBOS that cannot answer: the run receives at every poll (slower), misses nothing."""

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the system database is away")

    monkeypatch.setattr(DBOS, "list_workflows", broken)
    first, second = _agent._control_mark("any-workflow"), _agent._control_mark("any-workflow")
    assert first and second and first != second


async def test_a_cancelled_workflow_stops_at_its_next_step_and_its_caller_gets_dbos_error(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOW_TOOL_SECONDS", "0.5")
    workflow_id = f"cancel-{uuid.uuid4().hex}"
    with SetWorkflowID(workflow_id):  # as start_agent does, keeping the handle of the run in this process
        handle = await DBOS.start_workflow_async(agents.slow.workflow, {"prompts": [to_json(PROMPT)]})
    await wait_for_first_line(log / "tool_starts")
    await DBOS.cancel_workflow_async(workflow_id)
    with anyio.fail_after(20):
        with pytest.raises(dbos_error.DBOSException, match="cancelled"):
            async for _ in stream_events(workflow_id):
                pass
        with pytest.raises(dbos_error.DBOSException, match="cancelled"):
            await result(workflow_id)
        running: asyncio.Future[Any] = handle.task  # type: ignore[attr-defined]
        await asyncio.wait({running})  # the workflow's own coroutine has ended
    assert isinstance(running.exception(), dbos_error.DBOSException)
    assert lines(log / "model_calls") == ["0"]  # no model call followed the cancellation
    assert (await DBOS.get_workflow_status_async(workflow_id)).status == "CANCELLED"  # type: ignore[union-attr]


async def test_dbos_errors_end_the_run_and_never_become_tool_results() -> None:
    workflow_id = await start_agent(agents.engine, [PROMPT], id=f"engine-{uuid.uuid4().hex}")
    seen: list[EventEnvelope] = []
    with anyio.fail_after(20), pytest.raises(dbos_error.DBOSException, match="the engine failed on x"):
        async for envelope in stream_events(workflow_id):
            seen.append(envelope)
    assert not any(e.type == "tool_execution_end" for e in seen)
    with pytest.raises(dbos_error.DBOSException, match="the engine failed on x"):
        await result(workflow_id)


async def test_a_tool_timeout_is_the_outcome_its_step_records() -> None:
    events, messages = await in_process(agents.napping)
    workflow_id, envelopes, durable_messages = await durable(agents.napping)
    assert comparable([e.event for e in envelopes]) == comparable(events)
    assert normalized([to_json(m) for m in durable_messages]) == normalized([to_json(m) for m in messages])
    assert text(durable_messages[2]) == "Tool nap timed out after 0.2 s"
    recorded = [
        s for s in await DBOS.list_workflow_steps_async(workflow_id) if s["function_name"] == "napping.tool.nap"
    ]
    output = recorded[0]["output"]
    assert output is not None and output["error"] == "Tool nap timed out after 0.2 s"  # what a replay answers


async def test_a_model_call_that_raises_ends_the_run_with_an_error_message(log: Path) -> None:
    _, envelopes, messages = await durable(agents.failing)
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "error"
    assert last.error_message == "The model call failed: RuntimeError: provider exploded"
    assert envelopes[-1].type == "agent_end"
    assert lines(log / "model_calls") == ["failing"]


async def test_details_that_are_not_json_are_an_error_result_the_tool_runs_once_and_the_result_is_json(
    log: Path,
) -> None:
    workflow_id, _, messages = await durable(agents.odd)
    tool_result = messages[2]
    assert isinstance(tool_result, al.ToolResultMessage) and tool_result.is_error
    assert "returned details that are not JSON values" in text(tool_result)
    assert lines(log / "tool_starts") == ["odd_details k"]
    raw: list[Any] = await (await DBOS.retrieve_workflow_async(workflow_id)).get_result()
    assert json.loads(json.dumps(raw)) == raw  # plain JSON values: any client decodes them


async def test_a_client_naming_an_agent_this_process_does_not_define_fails_at_once(tmp_path: Path) -> None:
    client = DBOSClient(system_database_url=f"sqlite:///{tmp_path}/other.sqlite")
    try:
        with anyio.fail_after(5), pytest.raises(LookupError, match="no DBOSAgent named 'calculatr'"):
            await start_agent("calculatr", [PROMPT], id=f"c-{uuid.uuid4().hex}", client=client)
    finally:
        client.destroy()


async def test_an_unknown_workflow_is_an_error_at_once() -> None:
    with anyio.fail_after(5):
        with pytest.raises(dbos_error.DBOSException, match="Non-existent target workflow ID: nobody"):
            await stream_events("nobody").__anext__()
        with pytest.raises(dbos_error.DBOSException, match="Non-existent target workflow ID: nobody"):
            await result("nobody")


def test_an_agent_is_checked_where_it_is_defined() -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        DBOSAgent("no spaces", model=scripts.MODEL)
    with pytest.raises(ValueError, match="already defined"):
        DBOSAgent("one_tool", model=scripts.MODEL)
    with pytest.raises(ValueError, match="must run alone in its batch"):
        DBOSAgent("approving", model=scripts.MODEL, tools=[scripts.lookup], needs_approval=["lookup"])
    with pytest.raises(ValueError, match="not among the tools"):
        DBOSAgent("approving", model=scripts.MODEL, tools=[scripts.lookup], needs_approval=["pay"])
    with pytest.raises(ValueError, match="max_parallel_tool_calls"):
        DBOSAgent("limited", model=scripts.MODEL, max_parallel_tool_calls=0)
    with pytest.raises(TypeError, match=r"DBOSAgent does not take before_tool_call; its loop options are api_key, "):
        DBOSAgent("hooked", model=scripts.MODEL, before_tool_call=lambda ctx, signal: None)
    with pytest.raises(TypeError, match="get_api_key must be callable or None, got 'key'"):
        DBOSAgent("keyed", model=scripts.MODEL, get_api_key="key")
    assert DBOSAgent("defaults", model=scripts.MODEL).options == al.LoopOptions()
    with pytest.raises(RuntimeError, match="only available in a tool running as a DBOS step"):
        idempotency_key()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_on_trio_every_function_fails_at_once(anyio_backend: str) -> None:
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: start_agent("one_tool", [PROMPT], id=""),
        lambda: stream_events("w", after_seq=-2).__anext__(),
        lambda: result(""),
        lambda: steer("w", "not a message"),  # type: ignore[arg-type]
        lambda: follow_up("w", "not a message"),  # type: ignore[arg-type]
        lambda: abort("w", client="not a client"),  # type: ignore[arg-type]
        lambda: approve("w", "c1", "yes"),  # type: ignore[arg-type]
    ]
    for make in calls:
        if anyio_backend == "trio":
            with pytest.raises(RuntimeError, match="DBOS runs async workflows on asyncio only, not on trio"):
                await make()
        else:  # past the backend check: the arguments' own error
            with pytest.raises((ValueError, TypeError)):
                await make()
