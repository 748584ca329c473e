"""Small helpers shared by the loop, the stream and the Agent."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import anyio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("exception_text", "single_exception")


def exception_text(exc: BaseException) -> str:
    """What an exception says: its text, else its class name (also when its `__str__` fails)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return text or type(exc).__name__


def single_exception(group: BaseExceptionGroup[BaseException], prefer: BaseException | None = None) -> BaseException:
    """The one exception a task group's group stands for, or the group itself (trio's rule).

    KeyboardInterrupt and SystemExit win; then a single non-cancellation exception; a group of
    cancellations only is its first cancellation, so an outer timeout stays a timeout; several
    real failures stay a group, because hiding one of them is a bug. `prefer` (the caller's own
    exception, e.g. raised in the body of an `async with` while the cleanup of its tasks failed
    too) wins over the others, which it keeps as its `__context__`: they happened while it was
    being handled.
    """
    leaves = list(_leaves(group))
    for exc in leaves:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return exc
    cancelled = anyio.get_cancelled_exc_class()
    real = [exc for exc in leaves if not isinstance(exc, cancelled)]
    if prefer is not None and any(exc is prefer for exc in real):
        others = [exc for exc in real if exc is not prefer]
        if others:
            prefer.__context__ = others[0] if len(others) == 1 else BaseExceptionGroup("during cleanup", others)
        return prefer
    if len(real) == 1:
        return real[0]
    if not real and leaves:
        return leaves[0]
    return group


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    exc: BaseException
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
