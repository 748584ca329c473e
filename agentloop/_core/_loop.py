"""The one implementation of the agent loop: `_Run.events`, an async generator of events.

It is pi-agent-core's `runLoop` with the behaviour of agentloop's profile (barriers, bounded
abort, `should_stop_after_turn`, `max_turns`). One way into a run, `open_run`, and two ways of
consuming it:

* with a sink (`run_agent_loop`, `async with agent_loop(...)` and the `Agent`): `deliver` hands
  every event the generator yields to the run's one sink (`RunState.emit`), and the steps that
  run a model stream or a tool batch emit theirs to it as they happen;
* bare (`async for event in agent_loop(...)`): the generator yields every event; a tool batch's,
  which its sink collects while the batch runs, once the batch has ended.

No cancel scope or task group is ever open across a `yield`: a tool batch's task group and a live
model call's abort cut open and close within one step, and a bare run reads the model with
`model_call`, each read in an abort cut of its own (`_model_call`). What a run works on (the
transcript, the config in force, the signal, the sink) is a `RunState` (`_run`), which the model
call and the tool batches (`_execution`) share.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from .._tools._tool import AgentTool
from .._types._abort import AbortSignal
from .._types._constants import AGENT_MESSAGE_TYPES
from .._types._errors import InvalidContextError
from .._types._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    TurnEnd,
    TurnStart,
)
from .._types._messages import (
    AgentMessage,
    AssistantMessage,
    Context,
    Message,
    ToolResultMessage,
)
from .._types._stream_fn import StreamFn, StreamOptions
from ._config import (
    AgentContext,
    AgentLoopConfig,
    Emit,
    NextTurn,
    TurnContext,
    api_key_for,
    call,
    default_convert_to_llm,
)
from ._execution import execute_tool_calls, fail_truncated_tool_calls
from ._model_call import emit_model_call, model_call
from ._run import RunState, Sink, sink

__all__ = (
    "check_config",
    "check_context",
    "check_continue",
    "check_messages",
    "deliver",
    "open_run",
    "resolve_stream_fn",
    "run_agent_loop",
    "run_agent_loop_continue",
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
    return await _run_to_end(prompts, check_context(context), config, _check_emit(emit), signal, stream_fn)


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
    return await _run_to_end(None, context, config, _check_emit(emit), signal, stream_fn)


async def _run_to_end(
    prompts: list[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal | None,
    stream_fn: StreamFn | None,
) -> list[AgentMessage]:
    """Run with every event through `emit`; the messages the run added (from `agent_end`)."""
    run_sink = sink(emit, config.observe)
    return await deliver(open_run(prompts, context, config, signal, resolve_stream_fn(stream_fn), run_sink), run_sink)


def open_run(
    prompts: list[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
    emit: Sink | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """The one way into a run (arguments checked): its events, in order, from new prompts (or
    continuing, with None).

    With a sink (`emit`, adapted by `sink`), the events of a tool batch's tasks go to it as they
    happen, and the caller hands every event the generator yields to the same sink (`deliver`).
    Without one (a bare `async for`), no task runs beside the generator and it yields every event
    itself: a tool batch's, collected while the batch runs, once the batch has ended; each one
    passed to `config.observe` first, when there is one.
    """
    if emit is not None:
        return _Run(context, config, emit, signal, stream_fn).events(prompts)
    collected: list[AgentEvent] = []

    async def collect(event: AgentEvent) -> None:
        collected.append(event)

    events = _Run(context, config, collect, signal, stream_fn, collected).events(prompts)
    if config.observe is None:
        return events
    return _observed(events, config.observe)


async def deliver(events: AsyncGenerator[AgentEvent, None], emit: Sink) -> list[AgentMessage]:
    """Hand every event of a run opened with `emit` to it, in order; the messages the run added
    (its last event, `agent_end`, says them)."""
    event = None
    async with aclosing(events):
        async for event in events:
            await emit(event)
    assert isinstance(event, AgentEnd)
    return list(event.messages)


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
        sink themselves (a bare run's tool events are collected and yielded when the step ends;
        its model call's events are yielded as they come).
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
                llm_context, options = await self.request()
                if self.collected is None:
                    message = await emit_model_call(self, llm_context, options)
                else:
                    async with aclosing(model_call(self, llm_context, options)) as response:
                        async for event in response:
                            yield event  # noqa: ASYNC119 - the context is aclosing: it closes an inner generator, no scope
                    message = self.messages[-1]  # appended by the model call before its last event
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
        options = StreamOptions(
            signal=signal,
            api_key=await api_key_for(config, self.model.provider),
            reasoning=self.reasoning,
            session_id=config.session_id,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            thinking_budgets=config.thinking_budgets,
            headers=config.headers,
            metadata=config.metadata,
            max_retry_delay=config.max_retry_delay,
            cache_retention=config.cache_retention,
        )
        return Context(system_prompt=self.system_prompt, messages=tuple(llm_messages), tools=self.tools), options
