"""An abort while the model speaks keeps what it has said, as a run in one process does: the
workflow cancels the model activity and waits (at most `_ABORT_WAIT`) for its answer."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

import agentloop as al
from agentloop.temporal import AgentLoopPlugin, AgentWorkflow, start_agent, stream_events, worker
from agentloop.temporal._workflow import _ABORT_WAIT
from agentloop.wire import EventEnvelope

from ..durable_checks import PROMPT, check_envelopes
from ..support import as_assistant, text
from . import agents


async def abort_mid_answer(
    client: Client, name: str, log: Path, **options: Any
) -> tuple[list[EventEnvelope], list[al.AgentMessage], float]:
    """Run `name`, abort it once the model has said "Hello, wor"; the events, the result and the
    seconds from the abort to the result (and check that its history replays)."""
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, task_queue=queue, agents=agents.UNSTORED):
        handle = await start_agent(client, name, [PROMPT], id=f"{name}-{uuid.uuid4().hex}", task_queue=queue, **options)
        calls = log / "model_calls"
        while not calls.exists() or "streamed" not in calls.read_text():  # noqa: ASYNC110 - a file the model writes
            await anyio.sleep(0.05)
        await handle.signal(AgentWorkflow.abort)
        aborted_at = time.monotonic()
        envelopes = [e async for e in stream_events(handle)]
        result = await handle.result()
        took = time.monotonic() - aborted_at
    # the history (the abort, the cancelled call's answer or the wait's timer) replays
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin(agents.UNSTORED)])
    await replayer.replay_workflow(await handle.fetch_history())
    return envelopes, result, took


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTLOOP_TEST_LOG", str(tmp_path))
    return tmp_path


async def test_an_abort_keeps_the_text_the_model_had_streamed(client: Client, log: Path) -> None:
    with anyio.fail_after(30):
        envelopes, result, took = await abort_mid_answer(client, "talker", log)
    check_envelopes(envelopes)
    final = as_assistant(result[-1])
    assert final.stop_reason == "aborted" and final.error_message == "Request was aborted"
    assert [text(block) for block in final.content] == ["Hello, wor"]
    end = [e.event for e in envelopes if isinstance(e.event, al.MessageEnd)][-1]
    assert end.message == final
    assert [e.type for e in envelopes][-2:] == ["turn_end", "agent_end"]
    assert took < _ABORT_WAIT.total_seconds()  # the answer came, the wait did not run out


async def test_a_model_call_that_cannot_hear_the_abort_ends_the_run_after_the_wait_without_its_text(
    client: Client, log: Path
) -> None:
    with anyio.fail_after(30):
        envelopes, result, took = await abort_mid_answer(client, "deaf_talker", log)
    check_envelopes(envelopes)
    final = as_assistant(result[-1])
    assert final.stop_reason == "aborted" and final.content == ()
    assert took >= _ABORT_WAIT.total_seconds() - 1


async def test_a_local_model_call_is_cut_at_once_and_keeps_its_text(client: Client, log: Path) -> None:
    with anyio.fail_after(30):
        # The abort reaches the run when the workflow task completes: every 80% of its timeout
        # while a local call runs.
        envelopes, result, took = await abort_mid_answer(client, "local_talker", log, task_timeout=timedelta(seconds=2))
    check_envelopes(envelopes)
    final = as_assistant(result[-1])
    assert final.stop_reason == "aborted"
    assert [text(block) for block in final.content] == ["Hello, wor"]
    assert took < _ABORT_WAIT.total_seconds()
