"""Human approval of tool calls in a durable run: the workflow waits for `approve`, a denied call
is blocked as by `before_tool_call` in one process, a call approved with edited arguments runs
with them as in one process (a bad edit is refused before it enters the history), an abort or a
timeout ends the wait. (The wait surviving a killed worker: test_kill_and_resume.)"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

import agentloop as al
from agentloop.approvals import ApprovalRequest
from agentloop.temporal import (
    AgentLoopPlugin,
    AgentWorkflow,
    TemporalAgent,
    approve,
    pending_approvals,
    start_agent,
    stream_events,
    worker,
)
from agentloop.temporal import _approval as approval_module
from tests import durable_scripts as scripts

from ..durable_checks import PROMPT, check_envelopes, comparable, in_process
from ..support import as_assistant, text
from . import agents


async def next_pending(handle: Any, after: str | None = None) -> ApprovalRequest:
    """The first pending approval other than `after`, once there is one."""
    while True:
        pending = [r for r in await pending_approvals(handle) if r.tool_call_id != after]
        if pending:
            return pending[0]
        await anyio.sleep(0.05)


async def in_process_deciding(
    agent: TemporalAgent, decide: Callable[[al.Agent, ApprovalRequest], Awaitable[None]]
) -> list[al.AgentEvent]:
    """The same conversation with an `Agent` in one process, whose calls named by the durable
    agent's `needs_approval` are decided by `decide`."""
    events: list[al.AgentEvent] = []
    local = al.Agent(
        model=agent.model,
        tools=agent.tools,
        stream_fn=agent.stream_fn,
        needs_approval=agent.needs_approval,
        on_approval_request=lambda request: decide(local, request),
    )
    local.subscribe(lambda event, signal: events.append(event))
    await local.prompt(PROMPT)
    return events


async def in_process_with(agent: TemporalAgent, decisions: dict[str, str | None]) -> list[al.AgentEvent]:
    """The same conversation in one process, with a `before_tool_call` that blocks the calls
    `decisions` names (with the reason given)."""

    def before(ctx: al.BeforeToolCallContext, signal: al.AbortSignal) -> al.BeforeToolCallResult | None:
        if ctx.tool_call.id in decisions:
            return al.BeforeToolCallResult(block=True, reason=decisions[ctx.tool_call.id])
        return None

    events, _ = await in_process(agent, before_tool_call=before)
    return events


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "replayed"])
async def test_approved_calls_run_and_a_denied_one_is_blocked_as_in_process(
    client: Client, queue: str, cached: bool
) -> None:
    """`replayed`: a worker without a workflow cache rebuilds the wait from the history at every step."""
    options: dict[str, Any] = {} if cached else {"max_cached_workflows": 0}
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED, **options):
            handle = await start_agent(client, "guarded", [PROMPT], id=f"ok-{uuid.uuid4().hex}", task_queue=queue)
            first = await next_pending(handle)
            assert await pending_approvals(handle) == [first]  # one at a time, in the calls' order
            with pytest.raises(ValueError, match=r"no approval is pending for tool call 'g3' \(pending: \['g1'\]\)"):
                await approve(handle, "g3", approved=False)
            await approve(handle, "g1")
            second = await next_pending(handle, after="g1")
            await approve(handle, "g3", approved=False, reason="not /etc")
            envelopes = [e async for e in stream_events(handle)]
            result = await handle.result()
            assert await pending_approvals(handle) == []
            with pytest.raises(ValueError, match="takes no decisions"):
                await approve(handle, "g3")
    assert (first.tool_call_id, first.tool_name, dict(first.arguments)) == ("g1", "delete", {"path": "/tmp/a"})
    assert first.requested_at > 0
    assert (second.tool_call_id, dict(second.arguments)) == ("g3", {"path": "/etc"})
    check_envelopes(envelopes)
    expected = await in_process_with(agents.guarded, {"g3": "not /etc"})
    assert comparable([e.event for e in envelopes], ends_in_id_order=True) == comparable(
        expected, ends_in_id_order=True
    )
    results = {m.tool_call_id: m for m in result if isinstance(m, al.ToolResultMessage)}
    assert not results["g1"].is_error and text(results["g1"].content[0]) == "deleted /tmp/a"
    assert results["g3"].is_error and text(results["g3"].content[0]) == "not /etc"
    history = await handle.fetch_history()
    await Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.UNSTORED)]).replay_workflow(history)


async def test_through_the_agent_an_edited_call_runs_with_its_arguments_and_a_denied_one_gets_the_reason(
    client: Client, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario of `Agent.approve` in one process: a bad edit is refused (never recorded) and
    the call keeps waiting; the good edit runs; the other call is denied with a reason."""
    agent = agents.guarded
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "guarded", [PROMPT], id=f"ed-{uuid.uuid4().hex}", task_queue=queue)
            first = await next_pending(handle)
            with pytest.raises(ValueError, match="the edited arguments of tool call 'g1' are invalid") as bad:
                await agent.approve(handle, "g1", arguments={"target": "/tmp/b"})
            with pytest.raises(ValueError, match="edited arguments are for an approved call, not a denied one"):
                await agent.approve(handle, "g1", False, arguments={"path": "/tmp/b"})
            assert await agent.pending_approvals(handle) == [first]  # still waiting
            await agent.approve(handle, "g1", arguments={"path": "/tmp/b"})
            with pytest.raises(ValueError, match=r"no approval is pending for tool call 'g1'"):
                await agent.approve(handle, "g1")
            await next_pending(handle, after="g1")
            await agent.approve(handle, "g3", False, "not /etc")
            envelopes = [e async for e in stream_events(handle)]
            result = await handle.result()
    assert "path" in str(bad.value)
    check_envelopes(envelopes)

    async def decide(local: al.Agent, request: ApprovalRequest) -> None:
        if request.tool_call_id == "g1":
            await local.approve("g1", arguments={"path": "/tmp/b"})
        else:
            await local.approve(request.tool_call_id, False, "not /etc")

    expected = await in_process_deciding(agent, decide)
    assert comparable([e.event for e in envelopes], ends_in_id_order=True) == comparable(
        expected, ends_in_id_order=True
    )
    results = {m.tool_call_id: m for m in result if isinstance(m, al.ToolResultMessage)}
    assert not results["g1"].is_error and text(results["g1"].content[0]) == "deleted /tmp/b"
    assert results["g3"].is_error and text(results["g3"].content[0]) == "not /etc"
    asked = next(m for m in result if isinstance(m, al.AssistantMessage))
    assert asked.tool_calls[0].arguments == {"path": "/tmp/a"}  # the transcript keeps the model's arguments
    history = await handle.fetch_history()
    accepted = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    names = [e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name for e in accepted]
    assert names.count("approve") == 2  # the refused decisions never entered the history
    await Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.UNSTORED)]).replay_workflow(history)

    # A replay takes the recorded decisions without checking them again (a check has a CPU
    # budget: a loaded worker could answer differently).
    def over_budget(tool: al.AgentTool, call: al.ToolCall) -> object:
        raise ValueError("over the validation budget")

    monkeypatch.setattr(approval_module, "validate_tool_arguments", over_budget)
    await Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.UNSTORED)]).replay_workflow(history)


async def test_a_denial_without_a_reason_reads_as_the_reference_block(client: Client, queue: str) -> None:
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "guarded", [PROMPT], id=f"no-{uuid.uuid4().hex}", task_queue=queue)
            await approve(handle, (await next_pending(handle)).tool_call_id, approved=False)
            await approve(handle, (await next_pending(handle, after="g1")).tool_call_id, approved=False)
            envelopes = [e async for e in stream_events(handle)]
    expected = await in_process_with(agents.guarded, {"g1": None, "g3": None})
    assert comparable([e.event for e in envelopes], ends_in_id_order=True) == comparable(
        expected, ends_in_id_order=True
    )
    ends = [e.event for e in envelopes if isinstance(e.event, al.ToolExecutionEnd) and e.event.is_error]
    assert [text(end.result.content[0]) for end in ends] == ["Tool execution was blocked"] * 2


async def test_an_abort_ends_the_wait_and_the_run(client: Client, queue: str) -> None:
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "guarded", [PROMPT], id=f"ab-{uuid.uuid4().hex}", task_queue=queue)
            await next_pending(handle)
            await handle.signal(AgentWorkflow.abort)
            result = await handle.result()
            assert await pending_approvals(handle) == []
    g1 = next(m for m in result if isinstance(m, al.ToolResultMessage) and m.tool_call_id == "g1")
    assert g1.is_error and text(g1.content[0]) == "Operation aborted"
    assert as_assistant(result[-1]).stop_reason == "aborted"


async def test_a_call_not_decided_in_time_is_blocked_and_a_predicate_picks_the_calls(
    client: Client, queue: str
) -> None:
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "impatient", [PROMPT], id=f"to-{uuid.uuid4().hex}", task_queue=queue)
            waiting = await next_pending(handle)
            result = await handle.result()
    assert waiting.tool_call_id == "g3"  # the predicate asks for /etc only
    results = {m.tool_call_id: m for m in result if isinstance(m, al.ToolResultMessage)}
    assert not results["g1"].is_error
    assert results["g3"].is_error and text(results["g3"].content[0]) == "No decision on this tool call within 1 s"


async def test_a_run_that_asks_no_approvals_refuses_a_decision(client: Client, queue: str) -> None:
    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "slow", [PROMPT], id=f"na-{uuid.uuid4().hex}", task_queue=queue)
            assert await pending_approvals(handle) == []
            with pytest.raises(ValueError, match="this run's agent asks none"):
                await approve(handle, "s1")
            await handle.result()


def test_needs_approval_is_checked_where_the_agent_is_made() -> None:
    with pytest.raises(ValueError, match=r"needs_approval names \['nope'\], which are not among the tools"):
        TemporalAgent("a", model=scripts.MODEL, tools=[scripts.lookup], needs_approval=["nope"])
    with pytest.raises(TypeError, match="needs_approval must be a collection of tool names or a callable"):
        TemporalAgent("a", model=scripts.MODEL, tools=[scripts.lookup], needs_approval="lookup")
    with pytest.raises(TypeError, match="approval_timeout must be a positive timedelta or None, got 5"):
        TemporalAgent("a", model=scripts.MODEL, approval_timeout=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"approval_timeout must be a positive timedelta.*timedelta\(0\)"):
        TemporalAgent("a", model=scripts.MODEL, approval_timeout=timedelta(0))
    asks = TemporalAgent("a", model=scripts.MODEL, tools=[scripts.lookup], needs_approval=lambda call: "yes")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="needs_approval must return a bool, got str"):
        asks.call_needs_approval(al.ToolCall("c", "lookup", {}))


async def test_approve_checks_its_arguments_before_asking() -> None:
    with pytest.raises(TypeError, match="approve: approved must be a bool, got str"):
        await approve(None, "c1", approved="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="approve: arguments must be a mapping or None, got list"):
        await agents.guarded.approve(None, "c1", arguments=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="approve: reason must be a str or None, got int"):
        await approve(None, "c1", approved=False, reason=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="approve: tool_call_id must be a str, got int"):
        await approve(None, 1)  # type: ignore[arg-type]


DURABLE_DOCS = Path(__file__).resolve().parents[2] / "docs" / "durable.md"


async def test_the_docs_supervisor_runs_as_written(client: Client, queue: str) -> None:
    page = await anyio.Path(DURABLE_DOCS).read_text(encoding="utf-8")
    code = next(c for c in re.findall(r"```python \{ \.notest \}\n(.*?)```", page, re.S) if "async def supervise" in c)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/durable.md", "exec"), namespace)
    seen: list[str] = []

    def allowed(request: ApprovalRequest) -> bool:
        seen.append(request.tool_call_id)
        return request.arguments.get("path") != "/etc"

    with anyio.fail_after(30):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start_agent(client, "guarded", [PROMPT], id=f"sup-{uuid.uuid4().hex}", task_queue=queue)
            await namespace["supervise"](agents.guarded, handle, allowed)
            result = await handle.result()
    assert seen == ["g1", "g3"]
    results = {m.tool_call_id: m for m in result if isinstance(m, al.ToolResultMessage)}
    assert not results["g1"].is_error and results["g3"].is_error and text(results["g3"].content[0]) == "not allowed"
