"""`SyncAgent.approve` and `SyncAgent.pending_approvals`: from another thread while `prompt`
blocks (a UI thread, a notebook), from a plain `on_approval_request`, and with no run going."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest

import agentloop as al
from agentloop.approvals import ApprovalRequest
from agentloop.sync import SyncAgent
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

MODEL = al.Model(id="scripted", api="scripted")
WAIT = 30  # seconds: a bound on a wait that fails the test, never a margin that passes it


@al.tool
async def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def tidy_model() -> ScriptedModel:
    calls = [
        ScriptedToolCall("c1", "delete", {"path": "draft.txt"}),
        ScriptedToolCall("c2", "delete", {"path": "/etc"}),
    ]
    return ScriptedModel([Response(content=calls), "Done."])


def approval_agent(on_request: Callable[[ApprovalRequest], None], backend: Any = "asyncio") -> SyncAgent:
    agent = al.Agent(
        model=MODEL, tools=[delete], stream_fn=tidy_model(), needs_approval=["delete"], on_approval_request=on_request
    )
    return SyncAgent(agent, backend=backend)


def tool_results(agent: SyncAgent) -> list[tuple[str, str, bool]]:
    return [
        (m.tool_call_id, m.content[0].text, m.is_error)  # type: ignore[union-attr]
        for m in agent.state.messages
        if isinstance(m, al.ToolResultMessage)
    ]


EXPECTED = [("c1", "deleted old-draft.txt", False), ("c2", "Never touch /etc.", True)]


class Approver(threading.Thread):
    """A thread of its own (a UI's) that answers the calls as they are asked: the first with an
    edited path, the second with a denial. Records what `pending_approvals` showed it."""

    def __init__(self, agent: SyncAgent, asked: queue.Queue[ApprovalRequest]) -> None:
        super().__init__(daemon=True)
        self.agent, self.asked = agent, asked
        self.seen: list[list[str]] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            for _ in range(2):
                request = self.asked.get(timeout=WAIT)
                self.seen.append([r.tool_call_id for r in self.agent.pending_approvals])
                if request.tool_call_id == "c1":
                    self.agent.approve("c1", arguments={"path": "old-draft.txt"})
                else:
                    self.agent.approve(request.tool_call_id, False, "Never touch /etc.")
        except BaseException as exc:  # the test reports it
            self.failure = exc


def prompt_answered_by_another_thread(backend: Any) -> tuple[SyncAgent, al.AssistantMessage, Approver]:
    asked: queue.Queue[ApprovalRequest] = queue.Queue()
    agent = approval_agent(asked.put, backend)
    approver = Approver(agent, asked)
    approver.start()
    answer = agent.prompt("Tidy up.")  # blocks this thread until the run ends
    approver.join(WAIT)
    assert approver.failure is None, approver.failure
    return agent, answer, approver


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_another_thread_answers_the_calls_while_prompt_blocks(backend: Any) -> None:
    agent, answer, approver = prompt_answered_by_another_thread(backend)
    assert answer.text == "Done."
    assert approver.seen == [["c1"], ["c2"]]  # one at a time, in the model's order
    assert tool_results(agent) == EXPECTED
    assert agent.pending_approvals == []


async def test_another_thread_answers_while_prompt_blocks_a_running_loop_as_in_a_notebook(
    anyio_backend: object,
) -> None:
    agent, answer, _ = prompt_answered_by_another_thread("asyncio")  # this loop is blocked meanwhile
    assert answer.text == "Done." and tool_results(agent) == EXPECTED


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_plain_on_approval_request_answers_through_the_sync_agent(backend: Any) -> None:
    seen: list[list[str]] = []

    def ask(request: ApprovalRequest) -> None:  # runs on the run's loop: it cannot wait
        seen.append([r.tool_call_id for r in agent.pending_approvals])
        if request.tool_call_id == "c1":
            agent.approve("c1", arguments={"path": "old-draft.txt"})
        else:
            agent.approve("c2", approved=False, reason="Never touch /etc.")

    agent = approval_agent(ask, backend)
    assert agent.prompt("Tidy up.").text == "Done."
    assert seen == [["c1"], ["c2"]]
    assert tool_results(agent) == EXPECTED


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_bad_decision_in_a_callback_raises_there_and_the_call_still_waits(backend: Any) -> None:
    failures: list[str] = []

    def ask(request: ApprovalRequest) -> None:
        bad_decisions: list[Callable[[], None]] = [
            lambda: agent.approve(request.tool_call_id, arguments={"path": ["not", "a", "str"]}),
            lambda: agent.approve(request.tool_call_id, False, arguments={"path": "x"}),
            lambda: agent.approve("nope"),
            lambda: agent.approve(request.tool_call_id, "yes"),  # type: ignore[arg-type]
        ]
        for bad in bad_decisions:
            try:
                bad()
            except (ValueError, TypeError) as exc:
                failures.append(str(exc))
        assert [r.tool_call_id for r in agent.pending_approvals] == [request.tool_call_id]  # still waiting
        agent.approve(request.tool_call_id, request.tool_call_id == "c1", "Never touch /etc.")

    agent = approval_agent(ask, backend)
    assert agent.prompt("Tidy up.").text == "Done."
    assert len(failures) == 8
    assert "edited arguments of tool call 'c1' are invalid" in failures[0]
    assert "edited arguments are for an approved call" in failures[1]
    assert "no approval is pending for tool call 'nope'" in failures[2]
    assert "approved must be a bool" in failures[3]
    assert tool_results(agent) == [("c1", "deleted draft.txt", False), ("c2", "Never touch /etc.", True)]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_second_decision_in_a_callback_raises_there_and_the_run_ends_with_the_first(backend: Any) -> None:
    failures: list[str] = []
    listed: list[list[str]] = []

    def ask(request: ApprovalRequest) -> None:
        if request.tool_call_id == "c1":
            agent.approve("c1", arguments={"path": "old-draft.txt"})
        else:
            agent.approve("c2", approved=False, reason="Never touch /etc.")
        listed.append([r.tool_call_id for r in agent.pending_approvals])  # decided: no longer listed
        seconds: list[Callable[[], None]] = [
            lambda: agent.approve(request.tool_call_id),
            lambda: agent.approve(request.tool_call_id, False),
        ]
        for second in seconds:
            try:
                second()
            except ValueError as exc:
                failures.append(str(exc))

    agent = approval_agent(ask, backend)
    assert agent.prompt("Tidy up.").text == "Done."
    assert listed == [[], []]
    assert failures == [f"approve: tool call {call!r} was already decided" for call in ("c1", "c1", "c2", "c2")]
    assert tool_results(agent) == EXPECTED
    assert agent.pending_approvals == []


def test_with_no_run_going_it_answers_stored_calls_and_continue_runs_them() -> None:
    call = al.ToolCall("c1", "delete", {"path": "draft.txt"})
    transcript: list[al.AgentMessage] = [
        al.UserMessage(content="Tidy up."),
        al.AssistantMessage(content=(call,), stop_reason="toolUse"),
    ]
    inner = al.Agent(model=MODEL, tools=[delete], stream_fn=ScriptedModel(["Done."]), messages=transcript)
    request = ApprovalRequest(tool_call_id="c1", tool_name="delete", arguments=call.arguments)
    inner.approvals.restore([{**request.to_json(), "decision": None}], inner.state.tools)  # as a session does
    agent = SyncAgent(inner)
    assert [r.tool_call_id for r in agent.pending_approvals] == ["c1"]
    with pytest.raises(ValueError, match="no approval is pending for tool call 'c9'"):
        agent.approve("c9")
    agent.approve("c1", arguments={"path": "old-draft.txt"})
    assert agent.pending_approvals == []
    assert agent.continue_().text == "Done."
    assert tool_results(agent) == [("c1", "deleted old-draft.txt", False)]
