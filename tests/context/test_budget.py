"""Budgets end a run cleanly before it crosses a limit."""

from __future__ import annotations

import pytest

import agentloop as al
from agentloop.context import Budget
from agentloop.testing import check_events

from .windowed import WindowedModel

pytestmark = pytest.mark.anyio


@al.tool
async def read(path: str) -> str:
    """Read a file."""
    return "x" * 700


def forever(model: list[WindowedModel]) -> WindowedModel:
    def answer(context: al.Context) -> al.AssistantMessage:
        n = len(model[0].requests)
        return al.AssistantMessage(content=(al.ToolCall(f"c{n}", "read", {"path": f"f{n}"}),))

    model.append(WindowedModel(answer, window=1_000_000))
    return model[0]


async def run(budget: Budget) -> tuple[al.Agent, list[al.AgentEvent], WindowedModel, str | None]:
    model = forever([])
    agent = al.Agent(model=model.model, stream_fn=model, tools=[read], max_turns=50)
    tracker = budget.attach(agent)
    events: list[al.AgentEvent] = []
    agent.subscribe(lambda event, signal: events.append(event))
    await agent.prompt("Read everything.")
    check_events(events)
    assert agent.state.error_message is None
    return agent, events, model, tracker.exceeded


async def test_a_tool_call_budget_blocks_the_call_past_it_and_ends_the_run() -> None:
    agent, events, model, exceeded = await run(Budget(max_tool_calls=3))
    executed = [e for e in events if isinstance(e, al.ToolExecutionEnd) and not e.is_error]
    assert len(executed) == 3 and len(model.requests) == 4
    assert exceeded == "Run stopped: the tool call budget (max_tool_calls=3) is spent: 3 calls made."
    last = agent.state.messages[-1]
    assert isinstance(last, al.ToolResultMessage) and last.is_error


async def test_an_input_budget_stops_before_the_call_that_would_cross_it() -> None:
    agent, events, model, exceeded = await run(Budget(max_input_tokens=5000))
    inputs = [m.usage.input for m in agent.state.messages if isinstance(m, al.AssistantMessage)]
    assert sum(inputs) <= 5000 < sum(inputs) + inputs[-1]  # the next call's input is larger than the last's
    assert len(model.requests) == len(inputs) == 7
    assert exceeded is not None and "max_input_tokens=5000" in exceeded
    assert isinstance(events[-1], al.AgentEnd)


async def test_an_output_and_a_cost_budget_stop_the_run_and_say_which() -> None:
    agent, _, model, exceeded = await run(Budget(max_output_tokens=40))
    outputs = [m.usage.output for m in agent.state.messages if isinstance(m, al.AssistantMessage)]
    assert exceeded is not None and "max_output_tokens=40" in exceeded
    # the next call's output is predicted as the last one's (at most `max_tokens` when that is set)
    assert sum(outputs[:-1]) + outputs[-2] <= 40 < sum(outputs) + outputs[-1] and len(model.requests) < 50
    priced = al.Model(id="windowed", api="test", provider="test", cost=al.ModelCost(input=1000.0, output=1000.0))
    model = forever([])
    agent = al.Agent(model=priced, stream_fn=model, tools=[read], max_turns=50)
    tracker = Budget(max_cost=2.0).attach(agent)
    await agent.prompt("Read everything.")
    assert tracker.exceeded is not None and "max_cost=2.0" in tracker.exceeded
    assert len(model.requests) < 50


async def test_detach_restores_the_agents_hooks_and_budgets_are_checked() -> None:
    def stop(ctx: al.TurnContext) -> bool:
        return True

    model = forever([])
    agent = al.Agent(model=model.model, stream_fn=model, tools=[read], should_stop_after_turn=stop)
    tracker = Budget(max_tool_calls=10).attach(agent)
    await agent.prompt("Read.")
    assert len(model.requests) == 1 and tracker.exceeded is None  # the agent's own hook still stops it
    tracker.detach()
    assert agent.options.should_stop_after_turn is stop and agent.options.before_tool_call is None
    with pytest.raises(ValueError, match="max_tool_calls must be an int >= 0"):
        Budget(max_tool_calls=-1)
    with pytest.raises(ValueError, match="max_cost must be a finite number >= 0"):
        Budget(max_cost=float("nan"))
