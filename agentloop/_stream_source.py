"""What a stream function returned, opened the one way its consumers need.

A stream function returns an async iterator of events, an async context manager yielding one, or
an awaitable of either (`StreamSource`). `opened_stream` awaits and enters it, checks that it
iterates, and closes the iterator when the block ends however it ends: in the task that read it,
shielded from a cancellation and bounded by `CLEANUP_TIMEOUT`. It holds no cancel scope while the
block runs, so an async generator may keep it open across its own `yield`s.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ._constants import CLEANUP_TIMEOUT
from ._events import AssistantMessageEvent

__all__ = ("not_a_stream", "opened_stream")


def not_a_stream(value: object) -> TypeError:
    """The error for a stream function's result that is not an async iterator of events."""
    return TypeError(
        "a stream function must return an async iterator of AssistantMessageEvent or an async "
        f"context manager yielding one, got {type(value).__name__}"
    )


@asynccontextmanager
async def opened_stream(source: Any) -> AsyncIterator[AsyncIterator[AssistantMessageEvent]]:
    """The events of what a stream function returned (see the module's docstring).

    Raises TypeError (`not_a_stream`) when the result, awaited and entered, does not iterate.
    """
    if inspect.isawaitable(source):
        source = await source
    if hasattr(source, "__aenter__"):
        async with source as events, _closing(events) as iterator:
            yield iterator
    else:
        async with _closing(source) as iterator:
            yield iterator


@asynccontextmanager
async def _closing(events: Any) -> AsyncIterator[AsyncIterator[AssistantMessageEvent]]:
    if not hasattr(events, "__anext__"):
        raise not_a_stream(events)
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                await aclose()
