"""The state of one run, shared by the loop (`_loop`) and the tool batches (`_execution`).

A `RunState` holds what every step of a run reads and changes: the working transcript, the config
in force (a turn may change the model, the thinking level and the context), the abort signal,
the clock, and the sink every event goes to (`emit`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from .._tools._tool import AgentTool
from .._types._abort import AbortSignal
from .._types._events import AgentEvent
from .._types._messages import AgentMessage, Message, now_ms
from .._types._stream_fn import StreamFn, StreamOptions
from ._config import AgentContext, AgentLoopConfig, Emit, default_convert_to_llm
from ._updates import settle

__all__ = ("FAIR_SHARE", "RunState")

FAIR_SHARE = 48
"""A run gives the scheduler a turn at least every this many steps (a model event read, a tool call
made): a fast model (a cache, a local server) or tools that never wait cannot starve the other
runs of the process."""


class RunState:
    """What one run works on: the working transcript, the config in force, the abort signal, the sink."""

    __slots__ = (
        "_llm_messages",
        "_llm_seen",
        "_llm_source",
        "_options",
        "clock",
        "collected",
        "config",
        "countdown",
        "deliver",
        "messages",
        "model",
        "new_messages",
        "plain",
        "reasoning",
        "signal",
        "stream_fn",
        "system_prompt",
        "task_group",
        "tools",
    )

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: Emit | None,
        signal: AbortSignal | None,
        stream_fn: StreamFn,
    ) -> None:
        """`emit` is the live sink; None makes a bare run's, which collects a step's events."""
        if signal is not None and not isinstance(signal, AbortSignal):
            raise TypeError(f"signal must be an agentloop.AbortSignal or None, got {type(signal).__name__}")
        self.config = config
        self.model = config.model
        self.reasoning = config.reasoning
        self.system_prompt = context.system_prompt
        self.messages: list[AgentMessage] = list(context.messages)
        self.tools: tuple[AgentTool, ...] = tuple(context.tools)
        self.new_messages: list[AgentMessage] = []
        self.signal = signal if signal is not None else AbortSignal()
        self.stream_fn = stream_fn
        self.clock = config.clock if config.clock is not None else now_ms
        self.countdown = FAIR_SHARE  # steps left before the run gives the scheduler a turn
        # `deliver(event)` hands an event to the sink and returns what to `settle` (None: nothing
        # to wait for): a plain sink costs no coroutine. A bare run's sink collects the events a
        # step delivers, which it yields after the step (observed then); a live sink gets them
        # as they happen (`collected` is None).
        self.collected: list[AgentEvent] | None = None
        self.deliver: Callable[[Any], Awaitable[None] | None]
        if emit is None:
            self.collected = []
            self.deliver = self.collected.append
        elif config.observe is None:
            self.deliver = emit
        else:
            self.deliver = _observing(config.observe, emit)
        self.plain = not inspect.iscoroutinefunction(emit)
        self.task_group: TaskGroup | None = None  # for progress updates whose delivery must wait
        self._llm_source: list[AgentMessage] | None = None
        self._llm_seen = 0
        self._llm_messages: list[Message] = []
        self._options: StreamOptions | None = None

    async def emit(self, event: AgentEvent) -> None:
        """Hand an event to the sink, and wait for it when the sink asks to (how the steps emit)."""
        if (pending := self.deliver(event)) is not None:
            await settle(pending)

    async def fair_share(self) -> None:
        """Give the other tasks a turn (see `FAIR_SHARE`)."""
        self.countdown = FAIR_SHARE
        await anyio.lowlevel.checkpoint()

    def take_collected(self) -> list[AgentEvent]:
        """The events a step delivered to a bare run's sink (none for a live sink)."""
        collected = self.collected
        if not collected:
            return []
        events = collected[:]
        collected.clear()
        return events

    def default_llm_messages(self) -> list[Message]:
        """The default conversion, kept up to date as the transcript grows: O(new messages) per call."""
        messages = self.messages
        if self._llm_source is not messages or self._llm_seen > len(messages):
            self._llm_source, self._llm_seen, self._llm_messages = messages, 0, []
        self._llm_messages.extend(default_convert_to_llm(messages[self._llm_seen :]))
        self._llm_seen = len(messages)
        return self._llm_messages

    def agent_context(self) -> AgentContext:
        return AgentContext(system_prompt=self.system_prompt, messages=tuple(self.messages), tools=self.tools)


def _observing(observe: Callable[[AgentEvent], None], emit: Emit) -> Callable[[Any], Awaitable[None] | None]:
    """A sink that passes every event to `config.observe` first."""

    def deliver(event: Any) -> Awaitable[None] | None:
        observe(event)
        return emit(event)

    return deliver
