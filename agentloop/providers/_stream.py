"""The stream function's contract: the object a stream function returns, and the check of its
arguments (a programming error raises at the call; everything after is an event)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from .._types._events import AssistantMessageEvent, DoneEvent, ErrorEvent
from .._types._messages import AssistantMessage, Context, Model
from .._types._stream_fn import StreamOptions

__all__ = ("AssistantMessageEventStream", "check_arguments")


def check_arguments(model: object, context: object, options: object) -> None:
    """Raise TypeError for arguments of the wrong type, ValueError for an option value no provider
    knows (a programming error, not a model failure)."""
    if not isinstance(model, Model):
        raise TypeError(f"model must be an agentloop.Model, got {type(model).__name__}")
    if not isinstance(context, Context):
        raise TypeError(f"context must be an agentloop.Context, got {type(context).__name__}")
    if not isinstance(options, StreamOptions):
        raise TypeError(f"options must be an agentloop.StreamOptions, got {type(options).__name__}")
    if options.cache_retention not in (None, "none", "short", "long"):
        raise ValueError(f"cache_retention must be 'none', 'short', 'long' or None, got {options.cache_retention!r}")


class AssistantMessageEventStream:
    """The events of one model response: an async iterator and an async context manager.

    `async with stream_simple(model, context, options) as events: async for event in events`
    closes the HTTP response when the block exits, even on `break`; iterating without `async
    with` works too (call `aclose()` when stopping early). `await stream.result()` consumes the
    rest and returns the final message. There is always exactly one terminal event (`done` or
    `error`); the stream never raises for a model, HTTP or protocol failure.

    Cancellation and early exit: an outer cancellation (a cancel scope, a timeout) propagates
    as a cancellation and closes the response; an abort of `options.signal` ends the stream with
    an `error` event whose reason is `aborted`, partial content kept.
    """

    __slots__ = ("_events", "_message")

    def __init__(self, events: AsyncGenerator[AssistantMessageEvent, None]) -> None:
        if not isinstance(events, AsyncIterator) or not callable(getattr(events, "aclose", None)):
            raise TypeError(f"events must be an async generator of AssistantMessageEvent, got {type(events).__name__}")
        self._events = events
        self._message: AssistantMessage | None = None

    def __aiter__(self) -> AssistantMessageEventStream:
        return self

    async def __anext__(self) -> AssistantMessageEvent:
        event = await self._events.__anext__()
        if isinstance(event, DoneEvent):
            self._message = event.message
        elif isinstance(event, ErrorEvent):
            self._message = event.error
        return event

    async def aclose(self) -> None:
        """Stop the response and release its connection."""
        await self._events.aclose()

    async def __aenter__(self) -> AssistantMessageEventStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def result(self) -> AssistantMessage:
        """Consume the remaining events and return the final message."""
        try:
            async for _ in self:
                pass
        finally:
            await self.aclose()
        assert self._message is not None, "a provider stream ended without a terminal event"
        return self._message

    def __repr__(self) -> str:
        return f"<AssistantMessageEventStream done={self._message is not None}>"
