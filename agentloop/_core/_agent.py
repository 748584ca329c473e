"""`Agent`: a stateful agent over the loop, with awaited listeners and message queues.

The Agent passes its own `emit` to `run_agent_loop`: each event is reduced into `state` and then
every listener is awaited, in registration order, before the loop goes on. That is the barrier:
`before_tool_call` sees the assistant message already in `state.messages`, and a tool call counts
as finalized only once every listener has processed its `tool_execution_end`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._tools._tool import AgentTool
from .._types._abort import AbortSignal
from .._types._constants import THINKING_LEVELS
from .._types._errors import AgentBusyError, InvalidContextError
from .._types._events import (
    AgentEnd,
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
)
from .._types._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingLevel,
    UserMessage,
)
from .._types._stream_fn import MaybeAwaitable, StreamFn
from ._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
    NextTurn,
    QueueMode,
    ToolExecution,
    ToolInvocation,
    TurnContext,
    check_options,
    default_convert_to_llm,
)
from ._loop import check_messages, resolve_stream_fn, run_agent_loop, run_agent_loop_continue
from ._updates import Flag
from ._util import exception_text

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ("DEFAULT_MODEL", "Agent", "AgentListener", "AgentState", "PromptInput")

AgentListener: TypeAlias = Callable[[AgentEvent, AbortSignal], MaybeAwaitable[None]]
"""`(event, signal)`, plain or async; awaited in registration order for every event."""

PromptInput: TypeAlias = str | AgentMessage | Sequence[AgentMessage]

DEFAULT_MODEL = Model(id="unknown", name="unknown", api="unknown", provider="unknown")
"""The placeholder model of an Agent built without one (as in the reference)."""

_QUEUE_MODES = ("all", "one-at-a-time")


class AgentState:
    """What an `Agent` knows. Assigning `tools` or `messages` stores a copy of the list.

    `is_streaming`, `streaming_message`, `pending_tool_calls` and `error_message` are read-only:
    the Agent's reducer maintains them from the run's events.
    """

    __slots__ = (
        "_error_message",
        "_is_streaming",
        "_messages",
        "_model",
        "_pending_tool_calls",
        "_streaming_message",
        "_system_prompt",
        "_thinking_level",
        "_tools",
    )

    def __init__(
        self,
        *,
        system_prompt: str,
        model: Model,
        thinking_level: ThinkingLevel,
        tools: Sequence[AgentTool],
        messages: Sequence[AgentMessage],
    ) -> None:
        self.system_prompt = system_prompt
        self.model = model
        self.thinking_level = thinking_level
        self.tools = tools
        self.messages = messages
        self._is_streaming = False
        self._streaming_message: AgentMessage | MessageUpdate | None = None
        self._pending_tool_calls: frozenset[str] = frozenset()
        self._error_message: str | None = None

    @property
    def system_prompt(self) -> str:
        """The system prompt of the next run."""
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, system_prompt: str) -> None:
        if not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
        self._system_prompt = system_prompt

    @property
    def model(self) -> Model:
        """The model the next run uses."""
        return self._model

    @model.setter
    def model(self, model: Model) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"model must be an agentloop.Model, got {type(model).__name__}")
        self._model = model

    @property
    def thinking_level(self) -> ThinkingLevel:
        """The reasoning level the next run asks for (`off` disables it)."""
        return self._thinking_level

    @thinking_level.setter
    def thinking_level(self, level: ThinkingLevel) -> None:
        if level not in THINKING_LEVELS:
            raise ValueError(f"thinking_level must be one of {THINKING_LEVELS}, got {level!r}")
        self._thinking_level = level

    @property
    def tools(self) -> list[AgentTool]:
        """The tools of the next run."""
        return self._tools

    @tools.setter
    def tools(self, tools: Sequence[AgentTool]) -> None:
        if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
            raise TypeError(f"tools must be a sequence of AgentTool, got {type(tools).__name__}")
        for i, tool in enumerate(tools):
            if not isinstance(tool, AgentTool):
                raise TypeError(f"tools[{i}] must be an AgentTool, got {type(tool).__name__}")
        self._tools = list(tools)

    @property
    def messages(self) -> list[AgentMessage]:
        """The transcript."""
        return self._messages

    @messages.setter
    def messages(self, messages: Sequence[AgentMessage]) -> None:
        self._messages = check_messages(messages, "messages")

    @property
    def is_streaming(self) -> bool:
        """True from the start of a run until its `agent_end` listeners have finished."""
        return self._is_streaming

    @property
    def streaming_message(self) -> AgentMessage | None:
        """The message being streamed (between its `message_start` and `message_end`)."""
        message = self._streaming_message
        if type(message) is MessageUpdate:
            return message.message
        return message  # type: ignore[return-value]

    @property
    def pending_tool_calls(self) -> frozenset[str]:
        """Ids of the tool calls started and not yet finalized."""
        return self._pending_tool_calls

    @property
    def error_message(self) -> str | None:
        """The error of the last failed turn or run; cleared when a run starts."""
        return self._error_message

    def __repr__(self) -> str:
        return (
            f"AgentState(model={self._model.id!r}, messages={len(self._messages)}, "
            f"is_streaming={self._is_streaming}, error_message={self._error_message!r})"
        )


class _Queue:
    __slots__ = ("items", "mode")

    def __init__(self, mode: QueueMode) -> None:
        self.mode = mode
        self.items: list[AgentMessage] = []

    def peek(self) -> list[AgentMessage]:
        if self.mode == "all":
            return list(self.items)
        return self.items[:1]

    def drain(self) -> list[AgentMessage]:
        taken = self.peek()
        del self.items[: len(taken)]
        return taken


class _ActiveRun(Flag):
    """A run in progress: its abort signal; set (so `wait()` returns) once the run has finished."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        super().__init__()
        self.signal = AbortSignal()


_LOOP_OPTIONS = (
    "after_tool_call",
    "api_key",
    "before_tool_call",
    "clock",
    "convert_to_llm",
    "get_api_key",
    "headers",
    "max_parallel_tool_calls",
    "max_retry_delay",
    "max_tokens",
    "max_turns",
    "metadata",
    "observe",
    "prepare_next_turn",
    "propagate",
    "session_id",
    "should_stop_after_turn",
    "temperature",
    "thinking_budgets",
    "tool_abort_grace",
    "tool_execution",
    "transform_context",
    "wrap_tool_call",
)
"""The `AgentLoopConfig` options an Agent holds as attributes of its own and passes to every run
(the same names and meanings: see `AgentLoopConfig`)."""


class Agent:
    """A stateful agent: a transcript, tools, listeners, and steering / follow-up queues.

    Example:
        agent = Agent(model=model, system_prompt="Be brief.", tools=[add], stream_fn=stream)
        agent.subscribe(lambda event, signal: print(event.type))
        await agent.prompt("What is 2 + 3?")

    Every callback may be a plain or an async function. A run failure (an exception from the
    stream function, a callback or a listener) does not escape `prompt()`: it becomes an error
    assistant message (`message_start`, `message_end`, `turn_end`, `agent_end`) and
    `state.error_message` (only a listener that fails again on those events makes `prompt()`
    raise, as in the reference). Cancelling the caller of `prompt()` cancels the run.
    """

    __slots__ = (
        "__weakref__",
        "_active",
        "_follow_up",
        "_listeners",
        "_state",
        "_steering",
        "stream_fn",
        *_LOOP_OPTIONS,
    )

    def __init__(
        self,
        *,
        model: Model | None = None,
        system_prompt: str = "",
        thinking_level: ThinkingLevel = "off",
        tools: Sequence[AgentTool] = (),
        messages: Sequence[AgentMessage] = (),
        stream_fn: StreamFn | None = None,
        convert_to_llm: Callable[[Sequence[AgentMessage]], MaybeAwaitable[Sequence[Message]]] = default_convert_to_llm,
        transform_context: (
            Callable[[Sequence[AgentMessage], AbortSignal], MaybeAwaitable[Sequence[AgentMessage]]] | None
        ) = None,
        get_api_key: Callable[[str], MaybeAwaitable[str | None]] | None = None,
        before_tool_call: (
            Callable[[BeforeToolCallContext, AbortSignal], MaybeAwaitable[BeforeToolCallResult | None]] | None
        ) = None,
        after_tool_call: (
            Callable[[AfterToolCallContext, AbortSignal], MaybeAwaitable[AfterToolCallResult | None]] | None
        ) = None,
        should_stop_after_turn: Callable[[TurnContext], MaybeAwaitable[bool]] | None = None,
        prepare_next_turn: Callable[[TurnContext], MaybeAwaitable[NextTurn | None]] | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        tool_execution: ToolExecution = "parallel",
        max_turns: int | None = None,
        tool_abort_grace: float = 2.0,
        session_id: str | None = None,
        thinking_budgets: Mapping[str, int] | None = None,
        max_retry_delay: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        headers: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        max_parallel_tool_calls: int | None = None,
        wrap_tool_call: (
            Callable[[ToolInvocation, Callable[[], Awaitable[object]]], MaybeAwaitable[object]] | None
        ) = None,
        propagate: tuple[type[BaseException], ...] = (),
        clock: Callable[[], int] | None = None,
        observe: Callable[[AgentEvent], None] | None = None,
    ) -> None:
        self._state = AgentState(
            system_prompt=system_prompt,
            model=model if model is not None else DEFAULT_MODEL,
            thinking_level=thinking_level,
            tools=tools,
            messages=messages,
        )
        if stream_fn is not None:
            resolve_stream_fn(stream_fn)
        self.stream_fn = stream_fn
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.should_stop_after_turn = should_stop_after_turn
        self.prepare_next_turn = prepare_next_turn
        self.tool_execution = tool_execution
        self.max_turns = max_turns
        self.tool_abort_grace = tool_abort_grace
        self.session_id = session_id
        self.thinking_budgets = thinking_budgets
        self.max_retry_delay = max_retry_delay
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.headers = headers
        self.metadata = metadata
        self.api_key = api_key
        self.max_parallel_tool_calls = max_parallel_tool_calls
        self.wrap_tool_call = wrap_tool_call
        self.propagate = propagate
        self.clock = clock
        self.observe = observe
        self._steering = _Queue(_check_mode(steering_mode, "steering_mode"))
        self._follow_up = _Queue(_check_mode(follow_up_mode, "follow_up_mode"))
        self._listeners: tuple[AgentListener, ...] = ()
        self._active: _ActiveRun | None = None
        check_options(self, "")  # bad options fail here, named as given, not at the first prompt
        self._config()

    # --- state and listeners -------------------------------------------------------------
    @property
    def state(self) -> AgentState:
        """The agent's state (live: it changes as runs progress)."""
        return self._state

    def subscribe(self, listener: AgentListener, *, first: bool = False) -> Callable[[], None]:
        """Call `listener(event, signal)` for every event; returns a function that unsubscribes.

        Listeners run in registration order; `first=True` puts this one before all others (a
        session store uses it, so that other listeners see only messages already stored).
        """
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        if first:
            self._listeners = (listener, *(fn for fn in self._listeners if fn is not listener))
        elif listener not in self._listeners:
            self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(fn for fn in self._listeners if fn is not listener)

        return unsubscribe

    @property
    def signal(self) -> AbortSignal | None:
        """The active run's abort signal, or None when idle."""
        return self._active.signal if self._active is not None else None

    # --- queues --------------------------------------------------------------------------
    @property
    def steering_mode(self) -> QueueMode:
        """How many steering messages a poll delivers: `one-at-a-time` or `all`."""
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: QueueMode) -> None:
        self._steering.mode = _check_mode(mode, "steering_mode")

    @property
    def follow_up_mode(self) -> QueueMode:
        """How many follow-up messages a poll delivers: `one-at-a-time` or `all`."""
        return self._follow_up.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_up.mode = _check_mode(mode, "follow_up_mode")

    def steer(self, message: AgentMessage) -> None:
        """Queue a message for the next turn of the current run (after the running tools)."""
        self._steering.items.append(check_messages([message], "steer(message)")[0])

    def follow_up(self, message: AgentMessage) -> None:
        """Queue a message for when the agent would otherwise stop."""
        self._follow_up.items.append(check_messages([message], "follow_up(message)")[0])

    def clear_steering_queue(self) -> None:
        """Drop the queued steering messages."""
        self._steering.items.clear()

    def clear_follow_up_queue(self) -> None:
        """Drop the queued follow-up messages."""
        self._follow_up.items.clear()

    def clear_all_queues(self) -> None:
        """Drop every queued message."""
        self.clear_steering_queue()
        self.clear_follow_up_queue()

    def has_queued_messages(self) -> bool:
        """Whether a steering or follow-up message is waiting."""
        return bool(self._steering.items or self._follow_up.items)

    def peek_queued_messages(self) -> list[AgentMessage]:
        """What the next poll would deliver: steering first, else follow-ups (not consumed)."""
        return self._steering.peek() or self._follow_up.peek()

    # --- runs ----------------------------------------------------------------------------
    def abort(self) -> None:
        """Abort the active run (no-op when idle). Synchronous; the run ends with `agent_end`."""
        if self._active is not None:
            self._active.signal.abort()

    async def wait_for_idle(self) -> None:
        """Return when no run is active (after its `agent_end` listeners finished)."""
        if self._active is not None:
            await self._active.wait()

    def reset(self) -> None:
        """Clear the transcript, the error and the queues. Raises while a run is active."""
        if self._active is not None:
            raise AgentBusyError("Agent is already processing. Wait for completion before resetting.")
        self._state._messages = []
        self._state._is_streaming = False
        self._state._streaming_message = None
        self._state._pending_tool_calls = frozenset()
        self._state._error_message = None
        self.clear_all_queues()

    async def prompt(self, input: PromptInput, images: Sequence[ImageContent] | None = None) -> None:
        """Run the agent on a text (with optional images), a message, or a list of messages.

        Raises `AgentBusyError` if a run is active; use `steer()` or `follow_up()` then.
        """
        if self._active is not None:
            raise AgentBusyError(
                "Agent is already processing a prompt. Use steer() or followUp() to queue messages, "
                "or wait for completion."
            )
        await self._run(_prompt_messages(input, images or ()))

    async def continue_(self) -> None:
        """Continue from the transcript: retry after an error, or resume after a crash.

        From an assistant tail, queued steering (else follow-ups) is delivered; with nothing
        queued it raises `InvalidContextError`.
        """
        if self._active is not None:
            raise AgentBusyError("Agent is already processing. Wait for completion before continuing.")
        messages = self._state.messages
        if not messages:
            raise InvalidContextError("No messages to continue from")
        self._config()  # a bad option fails before any queued message is taken
        if messages[-1].role == "assistant":
            steering = self._steering.drain()
            if steering:
                await self._run(steering, skip_initial_steering_poll=True)
                return
            follow_ups = self._follow_up.drain()
            if follow_ups:
                await self._run(follow_ups)
                return
            raise InvalidContextError("Cannot continue from message role: assistant")
        await self._run(None)

    def _config(self, skip_initial_steering_poll: bool = False) -> AgentLoopConfig:
        skip = [skip_initial_steering_poll]

        def steering() -> list[AgentMessage]:
            if skip[0]:
                skip[0] = False
                return []
            return self._steering.drain()

        state = self._state
        return AgentLoopConfig(
            model=state.model,
            reasoning=None if state.thinking_level == "off" else state.thinking_level,
            get_steering_messages=steering,
            get_follow_up_messages=self._follow_up.drain,
            **{name: getattr(self, name) for name in _LOOP_OPTIONS},
        )

    async def _run(self, messages: list[AgentMessage] | None, skip_initial_steering_poll: bool = False) -> None:
        if self._active is not None:
            raise AgentBusyError("Agent is already processing.")
        config = self._config(skip_initial_steering_poll)
        state = self._state
        context = AgentContext(
            system_prompt=state.system_prompt, messages=tuple(state.messages), tools=tuple(state.tools)
        )
        active = self._active = _ActiveRun()
        state._is_streaming = True
        state._streaming_message = None
        state._error_message = None
        try:
            try:
                if messages is None:
                    await run_agent_loop_continue(context, config, self._deliver, active.signal, self.stream_fn)
                else:
                    await run_agent_loop(messages, context, config, self._deliver, active.signal, self.stream_fn)
            except Exception as exc:
                await self._fail(exc, active.signal.aborted)
        finally:
            state._is_streaming = False
            state._streaming_message = None
            state._pending_tool_calls = frozenset()
            self._active = None
            active.set()

    async def _fail(self, exc: Exception, aborted: bool) -> None:
        model = self._state.model
        failure = AssistantMessage(
            content=(TextContent(""),),
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="aborted" if aborted else "error",
            error_message=exception_text(exc),
        )
        await self._process(MessageStart(failure))
        await self._process(MessageEnd(failure))
        await self._process(TurnEnd(failure, ()))
        await self._process(AgentEnd((failure,)))

    async def _process(self, event: AgentEvent) -> None:
        pending = self._deliver(event)
        if pending is not None:
            await pending

    def _deliver(self, event: AgentEvent) -> Awaitable[None] | None:
        """Reduce the event into the state, then call the listeners in order.

        A plain function, the loop's sink: while listeners return None it costs no coroutine; from
        the first listener that returns an awaitable, the rest are awaited in order.
        """
        state = self._state
        # The loop emits exactly these classes: `type() is` is cheaper than `isinstance`.
        if type(event) is MessageUpdate:
            state._streaming_message = event  # its message is built only if someone reads it
        elif type(event) is MessageStart:
            state._streaming_message = event.message
        elif type(event) is MessageEnd:
            state._streaming_message = None
            state._messages.append(event.message)
        elif type(event) is ToolExecutionStart:
            state._pending_tool_calls = state._pending_tool_calls | {event.tool_call_id}
        elif type(event) is ToolExecutionEnd:
            state._pending_tool_calls = state._pending_tool_calls - {event.tool_call_id}
        elif type(event) is TurnEnd:
            if event.message.error_message:
                state._error_message = event.message.error_message
        elif type(event) is AgentEnd:
            state._streaming_message = None
        active = self._active
        if active is None:
            raise RuntimeError("Agent listener invoked outside active run")
        signal = active.signal
        listeners = self._listeners
        for listener in listeners:
            result: Any = listener(event, signal)
            if result is not None:
                if not inspect.isawaitable(result):
                    raise TypeError(
                        f"listener {listener!r} returned {type(result).__name__}: expected None or an awaitable"
                    )
                return self._finish_listeners(result, event, signal, listeners, listeners.index(listener) + 1)
        return None

    async def _finish_listeners(
        self,
        pending: Awaitable[None],
        event: AgentEvent,
        signal: AbortSignal,
        listeners: tuple[AgentListener, ...],
        start: int,
    ) -> None:
        await pending
        for listener in listeners[start:]:
            result: Any = listener(event, signal)
            if result is not None:
                if not inspect.isawaitable(result):
                    raise TypeError(
                        f"listener {listener!r} returned {type(result).__name__}: expected None or an awaitable"
                    )
                await result


def _check_mode(mode: object, name: str) -> QueueMode:
    if mode not in _QUEUE_MODES:
        raise ValueError(f"{name} must be 'all' or 'one-at-a-time', got {mode!r}")
    return mode  # type: ignore[return-value]


def _prompt_messages(input: PromptInput, images: Sequence[ImageContent]) -> list[AgentMessage]:
    if isinstance(input, str):
        for i, image in enumerate(images):
            if not isinstance(image, ImageContent):
                raise TypeError(f"images[{i}] must be an ImageContent, got {type(image).__name__}")
        return [UserMessage(content=(TextContent(input), *images))]
    if images:
        raise TypeError("images can only be given with a text prompt")
    if isinstance(input, Sequence):
        return check_messages(input, "prompt input")
    return check_messages([input], "prompt input")
