"""One model call: the agent events of one model response, read from the run's stream function.

A run with a live sink (`run_agent_loop`, `async with agent_loop(...)`, the `Agent`) reads it with
`emit_model_call`: one abort cut around the whole stream, each event emitted as it comes. A bare
run reads it with `model_call`, an async generator: each read in an abort cut of its own, each
event yielded outside it (no cancel scope spans a `yield`). Both turn the model's events into
agent events with `_agent_event` and end with `_response`.

An abort never cuts an event being delivered: `model_call` hands events on outside its cuts, and
`emit_model_call` holds its cut while it emits (a listener that aborts must not cancel its own
delivery) and applies it after. Every read is a fairness point (`fair_share`): every `FAIR_SHARE`
steps of a run (a model event read, a tool call made) the scheduler gets a turn, so a fast model
(a cache, a local server) or tools that never wait cannot starve the other tasks of the process.

The stream is closed at its terminal event, as the reference's `break` out of `for await` does (a
stream that would wait for more never holds the run). The response is appended to the run's
transcript before the last event (`message_end`) is yielded.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator
from typing import Any

import anyio

from .._types._abort import AbortCut
from .._types._constants import ABORTED_TEXT
from .._types._events import AgentEvent, MessageEnd, MessageStart, MessageUpdate
from .._types._messages import AssistantMessage, Context, ended_message
from .._types._stream_fn import StreamOptions, close_events, opened_stream
from ._run import RunState

__all__ = ("FAIR_SHARE", "emit_model_call", "fair_share", "model_call")

FAIR_SHARE = 48
"""A run gives the scheduler a turn at least every this many steps (a model event read, a tool
call made)."""

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


async def fair_share(run: RunState) -> None:
    """Give the other tasks a turn (the run has taken `FAIR_SHARE` steps since the last one)."""
    run.countdown = FAIR_SHARE
    await anyio.lowlevel.checkpoint()


async def emit_model_call(run: RunState, context: Context, options: StreamOptions) -> AssistantMessage:
    """Call the run's stream function and emit the agent events of its response to the run's sink
    as they come, in one abort cut; the message it ended with (appended to `run.messages`)."""
    state = _Streaming()
    signal = run.signal
    emit = run.emit
    with AbortCut(signal) as cut:
        source = _open(run, context, options)
        try:
            while True:
                run.countdown -= 1
                if run.countdown <= 0:
                    await fair_share(run)
                try:
                    event = _agent_event(run, await source.__anext__(), state)
                except StopAsyncIteration:
                    break
                if event is None:
                    if state.ended:
                        break
                    continue
                cut.held = True
                await emit(event)
                cut.held = False
                if signal.aborted:
                    cut.cut()  # aborted during the delivery: a read that has to wait is cut
        except BaseException:
            await close_events(source)  # noqa: ASYNC102 - shielded, with a timeout, inside close_events
            raise
        await close_events(source, shielded=state.final is None)  # after an abort, bounded like any cleanup
    final = _response(run, state)
    if state.last is None:
        await emit(MessageStart(final))
    await emit(MessageEnd(final))
    return final


async def model_call(run: RunState, context: Context, options: StreamOptions) -> AsyncGenerator[AgentEvent, None]:
    """Call the run's stream function and yield the agent events of its response, the last one
    `message_end` of the message it ended with (appended to `run.messages` first).

    An abort cuts the read that is waiting; the response then ends as an aborted message."""
    state = _Streaming()
    signal = run.signal
    source = _open(run, context, options)
    try:
        while True:
            run.countdown -= 1
            if run.countdown <= 0:
                await fair_share(run)
            with AbortCut(signal) as cut:
                try:
                    raw = await source.__anext__()
                except StopAsyncIteration:
                    break
            if cut.cancelled_caught:
                break
            event = _agent_event(run, raw, state)
            if event is None:
                if state.ended:
                    break
                continue
            yield event
    except BaseException:
        await close_events(source)  # noqa: ASYNC102 - shielded, with a timeout, inside close_events
        raise
    await close_events(source, shielded=state.final is None)  # after an abort, bounded like any cleanup
    final = _response(run, state)
    if state.last is None:
        yield MessageStart(final)
    yield MessageEnd(final)


class _Streaming:
    """What the loop saw of one model response, kept when it is cut."""

    __slots__ = ("ended", "final", "last")

    def __init__(self) -> None:
        self.last: Any = None  # the latest event that carries the partial message
        self.final: Any = None  # the message of its terminal event
        self.ended = False  # it ended: its terminal event, or an abort


def _open(run: RunState, context: Context, options: StreamOptions) -> Any:
    """Call the stream function: its events, as an async iterator (an async generator as it is,
    the other shapes through `_opened`)."""
    source: Any = run.stream_fn(run.model, context, options)
    if inspect.isasyncgen(source):
        return source
    return _opened(source)


async def _opened(source: Any) -> AsyncGenerator[Any, None]:
    """The events of what a stream function returned when it is not an async generator (awaited and
    entered by `opened_stream`). In a bare run an async context manager it returns stays entered
    across the run's yields, so one that holds a cancel scope or a task group is for the `async
    with` form only."""
    async with opened_stream(source) as events:
        async for event in events:
            yield event  # noqa: ASYNC119 - a stream function's own context manager (see above)


def _agent_event(run: RunState, event: Any, state: _Streaming) -> AgentEvent | None:
    """The agent event for one model stream event, or None: none to hand on, and the stream has
    `state.ended` when this event ends it (its terminal event, or an abort before it)."""
    if run.signal.aborted:
        # Aborted before this event was handed on: it is not, unless it is the stream's own
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


def _response(run: RunState, state: _Streaming) -> AssistantMessage:
    """The message a model stream ended with (made up when it ended without one), appended to the transcript."""
    last = state.last
    final = state.final
    if final is None:
        partial = None if last is None else last.partial
        if run.signal.aborted:
            final = ended_message(run.model, "aborted", ABORTED_TEXT, run.clock(), partial)
        else:
            final = ended_message(
                run.model, "error", "The model stream ended without a done or error event", run.clock(), partial
            )
    elif not isinstance(final, AssistantMessage):
        raise TypeError(f"stream function finished with {type(final).__name__}, expected AssistantMessage")
    run.messages.append(final)
    run.new_messages.append(final)
    return final
