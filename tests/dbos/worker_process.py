"""A DBOS worker in a process of its own, for the kill-and-resume tests.

    python -m tests.dbos.worker_process DATABASE_URL [newcomer]

Defines the test agents (with `newcomer`, one more: a worker of a rolling deploy's new version),
launches DBOS (which recovers the runs a killed worker left unfinished), listens to the queues
of its agents and prints `ready`.
"""

from __future__ import annotations

import sys
import threading

from dbos import DBOS

from agentloop.dbos import listen_queues, register_queues
from tests.dbos.agents import dbos_config  # the agents' workflows are registered before the launch


def main(url: str, newcomer: bool) -> None:
    if newcomer:
        import tests.dbos.newcomer  # noqa: F401  (defines the agent before the launch)
    DBOS(config=dbos_config(url))
    listen_queues()
    DBOS.launch()
    register_queues(polling_interval_sec=0.05)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["newcomer"])
