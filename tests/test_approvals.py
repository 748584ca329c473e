"""Approvals in one process: a call waits for `agent.approve`, which approves, denies or edits it;
the timeout, an abort and a cancellation end the wait; parallel batches ask one call at a time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.approvals import ApprovalRequest, NeedsApproval
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

ran: list[dict[str, Any]] = []


@al.tool
async def delete(path: str, force: bool = False) -> str:
    """Delete a file."""
    ran.append({"path": path, "force": force})
    return f"deleted {path}"


@al.tool
async def look(path: str) -> str:
    """Read a file."""
    return f"read {path}"


def calls(*calls: ScriptedToolCall) -> ScriptedModel:
    return ScriptedModel([Response(content=calls), "done"])


def results(agent: al.Agent) -> dict[str, tuple[str, bool]]:
    out = {}
    for message in agent.state.messages:
        if isinstance(message, al.ToolResultMessage):
            text = message.content[0]
            assert isinstance(text, al.TextContent)
            out[message.tool_call_id] = (text.text, message.is_error)
    return out


def answering(
    answer: Callable[[al.Agent, ApprovalRequest], Awaitable[None]],
) -> tuple[list[ApprovalRequest], Callable[[al.Agent], Callable[[ApprovalRequest], Awaitable[None]]]]:
    """An `on_approval_request` that records each request and answers it with `answer`."""
    seen: list[ApprovalRequest] = []

    def bind(agent: al.Agent) -> Callable[[ApprovalRequest], Awaitable[None]]:
        async def on_request(request: ApprovalRequest) -> None:
            seen.append(request)
            assert agent.pending_approvals == [request]
            await answer(agent, request)

        return on_request

    return seen, bind


def agent_with(model: ScriptedModel, bind: Callable[[al.Agent], Any] | None = None, **options: Any) -> al.Agent:
    holder: list[al.Agent] = []

    async def on_request(request: ApprovalRequest) -> None:
        assert bind is not None
        await bind(holder[0])(request)

    agent = al.Agent(tools=[delete, look], stream_fn=model, on_approval_request=on_request, **options)
    holder.append(agent)
    return agent


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def test_an_approved_call_runs_once_approved(anyio_backend: object) -> None:
    async def approve(agent: al.Agent, request: ApprovalRequest) -> None:
        assert ran == []  # the tool waits for the answer
        await agent.approve(request.tool_call_id)

    seen, bind = answering(approve)
    agent = agent_with(calls(ScriptedToolCall("c1", "delete", {"path": "a"})), bind, needs_approval=["delete"])
    await agent.prompt("clean")
    assert [(r.tool_call_id, r.tool_name, dict(r.arguments)) for r in seen] == [("c1", "delete", {"path": "a"})]
    assert results(agent) == {"c1": ("deleted a", False)}
    assert ran == [{"path": "a", "force": False}]
    assert agent.pending_approvals == []


async def test_a_denied_call_gets_the_reason_or_the_default_text(anyio_backend: object) -> None:
    reasons = iter(["not that file", None])

    async def deny(agent: al.Agent, request: ApprovalRequest) -> None:
        await agent.approve(request.tool_call_id, False, next(reasons))

    _, bind = answering(deny)
    model = calls(ScriptedToolCall("c1", "delete", {"path": "a"}), ScriptedToolCall("c2", "delete", {"path": "b"}))
    agent = agent_with(model, bind, needs_approval=["delete"])
    await agent.prompt("clean")
    assert results(agent) == {"c1": ("not that file", True), "c2": ("Tool execution was blocked", True)}
    assert ran == []


async def test_edited_arguments_are_validated_and_used(anyio_backend: object) -> None:
    errors: list[str] = []

    async def edit(agent: al.Agent, request: ApprovalRequest) -> None:
        with pytest.raises(ValueError, match="edited arguments of tool call 'c1' are invalid") as info:
            await agent.approve(request.tool_call_id, arguments={"path": 3, "force": "very"})
        errors.append(str(info.value))
        assert agent.pending_approvals == [request]  # still waiting after a bad edit
        with pytest.raises(ValueError, match="not a denied one"):
            await agent.approve(request.tool_call_id, False, arguments={"path": "b"})
        await agent.approve(request.tool_call_id, arguments={"path": "b", "force": True})
        with pytest.raises(ValueError, match="already decided"):
            await agent.approve(request.tool_call_id)

    _, bind = answering(edit)
    agent = agent_with(calls(ScriptedToolCall("c1", "delete", {"path": "a"})), bind, needs_approval=["delete"])
    await agent.prompt("clean")
    assert "force" in errors[0]
    assert ran == [{"path": "b", "force": True}]
    assert results(agent) == {"c1": ("deleted b", False)}
    # the transcript keeps what the model asked for
    assistant = agent.state.messages[1]
    assert isinstance(assistant, al.AssistantMessage)
    assert assistant.tool_calls[0].arguments == {"path": "a"}


async def test_a_call_not_decided_in_time_is_blocked(anyio_backend: object) -> None:
    async def ignore(agent: al.Agent, request: ApprovalRequest) -> None:
        pass

    _, bind = answering(ignore)
    agent = agent_with(
        calls(ScriptedToolCall("c1", "delete", {"path": "a"})),
        bind,
        needs_approval=["delete"],
        approval_timeout=timedelta(milliseconds=50),
    )
    await agent.prompt("clean")
    assert results(agent) == {"c1": ("No decision on this tool call within 0.05 s", True)}
    assert ran == []
    assert agent.pending_approvals == []
    with pytest.raises(ValueError, match="no approval is pending"):
        await agent.approve("c1")


async def test_an_abort_ends_the_wait(anyio_backend: object) -> None:
    async def abort(agent: al.Agent, request: ApprovalRequest) -> None:
        agent.abort()

    _, bind = answering(abort)
    agent = agent_with(calls(ScriptedToolCall("c1", "delete", {"path": "a"})), bind, needs_approval=["delete"])
    await agent.prompt("clean")
    assert results(agent) == {"c1": ("Operation aborted", True)}
    assert agent.state.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
    assert agent.pending_approvals == [] and ran == []


async def test_cancelling_the_run_ends_the_wait(anyio_backend: object) -> None:
    waiting = anyio.Event()

    async def note(agent: al.Agent, request: ApprovalRequest) -> None:
        waiting.set()

    _, bind = answering(note)
    agent = agent_with(calls(ScriptedToolCall("c1", "delete", {"path": "a"})), bind, needs_approval=["delete"])
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "clean")
        await waiting.wait()
        tg.cancel_scope.cancel()
    assert agent.pending_approvals == [] and agent.signal is None and ran == []


async def test_a_parallel_batch_asks_one_call_at_a_time_in_order(anyio_backend: object) -> None:
    order: list[list[str]] = []

    async def approve(agent: al.Agent, request: ApprovalRequest) -> None:
        order.append([r.tool_call_id for r in agent.pending_approvals])
        await agent.approve(request.tool_call_id, request.tool_call_id != "c2")

    _, bind = answering(approve)
    model = calls(
        ScriptedToolCall("c1", "delete", {"path": "a"}),
        ScriptedToolCall("c2", "delete", {"path": "b"}),
        ScriptedToolCall("c3", "look", {"path": "c"}),
        ScriptedToolCall("c4", "delete", {"path": "d"}),
    )
    agent = agent_with(model, bind, needs_approval=["delete"])
    await agent.prompt("clean")
    assert order == [["c1"], ["c2"], ["c4"]]
    assert results(agent) == {
        "c1": ("deleted a", False),
        "c2": ("Tool execution was blocked", True),
        "c3": ("read c", False),
        "c4": ("deleted d", False),
    }


async def test_calls_can_be_answered_from_another_task(anyio_backend: object) -> None:
    asked = anyio.Event()
    agent = al.Agent(
        tools=[delete],
        stream_fn=calls(ScriptedToolCall("c1", "delete", {"path": "a"})),
        needs_approval=lambda call: call.arguments.get("path") == "a",
        on_approval_request=lambda request: asked.set(),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "clean")
        await asked.wait()
        [request] = agent.pending_approvals
        await agent.approve(request.tool_call_id)
    assert results(agent) == {"c1": ("deleted a", False)}


async def test_before_tool_call_asks_with_needs_approval_or_blocks_without_asking(anyio_backend: object) -> None:
    def check(ctx: al.BeforeToolCallContext, signal: al.AbortSignal) -> al.BeforeToolCallResult | None:
        if ctx.tool_call.arguments["path"] == "secret":
            return al.BeforeToolCallResult(block=True, reason="never")
        if ctx.tool_call.name == "look":
            return NeedsApproval()
        return None

    async def approve(agent: al.Agent, request: ApprovalRequest) -> None:
        await agent.approve(request.tool_call_id)

    seen, bind = answering(approve)
    model = calls(
        ScriptedToolCall("c1", "look", {"path": "a"}),
        ScriptedToolCall("c2", "delete", {"path": "secret"}),
        ScriptedToolCall("c3", "delete", {"path": "b"}),
    )
    agent = agent_with(model, bind, needs_approval=["delete"], before_tool_call=check)
    await agent.prompt("go")
    assert [r.tool_call_id for r in seen] == ["c1", "c3"]
    assert results(agent) == {"c1": ("read a", False), "c2": ("never", True), "c3": ("deleted b", False)}


async def test_needs_approval_without_an_agent_blocks_the_call(anyio_backend: object) -> None:
    config = al.AgentLoopConfig(model=al.DEFAULT_MODEL, before_tool_call=lambda ctx, signal: NeedsApproval())
    context = al.AgentContext(system_prompt="", messages=(), tools=(delete,))
    model = calls(ScriptedToolCall("c1", "delete", {"path": "a"}))
    messages = await al.run_agent_loop(
        [al.UserMessage(content="go")], context, config, _ignore, al.AbortSignal(), model
    )
    [result] = [m for m in messages if isinstance(m, al.ToolResultMessage)]
    assert result.is_error and "needs a person's approval" in result.content[0].text  # type: ignore[union-attr]
    assert ran == []


async def _ignore(event: al.AgentEvent) -> None:
    pass


def test_bad_approval_options_are_named() -> None:
    with pytest.raises(TypeError, match="needs_approval must be a collection of tool names"):
        al.Agent(needs_approval="delete")
    with pytest.raises(ValueError, match="approval_timeout must be a positive number"):
        al.Agent(approval_timeout=0)
    with pytest.raises(TypeError, match="on_approval_request must be callable"):
        al.Agent(on_approval_request=3)  # type: ignore[arg-type]


async def test_approve_checks_its_arguments(anyio_backend: object) -> None:
    agent = al.Agent()
    with pytest.raises(TypeError, match="approved must be a bool"):
        await agent.approve("c1", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no approval is pending for tool call 'c1'"):
        await agent.approve("c1")


async def test_an_answer_that_cannot_be_recorded_leaves_the_call_waiting(anyio_backend: object) -> None:
    failures = iter([False, True, False, False])

    async def recorder(records: list[dict[str, Any]]) -> None:
        if next(failures):
            raise OSError("disk full")

    async def approve(agent: al.Agent, request: ApprovalRequest) -> None:
        with pytest.raises(OSError, match="disk full"):
            await agent.approve(request.tool_call_id)
        assert agent.pending_approvals == [request]
        await agent.approve(request.tool_call_id)

    _, bind = answering(approve)
    agent = agent_with(calls(ScriptedToolCall("c1", "delete", {"path": "a"})), bind, needs_approval=["delete"])
    agent._approvals.recorder = recorder
    await agent.prompt("clean")
    assert results(agent) == {"c1": ("deleted a", False)}
