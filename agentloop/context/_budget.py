"""Budgets: limits on a run's input and output tokens, its cost and its tool calls.

A run that would cross a limit ends cleanly, with the loop's own events: after each turn
(`should_stop_after_turn`) the next model call is predicted (its input is the context's size,
`estimate_context`; its output is at most `max_tokens` when the agent sets it, else about the
last call's; its cost follows from those) and the run stops when it would
cross a limit; a tool call past `max_tool_calls` is blocked (`before_tool_call`) and the run
stops after that turn. `BudgetTracker.exceeded` then says which limit, with the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._core._agent import Agent
from .._core._config import BeforeToolCallContext, BeforeToolCallResult, TurnContext, call
from .._types._abort import AbortSignal
from .._types._events import AgentEvent, AgentStart, MessageEnd
from .._types._messages import AssistantMessage
from ._tokens import estimate_context

__all__ = ("Budget", "BudgetTracker", "Spent")


def _check_limit(value: object, name: str, number: bool = False) -> None:
    if value is None:
        return
    if number:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0 or None, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0 or None, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits on one run (None: no limit).

    Attributes:
        max_input_tokens: Input tokens over the run's model calls (cache reads and writes included).
        max_output_tokens: Output tokens over the run's model calls.
        max_cost: Dollars over the run's model calls (as their usage reports them).
        max_tool_calls: Tool calls executed in the run.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost: float | None = None
    max_tool_calls: int | None = None

    def __post_init__(self) -> None:
        _check_limit(self.max_input_tokens, "max_input_tokens")
        _check_limit(self.max_output_tokens, "max_output_tokens")
        _check_limit(self.max_cost, "max_cost", number=True)
        _check_limit(self.max_tool_calls, "max_tool_calls")

    def attach(self, agent: Agent) -> BudgetTracker:
        """Apply the budget to every run of `agent` from the next one on."""
        return BudgetTracker(agent, self)


@dataclass(frozen=True, slots=True)
class Spent:
    """What a run has used so far."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0


class BudgetTracker:
    """A `Budget` applied to an agent (`Budget.attach`): what the current (or last) run spent,
    and which limit ended it."""

    __slots__ = ("_agent", "_inner_before", "_inner_stop", "_last", "_unsubscribe", "budget", "exceeded", "spent")

    def __init__(self, agent: Agent, budget: Budget) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        self.budget = budget
        self.spent = Spent()
        self.exceeded: str | None = None
        """Why the run stopped (the limit, what was spent and what the next call would add), or None."""
        self._agent = agent
        self._last: AssistantMessage | None = None
        self._inner_stop = agent.options.should_stop_after_turn
        self._inner_before = agent.options.before_tool_call
        agent.options = agent.options.replace(
            should_stop_after_turn=self._should_stop, before_tool_call=self._before_tool_call
        )
        self._unsubscribe = agent.subscribe(self._on_event)

    def detach(self) -> None:
        """Stop applying the budget (the agent gets back its own hooks)."""
        agent = self._agent
        agent.options = agent.options.replace(
            should_stop_after_turn=self._inner_stop, before_tool_call=self._inner_before
        )
        self._unsubscribe()

    def _on_event(self, event: AgentEvent, signal: AbortSignal) -> None:
        if isinstance(event, AgentStart):
            self.spent, self.exceeded, self._last = Spent(), None, None
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            usage = event.message.usage
            spent = self.spent
            self.spent = Spent(
                spent.input_tokens + usage.input + usage.cache_read + usage.cache_write,
                spent.output_tokens + usage.output,
                spent.cost + usage.cost.total,
                spent.tool_calls,
            )
            self._last = event.message

    def _prediction(self, ctx: TurnContext) -> str | None:
        budget, spent, last = self.budget, self.spent, self._last
        next_input = estimate_context(ctx.context.messages).tokens
        next_output = self._agent.options.max_tokens or (last.usage.output if last is not None else 0)
        if budget.max_input_tokens is not None and spent.input_tokens + next_input > budget.max_input_tokens:
            return (
                f"the input token budget (max_input_tokens={budget.max_input_tokens}) would be crossed by the "
                f"next model call: {spent.input_tokens} spent, about {next_input} more"
            )
        if budget.max_output_tokens is not None and spent.output_tokens + next_output > budget.max_output_tokens:
            return (
                f"the output token budget (max_output_tokens={budget.max_output_tokens}) would be crossed by the "
                f"next model call: {spent.output_tokens} spent, about {next_output} more"
            )
        if budget.max_cost is not None:
            price = self._agent.state.model.cost
            next_cost = (next_input * price.input + next_output * price.output) / 1e6
            if last is not None:
                next_cost = max(next_cost, last.usage.cost.total)
            if spent.cost + next_cost > budget.max_cost:
                return (
                    f"the cost budget (max_cost={budget.max_cost}) would be crossed by the next model call: "
                    f"${spent.cost:.6f} spent, about ${next_cost:.6f} more"
                )
        return None

    async def _should_stop(self, ctx: TurnContext) -> bool:
        if self._inner_stop is not None and await call(self._inner_stop, ctx):
            return True
        if self.exceeded is None:
            reason = self._prediction(ctx)
            if reason is not None:
                self.exceeded = f"Run stopped: {reason}."
        return self.exceeded is not None

    async def _before_tool_call(self, ctx: BeforeToolCallContext, signal: AbortSignal) -> Any:
        limit = self.budget.max_tool_calls
        spent = self.spent
        if limit is not None and spent.tool_calls >= limit:
            reason = f"the tool call budget (max_tool_calls={limit}) is spent: {spent.tool_calls} calls made"
            self.exceeded = self.exceeded or f"Run stopped: {reason}."
            return BeforeToolCallResult(block=True, reason=f"Tool call not made: {reason}.", terminate=True)
        if self._inner_before is not None:
            result = await call(self._inner_before, ctx, signal)
            if isinstance(result, BeforeToolCallResult) and result.block:
                return result
        self.spent = Spent(spent.input_tokens, spent.output_tokens, spent.cost, spent.tool_calls + 1)
        return None
