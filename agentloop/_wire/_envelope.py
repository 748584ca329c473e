"""Event envelopes: run id, turn, sequence number and time around every event of a run.

An envelope is what a consumer on a bus (or a browser) needs to order, de-duplicate and resume
a run's events: `(run_id, seq)` identifies an event, `seq` counts from 0 (`agent_start`) in the
order the run emitted its events, and `turn` says which turn it belongs to. Its JSON form wraps
the event's JSON form:

    {"runId": "6f1c...", "seq": 3, "turn": 1, "timestamp": 1718000000000, "event": {"type": "message_start", ...}}

`Enveloper` stamps events one by one; `with_envelopes(events)` does it on an `agent_loop` stream
and `enveloping(listener)` for an `Agent` listener.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._types._abort import AbortSignal
from .._types._events import AgentEvent, AgentStart, TurnStart
from .._types._messages import now_ms
from .._types._stream_fn import MaybeAwaitable
from ._compact import CompactEncoder
from ._decode import from_json
from ._encode import to_json
from ._json_fallback import encode_lenient

__all__ = (
    "EnvelopeStream",
    "Enveloper",
    "EventEnvelope",
    "envelope_from_json",
    "dumps_envelope",
    "envelope_to_json",
    "enveloping",
    "with_envelopes",
)

_EVENT_TYPES = (
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventEnvelope:
    """An agent event with what a consumer needs to order, de-duplicate and resume it."""

    event: AgentEvent
    run_id: str
    """The run the event belongs to (new for every `agent_start`)."""
    seq: int
    """The event's position in its run, from 0 (`agent_start`)."""
    turn: int
    """The turn the event belongs to, from 1; 0 for `agent_start` (before the first turn)."""
    timestamp: int
    """When the event was stamped: milliseconds since the epoch."""

    @property
    def type(self) -> str:
        """The event's type (`message_update`, ...)."""
        return self.event.type


class Enveloper:
    """Stamps a stream of events, run after run: `enveloper(event)` returns its envelope.

    Every `agent_start` begins a new run (a new `run_id`, `seq` back to 0, turn 0); each
    `turn_start` opens the next turn. Stamp the events in the order they were emitted, from one
    task at a time (as an `Agent`'s listeners and an `agent_loop` stream see them).

    Args:
        run_id: Makes the id of each new run (default: a random UUID's hex).
        clock: The time in epoch milliseconds (default: the wall clock).
    """

    __slots__ = ("_clock", "_new_run_id", "_run_id", "_seq", "_turn")

    def __init__(self, *, run_id: Callable[[], str] | None = None, clock: Callable[[], int] | None = None) -> None:
        self._new_run_id = run_id if run_id is not None else _random_id
        self._clock = clock if clock is not None else now_ms
        self._run_id: str | None = None
        self._seq = 0
        self._turn = 0

    @property
    def run_id(self) -> str | None:
        """The id of the current (or last) run; None before the first event."""
        return self._run_id

    def __call__(self, event: AgentEvent) -> EventEnvelope:
        kind = type(event)
        if kind is AgentStart or self._run_id is None:
            self._run_id = self._new_run_id()
            self._seq = 0
            self._turn = 0
        if kind is TurnStart:
            self._turn += 1
        envelope = EventEnvelope(
            event=event, run_id=self._run_id, seq=self._seq, turn=self._turn, timestamp=self._clock()
        )
        self._seq += 1
        return envelope


def _random_id() -> str:
    return uuid.uuid4().hex


class EnvelopeStream:
    """An async iterator of envelopes over an async iterator of events (`with_envelopes`)."""

    __slots__ = ("_enveloper", "_events")

    def __init__(self, events: AsyncIterator[AgentEvent], enveloper: Enveloper) -> None:
        self._events = events
        self._enveloper = enveloper

    def __aiter__(self) -> EnvelopeStream:
        return self

    async def __anext__(self) -> EventEnvelope:
        return self._enveloper(await self._events.__anext__())


def with_envelopes(events: AsyncIterator[AgentEvent], enveloper: Enveloper | None = None) -> EnvelopeStream:
    """The events of an `agent_loop` stream, each in its envelope.

    Example:
        ```python
        async with agent_loop(prompts, context, config) as events:
            async for envelope in with_envelopes(events):
                bus.publish(encode_json(envelope_to_json(envelope)))
        ```
    """
    if not hasattr(events, "__anext__"):
        raise TypeError(f"with_envelopes expects an async iterator of events, got {type(events).__name__}")
    return EnvelopeStream(events, enveloper if enveloper is not None else Enveloper())


def enveloping(
    listener: Callable[[EventEnvelope, AbortSignal], MaybeAwaitable[None]], enveloper: Enveloper | None = None
) -> Callable[[AgentEvent, AbortSignal], MaybeAwaitable[None]]:
    """An `Agent` listener that calls `listener(envelope, signal)` for every event.

    Example:
        ```python
        agent.subscribe(enveloping(lambda envelope, signal: print(envelope.seq, envelope.type)))
        ```
    """
    if not callable(listener):
        raise TypeError(f"listener must be callable, got {listener!r}")
    stamp = enveloper if enveloper is not None else Enveloper()

    def on_event(event: AgentEvent, signal: AbortSignal) -> MaybeAwaitable[None]:
        return listener(stamp(event), signal)

    return on_event


def envelope_to_json(envelope: EventEnvelope, *, compact: CompactEncoder | None = None) -> dict[str, Any]:
    """The JSON form: `{"runId", "seq", "turn", "timestamp", "event"}` (the event's `to_json`).

    With `compact=` (the encoder of this stream of envelopes) the event is in the compact wire
    form (`CompactEncoder`: a `message_update` without the whole message so far).
    """
    if not isinstance(envelope, EventEnvelope):
        raise TypeError(f"envelope_to_json expects an EventEnvelope, got {type(envelope).__name__}")
    return {
        "runId": envelope.run_id,
        "seq": envelope.seq,
        "turn": envelope.turn,
        "timestamp": envelope.timestamp,
        "event": to_json(envelope.event) if compact is None else compact.to_json(envelope.event),
    }


def envelope_from_json(data: Any) -> EventEnvelope:
    """The envelope of a JSON form made by `envelope_to_json` (ValueError, saying why, if not one)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"an envelope must be a JSON object, got {type(data).__name__}")
    for key, kind in (("runId", str), ("seq", int), ("turn", int), ("timestamp", int)):
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"envelope: {key!r} must be {'a string' if kind is str else 'an integer'}, got {value!r}")
    event = data.get("event")
    if not isinstance(event, Mapping) or event.get("type") not in _EVENT_TYPES:
        raise ValueError("envelope: 'event' must be an agent event's JSON form")
    return EventEnvelope(
        event=from_json(event), run_id=data["runId"], seq=data["seq"], turn=data["turn"], timestamp=data["timestamp"]
    )


def dumps_envelope(envelope: EventEnvelope, *, compact: CompactEncoder | None = None) -> str:
    """`envelope_to_json` as one compact line of JSON (`compact=` as there).

    Tool `details` JSON cannot hold are written as session stores write them (anything without
    a JSON form of its own as its `str()`), so every event reaches the bus or the browser.
    """
    return encode_lenient(envelope_to_json(envelope, compact=compact))
