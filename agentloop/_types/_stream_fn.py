"""The stream-function contract: what a model call receives (`StreamOptions`) and returns.

A stream function returns an async iterator of events, an async context manager yielding one, or
an awaitable of either (`StreamSource`). `opened_stream` awaits and enters it, checks that it
iterates, and closes the iterator when the block ends however it ends: in the task that read it,
shielded from a cancellation and bounded by `CLEANUP_TIMEOUT`. It holds no cancel scope while the
block runs, so an async generator may keep it open across its own `yield`s.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio

from ._abort import AbortSignal
from ._constants import CLEANUP_TIMEOUT
from ._events import AssistantMessageEvent
from ._messages import Context, Model, ThinkingLevel

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "MaybeAwaitable",
    "OutputSchema",
    "StreamFn",
    "StreamOptions",
    "StreamSource",
    "close_events",
    "not_a_stream",
    "opened_stream",
)

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]
"""Callbacks may be plain or `async` functions."""


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """A JSON schema the model's text answer must follow, for providers that constrain their
    output to one (OpenAI's `response_format`/`text.format`, Gemini's `responseJsonSchema`)."""

    name: str
    """The schema's name (letters, digits, `_` and `-`: OpenAI's rule)."""
    schema: Mapping[str, Any]
    """A JSON schema of an object."""
    strict: bool = False
    """OpenAI's strict mode; only for a schema it accepts (every object's properties all
    required, `additionalProperties: false`)."""


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class StreamOptions:
    """What a stream function receives besides the model and the context."""

    signal: AbortSignal
    """Abort the request when this aborts; a stream called with an aborted signal ends at once."""
    api_key: str | None = None
    reasoning: ThinkingLevel | None = None
    """The thinking level; None means reasoning off."""
    session_id: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    thinking_budgets: Mapping[str, int] | None = None
    headers: Mapping[str, str] | None = None
    metadata: Mapping[str, Any] | None = None
    max_retry_delay: float | None = None
    """Seconds; the longest server-requested retry delay a provider honours."""
    cache_retention: Literal["none", "short", "long"] | None = None
    """Prompt caching: `short` (the provider's default cache; also what None means), `long`
    (Anthropic's 1-hour cache and OpenAI's 24-hour retention, where the model has them) or `none`
    (no cache marks and no cache key)."""
    output_schema: OutputSchema | None = None
    """Ask for a text answer that is JSON following this schema, where the provider can constrain
    its output (OpenAI Chat Completions and Responses, Azure OpenAI, Gemini and Vertex AI); the
    other providers end the stream with an error saying so."""

    def __repr__(self) -> str:
        key = "None" if self.api_key is None else "'***'"
        return f"StreamOptions(api_key={key}, reasoning={self.reasoning!r}, session_id={self.session_id!r})"


StreamSource: TypeAlias = (
    AsyncIterator[AssistantMessageEvent] | AbstractAsyncContextManager[AsyncIterator[AssistantMessageEvent]]
)
"""What a stream function returns (or an awaitable of it): an async iterator of events, or an
async context manager that yields one (the loop enters it and always exits it)."""

StreamFn: TypeAlias = Callable[[Model, Context, StreamOptions], MaybeAwaitable[StreamSource]]
"""Streams one model response. It must report every failure as one terminal `error` event."""


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
        await close_events(events)


async def close_events(events: object, *, shielded: bool = True) -> None:
    """Close an event iterator that has `aclose` (an async generator left open is finalized late,
    in another task). `shielded` (unwinding from a cancellation, an error or an abort): shielded
    from cancellation and bounded by `CLEANUP_TIMEOUT`, like any cleanup."""
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    if shielded:
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            await aclose()
    else:
        await aclose()
