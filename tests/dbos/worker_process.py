"""A DBOS worker in a process of its own, for the kill-and-resume tests.

    python -m tests.dbos.worker_process DATABASE_URL

Defines the test agents, launches DBOS, registers the `agentloop` queue (which recovers the
runs a killed worker left unfinished) and prints `ready`.
"""

from __future__ import annotations

import sys
import threading

from dbos import DBOS

from agentloop.dbos import QUEUE
from tests.dbos import agents  # noqa: F401  (the agents' workflows are registered before the launch)
from tests.dbos.conftest import dbos_config


def main(url: str) -> None:
    DBOS(config=dbos_config(url))  # type: ignore[arg-type]
    DBOS.launch()
    DBOS.register_queue(QUEUE, polling_interval_sec=0.05)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1])
