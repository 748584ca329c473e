"""The final message of a model stream: what a durable engine's model step returns.

A durable engine runs the model call where the keys and the network are (a DBOS step, a Temporal
activity), consumes the provider's stream there, and records only the message of its terminal
event; the loop then gets `start` and `done` (or `error`) for that message.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

from ._types import AssistantMessage

__all__ = ("final_message",)


async def final_message(source: Any) -> AssistantMessage:
    """Consume what a stream function returned (an iterator, a context manager, or an awaitable of
    either); the message of its terminal event. RuntimeError if the stream ends without one."""
    if inspect.isawaitable(source):
        source = await source
    if hasattr(source, "__aenter__"):
        async with source as events:
            return await _last_message(events)
    return await _last_message(source)


async def _last_message(events: AsyncIterator[Any]) -> AssistantMessage:
    try:
        async for event in events:
            kind = getattr(event, "type", None)
            if kind == "done":
                return event.message  # type: ignore[no-any-return]
            if kind == "error":
                return event.error  # type: ignore[no-any-return]
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    raise RuntimeError("the model stream ended without a done or error event")
