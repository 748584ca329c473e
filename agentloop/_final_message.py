"""A model call as a durable engine records it: the final message, and its replay as a stream.

A durable engine runs the model call where the keys and the network are (a DBOS step, a Temporal
activity), consumes the provider's stream there (`final_message`) and records only the message
of its terminal event; the loop, in the workflow, then gets that message as a stream of its own
(`replayed`): `start`, then `done` or `error`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from ._events import AssistantMessageEvent, DoneEvent, ErrorEvent, StartEvent
from ._stream_source import opened_stream
from ._types import AssistantMessage

__all__ = ("IncompleteStream", "final_message", "replayed")


class IncompleteStream(RuntimeError):
    """A model stream ended without its terminal event (a broken stream function: no retry helps)."""


async def final_message(source: Any) -> AssistantMessage:
    """Consume what a stream function returned (an iterator, a context manager, or an awaitable of
    either); the message of its terminal event. `IncompleteStream` if it ends without one."""
    async with opened_stream(source) as events:
        async for event in events:
            if isinstance(event, DoneEvent):
                return event.message
            if isinstance(event, ErrorEvent):
                return event.error
    raise IncompleteStream("the model stream ended without a done or error event")


async def replayed(final: AssistantMessage) -> AsyncIterator[AssistantMessageEvent]:
    """A recorded final message as the stream the loop reads: `start` (the message's identity,
    no content yet), then `done` for a normal ending or `error` for an error or abort (an
    unknown stop reason is an error that names it)."""
    yield StartEvent(
        AssistantMessage(
            api=final.api,
            provider=final.provider,
            model=final.model,
            response_id=final.response_id,
            timestamp=final.timestamp,
        )
    )
    reason = final.stop_reason
    if reason == "stop" or reason == "length" or reason == "toolUse":
        yield DoneEvent(reason, final)
    elif reason == "error" or reason == "aborted":
        yield ErrorEvent(reason, final)
    else:
        unexpected = replace(final, stop_reason="error", error_message=f"unexpected stop reason {reason!r}")
        yield ErrorEvent("error", unexpected)
