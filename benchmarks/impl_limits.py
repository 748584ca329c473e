"""W5: what any loop can reach on this machine (transports alone, and a minimal agent loop).

Each transport function moves `n` slotted dataclasses from a producer to a consumer that does the
same trivial work as the agent consumers (a type check and a counter), or measures the W3 floor.
The minimal loop (as in bench-anchors.md) is not a product: typed slotted events, a stateless
scripted streaming model that keeps its partial up to date, tool dispatch without validation, a
transcript, and events through a memory-object stream with `send_nowait`/`receive_nowait`. It
shows what the design can reach before validation, hooks, queues, abort and ordering guarantees.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

BACKENDS = ("asyncio", "trio")
BUFFER = 128  # agent_loop's default


@dataclass(slots=True)
class Item:
    index: int
    text: str


async def _generate(n: int) -> AsyncIterator[Item]:
    for i in range(n):
        yield Item(i, "abc ")


async def async_generator(n: int) -> int:
    """A plain async generator consumed with `async for`."""
    seen = 0
    async for item in _generate(n):
        if type(item) is Item:
            seen += 1
    return seen


async def stream_buffer0(n: int) -> int:
    """An anyio memory-object stream of buffer 0: `await send()` / `await receive()` per item."""
    send, receive = anyio.create_memory_object_stream[Item](0)
    seen = 0

    async def produce() -> None:
        async with send:
            for i in range(n):
                await send.send(Item(i, "abc "))

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async with receive:
            async for item in receive:
                if type(item) is Item:
                    seen += 1
    return seen


async def stream_nowait(n: int) -> int:
    """A buffered anyio memory-object stream, `send_nowait` / `receive_nowait` while they succeed."""
    send, receive = anyio.create_memory_object_stream[Item](BUFFER)
    seen = 0

    async def produce() -> None:
        async with send:
            for i in range(n):
                item = Item(i, "abc ")
                try:
                    send.send_nowait(item)
                except anyio.WouldBlock:
                    await send.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async with receive:
            while True:
                try:
                    item = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        item = await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                if type(item) is Item:
                    seen += 1
    return seen


async def gather_sleeps(n: int) -> int:
    """The W3 floor: `n` tasks sleeping 10 ms each in an anyio task group."""
    done = 0

    async def sleeper() -> None:
        nonlocal done
        await anyio.sleep(0.01)
        done += 1

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(sleeper)
    return done


# --- the minimal loop ------------------------------------------------------------------------


@dataclass(slots=True)
class Message:
    role: str
    chunks: list[str]
    tool_calls: list[tuple[str, str]]  # (id, tool name)
    tool_call_id: str = ""


@dataclass(slots=True)
class Delta:  # a model event: one text chunk and the partial message after it
    delta: str
    partial: Message


@dataclass(slots=True)
class Done:
    message: Message


@dataclass(slots=True)
class AgentEvent:  # the loop's events: kind is agent_start, turn_start, message_update, ...
    kind: str
    payload: object = None


async def _minimal_model(transcript: list[Message], deltas: int, turns: int) -> AsyncIterator[object]:
    last = transcript[-1]
    turn = int(last.tool_call_id[1:]) + 1 if last.role == "toolResult" else 0
    partial = Message("assistant", [], [])
    if turn < turns:  # toolcall_start, toolcall_delta, toolcall_end
        partial.tool_calls.append((f"c{turn}", "ok"))
        for _ in range(3):
            yield Delta("{}", partial)
    else:
        for _ in range(deltas):
            partial.chunks.append("abc ")
            yield Delta("abc ", partial)
    yield Done(partial)


async def _ok_tool() -> str:
    return "ok"


async def _minimal_loop(send: MemoryObjectSendStream[AgentEvent], deltas: int, turns: int) -> None:
    tools = {"ok": _ok_tool}
    transcript = [Message("user", ["go"], [])]

    async def emit(event: AgentEvent) -> None:
        try:
            send.send_nowait(event)
        except anyio.WouldBlock:
            await send.send(event)

    async with send:
        await emit(AgentEvent("agent_start"))
        while True:
            await emit(AgentEvent("turn_start"))
            await emit(AgentEvent("message_start"))
            async for event in _minimal_model(transcript, deltas, turns):  # runs to its end: no finalizer
                if type(event) is Done:
                    message = event.message
                else:
                    await emit(AgentEvent("message_update", event))
            transcript.append(message)
            await emit(AgentEvent("message_end", message))
            for call_id, name in message.tool_calls:
                await emit(AgentEvent("tool_execution_start", call_id))
                output = await tools[name]()
                result = Message("toolResult", [output], [], call_id)
                await emit(AgentEvent("tool_execution_end", result))
                await emit(AgentEvent("message_start", result))
                await emit(AgentEvent("message_end", result))
                transcript.append(result)
            await emit(AgentEvent("turn_end", message))
            if not message.tool_calls:
                break
        await emit(AgentEvent("agent_end", transcript))


async def _minimal_run(deltas: int, turns: int, kind: str) -> int:
    send, receive = anyio.create_memory_object_stream[AgentEvent](BUFFER)
    return await _consume_minimal(receive, functools.partial(_minimal_loop, send, deltas, turns), kind)


async def _consume_minimal(
    receive: MemoryObjectReceiveStream[AgentEvent], loop: Callable[[], Awaitable[None]], kind: str
) -> int:
    """Run `loop` as the producer and count the events of `kind` (the consumer's trivial work)."""
    seen = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(loop)
        async with receive:
            while True:
                try:
                    event = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        event = await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                if event.kind == kind:
                    seen += 1
    return seen


async def minimal_w1(n: int) -> int:
    """W1 through the minimal loop: deltas seen by the consumer."""
    return await _minimal_run(n, 0, "message_update")


async def minimal_w2(turns: int) -> int:
    """W2 through the minimal loop: tool turns seen by the consumer."""
    return await _minimal_run(1, turns, "turn_end") - 1


async def minimal_w3(calls: int) -> int:
    """W3 through the minimal loop: one turn of `calls` tools that sleep 10 ms, each in a task and
    in a cancel scope of its own (what agentloop paid per parallel call before it cut a call
    through its task's own scope)."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](BUFFER)

    async def emit(event: AgentEvent) -> None:
        try:
            send.send_nowait(event)
        except anyio.WouldBlock:
            await send.send(event)

    async def call(call_id: str) -> None:
        with anyio.CancelScope():
            await anyio.sleep(0.01)
        await emit(AgentEvent("tool_execution_end", Message("toolResult", ["ok"], [], call_id)))

    async def loop() -> None:
        async with send:
            await emit(AgentEvent("agent_start"))
            await emit(AgentEvent("turn_start"))
            partial = Message("assistant", [], [])
            for j in range(calls):  # the calls stream in: toolcall_start, toolcall_delta, toolcall_end
                partial.tool_calls.append((f"c0_{j}", "sleep"))
                for _ in range(3):
                    await emit(AgentEvent("message_update", Delta("{}", partial)))
            await emit(AgentEvent("message_end", partial))
            for call_id, _ in partial.tool_calls:
                await emit(AgentEvent("tool_execution_start", call_id))
            async with anyio.create_task_group() as tg:
                for call_id, _ in partial.tool_calls:
                    tg.start_soon(call, call_id)
            for call_id, _ in partial.tool_calls:
                result = Message("toolResult", ["ok"], [], call_id)
                await emit(AgentEvent("message_start", result))
                await emit(AgentEvent("message_end", result))
            await emit(AgentEvent("turn_end"))
            await emit(AgentEvent("turn_start"))
            async for event in _minimal_model([Message("toolResult", ["ok"], [], "c0")], 1, 0):
                if type(event) is Delta:
                    await emit(AgentEvent("message_update", event))
            await emit(AgentEvent("turn_end"))
            await emit(AgentEvent("agent_end"))

    return await _consume_minimal(receive, loop, "tool_execution_end")


async def cancel_scopes(n: int) -> int:
    """`n` anyio cancel scopes created, entered and left (what one abortable step costs)."""
    done = 0
    for _ in range(n):
        with anyio.CancelScope():  # noqa: ASYNC100 - the scope itself is what is measured
            done += 1
    return done


WORKLOADS = {
    "minimal_w1": minimal_w1,
    "minimal_w2": minimal_w2,
    "minimal_w3": minimal_w3,
    "cancel_scopes": cancel_scopes,
    "async_generator": async_generator,
    "stream_buffer0": stream_buffer0,
    "stream_nowait": stream_nowait,
    "gather_sleeps": gather_sleeps,
}
