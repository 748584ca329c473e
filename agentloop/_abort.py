"""`AbortSignal`: a synchronous, idempotent abort that the loop turns into events, not exceptions."""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio

__all__ = ("GRACE", "IDLE", "NOW", "AbortScope", "AbortSignal")

IDLE, NOW, GRACE = 0, 1, 2
"""What an abort does to an `AbortScope` in each phase: nothing, cancel it at once, or later."""


class AbortSignal:
    """Tells a run to stop as soon as it can, and still finish its event protocol.

    `abort()` is synchronous and may be called from any task of the event loop (from another
    thread use `anyio.from_thread.run_sync(signal.abort)`). What it does to a run:

    * the model stream is cancelled at once and ends as an aborted assistant message;
    * tools see `signal.aborted` (and `await signal.wait()` returns); a tool still running after
      the loop's grace period is cancelled and answered with "Operation aborted";
    * tool calls not started yet are answered with "Operation aborted";
    * the run then ends with `turn_end` and `agent_end`.

    An outer timeout or cancellation is never an abort: it propagates as a cancellation.
    """

    __slots__ = ("_aborted", "_callbacks", "_event", "_next_key")

    def __init__(self) -> None:
        self._aborted = False
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_key = 0
        self._event: anyio.Event | None = None

    @property
    def aborted(self) -> bool:
        """Whether `abort()` has been called."""
        return self._aborted

    def abort(self) -> None:
        """Abort the run. Calling it again does nothing."""
        if self._aborted:
            return
        self._aborted = True
        if self._event is not None:
            self._event.set()
        callbacks = list(self._callbacks.values())
        self._callbacks.clear()
        failure: BaseException | None = None
        for callback in callbacks:
            try:
                callback()
            except BaseException as exc:  # every callback runs; the first failure is raised after
                failure = failure or exc
        if failure is not None:
            raise failure

    async def wait(self) -> None:
        """Return once the signal is aborted (for tools that wait on it)."""
        if self._aborted:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def on_abort(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` when the signal aborts (at once if it already has).

        Returns a function that removes the callback.
        """
        if not callable(callback):
            raise TypeError(f"on_abort expects a callable, got {callback!r}")
        if self._aborted:
            callback()
            return _noop
        return partial(self._callbacks.pop, self._listen(callback), None)  # type: ignore[return-value]  # its value is unused

    def _listen(self, callback: Callable[[], None]) -> int:
        """`on_abort` for the loop's own callbacks (never aborted yet): the key that removes it."""
        key = self._next_key
        self._next_key = key + 1
        self._callbacks[key] = callback
        return key

    @contextmanager
    def cancel_scope(self, grace: float = 0.0) -> Generator[anyio.CancelScope, None, None]:
        """A cancel scope that the abort cancels, at once or `grace` seconds after it.

        `scope.cancelled_caught` then tells an abort from an outer cancellation.
        """
        scope = anyio.CancelScope()

        def cancel() -> None:
            if grace <= 0:
                scope.cancel()
            else:
                scope.deadline = min(scope.deadline, anyio.current_time() + grace)

        remove = self.on_abort(cancel)
        try:
            with scope:
                yield scope
        finally:
            remove()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self._aborted})"


def _noop() -> None:
    pass


class AbortScope:
    """The cancel scope an abort cuts: a model stream at once, a tool `grace` seconds later.

    A run keeps one open from one model or tool call to the next, in its own task (a cancel scope
    costs 2-7 us to enter and leave, a short tool turn ~35 us in all), and enters a fresh one only
    after an abort has touched it. Between the calls (`phase` IDLE: events being delivered, hooks) an abort
    does nothing to it. (A tool call in a task of its own is cut through the task's own cancel
    scope instead: see `_Batch` in `_execution.py`.)

    Each call is `enter(phase)`, then `leave()` when it returns, or `leave(exc)` when it raises:
    True means `exc` was the abort's cut, swallowed. `close(exc)` at the end of the run.
    """

    __slots__ = ("_armed", "_factory", "_grace", "_key", "_scope", "_signal", "phase")

    def __init__(self, signal: AbortSignal, grace: float, factory: Callable[[], Any]) -> None:
        self._signal = signal
        self._grace = grace
        self._factory = factory  # the backend's CancelScope class: cheaper than anyio's factory
        self._scope: Any = None
        self._armed = False  # an abort cancelled the scope or set its deadline
        self.phase = IDLE
        # The scope itself is the callback (`__call__`): no bound method or remover to make.
        self._key = -1 if signal._aborted else signal._listen(self)

    def enter(self, phase: int) -> None:
        scope = self._scope
        if scope is None:
            scope = self._scope = self._factory()
            scope.__enter__()
        self.phase = phase
        if self._signal._aborted:
            self._on_abort()

    def leave(self, exc: BaseException | None = None) -> bool:
        self.phase = IDLE
        if not self._armed:
            return False  # stays open for the next call
        return self.close(exc)

    def close(self, exc: BaseException | None = None) -> bool:
        """Exit the scope, if open, and stop listening to the signal (armed: it has aborted)."""
        self.phase = IDLE
        self._signal._callbacks.pop(self._key, None)
        scope, self._scope, self._armed = self._scope, None, False
        if scope is None:
            return False
        if exc is None:
            scope.__exit__(None, None, None)
            return False
        return bool(scope.__exit__(type(exc), exc, exc.__traceback__))

    def _on_abort(self) -> None:
        phase = self.phase
        if phase == IDLE:
            return
        self._armed = True
        scope = self._scope
        if phase == NOW:
            scope.cancel()
        else:
            scope.deadline = min(scope.deadline, anyio.current_time() + self._grace)

    __call__ = _on_abort  # what the signal calls
