"""Progress updates, and `Flag`: a one-shot event that costs nothing until someone waits.

As in the reference, `on_update(partial)` hands the `tool_execution_update` event over and
returns at once: the tool is not held up by the listeners. Each update is delivered by a task of
the tool call's own task group, in the order reported, and the call is finalized only after every
update it reported has been delivered. Awaiting what `on_update` returns waits for that delivery
(backpressure for a tool that wants it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = ("Delivery", "Flag", "UpdatePump")


class Flag:
    """Set once; `wait()` returns when set. The underlying event exists only if someone waits."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: anyio.Event | None = None

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        """Return once the flag is set (at once, without a checkpoint, if it already is)."""
        if self._set:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


class Delivery:
    """Awaitable: done when the update has been delivered (awaiting it is optional)."""

    __slots__ = ("begun", "done")

    def __init__(self) -> None:
        self.begun = Flag()
        self.done = Flag()

    @property
    def delivered(self) -> bool:
        """Whether every listener has processed the update."""
        return self.done.is_set()

    async def wait(self) -> None:
        """Return once the update is delivered."""
        await self.done.wait()

    def __await__(self) -> Generator[Any, None, None]:
        return self.done.wait().__await__()


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
            await previous.begun.wait()
        delivery.begun.set()
        try:
            await self._emit(event)
        finally:
            delivery.done.set()
