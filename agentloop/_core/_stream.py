"""`agent_loop` / `agent_loop_continue`: a run's events, with `async with` or a bare `async for`.

With `async with`, the loop runs as a producer task in a task group the context manager owns
(the shape of `trio.as_safe_channel`); the caller iterates a receive-only stream inside the
block, and leaving the block cancels the producer before the block returns. A bare `async for`
iterates the loop's own generator (`_loop.open_run` without a sink) in the caller's task.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import AsyncGeneratorType, TracebackType
from typing import TYPE_CHECKING, NoReturn, Protocol, TypeAlias

import anyio

from .._types._abort import AbortSignal
from .._types._events import AgentEnd, AgentEvent
from .._types._messages import AgentMessage
from .._types._stream_fn import StreamFn
from ._config import AgentContext, AgentLoopConfig
from ._loop import check_config, check_context, check_continue, check_messages, deliver, open_run, resolve_stream_fn
from ._run import check_signal, sink
from ._util import single_exception

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("DEFAULT_BUFFER", "AgentEventStream", "AgentLoopStream", "agent_loop", "agent_loop_continue")

DEFAULT_BUFFER = 128
"""How far the run may get ahead of the consumer: bounded (backpressure), and large enough that
producer and consumer switch once per ~128 events, not per event (see benchmarks/RESULTS.md)."""
_USAGE = (
    "agent_loop() is not awaitable; iterate it:\n"
    "    async with agent_loop(prompts, context, config) as events:\n"
    "        async for event in events:\n"
    "            ..."
)
_CLOSED = object()
"""What a run closed before its use became: it can no longer be used."""
_RunArguments: TypeAlias = tuple[
    "list[AgentMessage] | None", AgentContext, AgentLoopConfig, "AbortSignal | None", StreamFn
]


class _Receiver(Protocol):
    """What `AgentEventStream` reads the run's items from: the receive end of its memory object
    stream (`anyio.streams.memory.MemoryObjectReceiveStream`)."""

    def receive_nowait(self) -> AgentEvent | _Failure: ...

    async def receive(self) -> AgentEvent | _Failure: ...

    def close(self) -> None: ...


class AgentEventStream:
    """The receive side of a run's events: iterate it, or `await result()`.

    It ends after `agent_end`. `aclose()` stops receiving early: the producer notices at its next
    event and stops, while the `async with` block goes on.
    """

    __slots__ = ("_receive", "_start")

    def __init__(self, receive: _Receiver, start: anyio.Event) -> None:
        self._receive = receive
        self._start = start

    def __aiter__(self) -> AgentEventStream:
        return self

    async def __anext__(self) -> AgentEvent:
        """The next event: a cancellation point; a scheduling point when it has to wait. The run's
        failure is raised here, after the events sent before it."""
        if not self._start.is_set():
            self._start.set()  # the run starts on the first pull
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            try:
                item = self._receive.receive_nowait()
            except anyio.WouldBlock:
                item = await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None
        if isinstance(item, _Failure):
            raise item.error
        return item

    async def result(self) -> list[AgentMessage]:
        """Drain the stream and return the messages the run added (from `agent_end`)."""
        messages: list[AgentMessage] = []
        async for event in self:
            if isinstance(event, AgentEnd):
                messages = list(event.messages)
        return messages

    async def aclose(self) -> None:
        """Stop receiving; the run is cancelled at its next event."""
        self._receive.close()


class AgentLoopStream:
    """What `agent_loop()` returns: a run, used once, in one of two ways.

    * `async with agent_loop(...) as events: async for event in events:` (the default): the run
      goes on in a task the block owns; leaving the block cancels it before the block returns.
    * `async for event in agent_loop(...):` (bare): the run is an async generator of its own
      events; the same events in the same order, but a tool batch's events arrive when the batch
      has ended. Leaving the loop early closes the run when the generator is closed: at once
      inside `async with contextlib.aclosing(agent_loop(...)) as events:`, else when the
      interpreter finalizes it.
    """

    __slots__ = ("_buffer", "_run", "_used")

    def __init__(self, run: _RunArguments, buffer: int) -> None:
        self._run = run
        self._buffer = buffer
        self._used: object = None  # the context manager or the generator it became, or _CLOSED

    def _arguments(self) -> _RunArguments:
        """The run's arguments, for its one use."""
        if self._used is not None:
            raise RuntimeError("an agent_loop() run can be used only once")
        return self._run

    async def __aenter__(self) -> AgentEventStream:
        cm = self._used = _open(self._arguments(), self._buffer)
        return await cm.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        cm = self._used
        assert isinstance(cm, AbstractAsyncContextManager), "__aexit__ without __aenter__"
        return bool(await cm.__aexit__(exc_type, exc, tb))  # noqa: ASYNC102 - the stream's own exit, bounded there

    def __aiter__(self) -> AsyncGenerator[AgentEvent, None]:
        generator = self._used = open_run(*self._arguments())
        return generator

    async def aclose(self) -> None:
        """Close a bare run (what `contextlib.aclosing` calls): what it opened is closed on return."""
        used = self._used
        if used is None:
            self._used = _CLOSED
        elif isinstance(used, AsyncGeneratorType):
            await used.aclose()

    def __await__(self) -> NoReturn:
        raise TypeError(_USAGE)


class _Failure:
    """The run's failure, sent after its last event: the consumer's iteration raises it."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


@asynccontextmanager
async def _open(arguments: _RunArguments, buffer: int) -> AsyncGenerator[AgentEventStream, None]:
    """The stream of `async with`: the run goes on in a task of the block's task group, its sink
    a memory object stream the block's consumer reads (`trio.as_safe_channel`'s shape). Leaving
    the block cancels the run; the run's failure reaches the consumer as the stream's last item."""
    prompts, context, config, signal, stream_fn = arguments
    send, receive = anyio.create_memory_object_stream[AgentEvent | _Failure](buffer)
    waiting = anyio.Lock()  # held while an item waits for room: the later ones line up behind it
    start = anyio.Event()
    run_scope = anyio.CancelScope()

    async def emit(item: AgentEvent | _Failure) -> None:
        # Items keep the order of the calls, whichever task makes them: an item that finds no
        # room waits its turn in the lock's queue (first come, first served), and no later item
        # goes past it.
        try:
            if not waiting.locked():
                try:
                    send.send_nowait(item)
                    return
                except anyio.WouldBlock:
                    pass
            async with waiting:
                await send.send(item)
        except anyio.BrokenResourceError:
            # Nobody listens any more: stop the whole run as a cancellation (several parallel
            # tools may notice at once; an error from each would surface as a group).
            run_scope.cancel()
            await anyio.lowlevel.checkpoint()

    async def produce() -> None:
        # The sending side closes once the run has ended, every task of it with it: the
        # iteration ends, and no delivery finds the stream closed under it.
        with send, run_scope:
            # Parked until the first pull (spawning the task then instead lets trio run the run
            # before the consumer waits, and a run failing at once would cancel it unread).
            await start.wait()
            run_sink = sink(emit, config.observe)
            try:
                await deliver(open_run(prompts, context, config, signal, stream_fn, run_sink), run_sink)
            except Exception as exc:
                await _send_failure(send, exc)

    consumers: BaseException | None = None  # what the consumer's block raised: it wins
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            with receive:
                try:
                    yield AgentEventStream(receive, start)
                except BaseException as exc:
                    consumers = exc
                    raise
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single_exception(group, prefer=consumers) from None


async def _send_failure(send: MemoryObjectSendStream[AgentEvent | _Failure], error: Exception) -> None:
    """Send the run's failure after its events; raise it when nobody reads any more (the consumer
    left the block: its own exception, if it raised one, then keeps this one as its context)."""
    failure = _Failure(error)
    try:
        try:
            send.send_nowait(failure)
        except anyio.WouldBlock:
            await send.send(failure)
    except anyio.BrokenResourceError:
        raise error from None


def _check_buffer(max_buffer_size: object) -> int:
    if isinstance(max_buffer_size, bool) or not isinstance(max_buffer_size, int) or max_buffer_size < 0:
        raise ValueError(f"max_buffer_size must be an int >= 0, got {max_buffer_size!r}")
    return max_buffer_size


def agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    *,
    max_buffer_size: int = DEFAULT_BUFFER,
) -> AgentLoopStream:
    """Run the agent from new prompts and stream its events.

    Example:
        ```python
        async with agent_loop([UserMessage(content="Hi")], context, config) as events:
            async for event in events:
                print(event.type)

        async for event in agent_loop([UserMessage(content="Hi")], context, config):
            print(event.type)  # bare: a tool batch's events arrive when the batch has ended
        ```

    The run starts when the first event is pulled and may run up to `max_buffer_size` events
    ahead of the consumer (0 makes it a rendezvous: one event at a time). Bad arguments raise
    here, before anything runs.

    Cancellation and early exit: leaving the block (by `break`, an exception, or an outer
    cancellation) cancels the run, the model stream and any running tool before the block
    returns; the consumer's own exception comes out unwrapped, a callback's exception comes out of
    the iteration after the events before it, and an outer timeout stays a plain cancellation. To
    stop a run but still get its aborted message and `agent_end`, call `signal.abort()` and keep
    iterating. A bare
    `async for` is cleaned up when its generator is closed: at once inside
    `contextlib.aclosing(agent_loop(...))`, else when the event loop finalizes it.
    """
    prompts = check_messages(prompts, "prompts")
    check_context(context)
    check_config(config)
    check_signal(signal)
    fn = resolve_stream_fn(stream_fn)
    buffer = _check_buffer(max_buffer_size)
    return AgentLoopStream((prompts, context, config, signal, fn), buffer)


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    *,
    max_buffer_size: int = DEFAULT_BUFFER,
) -> AgentLoopStream:
    """Continue from `context` without new messages and stream the events (see `agent_loop`).

    Raises `InvalidContextError` at once when the context is empty or ends with an assistant
    message.
    """
    check_context(context)
    check_continue(context)
    check_config(config)
    check_signal(signal)
    fn = resolve_stream_fn(stream_fn)
    buffer = _check_buffer(max_buffer_size)
    return AgentLoopStream((None, context, config, signal, fn), buffer)
