"""A worker in a process of its own, for the kill-and-resume test.

    python -m tests.temporal.worker_process ADDRESS TASK_QUEUE [stored]

Prints `ready` once it polls. Its sticky queue times out after a second, so that a workflow
whose worker was killed moves to another worker quickly.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from temporalio.client import Client

from agentloop.temporal import TemporalAgent, data_converter, worker
from tests.temporal import agents


async def main(address: str, queue: str, held: list[TemporalAgent]) -> None:
    client = await Client.connect(address, data_converter=data_converter)
    options = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
    async with worker(client, task_queue=queue, agents=held, **options):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], agents.STORED if sys.argv[3:] == ["stored"] else agents.UNSTORED))
