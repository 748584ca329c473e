"""`run_agent_loop`: the one implementation of the agent loop, TypeScript-shaped.

Every event goes through an awaited `emit`; the streaming API (`_stream.py`) and the `Agent`
(`_agent.py`) are two ways of consuming it. The algorithm is pi-agent-core's `runLoop` with the
behaviour of `spec/PROFILE.md` (barriers, bounded abort, `should_stop_after_turn`, `max_turns`).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from types import AsyncGeneratorType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ._abort import IDLE, NOW, AbortScope, AbortSignal
from ._config import (
    AgentContext,
    AgentLoopConfig,
    Emit,
    StreamFn,
    StreamOptions,
    TurnContext,
    call,
    default_convert_to_llm,
)
from ._errors import InvalidContextError
from ._events import (
    AgentEnd,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnEnd,
    TurnStart,
)
from ._execution import execute_tool_calls, fail_truncated_tool_calls
from ._tools import AgentTool
from ._types import (
    AgentMessage,
    AssistantMessage,
    Context,
    CustomMessage,
    Message,
    ToolResultMessage,
    UserMessage,
    now_ms,
)
from ._updates import settle
from ._util import single_exception

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("check_continue", "run_agent_loop", "run_agent_loop_continue", "start_run")

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage)
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
ABORTED_TEXT = "Request was aborted"
_CLEANUP_TIMEOUT = 5.0


def check_messages(messages: object, what: str) -> list[AgentMessage]:
    """A list of agent messages, or a TypeError that says what was expected."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"{what} must be a sequence of messages, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, _MESSAGE_TYPES):
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
    run = _Run(check_context(context), check_config(config), emit, signal, resolve_stream_fn(stream_fn))
    return await _run_in_task_group(run, prompts)


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
    run = _Run(context, check_config(config), emit, signal, resolve_stream_fn(stream_fn))
    return await _run_in_task_group(run, None)


async def _run_in_task_group(run: _Run, prompts: list[AgentMessage] | None) -> list[AgentMessage]:
    """Run in a task group of the run's own (progress updates that must wait are delivered there)."""
    try:
        async with anyio.create_task_group() as run.task_group:
            await run.run(prompts)
    except BaseExceptionGroup as group:
        raise single_exception(group) from None
    return run.new_messages


def start_run(
    prompts: list[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
    task_group: TaskGroup,
) -> Coroutine[Any, Any, None]:
    """The run of `agent_loop`: checked arguments, and the stream's task group for the run's tasks."""
    run = _Run(context, config, emit, signal, stream_fn)
    run.task_group = task_group
    return run.run(prompts)


class _Run:
    """The state of one run: the working transcript, the config in force, the sink."""

    __slots__ = (
        "_llm_messages",
        "_llm_seen",
        "_llm_source",
        "_options",
        "abort_scope",
        "config",
        "deliver",
        "emit",
        "messages",
        "model",
        "new_messages",
        "plain",
        "reasoning",
        "scope_class",
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
        emit: Emit,
        signal: AbortSignal | None,
        stream_fn: StreamFn,
    ) -> None:
        if signal is not None and not isinstance(signal, AbortSignal):
            raise TypeError(f"signal must be an agentloop.AbortSignal or None, got {type(signal).__name__}")
        if not callable(emit):
            raise TypeError(f"emit must be callable, got {emit!r}")
        self.config = config
        self.model = config.model
        self.reasoning = config.reasoning
        self.system_prompt = context.system_prompt
        self.messages: list[AgentMessage] = list(context.messages)
        self.tools: tuple[AgentTool, ...] = tuple(context.tools)
        self.new_messages: list[AgentMessage] = []
        self.signal = signal if signal is not None else AbortSignal()
        self.stream_fn = stream_fn
        # `deliver(event)` hands an event to the sink and returns what to `settle` (None: nothing to
        # wait for): a plain sink costs no coroutine. `emit` is the awaitable form.
        self.deliver: Callable[[Any], Awaitable[None] | None] = emit
        self.plain = not inspect.iscoroutinefunction(emit)
        self.emit: Callable[[Any], Awaitable[None]] = self._emit if self.plain else emit  # type: ignore[assignment]
        self.scope_class = type(anyio.CancelScope())  # the backend's class: cheaper than anyio's factory
        self.task_group: TaskGroup = None  # type: ignore[assignment]  # set by the caller: for progress updates
        self._llm_source: list[AgentMessage] | None = None
        self._llm_seen = 0
        self._llm_messages: list[Message] = []
        self._options: StreamOptions | None = None
        self.abort_scope: AbortScope = None  # type: ignore[assignment]  # for the model and tool calls of the run's task

    async def _emit(self, event: Any) -> None:
        """Deliver an event to a plain (or awaitable-returning) sink and wait for it."""
        pending = self.deliver(event)
        if pending is not None:
            await settle(pending)

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

    async def poll(self, which: str) -> list[AgentMessage]:
        """Ask a queue callback (`get_steering_messages`, `get_follow_up_messages`) for messages."""
        callback = getattr(self.config, which)
        messages = callback()
        if type(messages) is not list and inspect.isawaitable(messages):
            messages = await messages
        return check_messages(messages, which + "()") if messages else []

    async def run(self, prompts: list[AgentMessage] | None) -> None:
        """Run from new prompts (or continue, with None); `task_group` must be set."""
        abort_scope = self.abort_scope = AbortScope(self.signal, self.config.tool_abort_grace, self.scope_class)
        try:
            if prompts is not None:
                self.new_messages.extend(prompts)
            await self.emit(AgentStart())
            await self.emit(TurnStart())
            for prompt in prompts or ():
                await self.emit(MessageStart(prompt))
                await self.emit(MessageEnd(prompt))
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
                        if (pending_delivery := self.deliver(TurnStart())) is not None:
                            await settle(pending_delivery)
                    first_turn = False
                    if pending or prepared:
                        for message in (*prepared, *pending):
                            await self.emit(MessageStart(message))
                            await self.emit(MessageEnd(message))
                            self.messages.append(message)
                            self.new_messages.append(message)
                        pending = prepared = ()
                    message = await self.stream_response()
                    turns += 1
                    if message.stop_reason == "error" or message.stop_reason == "aborted":
                        await self.emit(TurnEnd(message, ()))
                        await self.emit(AgentEnd(tuple(self.new_messages)))
                        return
                    tool_results: list[ToolResultMessage] = []
                    has_more_tool_calls = False
                    tool_calls = message.tool_calls
                    if tool_calls:
                        if message.stop_reason == "length":
                            tool_results = await fail_truncated_tool_calls(self, tool_calls)
                            terminate = False
                        else:
                            tool_results, terminate = await execute_tool_calls(self, message, tool_calls)
                        has_more_tool_calls = not terminate
                        self.messages.extend(tool_results)
                        self.new_messages.extend(tool_results)
                    if (pending_delivery := self.deliver(TurnEnd(message, tuple(tool_results)))) is not None:
                        await settle(pending_delivery)
                    if config.prepare_next_turn is not None or config.should_stop_after_turn is not None:
                        prepared, stop = await self.after_turn(message, tool_results)
                        if stop:
                            await self.emit(AgentEnd(tuple(self.new_messages)))
                            return
                    if config.max_turns is not None and turns >= config.max_turns:
                        await self.emit(AgentEnd(tuple(self.new_messages)))
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
            await self.emit(AgentEnd(tuple(self.new_messages)))
        except BaseException as exc:
            abort_scope.close(exc)
            raise
        finally:
            abort_scope.close()  # returned (after the `except` there is nothing left to close)

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
        from ._config import NextTurn

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

    async def stream_response(self) -> AssistantMessage:
        """Stream one assistant message, emitting its events; append it to the transcript."""
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
        options = self._options
        if options is None or options.api_key != (api_key or config.api_key) or options.reasoning != self.reasoning:
            options = self._options = StreamOptions(
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
        llm_context = Context(system_prompt=self.system_prompt, messages=tuple(llm_messages), tools=self.tools)
        state = _Streaming()
        abort_scope = self.abort_scope
        abort_scope.enter(NOW)  # waits on the outside world are cut at once (`consume` pauses it)
        try:
            source: Any = self.stream_fn(self.model, llm_context, options)
            if type(source) is AsyncGeneratorType:  # the usual shape: no probing
                await self.consume(source, state)
            else:
                await self.consume_other(source, state)
        except BaseException as exc:
            if not abort_scope.leave(exc):
                raise
        else:
            abort_scope.leave()
        last = state.last
        final = state.final
        if final is None:
            partial = None if last is None else last.partial
            if signal.aborted:
                final = self.ended(partial, "aborted", ABORTED_TEXT)
            else:
                final = self.ended(partial, "error", "The model stream ended without a done or error event")
        elif not isinstance(final, AssistantMessage):
            raise TypeError(f"stream function finished with {type(final).__name__}, expected AssistantMessage")
        if last is None:
            await self.emit(MessageStart(final))
        if (pending := self.deliver(MessageEnd(final))) is not None:
            await settle(pending)
        self.messages.append(final)
        self.new_messages.append(final)
        return final

    async def consume_other(self, source: Any, state: _Streaming) -> None:
        """Consume what a stream function returned when it is not an async generator."""
        if inspect.isawaitable(source):
            source = await source
        if hasattr(source, "__aenter__"):
            async with source as events:
                await self.consume(events, state)
        else:
            await self.consume(source, state)

    async def consume(self, events: Any, state: _Streaming) -> None:
        """Emit the events of one model response until its terminal event; always close the source."""
        if not hasattr(events, "__anext__"):
            raise TypeError(
                "a stream function must return an async iterator of AssistantMessageEvent or an async "
                f"context manager yielding one, got {type(events).__name__}"
            )
        deliver = self.deliver  # no coroutine per delta for a plain sink
        signal = self.signal
        abort_scope = self.abort_scope
        last = None  # the latest event that carries the partial message
        try:
            async for event in events:
                if signal._aborted:
                    # Aborted before this event was delivered: it is not, unless it is the
                    # stream's own aborted ending, which is kept (as in the reference).
                    if getattr(event, "type", None) == "error" and event.error.stop_reason == "aborted":
                        state.final = event.error
                    break
                try:
                    kind = event.type
                except AttributeError:
                    kind = None  # not an event: the TypeError below says so
                if kind in _UPDATE_TYPES:
                    if last is None:
                        continue  # no `start` yet: the reference drops block events too
                    last = event
                    abort_scope.phase = IDLE  # an abort from a listener must not cut this event
                    if (pending := deliver(MessageUpdate(None, event))) is not None:
                        await settle(pending)
                    abort_scope.phase = NOW
                elif kind == "start":
                    last = event
                    abort_scope.phase = IDLE
                    if (pending := deliver(MessageStart._streaming(event))) is not None:
                        await settle(pending)
                    abort_scope.phase = NOW
                elif kind == "done":
                    state.final = event.message
                    break
                elif kind == "error":
                    state.final = event.error
                    break
                else:
                    raise TypeError(f"stream function yielded an unknown event: {event!r}")
                if signal._aborted:
                    # Aborted while this event was delivered: the next read is cut at its first
                    # wait, so only an ending the stream gives at once is still taken.
                    abort_scope()
        except BaseException:
            state.last = last
            await _close(events, shielded=True)
            raise
        state.last = last
        if state.final is not None and type(events) is AsyncGeneratorType:
            # After its terminal event a source is let run to its end: a generator normally just
            # ends, which costs less than throwing GeneratorExit into it.
            try:
                await events.__anext__()
            except StopAsyncIteration:
                return
        # What is left is closed; after an abort, bounded like any cleanup (its scope may be
        # cancelled already).
        await _close(events, shielded=state.final is None)

    def ended(self, partial: AssistantMessage | None, reason: Any, text: str) -> AssistantMessage:
        if partial is None:
            model = self.model
            return AssistantMessage(
                api=model.api, provider=model.provider, model=model.id, stop_reason=reason, error_message=text
            )
        return replace(partial, stop_reason=reason, error_message=text, timestamp=now_ms())


class _Streaming:
    """What `consume` saw of one model response, kept when it is cut."""

    __slots__ = ("final", "last")

    def __init__(self) -> None:
        self.last: Any = None  # the latest event that carries the partial message
        self.final: Any = None


async def _close(events: Any, shielded: bool) -> None:
    """Close an event source (an async generator left open is finalized late, in another task)."""
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    if shielded:  # unwinding from a cancellation, an error or an abort: clean up anyway, bounded
        with anyio.move_on_after(_CLEANUP_TIMEOUT, shield=True):
            await aclose()
        return
    await aclose()
