"""Waiting for a DBOS run's event, as a caller streaming its events would."""

from __future__ import annotations

from contextlib import aclosing

from agentloop.dbos import stream_events


async def wait_for_event(workflow_id: str, kind: str, tool_call_id: str | None = None) -> None:
    """Until the run emits an event of `kind` (for `tool_call_id`, if given); AssertionError if it ends first."""
    async with aclosing(stream_events(workflow_id)) as envelopes:
        async for envelope in envelopes:
            if envelope.type == kind and tool_call_id in (None, getattr(envelope.event, "tool_call_id", None)):
                return
    raise AssertionError(f"the run ended without a {kind} event")
