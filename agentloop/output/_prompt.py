"""`prompt_typed`: an `Agent`'s run that ends with a typed result."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

from .._core._agent import Agent, PromptInput
from .._types._abort import AbortSignal
from .._types._events import AgentEvent
from .._types._messages import AssistantMessage, ImageContent
from ._native import NativeOutput
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
    mode: Literal["tool", "native"] = "tool",
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

    `mode="native"` asks the provider for a text answer constrained to the type's JSON schema
    instead (`NativeOutput`; OpenAI, Azure OpenAI, Mistral, Gemini, Vertex AI): an answer that
    does not validate is sent back as a new prompt with the errors, `max_retries` times, and
    `on_partial` gets partial objects of the streaming text. The other providers fail the run.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
    if on_partial is not None and not callable(on_partial):
        raise TypeError(f"on_partial must be callable or None, got {on_partial!r}")
    if mode == "native":
        native = NativeOutput(output_type, max_retries=max_retries)
        return await _prompt_native(agent, input, native, images, on_partial)
    if mode != "tool":
        raise ValueError(f"mode must be 'tool' or 'native', got {mode!r}")
    final = OutputTool(output_type, name=tool_name, max_retries=max_retries)
    if any(tool.name == final.name for tool in agent.state.tools):
        raise ValueError(f"the agent already has a tool named {final.name!r}: pass another tool_name")

    tools = agent.state.tools
    agent.state.tools = [*tools, final]
    unsubscribe = agent.subscribe(_listener(final, on_partial))
    try:
        await agent.prompt(input, images)
    finally:
        unsubscribe()
        agent.state.tools = tools
    return final.result()


async def _prompt_native(
    agent: Agent,
    input: PromptInput,
    native: NativeOutput[T],
    images: Sequence[ImageContent] | None,
    on_partial: Callable[[T], Awaitable[None] | None] | None,
) -> T:
    stream_fn = agent.stream_fn
    agent.stream_fn = native.stream_fn(stream_fn)
    unsubscribe = agent.subscribe(_listener(native, on_partial))
    try:
        await agent.prompt(input, images)
        while True:
            last = agent.state.messages[-1] if agent.state.messages else None
            if not isinstance(last, AssistantMessage) or last.stop_reason != "stop":
                break
            feedback = native.check(last)
            if feedback is None or not native.retries_left:
                break
            await agent.prompt(feedback)
    finally:
        unsubscribe()
        agent.stream_fn = stream_fn
    return native.result()


def _listener(
    final: OutputTool[T] | NativeOutput[T], on_partial: Callable[[T], Awaitable[None] | None] | None
) -> Callable[[AgentEvent, AbortSignal], Awaitable[None]]:
    async def listen(event: AgentEvent, signal: AbortSignal) -> None:
        partial = final.partial(event)
        if partial is not None and on_partial is not None:
            outcome: Any = on_partial(partial)
            if inspect.isawaitable(outcome):
                await outcome

    return listen
