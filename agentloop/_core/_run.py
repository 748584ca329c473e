"""The state of one run, shared by the loop (`_loop`) and the tool batches (`_execution`), and its sink.

A `RunState` holds what every step of a run reads and changes: the working transcript, the config
in force (a turn may change the model, the thinking level and the context), the abort signal,
the clock, and the one sink every event goes to: `await run.emit(event)`. The user's sink (a
plain or async `emit`, the `Agent`'s listeners, the stream of `async with agent_loop(...)`) and
`config.observe` are adapted to it once, where the run starts (`sink`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .._tools._tool import AgentTool
from .._types._abort import AbortSignal
from .._types._events import AgentEvent
from .._types._messages import AgentMessage, Message, now_ms
from .._types._stream_fn import StreamFn
from ._config import AgentContext, AgentLoopConfig, Emit, default_convert_to_llm, notify

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ("RunState", "Sink", "check_signal", "sink")

Sink: TypeAlias = Callable[[AgentEvent], Awaitable[None]]
"""The one sink of a run: every event is awaited through it."""


def check_signal(signal: object) -> None:
    if signal is not None and not isinstance(signal, AbortSignal):
        raise TypeError(f"signal must be an agentloop.AbortSignal or None, got {type(signal).__name__}")


def sink(emit: Emit, observe: Callable[[AgentEvent], None] | None = None) -> Sink:
    """The run's sink for a user's `emit` (plain or async), after `config.observe` when there is one."""

    if observe is None and inspect.iscoroutinefunction(emit):
        return emit

    async def deliver(event: AgentEvent) -> None:
        if observe is not None:
            observe(event)
        await notify(emit, "emit", event)

    return deliver


class RunState:
    """What one run works on: the working transcript, the config in force, the abort signal, the sink."""

    __slots__ = (
        "_llm_messages",
        "_llm_seen",
        "_llm_source",
        "clock",
        "config",
        "countdown",
        "emit",
        "messages",
        "model",
        "new_messages",
        "reasoning",
        "signal",
        "stream_fn",
        "system_prompt",
        "tools",
    )

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: Sink,
        signal: AbortSignal | None,
        stream_fn: StreamFn,
    ) -> None:
        check_signal(signal)
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
        self.emit = emit
        self.countdown = 0  # steps left before the run gives the scheduler a turn (`_model_call`)
        self._llm_source: list[AgentMessage] | None = None
        self._llm_seen = 0
        self._llm_messages: list[Message] = []

    def default_llm_messages(self) -> list[Message]:
        """`default_convert_to_llm` of the transcript, converting only the messages added since the
        last call (a long conversation: without it the conversion was ~16% of a tool turn at 400
        turns, benchmarks/README.md)."""
        messages = self.messages
        if self._llm_source is not messages or self._llm_seen > len(messages):
            self._llm_source, self._llm_seen, self._llm_messages = messages, 0, []
        self._llm_messages.extend(default_convert_to_llm(messages[self._llm_seen :]))
        self._llm_seen = len(messages)
        return self._llm_messages

    def agent_context(self) -> AgentContext:
        return AgentContext(system_prompt=self.system_prompt, messages=tuple(self.messages), tools=self.tools)

    def find_tool(self, name: str) -> AgentTool | None:
        """The run's first tool called `name`, as the reference looks it up."""
        return next((tool for tool in self.tools if tool.name == name), None)
