"""What `_control_mark` reads, on the database DBOS runs on (the run's workflow attribute that
the senders of control messages set: a DBOS that changes how attributes are kept must fail this,
not make every run slow unnoticed).

    python -m tests.dbos.control_messages DATABASE_URL

launches DBOS on the database, prints `answers()` as JSON and exits (the PostgreSQL test runs it
so; the SQLite one calls `answers()` in the tests' own process).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from contextlib import aclosing
from typing import Any

import anyio
from dbos import DBOS

import agentloop as al
from agentloop.dbos import abort, result, start_agent, steer, stream_events
from agentloop.dbos._agent import _control_mark
from tests.dbos.agents import dbos_config, payment  # the agents' workflows are registered before the launch
from tests.dbos.support import PROMPT


async def answers() -> dict[str, Any]:
    """A run waiting for an approval: its mark with no message, with one on another topic, after
    an abort and after a steering message (each a new mark); and how the run ended."""
    workflow_id = await start_agent(payment, [PROMPT], id=f"control-{uuid.uuid4().hex}")

    async def mark() -> str:
        return await anyio.to_thread.run_sync(_control_mark, workflow_id)

    with anyio.fail_after(20):
        async with aclosing(stream_events(workflow_id)) as envelopes:
            async for envelope in envelopes:
                if envelope.type == "tool_execution_start":  # the call waits; the run's first poll is past
                    break
        marks = {"no message": await mark()}
        await DBOS.send_async(workflow_id, {"note": "not a control message"}, "another.topic")
        marks["another topic"] = await mark()
        await abort(workflow_id)  # also denies the waiting call: the run takes the abort at its next poll
        marks["abort"] = await mark()
        await steer(workflow_id, al.UserMessage(content="and y?", timestamp=2))
        marks["steer"] = await mark()
        messages = await result(workflow_id)
    seen = {
        "no message": marks["no message"],
        "another topic": marks["another topic"],
        "abort": len(marks["abort"]) == 32,
        "steer": len(marks["steer"]) == 32 and marks["steer"] != marks["abort"],
    }
    return {"marks": seen, "stop_reason": getattr(messages[-1], "stop_reason", None)}


EXPECTED = {
    "marks": {"no message": "", "another topic": "", "abort": True, "steer": True},
    "stop_reason": "aborted",
}


def main(url: str) -> None:
    DBOS(config=dbos_config(url))
    DBOS.launch()
    try:
        print(json.dumps(asyncio.run(answers())), flush=True)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main(sys.argv[1])
