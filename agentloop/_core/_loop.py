"""The one implementation of the agent loop: `_Run.events`, an async generator of events.

It is pi-agent-core's `runLoop` with the behaviour of agentloop's profile (barriers, bounded
abort, `should_stop_after_turn`, `max_turns`). Two ways of consuming it:

* `drive` (for `run_agent_loop`, `async with agent_loop(...)` and the `Agent`): every event goes
  to the run's one sink (`RunState.emit`) as it happens; the generator emits a model stream's and
  a tool batch's events itself, inside the step that runs them, and `drive` emits the ones it
  yields.
* `bare_run` (for a bare `async for event in agent_loop(...)`): the generator yields every
  event; a tool batch's, which its sink collects while the batch runs, once the batch has ended.

No cancel scope or task group is ever open across a `yield`: abort cuts (`AbortCut`) and a
batch's task group open and close within one step. A model stream is read by `respond` (a live
sink: one cut around the whole stream) or `respond_bare` (a cut around each read); both turn its
events into agent events with `agent_event`, and both close it at its terminal event, as the
reference's `break` out of `for await` does (a stream that would wait for more never holds the
run). What a run works on (the transcript, the config in force, the signal, the sink) is a
`RunState` (`_run`), which the tool batches (`_execution`) share.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from .._tools._tool import AgentTool
from .._types._abort import AbortCut, AbortSignal
from .._types._constants import ABORTED_TEXT, AGENT_MESSAGE_TYPES
from .._types._errors import InvalidContextError
from .._types._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnEnd,
    TurnStart,
)
from .._types._messages import (
    AgentMessage,
    AssistantMessage,
    Context,
    Message,
    ToolResultMessage,
    ended_message,
)
from .._types._stream_fn import StreamFn, StreamOptions, close_events, opened_stream
from ._config import AgentContext, AgentLoopConfig, Emit, NextTurn, TurnContext, call, default_convert_to_llm
from ._execution import execute_tool_calls, fail_truncated_tool_calls
from ._run import RunState, Sink, sink

__all__ = (
    "bare_run",
    "check_config",
    "check_context",
    "check_continue",
    "check_messages",
    "drive",
    "resolve_stream_fn",
    "run_agent_loop",
    "run_agent_loop_continue",
    "start_run",
)

_UPDATE_TYPES = frozenset(
    {
        "text_start",
        "text_delta",
        "text_end",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    }
)


def check_messages(messages: object, what: str) -> list[AgentMessage]:
    """A list of agent messages, or a TypeError that says what was expected."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"{what} must be a sequence of messages, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, AGENT_MESSAGE_TYPES):
            raise TypeError(
                f"{what}[{i}] must be a UserMessage, AssistantMessage, ToolResultMessage or "
                f"CustomMessage, got {type(message).__name__}"
            )
    return list(messages)


def check_context(context: object) -> AgentContext:
    if not isinstance(context, AgentContext):
        raise TypeError(f"context must be an agentloop.AgentContext, got {type(context).__name__}")
    check_messages(context.messages, "context.messages")
    for i, tool in enumerate(context.tools):
        if not isinstance(tool, AgentTool):
            raise TypeError(f"context.tools[{i}] must be an AgentTool, got {type(tool).__name__}")
    return context


def check_config(config: object) -> AgentLoopConfig:
    if not isinstance(config, AgentLoopConfig):
        raise TypeError(f"config must be an agentloop.AgentLoopConfig, got {type(config).__name__}")
    return config


def _check_emit(emit: object) -> Emit:
    if not callable(emit):
        raise TypeError(f"emit must be callable, got {emit!r}")
    return emit  # callable: what it returns is checked per event (`call`)


def check_continue(context: AgentContext) -> None:
    """Raise `InvalidContextError` when a run cannot continue from `context` (the reference's checks)."""
    if not context.messages:
        raise InvalidContextError("Cannot continue: no messages in context")
    if context.messages[-1].role == "assistant":
        raise InvalidContextError("Cannot continue from message role: assistant")


def resolve_stream_fn(stream_fn: StreamFn | None) -> StreamFn:
    if stream_fn is None:
        from ._default_stream import default_stream_fn

        return default_stream_fn
    if not callable(stream_fn):
        raise TypeError(f"stream_fn must be callable, got {stream_fn!r}")
    return stream_fn


async def run_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Run the agent from new prompt messages; return the messages the run added.

    Every event is passed to `emit` and awaited before the loop goes on (while parallel tools
    run, `emit` may be called from several tasks at once, as in the reference). Model and tool
    failures become events; an exception from `emit`, a stream function or a callback propagates
    after everything the run opened is closed.
    """
    prompts = check_messages(prompts, "prompts")
    check_config(config)
    run = _Run(
        check_context(context), config, sink(_check_emit(emit), config.observe), signal, resolve_stream_fn(stream_fn)
    )
    await drive(run, prompts)
    return run.new_messages


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Continue from `context` without new messages (retries, resuming after a crash).

    The last message must not be an assistant message (`InvalidContextError` otherwise).
    """
    check_context(context)
    check_continue(context)
    check_config(config)
    run = _Run(context, config, sink(_check_emit(emit), config.observe), signal, resolve_stream_fn(stream_fn))
    await drive(run, None)
    return run.new_messages


async def drive(run: _Run, prompts: list[AgentMessage] | None) -> None:
    """Run to the end, every event through the run's sink, in order: the events the loop yields
    are emitted here, the ones it emits itself (a model stream's, a tool batch's) as they happen."""
    async with aclosing(run.events(prompts)) as events:
        async for event in events:
            await run.emit(event)


def start_run(
    prompts: list[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Sink,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
) -> _Run:
    """The run of `async with agent_loop(...)`, whose sink is the stream's (arguments checked)."""
    return _Run(context, config, sink(emit, config.observe), signal, stream_fn)


def bare_run(
    prompts: list[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
) -> AsyncGenerator[AgentEvent, None]:
    """The run of a bare `async for event in agent_loop(...)`: the loop's own generator.

    No task runs beside it, so nothing is delivered behind the consumer's back: the loop yields
    every event itself, and a tool batch's events, collected while the batch runs, are yielded
    once it has ended.
    """
    collected: list[AgentEvent] = []

    async def collect(event: AgentEvent) -> None:
        collected.append(event)

    run = _Run(context, config, collect, signal, stream_fn, collected)
    if config.observe is None:
        return run.events(prompts)
    return _observed(run.events(prompts), config.observe)


async def _observed(
    events: AsyncGenerator[AgentEvent, None], observe: Callable[[AgentEvent], None]
) -> AsyncGenerator[AgentEvent, None]:
    """A bare run's events, each passed to `config.observe` before it is yielded."""
    async with aclosing(events):
        async for event in events:
            observe(event)
            yield event  # noqa: ASYNC119 - the context is aclosing: it closes an inner generator, no scope


class _Run(RunState):
    """One run: its state (`RunState`) and the loop that drives it (`events`)."""

    __slots__ = ("collected",)

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: Sink,
        signal: AbortSignal | None,
        stream_fn: StreamFn,
        collected: list[AgentEvent] | None = None,
    ) -> None:
        super().__init__(context, config, emit, signal, stream_fn)
        self.collected = collected  # a bare run's: what its sink collected during a step

    def take_collected(self) -> list[AgentEvent]:
        """The events a bare run's step emitted, to yield now (none for a live sink)."""
        if not self.collected:
            return []
        events = self.collected[:]
        self.collected.clear()
        return events

    async def poll(self, which: str) -> list[AgentMessage]:
        """Ask a queue callback (`get_steering_messages`, `get_follow_up_messages`) for messages."""
        messages = await call(getattr(self.config, which))
        return check_messages(messages, which + "()") if messages else []

    async def events(self, prompts: list[AgentMessage] | None) -> AsyncGenerator[AgentEvent, None]:
        """The loop: run from new prompts (or continue, with None), yielding its events in order.

        It never yields inside a cancel scope or task group: a model stream's cut and a tool
        batch's tasks open and close within one step. Those steps deliver their events to the
        sink themselves; a bare run's are collected and yielded when the step ends.
        """
        if prompts is not None:
            self.new_messages.extend(prompts)
        yield AgentStart()
        yield TurnStart()
        for prompt in prompts or ():
            yield MessageStart(prompt)
            yield MessageEnd(prompt)
            self.messages.append(prompt)
        config = self.config
        steering = config.get_steering_messages is not None
        pending: Sequence[AgentMessage] = await self.poll("get_steering_messages") if steering else ()
        prepared: Sequence[AgentMessage] = ()
        first_turn = True
        turns = 0
        while True:
            has_more_tool_calls = True
            while has_more_tool_calls or pending or prepared:
                if not first_turn:
                    if not pending and steering:
                        pending = await self.poll("get_steering_messages")
                    yield TurnStart()
                first_turn = False
                if pending or prepared:
                    for message in (*prepared, *pending):
                        yield MessageStart(message)
                        yield MessageEnd(message)
                        self.messages.append(message)
                        self.new_messages.append(message)
                    pending = prepared = ()
                if self.collected is None:
                    message = await self.respond()
                else:
                    async with aclosing(self.respond_bare()) as response:
                        async for event in response:
                            yield event  # noqa: ASYNC119 - the context is aclosing: it closes an inner generator, no scope
                    message = self.messages[-1]  # appended by `response()`
                    assert isinstance(message, AssistantMessage)
                turns += 1
                if message.stop_reason == "error" or message.stop_reason == "aborted":
                    yield TurnEnd(message, ())
                    yield AgentEnd(tuple(self.new_messages))
                    return
                tool_results: list[ToolResultMessage] = []
                has_more_tool_calls = False
                tool_calls = message.tool_calls
                if tool_calls:
                    self.countdown -= len(tool_calls)  # steps too (checked at the next model event)
                    if message.stop_reason == "length":
                        tool_results = await fail_truncated_tool_calls(self, tool_calls)
                        terminate = False
                    else:
                        tool_results, terminate = await execute_tool_calls(self, message, tool_calls)
                    for event in self.take_collected():
                        yield event
                    has_more_tool_calls = not terminate
                    self.messages.extend(tool_results)
                    self.new_messages.extend(tool_results)
                yield TurnEnd(message, tuple(tool_results))
                if config.prepare_next_turn is not None or config.should_stop_after_turn is not None:
                    prepared, stop = await self.after_turn(message, tool_results)
                    if stop:
                        yield AgentEnd(tuple(self.new_messages))
                        return
                if config.max_turns is not None and turns >= config.max_turns:
                    yield AgentEnd(tuple(self.new_messages))
                    return
                if steering:
                    pending = await self.poll("get_steering_messages")
            if config.get_follow_up_messages is None:
                break
            follow_ups = await self.poll("get_follow_up_messages")
            if follow_ups:
                pending = follow_ups
                continue
            break
        yield AgentEnd(tuple(self.new_messages))

    async def after_turn(
        self, message: AssistantMessage, tool_results: list[ToolResultMessage]
    ) -> tuple[list[AgentMessage], bool]:
        """Call `prepare_next_turn` and `should_stop_after_turn`: the next turn's messages, and whether to stop."""
        config = self.config
        turn = TurnContext(
            message=message,
            tool_results=tuple(tool_results),
            context=self.agent_context(),
            new_messages=tuple(self.new_messages),
        )
        prepared: list[AgentMessage] = []
        if config.prepare_next_turn is not None:
            update = await call(config.prepare_next_turn, turn)
            if update is not None:
                prepared = self.apply_next_turn(update)
        stop = config.should_stop_after_turn is not None and bool(await call(config.should_stop_after_turn, turn))
        return prepared, stop

    def apply_next_turn(self, update: Any) -> list[AgentMessage]:
        if not isinstance(update, NextTurn):
            raise TypeError(f"prepare_next_turn must return a NextTurn or None, got {type(update).__name__}")
        if update.context is not None:
            context = check_context(update.context)
            self.system_prompt = context.system_prompt
            self.messages = list(context.messages)
            self.tools = tuple(context.tools)
        if update.model is not None:
            self.model = update.model
        if update.thinking_level is not None:
            self.reasoning = None if update.thinking_level == "off" else update.thinking_level
        return check_messages(update.messages, "NextTurn.messages")

    async def request(self) -> tuple[Context, StreamOptions]:
        """What the next model call is given: the context as the model sees it, and the options."""
        config = self.config
        signal = self.signal
        if config.transform_context is None and config.convert_to_llm is default_convert_to_llm:
            llm_messages: Sequence[Message] = self.default_llm_messages()
        else:
            messages: Sequence[AgentMessage] = tuple(self.messages)
            if config.transform_context is not None:
                messages = check_messages(await call(config.transform_context, messages, signal), "transform_context()")
            llm_messages = await call(config.convert_to_llm, messages)
        api_key = None
        if config.get_api_key is not None:
            api_key = await call(config.get_api_key, self.model.provider)
        options = StreamOptions(
            signal=signal,
            api_key=api_key or config.api_key,
            reasoning=self.reasoning,
            session_id=config.session_id,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            thinking_budgets=config.thinking_budgets,
            headers=config.headers,
            metadata=config.metadata,
            max_retry_delay=config.max_retry_delay,
        )
        return Context(system_prompt=self.system_prompt, messages=tuple(llm_messages), tools=self.tools), options

    async def respond(self) -> AssistantMessage:
        """One model call with a live sink: its events emitted as they come, in one abort cut.

        An abort ends the stream at once, but never cuts an event being delivered (a listener
        that aborts): the cut is held meanwhile, and applied after.
        """
        llm_context, options = await self.request()
        state = _Streaming()
        signal = self.signal
        with AbortCut(signal) as cut:
            source = self.open_stream(llm_context, options)
            try:
                while True:
                    self.countdown -= 1
                    if self.countdown <= 0:
                        await self.fair_share()
                    try:
                        event = self.agent_event(await source.__anext__(), state)
                    except StopAsyncIteration:
                        break
                    if event is None:
                        if state.ended:
                            break
                        continue
                    cut.held = True
                    await self.emit(event)
                    cut.held = False
                    if signal.aborted:
                        cut.cut()  # aborted during the delivery: a read that has to wait is cut
            except BaseException:
                await close_events(source)  # noqa: ASYNC102 - shielded, with a timeout, inside close_events
                raise
            await close_events(source, shielded=state.final is None)  # after an abort, bounded like any cleanup
        final = self.response(state)
        if state.last is None:
            await self.emit(MessageStart(final))
        await self.emit(MessageEnd(final))
        return final

    async def respond_bare(self) -> AsyncGenerator[AgentEvent, None]:
        """One model call in a bare run: its events yielded as they come, each read in an abort cut of
        its own (no cut spans a `yield`); `response()` is the message."""
        llm_context, options = await self.request()
        state = _Streaming()
        signal = self.signal
        source = self.open_stream(llm_context, options)
        try:
            while True:
                self.countdown -= 1
                if self.countdown <= 0:
                    await self.fair_share()
                with AbortCut(signal) as cut:
                    try:
                        raw = await source.__anext__()
                    except StopAsyncIteration:
                        break
                if cut.cancelled_caught:
                    break
                event = self.agent_event(raw, state)
                if event is None:
                    if state.ended:
                        break
                    continue
                yield event
        except BaseException:
            await close_events(source)  # noqa: ASYNC102 - shielded, with a timeout, inside close_events
            raise
        await close_events(source, shielded=state.final is None)
        final = self.response(state)
        if state.last is None:
            yield MessageStart(final)
        yield MessageEnd(final)

    def response(self, state: _Streaming) -> AssistantMessage:
        """The message a model stream ended with (made up when it ended without one), appended to the transcript."""
        last = state.last
        final = state.final
        if final is None:
            partial = None if last is None else last.partial
            if self.signal.aborted:
                final = self.ended(partial, "aborted", ABORTED_TEXT)
            else:
                final = self.ended(partial, "error", "The model stream ended without a done or error event")
        elif not isinstance(final, AssistantMessage):
            raise TypeError(f"stream function finished with {type(final).__name__}, expected AssistantMessage")
        self.messages.append(final)
        self.new_messages.append(final)
        return final

    def open_stream(self, llm_context: Context, options: StreamOptions) -> Any:
        """Call the stream function: its events, as an async iterator (an async generator as it is,
        the other shapes through `_opened`)."""
        source: Any = self.stream_fn(self.model, llm_context, options)
        if inspect.isasyncgen(source):
            return source
        return _opened(source)

    def agent_event(self, event: Any, state: _Streaming) -> AgentEvent | None:
        """The agent event for one model stream event, or None: none to emit, and the stream has
        `state.ended` when this event ends it (its terminal event, or an abort before it)."""
        if self.signal.aborted:
            # Aborted before this event was delivered: it is not, unless it is the stream's own
            # aborted ending, which is kept (as in the reference).
            if getattr(event, "type", None) == "error" and event.error.stop_reason == "aborted":
                state.final = event.error
            state.ended = True
            return None
        try:
            kind = event.type
        except AttributeError:
            kind = None  # not an event: the TypeError below says so
        if kind in _UPDATE_TYPES:
            if state.last is None:
                return None  # no `start` yet: the reference drops block events too
            state.last = event
            return MessageUpdate(None, event)
        if kind == "start":
            state.last = event
            return MessageStart(event.partial)
        if kind == "done":
            state.final = event.message
        elif kind == "error":
            state.final = event.error
        else:
            raise TypeError(f"stream function yielded an unknown event: {event!r}")
        state.ended = True
        return None

    def ended(self, partial: AssistantMessage | None, reason: Any, text: str) -> AssistantMessage:
        return ended_message(self.model, reason, text, self.clock(), partial)


class _Streaming:
    """What the loop saw of one model response, kept when it is cut."""

    __slots__ = ("ended", "final", "last")

    def __init__(self) -> None:
        self.last: Any = None  # the latest event that carries the partial message
        self.final: Any = None  # the message of its terminal event
        self.ended = False  # it ended: its terminal event, or an abort


async def _opened(source: Any) -> AsyncGenerator[Any, None]:
    """The events of what a stream function returned when it is not an async generator (awaited and
    entered by `opened_stream`). In a bare run an async context manager it returns stays entered
    across the run's yields, so one that holds a cancel scope or a task group is for the `async
    with` form only."""
    async with opened_stream(source) as events:
        async for event in events:
            yield event  # noqa: ASYNC119 - a stream function's own context manager (see above)
