"""`Agent`: a stateful agent over the loop, with awaited listeners and message queues.

The Agent passes its own `emit` to `run_agent_loop`: each event is reduced into `state` and then
every listener is awaited, in registration order, before the loop goes on. That is the barrier:
`before_tool_call` sees the assistant message already in `state.messages`, and a tool call counts
as finalized only once every listener has processed its `tool_execution_end`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio

from .._tools._tool import AgentTool
from .._types._abort import AbortSignal
from .._types._errors import AgentBusyError, InvalidContextError
from .._types._events import AgentEnd, AgentEvent, MessageEnd, MessageStart, TurnEnd
from .._types._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingLevel,
    UserMessage,
)
from .._types._stream_fn import MaybeAwaitable, StreamFn
from ..approvals._request import ApprovalRequest
from ..approvals._waiting import Approvals, NeedsApprovalOption
from ._config import AgentContext, AgentLoopConfig, LoopOptions, QueueMode, notify
from ._loop import check_messages, resolve_stream_fn, run_agent_loop, run_agent_loop_continue
from ._state import AgentState
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


class _ActiveRun:
    """A run in progress: its abort signal, and `finished` once the run has ended."""

    __slots__ = ("finished", "signal")

    def __init__(self) -> None:
        self.signal = AbortSignal()
        self.finished = anyio.Event()


class Agent:
    """A stateful agent: a transcript, tools, listeners, and steering / follow-up queues.

    Example:
        ```python
        agent = Agent(model=model, system_prompt="Be brief.", tools=[add], stream_fn=stream, max_turns=10)
        agent.subscribe(lambda event, signal: print(event.type))
        await agent.prompt("What is 2 + 3?")
        agent.options = agent.options.replace(before_tool_call=check)  # from the next run on
        ```

    Its loop options (`LoopOptions`: hooks, limits, what the stream function gets) are keyword
    arguments, kept checked and frozen in `options` and passed to every run. Every callback may
    be a plain or an async function. A run failure (an exception from the
    stream function, a callback or a listener) does not escape `prompt()`: it becomes an error
    assistant message (`message_start`, `message_end`, `turn_end`, `agent_end`) and
    `state.error_message` (only a listener that fails again on those events makes `prompt()`
    raise, as in the reference). Cancelling the caller of `prompt()` cancels the run.

    Two agents are equal only if they are the same agent; an agent is hashable (a dict key, a
    member of a `WeakSet`).
    """

    __slots__ = (
        "__weakref__",
        "_active",
        "_approvals",
        "_follow_up",
        "_listeners",
        "_options",
        "_state",
        "_steering",
        "stream_fn",
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
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        needs_approval: NeedsApprovalOption = (),
        approval_timeout: float | timedelta | None = None,
        on_approval_request: Callable[[ApprovalRequest], MaybeAwaitable[None]] | None = None,
        **options: Any,
    ) -> None:
        """`options` are the loop's options (`LoopOptions`: the same names, defaults and checks).

        `needs_approval` names the tools whose calls wait for `approve` (or is a function of
        the call that says so); `approval_timeout` (seconds or a timedelta) blocks a call not
        decided in time; `on_approval_request(request)`, plain or async, is called when a call
        starts waiting (within the wait: an abort or the timeout cuts it). See `agentloop.approvals`.
        """
        self._options = LoopOptions(**options)  # bad options fail here, named as given
        self._approvals = Approvals(needs_approval, approval_timeout, on_approval_request)
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
        self._steering = _Queue(_check_mode(steering_mode, "steering_mode"))
        self._follow_up = _Queue(_check_mode(follow_up_mode, "follow_up_mode"))
        self._listeners: tuple[AgentListener, ...] = ()
        self._active: _ActiveRun | None = None

    def __repr__(self) -> str:
        state = self._state
        parts = [f"model={state.model.id!r}", f"messages={len(state.messages)}", f"tools={len(state.tools)}"]
        queued = len(self._steering.items) + len(self._follow_up.items)
        if queued:
            parts.append(f"queued={queued}")
        parts.append("idle" if self._active is None else "running")
        return f"<Agent {' '.join(parts)}>"

    # --- options -------------------------------------------------------------------------
    @property
    def options(self) -> LoopOptions:
        """The loop options of every run from the next one on (frozen): change them with
        `agent.options = agent.options.replace(name=value, ...)`, which checks the new values."""
        return self._options

    @options.setter
    def options(self, options: LoopOptions) -> None:
        if not isinstance(options, LoopOptions) or isinstance(options, AgentLoopConfig):
            raise TypeError(f"options must be an agentloop.LoopOptions, got {type(options).__name__}")
        self._options = options

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

    # --- approvals -----------------------------------------------------------------------
    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The tool calls waiting for a person's decision, oldest first."""
        return self._approvals.listed()

    @property
    def approvals(self) -> Approvals:
        """The agent's approvals as a session and the SSE app use them: `restore(records, tools)`
        loads the calls a session stored, `recorder` is told every change to store, and `parked`
        says whether loaded calls wait to run first. List and answer calls with
        `pending_approvals` and `approve`."""
        return self._approvals

    async def approve(
        self,
        tool_call_id: str,
        approved: bool = True,
        reason: str | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """Decide a pending tool call: approved, it runs (with `arguments` instead of the model's,
        when given: they are validated against the tool's schema now, `ValueError` if they do
        not fit); denied (`approved=False`), the model gets an error result with `reason`
        (default "Tool execution was blocked").

        Raises ValueError if that call is not pending (unknown, already decided, or over).
        """
        await self._approvals.approve(tool_call_id, approved, reason, arguments)

    # --- runs ----------------------------------------------------------------------------
    def abort(self) -> None:
        """Abort the active run (no-op when idle). Synchronous; the run ends with `agent_end`."""
        if self._active is not None:
            self._active.signal.abort()

    async def wait_for_idle(self) -> None:
        """Return when no run is active (after its `agent_end` listeners finished)."""
        if self._active is not None:
            await self._active.finished.wait()

    def reset(self) -> None:
        """Clear the transcript, the error and the queues. Raises while a run is active."""
        if self._active is not None:
            raise AgentBusyError("Agent is already processing. Wait for completion before resetting.")
        self._state.reset()
        self.clear_all_queues()

    async def prompt(self, input: PromptInput, images: Sequence[ImageContent] | None = None) -> None:
        """Run the agent on a text (with optional images), a message, or a list of messages.

        Raises `AgentBusyError` if a run is active; use `steer()` or `follow_up()` then. Tool
        calls loaded from a session that waited for approval run first (ValueError while one of
        them is still unanswered).
        """
        if self._active is not None:
            raise AgentBusyError(
                "Agent is already processing a prompt. Use steer() or followUp() to queue messages, "
                "or wait for completion."
            )
        messages = _prompt_messages(input, images or ())
        await self._resolve_parked()
        await self._run(messages)

    async def continue_(self) -> None:
        """Continue from the transcript: retry after an error, or resume after a crash.

        From an assistant tail, queued steering (else follow-ups) is delivered; with nothing
        queued it raises `InvalidContextError`.
        """
        if self._active is not None:
            raise AgentBusyError("Agent is already processing. Wait for completion before continuing.")
        await self._resolve_parked()
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

    async def _resolve_parked(self) -> None:
        """Run the calls answered after a restart (loaded from a session): their results join the
        transcript before the run goes on."""
        approvals = self._approvals
        if approvals.parked:
            results = await approvals.resolve_parked(self._state.tools)
            self._state.messages = [*self._state.messages, *results]
            await approvals.record()

    def _config(self, skip_initial_steering_poll: bool = False) -> AgentLoopConfig:
        skip = [skip_initial_steering_poll]

        def steering() -> list[AgentMessage]:
            if skip[0]:
                skip[0] = False
                return []
            return self._steering.drain()

        state = self._state
        options = self._options.loop_options()
        approvals = self._approvals
        if approvals.asks or options.get("before_tool_call") is not None:
            options["before_tool_call"] = approvals.before_tool_call(options.get("before_tool_call"))
            options["wrap_tool_call"] = approvals.wrap_tool_call(options.get("wrap_tool_call"))
        return AgentLoopConfig(
            model=state.model,
            reasoning=None if state.thinking_level == "off" else state.thinking_level,
            get_steering_messages=steering,
            get_follow_up_messages=self._follow_up.drain,
            **options,
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
        state.run_started()
        try:
            try:
                if messages is None:
                    await run_agent_loop_continue(context, config, self._emit, active.signal, self.stream_fn)
                else:
                    await run_agent_loop(messages, context, config, self._emit, active.signal, self.stream_fn)
            except Exception as exc:
                await self._fail(exc, active.signal.aborted)
        finally:
            state.run_ended()
            self._active = None
            active.finished.set()

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
        await self._emit(MessageStart(failure))
        await self._emit(MessageEnd(failure))
        await self._emit(TurnEnd(failure, ()))
        await self._emit(AgentEnd((failure,)))

    async def _emit(self, event: AgentEvent) -> None:
        """The runs' sink: reduce the event into the state, then await every listener in order."""
        self._state.reduce(event)
        active = self._active
        if active is None:
            raise RuntimeError("Agent listener invoked outside active run")
        for listener in self._listeners:
            await notify(listener, f"listener {listener!r}", event, active.signal)


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
