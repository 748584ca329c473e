"""What the DBOS tests compare: transcripts without timestamps, and runs as conformance traces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import agentloop as al
from agentloop.wire import EventEnvelope

from ..conformance.run import event_line

PROMPT = al.UserMessage(content="go", timestamp=1)


def normalized(value: Any) -> Any:
    """A JSON form without timestamps (the model's clock is not the test's)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def comparable(events: Sequence[al.AgentEvent]) -> list[Any]:
    """The conformance runner's trace of a run (timestamps dropped), without `message_update`:
    the model step consumes the token deltas, and the workflow's stream yields `start` and `done`."""
    return [event_line(event) for event in events if event.type != "message_update"]


def check_envelopes(envelopes: Sequence[EventEnvelope]) -> None:
    """Every event once, in order (seq 0..n-1), of one run, and a well-formed run."""
    assert [e.seq for e in envelopes] == list(range(len(envelopes)))
    assert len({e.run_id for e in envelopes}) == 1
    al.testing.check_events([e.event for e in envelopes])


def text(message: al.AgentMessage) -> str:
    """A message's text blocks, joined."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, al.TextContent))
