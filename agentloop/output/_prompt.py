"""`prompt_typed`: an `Agent`'s run that ends with a typed result."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .._core._agent import Agent, PromptInput
from .._types._abort import AbortSignal
from .._types._events import AgentEvent
from .._types._messages import ImageContent
from ._tool import OutputTool

__all__ = ("prompt_typed",)

T = TypeVar("T")


async def prompt_typed(
    agent: Agent,
    input: PromptInput,
    output_type: type[T],
    *,
    images: Sequence[ImageContent] | None = None,
    max_retries: int = 2,
    on_partial: Callable[[T], Awaitable[None] | None] | None = None,
    tool_name: str = "final_result",
) -> T:
    """Run `agent.prompt(input)` with `output_type` as its final tool; return the typed result.

    Example:
        ```python
        total = await prompt_typed(agent, "Add 2 and 3", Sum, on_partial=print)
        ```

    For this run only, the agent's tools get an `OutputTool(output_type)`: a call that validates
    ends the run; one that does not is sent back to the model with the errors, `max_retries`
    times. `on_partial` (plain or async) gets each partial object while the model streams the
    call, in order. Raises `OutputError` when the run ends without a valid result (the retries
    spent, the model answered in text, the run failed or was aborted: `agent.state` tells).
    The transcript keeps the whole exchange, the final call and its result included.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
    if on_partial is not None and not callable(on_partial):
        raise TypeError(f"on_partial must be callable or None, got {on_partial!r}")
    final = OutputTool(output_type, name=tool_name, max_retries=max_retries)
    if any(tool.name == final.name for tool in agent.state.tools):
        raise ValueError(f"the agent already has a tool named {final.name!r}: pass another tool_name")

    async def listen(event: AgentEvent, signal: AbortSignal) -> None:
        partial = final.partial(event)
        if partial is not None and on_partial is not None:
            outcome: Any = on_partial(partial)
            if inspect.isawaitable(outcome):
                await outcome

    tools = agent.state.tools
    agent.state.tools = [*tools, final]
    unsubscribe = agent.subscribe(listen)
    try:
        await agent.prompt(input, images)
    finally:
        unsubscribe()
        agent.state.tools = tools
    return final.result()
