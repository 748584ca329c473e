"""An agent only the new workers of a rolling deploy define (`worker_process URL newcomer`)."""

from __future__ import annotations

from agentloop.dbos import DBOSAgent
from tests.durable_scripts import MODEL, ONE_TOOL, lookup, scripted

newcomer = DBOSAgent("newcomer", model=MODEL, tools=[lookup], stream_fn=scripted(ONE_TOOL))
