"""Durable runs on DBOS against the in-process loop: time per turn, checkpoint size per turn, throughput.

    .venv/bin/python benchmarks/dbos.py [--database sqlite|postgres|URL] [--turns 20] [--runs 3]
                                        [--overhead-runs 5] [--concurrent 100 --worker-processes 2]
                                        [--no-pool-pre-ping]

`sqlite` (the default) is a file in a temporary directory; `postgres` starts a cluster of its
own on loopback (the machine's `initdb` and `pg_ctl`). DBOS runs in this process for the per-turn
figures. Each turn is one scripted model call (a step) and one tool call (a step); the last turn
has no tool. Reported: the overhead per turn, (time of a 21-turn run - time of a 3-turn run) / 18
(what starting and ending a run cost drops out) minus the same difference in process, median of
`--overhead-runs` pairs of runs, without and with a caller streaming the events, and the DBOS
operations it records per turn the same way; milliseconds per turn of a `--turns` run (durable,
and the same run in process), without and with a caller; what DBOS keeps per turn (step outputs
and stream values, as JSON bytes); and, with `--concurrent N`, N durable runs of 5 turns enqueued
at once by a `DBOSClient` and served by `--worker-processes` worker processes, and N runs started
at once in this one process. `--no-pool-pre-ping` configures DBOS's engine without
`pool_pre_ping` (DBOS checks each connection with a round trip before it uses it by default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# This file's name is the library's: run as a script, its directory must not shadow `dbos`.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))  # the repository: `agentloop` and `tests.dbos.postgres`

from dbos import DBOS, DBOSClient, SetWorkflowID  # noqa: E402

import agentloop as al  # noqa: E402
from agentloop.dbos import EVENTS_STREAM, DBOSAgent, listen_queues, register_queues, result, start_agent, stream_events  # noqa: E402
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall  # noqa: E402
from agentloop.wire import to_json  # noqa: E402

PROMPT = al.UserMessage(content="go")


@al.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}=42"


def make_agent(turns: int) -> DBOSAgent:
    responses: list[Response | str] = [
        *(
            Response(content=[f"step {i}", ScriptedToolCall(f"t{i}", "lookup", {"key": str(i)})])
            for i in range(turns - 1)
        ),
        "done",
    ]

    def stream(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        n = sum(1 for m in context.messages if m.role == "assistant")
        return ScriptedModel([responses[n]])(model, context, options)

    return DBOSAgent(f"bench{turns}", model=al.Model(id="scripted", api="scripted"), tools=[lookup], stream_fn=stream)


def config(url: str) -> Any:
    settings = {
        "name": "agentloop-bench",
        "system_database_url": url,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }
    if os.environ.get("AGENTLOOP_BENCH_NO_PRE_PING") == "1":  # --no-pool-pre-ping, also in worker processes
        settings["db_engine_kwargs"] = {"pool_pre_ping": False}
    return settings


async def in_process(agent: DBOSAgent) -> float:
    loop_config = al.AgentLoopConfig(model=agent.model)
    context = al.AgentContext(tools=agent.tools)
    start = time.perf_counter()
    await al.run_agent_loop([PROMPT], context, loop_config, lambda e: None, stream_fn=agent.stream_fn)
    return time.perf_counter() - start


async def durable(agent: DBOSAgent, streaming: bool) -> tuple[float, int, int]:
    """Seconds (until the run's result, and the caller's last event), JSON bytes DBOS keeps for
    the run (step outputs, stream values), and DBOS operations."""
    start = time.perf_counter()
    # What `start_agent` does, keeping DBOS's handle: its result is the run's own task, where
    # `result()` would look at the workflow's status every 0.1 s (and round the time up to that).
    with SetWorkflowID(uuid.uuid4().hex):
        handle = await DBOS.start_workflow_async(agent.workflow, {"prompts": [to_json(PROMPT)], "messages": []})
    workflow_id = handle.get_workflow_id()
    if streaming:
        async for _ in stream_events(workflow_id):
            pass
    await handle.get_result()
    elapsed = time.perf_counter() - start
    steps = await DBOS.list_workflow_steps_async(workflow_id)
    size = sum(len(json.dumps(step["output"], default=str)) for step in steps)
    size += sum([len(json.dumps(value)) async for value in DBOS.read_stream_async(workflow_id, EVENTS_STREAM)])
    return elapsed, size, len(steps)


LONG, SHORT = 21, 3
"""The runs whose difference is the overhead per turn: (LONG-turn run - SHORT-turn run) / (LONG - SHORT)."""


async def overhead(runs: int) -> None:
    """The overhead per turn of a durable run, with no caller and with a caller streaming."""
    long_agent, short_agent = AGENTS[LONG], AGENTS[SHORT]
    extra_turns = LONG - SHORT
    await durable(long_agent, False)  # warm-up
    await durable(short_agent, False)
    local: list[float] = []
    quiet: list[float] = []
    streamed: list[float] = []
    operations: list[float] = []
    for _ in range(runs):  # the pairs interleaved: drift in the machine's load hits every figure alike
        local.append((await in_process(long_agent) - await in_process(short_agent)) / extra_turns)
        long_run, short_run = await durable(long_agent, False), await durable(short_agent, False)
        quiet.append((long_run[0] - short_run[0]) / extra_turns)
        operations.append((long_run[2] - short_run[2]) / extra_turns)
        long_run, short_run = await durable(long_agent, True), await durable(short_agent, True)
        streamed.append((long_run[0] - short_run[0]) / extra_turns)
    in_process_ms = statistics.median(local) * 1000
    print(
        f"overhead per turn: ({LONG}-turn run - {SHORT}-turn run) / {extra_turns}, "
        f"minus the same in process (median of {runs})"
    )
    print(f"in process:          {in_process_ms:8.2f} ms/turn")
    for label, rows in (("durable, no caller", quiet), ("durable, streaming", streamed)):
        print(f"{label}: {statistics.median(rows) * 1000 - in_process_ms:8.2f} ms/turn of overhead")
    print(f"DBOS operations:     {statistics.median(operations):8.1f} per turn")


async def measure(turns: int, runs: int) -> None:
    agent = AGENTS[turns]
    local = [await in_process(agent) for _ in range(runs)]
    await durable(agent, False)  # warm-up
    quiet = [await durable(agent, False) for _ in range(runs)]
    streamed = [await durable(agent, True) for _ in range(runs)]
    print(f"turns per run: {turns} (one model step and one tool step each; the last turn has no tool)")
    print(f"in process:          {statistics.median(local) / turns * 1000:8.2f} ms/turn")
    for label, rows in (("durable, no caller", quiet), ("durable, streaming", streamed)):
        ms = statistics.median(r[0] for r in rows) / turns * 1000
        size = statistics.median(r[1] for r in rows)
        steps = statistics.median(r[2] for r in rows)
        print(
            f"{label}: {ms:8.2f} ms/turn, kept {size / turns / 1024:6.1f} KiB/turn "
            f"({steps / turns:.1f} operations/turn, {size / 1024:.0f} KiB in all)"
        )


async def one_process(concurrent: int) -> None:
    agent = AGENTS[5]
    start = time.perf_counter()
    ids = await asyncio.gather(
        *(start_agent(agent, [al.UserMessage(content="go")], id=uuid.uuid4().hex) for _ in range(concurrent))
    )
    results = await asyncio.gather(*(result(i) for i in ids))
    elapsed = time.perf_counter() - start
    assert all(r[-1].stop_reason == "stop" for r in results)  # type: ignore[union-attr]
    print(
        f"{concurrent} concurrent runs of 5 turns, in this process: {elapsed:.1f} s, "
        f"{concurrent * 5 / elapsed:.0f} turns/s"
    )


async def throughput(url: str, concurrent: int, processes: int) -> None:
    client = DBOSClient(system_database_url=url)
    try:
        start = time.perf_counter()
        prompt = [al.UserMessage(content="go")]
        ids = await asyncio.gather(
            *(start_agent("bench5", prompt, id=uuid.uuid4().hex, client=client) for _ in range(concurrent))
        )
        results = await asyncio.gather(*(result(i, client=client) for i in ids))
        elapsed = time.perf_counter() - start
    finally:
        client.destroy()
    assert all(r[-1].stop_reason == "stop" for r in results)  # type: ignore[union-attr]
    print(
        f"{concurrent} concurrent runs of 5 turns, enqueued, {processes} worker processes: {elapsed:.1f} s, "
        f"{concurrent * 5 / elapsed:.0f} turns/s"
    )


def serve(url: str) -> None:
    """A worker process of the throughput measurement."""
    DBOS(config=config(url))
    listen_queues()
    DBOS.launch()
    register_queues(polling_interval_sec=0.05)
    print("ready", flush=True)
    threading.Event().wait()


AGENTS = {turns: make_agent(turns) for turns in (SHORT, 5, 20, LONG, 60)}


@contextlib.contextmanager
def database(choice: str) -> Iterator[str]:
    if choice == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/bench.sqlite"
    elif choice == "postgres":
        from tests.dbos.postgres import postgres_cluster

        with postgres_cluster() as url:
            yield url
    else:
        yield choice


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        serve(sys.argv[2])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="sqlite", help="sqlite, postgres, or a database URL")
    parser.add_argument("--turns", type=int, default=20, choices=sorted(AGENTS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--overhead-runs", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=0)
    parser.add_argument("--worker-processes", type=int, default=2)
    parser.add_argument(
        "--no-pool-pre-ping",
        action="store_true",
        help="DBOS's engine without pool_pre_ping (no round trip to check a connection before each use)",
    )
    args = parser.parse_args()
    if args.no_pool_pre_ping:
        os.environ["AGENTLOOP_BENCH_NO_PRE_PING"] = "1"
    with database(args.database) as url:
        print(f"database: {url.split(':')[0]}")
        DBOS(config=config(url))
        DBOS.launch()
        try:
            asyncio.run(overhead(args.overhead_runs))
            asyncio.run(measure(args.turns, args.runs))
            if args.concurrent:
                asyncio.run(one_process(args.concurrent))
        finally:
            DBOS.destroy()
        if not args.concurrent:
            return
        workers: list[subprocess.Popen[str]] = []
        try:
            for _ in range(args.worker_processes):
                process = subprocess.Popen([sys.executable, __file__, "worker", url], stdout=subprocess.PIPE, text=True)
                workers.append(process)
                assert process.stdout is not None and process.stdout.readline().strip() == "ready"
            asyncio.run(throughput(url, args.concurrent, args.worker_processes))
        finally:
            for process in workers:
                process.terminate()
                process.wait(30)
                assert process.stdout is not None
                process.stdout.close()


if __name__ == "__main__":
    main()
