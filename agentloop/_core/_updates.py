"""A tool call's progress updates: reported at once, their deliveries begun in order by one task.

As in the reference, `on_update(partial)` hands the `tool_execution_update` event over and returns
at once: a slow listener holds up neither the tool nor the next update (in JavaScript each
un-awaited `emit` runs up to its first wait, then the next one begins). The updates of one call go
through a memory object stream to one task that begins their deliveries in the order reported,
each in a task of its own (`TaskGroup.start` returns once the delivery has run up to its first
wait). The call counts as finalized only after every update it reported has been delivered.
Awaiting what `on_update` returns waits for that update's delivery (backpressure for a tool that
wants it). An update reported after the call finished is ignored.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._types._events import ToolExecutionUpdate
from ._run import Sink

__all__ = ("DELIVERED", "Delivery", "ProgressUpdates")


class Delivery:
    """What `on_update` returns: awaiting it (optional) waits until the update has been delivered."""

    __slots__ = ("_done",)

    def __init__(self, done: anyio.Event | None) -> None:
        self._done = done  # set once delivered; None: nothing to deliver

    @property
    def delivered(self) -> bool:
        """Whether every listener has processed the update."""
        return self._done is None or self._done.is_set()

    async def wait(self) -> None:
        """Return once the update is delivered."""
        if self._done is None:
            await anyio.lowlevel.checkpoint()
        else:
            await self._done.wait()

    def __await__(self) -> Generator[Any, None, None]:
        return self.wait().__await__()


DELIVERED = Delivery(None)
"""The answer to an update that is not delivered (reported after its call finished)."""


class ProgressUpdates:
    """One call's updates: `report` queues an event; a task of `task_group` begins their deliveries in order."""

    __slots__ = ("_deliveries", "_emit", "_send", "_task_group", "finished")

    def __init__(self, emit: Sink, task_group: TaskGroup) -> None:
        self._emit = emit
        self._task_group = task_group
        self._send: MemoryObjectSendStream[tuple[ToolExecutionUpdate, Delivery]] | None = None
        self._deliveries: list[Delivery] = []
        self.finished = False

    def report(self, event: ToolExecutionUpdate) -> Delivery:
        """Queue an update for delivery (ignored once the call has finished)."""
        if self.finished:
            return DELIVERED
        if self._send is None:  # the call's first update starts the task that delivers them
            self._send, receive = anyio.create_memory_object_stream[tuple[ToolExecutionUpdate, Delivery]](math.inf)
            self._task_group.start_soon(self._deliver, receive)
        delivery = Delivery(anyio.Event())
        self._deliveries.append(delivery)
        self._send.send_nowait((event, delivery))
        return delivery

    def close(self) -> None:
        """The call has finished (or was cancelled): later updates are ignored."""
        self.finished = True
        if self._send is not None:
            self._send.close()

    async def delivered(self) -> None:
        """Return once every update reported before `close()` is delivered."""
        for delivery in self._deliveries:
            await delivery.wait()

    async def _deliver(self, receive: MemoryObjectReceiveStream[tuple[ToolExecutionUpdate, Delivery]]) -> None:
        with receive:
            async for event, delivery in receive:
                await self._task_group.start(self._deliver_one, event, delivery)

    async def _deliver_one(
        self, event: ToolExecutionUpdate, delivery: Delivery, *, task_status: TaskStatus[None]
    ) -> None:
        task_status.started()
        await self._emit(event)
        assert delivery._done is not None
        delivery._done.set()
