"""Progress updates, and `Flag`: a one-shot event that costs nothing until someone waits.

As in the reference, `on_update(partial)` hands the `tool_execution_update` event over and
returns at once: the tool is not held up by the listeners. Updates are delivered in the order
reported (through a task of the run's task group when a delivery has to wait), and the call is
finalized only after every update it reported has been delivered. Awaiting what `on_update`
returns waits for that delivery (backpressure for a tool that wants it).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import CoroutineType
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = ("DELIVERED", "Delivery", "Flag", "UpdatePump", "settle")


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


async def settle(pending: Any) -> None:
    """Wait for what a plain sink returned for an event (it must be None or an awaitable)."""
    await _check_pending(pending)


def _check_pending(pending: object) -> Awaitable[None]:
    """What a plain sink returned for an event, checked: it must be None or an awaitable."""
    if type(pending) is not CoroutineType and not inspect.isawaitable(pending):
        raise TypeError(f"emit must return None or an awaitable, got {type(pending).__name__}")
    return pending


class UpdatePump:
    """Delivers one tool call's updates as the reference does: each begins at once, in order.

    A plain sink is called at once (the un-awaited `emit` of JavaScript runs up to its first
    `await` before `onUpdate` returns); what it returns to await, and every delivery through an
    async sink, is driven by a task of the run's task group, so a slow listener delays neither
    the tool nor the next update. A delivery begins only after the previous one has begun,
    whatever order the scheduler picks. `drained()` returns once every update is delivered.
    """

    __slots__ = ("_deliver", "_idle", "_in_flight", "_plain", "_previous", "_task_group")

    def __init__(self, deliver: Callable[[Any], Any], plain: bool, task_group: TaskGroup | None) -> None:
        self._deliver = deliver  # the run's sink: returns None or what to wait for
        self._plain = plain  # a plain function (its synchronous part may run at once)
        self._task_group = task_group
        self._previous: Delivery | None = None
        self._in_flight = 0
        self._idle = Flag()  # set when no delivery is in flight

    def push(self, event: Any) -> Delivery:
        previous = self._previous
        if self._plain and (previous is None or previous.begun.is_set()):
            try:
                pending = self._deliver(event)
            except Exception as exc:  # a listener's failure fails the run, not the tool reporting
                pending = _raise(exc)
            if pending is None:
                return DELIVERED
            _check_pending(pending)
            delivery = self._track()
            delivery.begun.set()
            self._spawn(self._finish, pending, delivery)
        else:
            delivery = self._track()
            self._spawn(self._deliver_later, event, previous, delivery)
        return delivery

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        if self._task_group is None:  # a bare run's sink never makes a delivery wait
            raise RuntimeError("a progress update had to wait, but the run has no task group")
        self._task_group.start_soon(fn, *args)

    def _track(self) -> Delivery:
        delivery = self._previous = Delivery()
        if not self._in_flight:
            self._idle = Flag()
        self._in_flight += 1
        return delivery

    def _done(self, delivery: Delivery) -> None:
        delivery.begun.set()
        delivery.done.set()
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()

    async def drained(self) -> None:
        """Return once every update pushed so far has been delivered."""
        if self._in_flight:
            await self._idle.wait()

    async def _deliver_later(self, event: Any, previous: Delivery | None, delivery: Delivery) -> None:
        try:
            if previous is not None:
                await previous.begun.wait()
            delivery.begun.set()
            pending = self._deliver(event)
            if pending is not None:
                await settle(pending)
        finally:
            self._done(delivery)

    async def _finish(self, pending: Awaitable[None], delivery: Delivery) -> None:
        try:
            await pending
        finally:
            self._done(delivery)


async def _raise(exc: Exception) -> None:  # noqa: ASYNC124 - an awaitable that raises
    raise exc


DELIVERED = Delivery()
DELIVERED.begun.set()
DELIVERED.done.set()
