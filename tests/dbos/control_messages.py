"""What `_control_message_waiting` answers, on the database DBOS runs on (it reads DBOS's private
notifications table: a DBOS that changes it must fail this, not make every run slow unnoticed).

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

from agentloop.dbos import CONTROL_TOPIC, approve, result, start_agent, stream_events
from agentloop.dbos._agent import _control_message_waiting
from tests.dbos.agents import dbos_config, payment  # the agents' workflows are registered before the launch
from tests.dbos.support import PROMPT


async def answers() -> dict[str, Any]:
    """A run waiting for an approval: the answers with no message, with one on another topic, with
    a control message, and once the run (its call denied) has taken it; and how the run ended."""
    workflow_id = await start_agent(payment, [PROMPT], id=f"control-{uuid.uuid4().hex}")

    async def waiting() -> bool:
        return await anyio.to_thread.run_sync(_control_message_waiting, workflow_id)

    with anyio.fail_after(20):
        async with aclosing(stream_events(workflow_id)) as envelopes:
            async for envelope in envelopes:
                if envelope.type == "tool_execution_start":  # the call waits; the run's first poll is past
                    break
        seen = {"no message": await waiting()}
        await DBOS.send_async(workflow_id, {"note": "not a control message"}, "another.topic")
        seen["another topic"] = await waiting()
        await DBOS.send_async(workflow_id, {"kind": "abort"}, CONTROL_TOPIC)
        seen["control message"] = await waiting()
        await approve(workflow_id, "m1", False)  # denied: the run takes the abort at its next poll
        messages = await result(workflow_id)
        seen["taken"] = await waiting()
    return {"answers": seen, "stop_reason": getattr(messages[-1], "stop_reason", None)}


EXPECTED = {
    "answers": {"no message": False, "another topic": False, "control message": True, "taken": False},
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
