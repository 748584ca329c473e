"""W5: what any loop can reach on this machine (transports alone, no agent).

Each function moves `n` slotted dataclasses from a producer to a consumer that does the same
trivial work as the agent consumers (a type check and a counter), or measures the W3 floor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

BACKENDS = ("asyncio", "trio")
BUFFER = 64


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


WORKLOADS = {
    "async_generator": async_generator,
    "stream_buffer0": stream_buffer0,
    "stream_nowait": stream_nowait,
    "gather_sleeps": gather_sleeps,
}
