"""Progress updates: a tool reports progress without waiting for the listeners.

As in the reference, `on_update(partial)` hands the `tool_execution_update` event over and
returns at once; the run delivers updates in order from a task of its own, and a call is
finalized only after every update it reported has been delivered. Awaiting the returned object
waits for that delivery (backpressure for a tool that wants it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = ("Delivery", "UpdatePump")


class Delivery:
    """Awaitable: done when the update has been delivered (awaiting it is optional)."""

    __slots__ = ("_begun", "_done", "_event", "_started")

    def __init__(self) -> None:
        self._done = False
        self._begun = False
        self._event: anyio.Event | None = None
        self._started: anyio.Event | None = None

    def begin(self) -> None:
        self._begun = True
        if self._started is not None:
            self._started.set()

    async def began(self) -> None:
        """Return once the delivery has begun."""
        if self._begun:
            return
        if self._started is None:
            self._started = anyio.Event()
        await self._started.wait()

    def set(self) -> None:
        self._done = True
        if self._event is not None:
            self._event.set()

    @property
    def delivered(self) -> bool:
        """Whether every listener has processed the update."""
        return self._done

    async def wait(self) -> None:
        """Return once the update is delivered."""
        if self._done:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def __await__(self) -> Generator[Any, None, None]:
        return self.wait().__await__()


class UpdatePump:
    """Delivers update events as the reference does: each one begins at once, in the order reported.

    Every update is emitted by a task of its own, so a slow listener delays neither the tool nor
    the next update (as JavaScript's un-awaited `emit` promises); a task begins only after the
    previous one has run up to its first `await`, whatever order the scheduler picks.
    """

    __slots__ = ("_emit", "_previous", "_task_group")

    def __init__(self, emit: Callable[[Any], Awaitable[None]], task_group: TaskGroup) -> None:
        self._emit = emit
        self._task_group = task_group
        self._previous: Delivery | None = None

    def push(self, event: Any) -> Delivery:
        delivery = Delivery()
        self._task_group.start_soon(self._deliver, event, self._previous, delivery)
        self._previous = delivery
        return delivery

    async def _deliver(self, event: Any, previous: Delivery | None, delivery: Delivery) -> None:
        if previous is not None:
            await previous.began()
        delivery.begin()
        try:
            await self._emit(event)
        finally:
            delivery.set()
