"""A DBOS worker process SIGKILLed in the middle of a tool call; a second worker resumes the run.

On SQLite and on PostgreSQL: the model is not called again for the turn that had finished, the
tool is retried (with the same idempotency key), the caller (a `DBOSClient` in this process)
streaming the events sees each one once, in order, and the final transcript equals an
uninterrupted run's. Also killed: a worker in the middle of a parallel batch, and one whose run
waits for an approval.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import anyio
import pytest
from dbos import DBOSClient

from agentloop.dbos import agent_queue, approve, result, start_agent, stream_events
from agentloop.dbos._agent import workflow_name
from agentloop.wire import EventEnvelope, to_json

from .. import durable_checks
from ..durable_checks import PROMPT, check_envelopes, comparable, kill, lines, normalized, text


def spawn_worker(url: str, log: Path, tool_seconds: str, newcomer: bool = False) -> subprocess.Popen[str]:
    """A worker process with the test agents (and, with `newcomer`, the agent only new workers hold)."""
    args = [url, *(["newcomer"] if newcomer else [])]
    return durable_checks.spawn_worker("tests.dbos.worker_process", *args, log=log, tool_seconds=tool_seconds)


async def read_all(workflow_id: str, client: DBOSClient, into: list[EventEnvelope]) -> None:
    async for envelope in stream_events(workflow_id, client=client, poll_interval=0.05):
        into.append(envelope)


async def finished_steps(client: DBOSClient, workflow_id: str, name: str) -> int:
    """How many steps named `name` the workflow has recorded as finished (in the database)."""
    steps = await client.list_workflow_steps_async(workflow_id, load_output=False)
    return sum(step["function_name"] == name and step["completed_at_epoch_ms"] is not None for step in steps)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/dbos.sqlite"
    url: str = request.getfixturevalue("postgres_url")
    return url.rsplit("/", 1)[0] + f"/kill_{uuid.uuid4().hex[:8]}"  # a database of its own


async def test_a_worker_killed_mid_tool_is_replaced_and_the_run_resumes(
    database_url: str, tmp_path: Path, workers: list[subprocess.Popen[str]]
) -> None:
    log = tmp_path / "log"
    log.mkdir()
    workers.append(spawn_worker(database_url, log, tool_seconds="600"))
    client = DBOSClient(system_database_url=database_url)
    try:
        workflow_id = await start_agent("slow", [PROMPT], id=f"kill-{uuid.uuid4().hex}", client=client)
        envelopes: list[EventEnvelope] = []

        with anyio.fail_after(45):
            async with anyio.create_task_group() as group:
                group.start_soon(read_all, workflow_id, client, envelopes)
                while not lines(log / "tool_starts"):  # noqa: ASYNC110 (written by the worker process)
                    await anyio.sleep(0.05)
                while not any(e.type == "tool_execution_start" for e in envelopes):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                killed_at = time.monotonic()
                kill(workers[0])
                seen_before_kill = len(envelopes)
                workers.append(spawn_worker(database_url, log, tool_seconds="0"))
                messages = await result(workflow_id, client=client)
            resumed_in = time.monotonic() - killed_at

        model_calls = lines(log / "model_calls")
        tool_starts = lines(log / "tool_starts")
        print(
            f"\n[{database_url.split(':')[0]}] events seen before the kill: {seen_before_kill}, "
            f"after: {len(envelopes) - seen_before_kill}"
        )
        print(f"model calls (by assistant messages in context): {model_calls}")
        print(f"tool starts: {tool_starts}")
        print(f"kill to result: {resumed_in:.1f} s")
        assert model_calls == ["0", "1"]  # the first call was not repeated by the second worker
        assert len(tool_starts) == 2  # the interrupted call was retried...
        assert tool_starts[0] == tool_starts[1] == f"slow_lookup x {workflow_id}/s1"  # ...with the same key
        check_envelopes(envelopes)  # every event once, in order (seq 0..n-1), a well-formed run
        assert 0 < seen_before_kill < len(envelopes)

        # An uninterrupted run of the same conversation, on the surviving worker.
        clean_id = await start_agent("slow", [PROMPT], id=f"clean-{uuid.uuid4().hex}", client=client)
        with anyio.fail_after(30):
            clean_envelopes = [e async for e in stream_events(clean_id, client=client, poll_interval=0.05)]
            clean = await result(clean_id, client=client)
        assert normalized([to_json(m) for m in messages]) == normalized([to_json(m) for m in clean])
        assert comparable([e.event for e in envelopes]) == comparable([e.event for e in clean_envelopes])
    finally:
        client.destroy()


async def test_a_worker_killed_in_a_parallel_batch_resumes_with_the_steps_in_the_same_order(
    database_url: str, tmp_path: Path, workers: list[subprocess.Popen[str]]
) -> None:
    """Two calls of the batch finished (recorded), one was running: the replay meets the recorded
    steps in the order it calls them again, and only the interrupted one runs again."""
    log = tmp_path / "log"
    log.mkdir()
    workers.append(spawn_worker(database_url, log, tool_seconds="600"))
    client = DBOSClient(system_database_url=database_url)
    try:
        workflow_id = await start_agent("slow_parallel", [PROMPT], id=f"batch-{uuid.uuid4().hex}", client=client)
        envelopes: list[EventEnvelope] = []
        with anyio.fail_after(45):
            async with anyio.create_task_group() as group:
                group.start_soon(read_all, workflow_id, client, envelopes)
                while len(lines(log / "tool_starts")) < 3:  # noqa: ASYNC110 (written by the worker process)
                    await anyio.sleep(0.05)
                while await finished_steps(client, workflow_id, "slow_parallel.tool.lookup") < 2:  # noqa: ASYNC110
                    await anyio.sleep(0.05)  # until the quick calls' steps are recorded
                kill(workers[0])
                workers.append(spawn_worker(database_url, log, tool_seconds="0"))
                messages = await result(workflow_id, client=client)

        tool_starts = lines(log / "tool_starts")
        print(f"\n[{database_url.split(':')[0]}] tool starts: {tool_starts}")
        assert lines(log / "model_calls") == ["0", "1"]
        assert sorted(tool_starts) == sorted(["lookup a", "lookup c", *[f"slow_lookup b {workflow_id}/q2"] * 2])
        check_envelopes(envelopes)

        clean_id = await start_agent("slow_parallel", [PROMPT], id=f"clean-{uuid.uuid4().hex}", client=client)
        with anyio.fail_after(30):
            clean_envelopes = [e async for e in stream_events(clean_id, client=client, poll_interval=0.05)]
            clean = await result(clean_id, client=client)
        assert normalized([to_json(m) for m in messages]) == normalized([to_json(m) for m in clean])
        assert sorted(map(str, comparable([e.event for e in envelopes]))) == sorted(
            map(str, comparable([e.event for e in clean_envelopes]))
        )
    finally:
        client.destroy()


async def test_a_call_waiting_for_approval_outlives_its_worker(
    tmp_path: Path, workers: list[subprocess.Popen[str]]
) -> None:
    """The wait is durable: the worker dies while the call waits, another takes the run over, and
    the approval sent then lets the tool run, once."""
    url = f"sqlite:///{tmp_path}/dbos.sqlite"
    log = tmp_path / "log"
    log.mkdir()
    workers.append(spawn_worker(url, log, tool_seconds="0"))
    client = DBOSClient(system_database_url=url)
    try:
        workflow_id = await start_agent("payment", [PROMPT], id=f"approval-{uuid.uuid4().hex}", client=client)
        envelopes: list[EventEnvelope] = []
        with anyio.fail_after(45):
            async with anyio.create_task_group() as group:
                group.start_soon(read_all, workflow_id, client, envelopes)
                while not any(e.type == "tool_execution_start" for e in envelopes):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
                kill(workers[0])
                workers.append(spawn_worker(url, log, tool_seconds="0"))
                await approve(workflow_id, "m1", client=client)
                messages = await result(workflow_id, client=client)
        assert text(messages[2]) == "paid 5"
        assert lines(log / "tool_starts") == [f"pay 5 {workflow_id}/m1"]
        assert lines(log / "model_calls") == ["0", "1"]
        check_envelopes(envelopes)
    finally:
        client.destroy()


async def test_in_a_rolling_deploy_every_run_goes_to_a_worker_that_holds_its_agent(
    database_url: str, tmp_path: Path, workers: list[subprocess.Popen[str]]
) -> None:
    """An old worker without the agent `newcomer` and a new one with it, on the same database:
    the runs of `newcomer` all go to the new one, those of `one_tool` to either."""
    workers.append(spawn_worker(database_url, tmp_path, tool_seconds="0"))
    # DBOS gives a run enqueued by a client (with no application version) only to workers of the
    # latest version, and dates versions to the second: the new worker starts in a later second,
    # as in a real deploy (launched in the same second, the two versions tie and either is latest).
    await anyio.sleep(1)
    workers.append(spawn_worker(database_url, tmp_path, tool_seconds="0", newcomer=True))
    client = DBOSClient(system_database_url=database_url)
    try:
        ids = []
        for i in range(10):
            for name in ("newcomer", "one_tool"):
                run_id = f"{name}-{i}-{uuid.uuid4().hex[:8]}"
                # as a client that does not define the agents enqueues a run: by name
                options = {"queue_name": agent_queue(name), "workflow_name": workflow_name(name), "workflow_id": run_id}
                request = {"prompts": [to_json(PROMPT)], "messages": []}
                await client.enqueue_async(options, request)  # type: ignore[arg-type]
                ids.append(run_id)
        with anyio.fail_after(90):
            finished = [await result(run_id, client=client, poll_interval=0.05) for run_id in ids]
    finally:
        client.destroy()
    assert all([m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"] for messages in finished)
