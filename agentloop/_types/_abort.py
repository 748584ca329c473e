"""`AbortSignal`: a synchronous, idempotent abort that the loop turns into events, not exceptions."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from types import TracebackType

import anyio

__all__ = ("AbortCut", "AbortSignal")


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
            except BaseException as exc:  # every callback runs; the first failure is raised after  # noqa: ASYNC103 - re-raised below (callbacks are plain functions)
                failure = failure or exc
        if failure is not None:
            raise failure

    async def wait(self) -> None:
        """Return once the signal is aborted (for tools that wait on it); a checkpoint, as anyio's waits are."""
        if self._aborted:
            await anyio.lowlevel.checkpoint()
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

    def cancel_scope(self, grace: float = 0.0) -> AbortCut:
        """A cancel scope, for a `with` block, that the abort cancels at once or `grace` seconds after it.

        `scope.cancelled_caught` then tells an abort from an outer cancellation (which
        propagates as usual).
        """
        return AbortCut(self, grace)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self._aborted})"


def _noop() -> None:
    pass


class AbortCut:
    """A cancel scope that an abort cancels: at once, or `grace` seconds later.

    The one bridge from an `AbortSignal` to a cancellation, always used as a `with` block: by the
    loop around a model stream and a tool call, and by providers and tools through
    `signal.cancel_scope()`. The scope catches only its own cancellation: `cancelled_caught`
    says the abort cut the block; an outer cancellation propagates.

    `deadline` (anyio's clock) bounds the block too: `cancelled_caught` is then the abort's cut
    or the deadline (the signal tells which).

    While `held` is True an abort does not cut the block (the loop holds the cut while it delivers
    an event: a listener that aborts must not cancel its own delivery); `cut()` applies it after.
    """

    __slots__ = ("_grace", "_key", "_scope", "_signal", "cancelled_caught", "held")

    def __init__(self, signal: AbortSignal, grace: float = 0.0, *, deadline: float = math.inf) -> None:
        self._signal = signal
        self._grace = grace
        self._scope = anyio.CancelScope(deadline=deadline)
        self._key = -1
        self.held = False
        self.cancelled_caught = False
        """Whether the abort cut the block (set when the block ends)."""

    def __enter__(self) -> AbortCut:
        self._scope.__enter__()
        signal = self._signal
        if signal._aborted:
            self.cut()
        else:
            self._key = signal._listen(self._on_abort)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._signal._callbacks.pop(self._key, None)
        scope = self._scope
        swallowed = scope.__exit__(exc_type, exc, tb)
        self.cancelled_caught = scope.cancelled_caught
        return bool(swallowed)

    def _on_abort(self) -> None:
        if not self.held:
            self.cut()

    def cut(self) -> None:
        """Cut the block as the abort does: at once, or after the grace period."""
        if self._grace <= 0:
            self._scope.cancel()
        else:
            self._scope.deadline = min(self._scope.deadline, anyio.current_time() + self._grace)
