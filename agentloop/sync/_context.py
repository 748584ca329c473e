"""`sync_context`: an async context manager entered from synchronous code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, Literal, TypeVar

from anyio.from_thread import start_blocking_portal

__all__ = ("sync_context",)

T = TypeVar("T")


@contextmanager
def sync_context(
    manager: AbstractAsyncContextManager[T],
    *,
    backend: Literal["asyncio", "trio"] = "asyncio",
    backend_options: dict[str, Any] | None = None,
) -> Iterator[T]:
    """Enter an async context manager from synchronous code, for as long as the `with` block.

    Example:
        ```python
        with sync_context(embedded_model()) as (model, stream_fn):
            agent = SyncAgent(Agent(model=model, stream_fn=stream_fn))
        ```

    The manager is entered and exited on an event loop running in a thread of its own (anyio's
    blocking portal), which keeps running for the whole block: what it starts (a server, a
    subprocess) lives until the block ends, even while the calling thread has an event loop of
    its own running. An exception in the block (Ctrl-C too) reaches the manager's `__aexit__`.
    What the manager yields must not be bound to its loop if it is used on another one (as
    `SyncAgent`'s calls do): URLs, models and plain stream functions are fine.
    """
    if not isinstance(manager, AbstractAsyncContextManager):
        raise TypeError(f"manager must be an async context manager, got {type(manager).__name__}")
    with start_blocking_portal(backend, backend_options) as portal, portal.wrap_async_context_manager(manager) as value:
        yield value
