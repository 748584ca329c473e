"""Approvals on DBOS, in this process on SQLite: a call waits for `approve` (listed by
`pending_approvals` before its `tool_execution_start` reaches a reader), a denied call gets its
reason, a call approved with edited arguments runs with them (a bad edit is refused to the
caller and the call keeps waiting), the timeout and an abort end the wait, and of two decisions
sent at once one is taken. (The wait surviving a killed worker: test_kill_and_resume.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from dbos import DBOS

import agentloop as al
from agentloop.approvals import ApprovalRequest
from agentloop.dbos import _approval as dbos_approval
from agentloop.dbos import abort, approve, pending_approvals, result, start_agent, steer, stream_events
from agentloop.dbos._decisions import APPROVAL_TOPIC
from agentloop.wire import from_json

from ..durable_checks import PROMPT, check_envelopes, lines, text
from . import agents
from .events import wait_for_event

pytestmark = pytest.mark.usefixtures("launched_dbos")


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("AGENTLOOP_TEST_LOG", str(tmp_path))
    yield tmp_path


async def next_pending(workflow_id: str, after: str | None = None) -> ApprovalRequest:
    """The first call waiting other than `after`, once there is one."""
    while True:
        pending = [r for r in await pending_approvals(workflow_id) if r.tool_call_id != after]
        if pending:
            return pending[0]
        await anyio.sleep(0.05)


def results(messages: list[al.AgentMessage]) -> dict[str, tuple[str, bool]]:
    return {m.tool_call_id: (text(m), m.is_error) for m in messages if isinstance(m, al.ToolResultMessage)}


async def test_a_call_waits_for_its_approval_and_is_listed_when_its_start_is_seen(log: Path) -> None:
    workflow_id = await start_agent(agents.payment, [PROMPT], id=f"pay-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        await wait_for_event(workflow_id, "tool_execution_start")  # the call is visible while it waits
        [request] = await pending_approvals(workflow_id)
        assert lines(log / "tool_starts") == []
        await approve(workflow_id, "m1")
        assert await pending_approvals(workflow_id) == []
        messages = await result(workflow_id)
    assert (request.tool_call_id, request.tool_name, dict(request.arguments)) == ("m1", "pay", {"amount": 5})
    assert request.requested_at > 0
    assert text(messages[2]) == "paid 5"
    assert lines(log / "tool_starts") == [f"pay 5 {workflow_id}/m1"]
    with pytest.raises(ValueError, match=r"no approval is pending for tool call 'm1' \(pending: \[\]\)"):
        await approve(workflow_id, "m1")  # the run is over


async def test_through_the_agent_an_edited_call_runs_with_its_arguments_and_a_denied_one_gets_the_reason(
    log: Path,
) -> None:
    """The scenario of `Agent.approve` in one process, on `DBOSAgent.approve`. Both calls of the
    batch are listed from their start; the second is decided before its turn."""
    agent = agents.two_payments
    workflow_id = await start_agent(agent, [PROMPT], id=f"edit-{uuid.uuid4().hex}")
    with anyio.fail_after(30):
        await wait_for_event(workflow_id, "tool_execution_start", "m2")
        first, second = await agent.pending_approvals(workflow_id)
        with pytest.raises(ValueError, match=r"no approval is pending for tool call 'm9' \(pending: \['m1', 'm2'\]\)"):
            await agent.approve(workflow_id, "m9")
        await agent.approve(workflow_id, "m2", False, "over budget")
        assert await agent.pending_approvals(workflow_id) == [first]
        with pytest.raises(ValueError, match="the edited arguments of tool call 'm1' are invalid") as bad:
            await agent.approve(workflow_id, "m1", arguments={"amount": "lots"})
        with pytest.raises(ValueError, match="edited arguments are for an approved call, not a denied one"):
            await agent.approve(workflow_id, "m1", False, arguments={"amount": 7})
        assert await agent.pending_approvals(workflow_id) == [first]  # still waiting
        assert lines(log / "tool_starts") == []
        await agent.approve(workflow_id, "m1", arguments={"amount": 7})
        with pytest.raises(ValueError, match=r"no approval is pending for tool call 'm1'"):
            await agent.approve(workflow_id, "m1")
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    assert "amount" in str(bad.value)
    assert (first.tool_call_id, dict(first.arguments)) == ("m1", {"amount": 5})
    assert (second.tool_call_id, dict(second.arguments)) == ("m2", {"amount": 900})
    check_envelopes(envelopes)
    assert results(messages) == {"m1": ("paid 7", False), "m2": ("over budget", True)}
    assert lines(log / "tool_starts") == [f"pay 7 {workflow_id}/m1"]  # the edited call ran, once
    # as in one process: the transcript and the start event keep the model's arguments, the end is what ran
    asked = messages[1]
    assert isinstance(asked, al.AssistantMessage) and asked.tool_calls[0].arguments == {"amount": 5}
    starts = [e.event for e in envelopes if isinstance(e.event, al.ToolExecutionStart)]
    assert [(s.tool_call_id, s.args) for s in starts] == [("m1", {"amount": 5}), ("m2", {"amount": 900})]
    ends = [e.event for e in envelopes if isinstance(e.event, al.ToolExecutionEnd)]
    assert [(end.tool_call_id, text_of(end), end.is_error) for end in ends] == [
        ("m1", "paid 7", False),
        ("m2", "over budget", True),
    ]


async def test_a_replay_takes_a_recorded_edit_without_checking_it_again(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check has a CPU budget, which a loaded process could exceed: its outcome is a step."""
    workflow_id = await start_agent(agents.payment, [PROMPT], id=f"edit-replay-{uuid.uuid4().hex}")
    with anyio.fail_after(30):
        await next_pending(workflow_id)
        await approve(workflow_id, "m1", arguments={"amount": 7})
        messages = await result(workflow_id)
    assert results(messages) == {"m1": ("paid 7", False)}
    recorded = [(s["function_id"], s["function_name"]) for s in await DBOS.list_workflow_steps_async(workflow_id)]
    assert [name for _, name in recorded].count("payment.check") == 1
    after_tool = max(i for i, name in recorded if name == "payment.tool.pay") + 1

    async def over_budget(tool: al.AgentTool, call: al.ToolCall) -> object:
        raise ValueError("over the validation budget")

    monkeypatch.setattr(dbos_approval, "validated_arguments", over_budget)
    with anyio.fail_after(30):  # the workflow runs again over the recorded steps, up to the last model step
        fork = await DBOS.fork_workflow_async(workflow_id, after_tool)
        replayed = [from_json(m) for m in await fork.get_result()]
    assert results(replayed) == {"m1": ("paid 7", False)}
    assert lines(log / "tool_starts") == [f"pay 7 {workflow_id}/m1"]  # the tool's step was not run again


def text_of(end: al.ToolExecutionEnd) -> str:
    return "".join(block.text for block in end.result.content if isinstance(block, al.TextContent))


async def test_a_denied_call_gets_an_error_result_and_its_tool_does_not_run(log: Path) -> None:
    workflow_id = await start_agent(agents.payment, [PROMPT], id=f"deny-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        await next_pending(workflow_id)
        await approve(workflow_id, "m1", False, reason="over budget")
        messages = await result(workflow_id)
    result_message = messages[2]
    assert isinstance(result_message, al.ToolResultMessage) and result_message.is_error
    assert text(result_message) == "over budget"
    assert lines(log / "tool_starts") == []


async def test_a_call_not_decided_in_time_is_blocked(log: Path) -> None:
    workflow_id = await start_agent(agents.impatient_payment, [PROMPT], id=f"late-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        messages = await result(workflow_id)
    assert results(messages) == {"m1": ("No decision on this tool call within 0.2 s", True)}
    assert lines(log / "tool_starts") == []
    assert await pending_approvals(workflow_id) == []


async def test_a_call_that_ends_without_waiting_is_no_longer_pending(log: Path) -> None:
    """`m1`'s arguments do not fit the tool: it ends at its preflight, and a decision on it is refused."""
    workflow_id = await start_agent(agents.bad_then_good_payment, [PROMPT], id=f"bad-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        await wait_for_event(workflow_id, "tool_execution_start", "m2")
        assert [r.tool_call_id for r in await pending_approvals(workflow_id)] == ["m2"]
        with pytest.raises(ValueError, match=r"no approval is pending for tool call 'm1' \(pending: \['m2'\]\)"):
            await approve(workflow_id, "m1")
        await approve(workflow_id, "m2")
        messages = await result(workflow_id)
    outcomes = results(messages)
    assert outcomes["m1"][1] and "amount" in outcomes["m1"][0]
    assert outcomes["m2"] == ("paid 5", False)
    assert lines(log / "tool_starts") == [f"pay 5 {workflow_id}/m2"]


async def test_messages_that_are_no_decision_do_not_extend_the_approval_timeout(log: Path) -> None:
    workflow_id = await start_agent(agents.impatient_payment, [PROMPT], id=f"junk-{uuid.uuid4().hex}")

    async def junk() -> None:
        while True:
            await DBOS.send_async(workflow_id, "not a decision", APPROVAL_TOPIC)
            await anyio.sleep(0.02)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(junk)
            messages = await result(workflow_id)
            group.cancel_scope.cancel()
    assert results(messages) == {"m1": ("No decision on this tool call within 0.2 s", True)}
    assert lines(log / "tool_starts") == []


async def test_of_two_decisions_sent_at_once_one_is_taken_and_the_other_raises(log: Path) -> None:
    workflow_id = await start_agent(agents.payment, [PROMPT], id=f"race-{uuid.uuid4().hex}")
    outcomes: dict[bool, str] = {}

    async def decide(approved: bool) -> None:
        try:
            await approve(workflow_id, "m1", approved, None if approved else "no")
        except ValueError as exc:
            outcomes[approved] = str(exc)
        else:
            outcomes[approved] = "taken"

    with anyio.fail_after(20):
        await next_pending(workflow_id)
        async with anyio.create_task_group() as group:
            group.start_soon(decide, True)
            group.start_soon(decide, False)
        messages = await result(workflow_id)
    assert sorted(outcomes.values())[-1] == "taken"
    [refused] = [outcome for outcome in outcomes.values() if outcome != "taken"]
    assert "was decided or ended meanwhile" in refused or "no approval is pending" in refused
    paid = outcomes[True] == "taken"
    assert results(messages) == {"m1": ("paid 5", False) if paid else ("no", True)}
    assert lines(log / "tool_starts") == ([f"pay 5 {workflow_id}/m1"] if paid else [])


async def test_an_abort_denies_a_call_waiting_for_approval_and_ends_the_run(log: Path) -> None:
    workflow_id = await start_agent(agents.payment, [PROMPT], id=f"pay-abort-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        await wait_for_event(workflow_id, "tool_execution_start")
        await abort(workflow_id)
        messages = await result(workflow_id)
    assert text(messages[2]) == "Operation aborted"
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "aborted"
    assert lines(log / "tool_starts") == []
    assert lines(log / "model_calls") == ["0"]


async def test_steering_while_a_call_waits_for_approval_reaches_the_next_turn_if_the_call_is_denied(
    log: Path,
) -> None:
    """The call's tool does not run, so no step looks for the message after the wait: the next poll receives."""
    workflow_id = await start_agent(agents.lookup_then_payment, [PROMPT], id=f"pay-steer-{uuid.uuid4().hex}")
    with anyio.fail_after(20):
        await wait_for_event(workflow_id, "tool_execution_start", "m1")  # l1's step has run
        await steer(workflow_id, al.UserMessage(content="and y?", timestamp=2))
        await approve(workflow_id, "m1", False)
        messages = await result(workflow_id)
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "toolResult", "user", "assistant"]
    assert text(messages[-2]) == "and y?"
    assert lines(log / "tool_starts") == ["lookup x"]


def test_approval_timeout_is_checked_where_the_agent_is_defined() -> None:
    from agentloop.dbos import DBOSAgent
    from tests import durable_scripts as scripts

    with pytest.raises(TypeError, match="approval_timeout must be a positive timedelta or None, got 5"):
        DBOSAgent("timed", model=scripts.MODEL, approval_timeout=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"approval_timeout must be a positive timedelta or None, got .*days=-1"):
        DBOSAgent("timed", model=scripts.MODEL, approval_timeout=timedelta(seconds=-1))


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_approval_calls_fail_at_once_on_trio_and_check_their_arguments(anyio_backend: str) -> None:
    agent = agents.payment
    if anyio_backend == "trio":
        with pytest.raises(RuntimeError, match=r"agentloop\.dbos\.approve needs asyncio"):
            await agent.approve("w", "c1")
        with pytest.raises(RuntimeError, match=r"agentloop\.dbos\.pending_approvals needs asyncio"):
            await agent.pending_approvals("w")
        return
    with pytest.raises(TypeError, match="approve: arguments must be a mapping or None, got list"):
        await agent.approve("w", "c1", arguments=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="approve: approved must be a bool, got str"):
        await approve("w", "c1", "yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workflow_id must be a non-empty str"):
        await pending_approvals("")
