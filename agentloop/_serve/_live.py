"""The state of one session an `AgentSSEApp` serves: its agent, its event log, its readers."""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any

import anyio

from .._core._agent import Agent
from .._sessions import Session
from .._types._abort import AbortSignal
from .._wire._compact import CompactEncoder
from .._wire._encode import to_json
from .._wire._envelope import EventEnvelope, dumps_envelope, enveloping
from .._wire._json_text import encode_json

__all__ = ("LiveSession",)


class LiveSession:
    """A session the app serves: its agent, its event log, who waits on it.

    `clients` counts its open event streams and `last_used` is when a request last touched it
    (`anyio.current_time()`): the app evicts a session that has neither a run, nor a client, nor a
    request for a while.
    """

    def __init__(
        self,
        session_id: str,
        agent: Agent,
        session: Session | None,
        replay_limit: int,
        replay_bytes: int,
        compact: bool = True,
    ) -> None:
        self.id = session_id
        self.agent = agent
        self.session = session
        self.epoch = uuid.uuid4().hex[:12]
        self.log: deque[tuple[int, bytes]] = deque()
        self.log_bytes = 0
        self.replay_limit = replay_limit
        self.replay_bytes = replay_bytes
        self.next_id = 1
        self._changed: anyio.Event | None = None  # made when an event stream waits for news
        self.busy = False
        self.deleted = False
        self.encoder = CompactEncoder() if compact else None  # one per log: it follows the stream
        self.listener = enveloping(self._on_envelope)
        self._unsubscribe = agent.subscribe(self.listener)
        self.clients = 0
        self.last_used = 0.0  # set by the app at each request

    def _on_envelope(self, envelope: EventEnvelope, signal: AbortSignal) -> None:
        self.publish(None, dumps_envelope(envelope, compact=self.encoder))

    def publish(self, event: str | None, data: str) -> None:
        number = self.next_id
        self.next_id += 1
        head = f"id: {self.event_id(number)}\n"
        if event is not None:
            head += f"event: {event}\n"
        frame = f"{head}data: {data}\n\n".encode()
        log = self.log
        log.append((number, frame))
        self.log_bytes += len(frame)
        while len(log) > 1 and (len(log) > self.replay_limit or self.log_bytes > self.replay_bytes):
            self.log_bytes -= len(log.popleft()[1])  # the newest event is always kept
        self.notify()

    def notify(self) -> None:
        """Wake the event streams waiting for news of this session."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def changes(self) -> anyio.Event:
        """An event set at the next `notify` (take it before reading the log, so no news is missed).

        It is made only when a stream asks: the events of a fast run are published many to one
        wake-up of the streams, and most of them find nobody waiting."""
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def event_id(self, number: int) -> str:
        """The SSE id of event `number` of this epoch."""
        return f"{self.epoch}-{number}"

    def number_of(self, event_id: str) -> int | None:
        """The number of an id of this epoch; None for an id of another (or a bare number)."""
        epoch, _, number = event_id.rpartition("-")
        return int(number) if epoch == self.epoch else None

    @property
    def last_id(self) -> int:
        return self.next_id - 1

    @property
    def last_event_id(self) -> str:
        return self.event_id(self.last_id)

    def reset(self, asked: str | None) -> bytes:
        """The `event: reset` message that announces a gap after `asked` (None: from the start)."""
        data = {"lastEventId": self.last_event_id, "oldestEventId": self.event_id(self.first_id), "asked": asked}
        return f"event: reset\ndata: {encode_json(data)}\n\n".encode()

    @property
    def first_id(self) -> int:
        return self.log[0][0] if self.log else self.next_id

    def after(self, last: int, max_bytes: int) -> list[tuple[int, bytes]]:
        """The events after number `last`, as many as fit in `max_bytes` (at least one, if any)."""
        start = max(0, last - self.first_id + 1)
        out: list[tuple[int, bytes]] = []
        size = 0
        for i in range(start, len(self.log)):
            number, frame = self.log[i]
            if out and size + len(frame) > max_bytes:
                break
            out.append((number, frame))
            size += len(frame)
        return out

    @property
    def idle(self) -> bool:
        """Whether the session may be evicted: no run going, no event stream open."""
        return not self.busy and self.clients == 0

    def state(self) -> dict[str, Any]:
        state = self.agent.state
        return {
            "id": self.id,
            "isStreaming": self.busy,
            "lastEventId": self.last_event_id,
            "errorMessage": state.error_message,
            "messages": [to_json(m) for m in state.messages],
        }

    async def close(self) -> None:
        """End the session's event streams and release its store session (if any)."""
        self.deleted = True
        self.notify()
        self._unsubscribe()
        if self.session is not None:
            await self.session.aclose()
