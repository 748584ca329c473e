"""A batch's progress updates: reported at once, their deliveries begun in the order reported.

As in the reference, `on_update(partial)` hands the `tool_execution_update` event over and returns
at once: a slow listener holds up neither the tool nor the next update (in JavaScript each
un-awaited `emit` runs up to its first wait, then the next one begins). Every update of a batch,
whichever call reports it, goes through one memory object stream to one task that begins their
deliveries in the order reported, each in a task of its own (`TaskGroup.start` returns once the
delivery has run up to its first wait). A call counts as finalized only after every update it
reported has been delivered. Awaiting what `on_update` returns waits for that update's delivery
(backpressure for a tool that wants it). An update reported after its call finished is ignored.

Worked examples (c1, c2 calls of one batch; "u" is a `tool_execution_update`):

* c1 reports twice, then c2 once: `u(c1), u(c1), u(c2)`.
* c2 has reported already (its updates have been delivered) and c1 not; then c1 and c2 report
  one right after the other, as two tools that wake in the same scheduler pass do: `u(c1), u(c2)`,
  the order reported. (With a stream per call, c2's update could overtake c1's: c2's way to the
  sink was already open, c1's had first to be set up.)
* A listener takes 50 ms over c1's update: c2's update, reported meanwhile, is delivered without
  waiting for it (its delivery begins once c1's has run up to its first wait).
* c1 reports after it has finished (a task it left behind): ignored.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import anyio

from .._types._events import ToolExecutionUpdate
from ._run import Sink

if TYPE_CHECKING:
    from typing import TypeAlias

    from anyio.abc import TaskGroup, TaskStatus
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ("DELIVERED", "CallUpdates", "Delivery", "ProgressUpdates")


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

_Queue: TypeAlias = "tuple[ToolExecutionUpdate, anyio.Event]"


class ProgressUpdates:
    """A batch's updates, in a `with` block: `call()` gives each call its reporter; a task of
    `task_group` begins the deliveries in the order reported. Leaving the block ends that task
    once what was reported has been delivered."""

    __slots__ = ("_emit", "_send", "_task_group")

    def __init__(self, emit: Sink, task_group: TaskGroup) -> None:
        self._emit = emit
        self._task_group = task_group
        self._send: MemoryObjectSendStream[_Queue] | None = None

    def __enter__(self) -> ProgressUpdates:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._send is not None:
            self._send.close()

    def call(self) -> CallUpdates:
        """The reporter of a call that begins."""
        return CallUpdates(self)

    def _queue(self, event: ToolExecutionUpdate) -> Delivery:
        if self._send is None:  # the batch's first update starts the task that delivers them
            self._send, receive = anyio.create_memory_object_stream[_Queue](math.inf)
            self._task_group.start_soon(self._deliver, receive)
        done = anyio.Event()
        self._send.send_nowait((event, done))
        return Delivery(done)

    async def _deliver(self, receive: MemoryObjectReceiveStream[_Queue]) -> None:
        with receive:
            async for event, done in receive:
                await self._task_group.start(self._deliver_one, event, done)

    async def _deliver_one(
        self, event: ToolExecutionUpdate, done: anyio.Event, *, task_status: TaskStatus[None]
    ) -> None:
        task_status.started()
        await self._emit(event)
        done.set()


class CallUpdates:
    """One call's updates: `report` queues an event on its batch's stream."""

    __slots__ = ("_batch", "_deliveries", "finished")

    def __init__(self, batch: ProgressUpdates) -> None:
        self._batch = batch
        self._deliveries: list[Delivery] = []
        self.finished = False

    def report(self, event: ToolExecutionUpdate) -> Delivery:
        """Queue an update for delivery (ignored once the call has finished)."""
        if self.finished:
            return DELIVERED
        delivery = self._batch._queue(event)
        self._deliveries.append(delivery)
        return delivery

    def close(self) -> None:
        """The call has finished (or was cancelled): later updates are ignored."""
        self.finished = True

    async def delivered(self) -> None:
        """Return once every update reported before `close()` is delivered."""
        for delivery in self._deliveries:
            await delivery.wait()
