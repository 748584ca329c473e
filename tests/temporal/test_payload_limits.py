"""Payload sizes: no run or reader hangs on a large value. Events come in pages (a large event in
parts), a value that cannot fit fails the run with a clear error, just under the limit runs,
with a store large values go by reference, and a result that cannot travel is an error result
at once (the tool is not run again)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.client import Client, WorkflowFailureError

import agentloop as al
from agentloop.temporal import (
    PAYLOAD_LIMIT,
    stored_data_converter,
    stream_events,
    worker,
)
from agentloop.wire import EventEnvelope

from ..durable_checks import check_envelopes
from . import agents
from .runs import run_on_worker, start


@pytest.fixture
def tool_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTLOOP_TEST_LOG", str(tmp_path))
    return tmp_path / "tool_starts"


def tool_texts(envelopes: list[EventEnvelope]) -> list[str]:
    ends = [e.event for e in envelopes if isinstance(e.event, al.ToolExecutionEnd)]
    return [block.text for end in ends for block in end.result.content if isinstance(block, al.TextContent)]


def error_result_text(message: al.AgentMessage) -> str:
    """The text of `message`, which must be a tool result that is an error, with a text block."""
    assert isinstance(message, al.ToolResultMessage) and message.is_error
    assert isinstance(message.content[0], al.TextContent)
    return message.content[0].text


async def largest_payload(handle: Any) -> int:
    """The size of the largest payload in the workflow's history."""
    largest = 0
    for event in (await handle.fetch_history()).events:
        for field, value in event.ListFields():
            if field.name.endswith("_attributes"):
                for name in ("input", "result"):
                    if value.DESCRIPTOR.fields_by_name.get(name) is not None and value.HasField(name):
                        largest = max([largest, *(p.ByteSize() for p in getattr(value, name).payloads)])
    return largest


async def test_a_caller_streaming_a_run_with_a_600_kb_result_gets_every_event(client: Client, queue: str) -> None:
    envelopes, _, result = await run_on_worker(client, queue, agents.blob_600k, seconds=120)
    assert tool_texts(envelopes) == ["x" * 600_000]
    assert result[-1].content[0].text == "done"


async def test_the_events_of_a_finished_run_with_a_large_result_are_read_in_pages(client: Client, queue: str) -> None:
    with anyio.fail_after(120):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start(client, agents.blob_600k, queue)
            await handle.result()
            envelopes = [e async for e in stream_events(handle)]  # the query of a finished workflow
            again = [e async for e in stream_events(handle, after_seq=envelopes[2].seq)]
    check_envelopes(envelopes)
    assert tool_texts(envelopes) == ["x" * 600_000]
    assert [e.seq for e in again] == [e.seq for e in envelopes[3:]]


def update_results(history: Any) -> list[bytes]:
    """The answers of the workflow's updates (`events` pages), in history order."""
    return [
        event.workflow_execution_update_completed_event_attributes.outcome.success.payloads[0].data
        for event in history.events
        if event.HasField("workflow_execution_update_completed_event_attributes")
    ]


async def test_a_caller_still_reading_when_the_run_ends_gets_the_rest_from_the_worker(
    client: Client, queue: str
) -> None:
    """A closed workflow's events are a query, and a worker answers one by replaying the whole
    history: a page at a time, a run's large events would cost a replay each. The workflow waits
    for its caller instead, and the last page (`agent_end`) is an answer of the workflow's own."""
    with anyio.fail_after(60):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start(client, agents.blob_600k, queue)
            events = stream_events(handle)
            envelopes = [await anext(events)]
            # the caller falls behind: the run has given its last event before the caller reads on
            while not (await handle.query("events_now", args=[-1, 0], result_type=dict))["finished"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)
            envelopes += [e async for e in events]
            result = await handle.result()
    check_envelopes(envelopes)
    assert tool_texts(envelopes) == ["x" * 600_000]
    assert result[-1].content[0].text == "done"
    # every part of the last event (`agent_end`, as large as the result) was an `events` answer
    pages = [json.loads(data) for data in update_results(await handle.fetch_history())]
    parts_of_the_end = [page for page in pages if page.get("seq") == envelopes[-1].seq]
    assert envelopes[-1].type == "agent_end" and parts_of_the_end
    assert len(parts_of_the_end) == parts_of_the_end[0]["parts"] > 1


async def test_a_caller_that_stops_reading_holds_the_end_of_the_run_only_while_it_asks(
    client: Client, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.temporal import _workflow

    monkeypatch.setattr(_workflow, "_DRAIN_TIMEOUT", timedelta(seconds=1))
    with anyio.fail_after(60):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start(client, agents.blob_600k, queue)
            seen: list[EventEnvelope] = []
            async for envelope in stream_events(handle):
                seen.append(envelope)
                break  # the caller goes away after its first page
            result = await handle.result()
    assert [e.type for e in seen] == ["agent_start"]
    assert result[-1].content[0].text == "done"
    assert len(update_results(await handle.fetch_history())) == 1


async def test_a_context_just_under_the_limit_runs(client: Client, queue: str) -> None:
    _, handle, result = await run_on_worker(client, queue, agents.blob_just_under, seconds=180)
    assert result[-1].content[0].text == "done"
    assert PAYLOAD_LIMIT - 2_000 < await largest_payload(handle) < 2 * 1024 * 1024


async def test_a_context_just_over_the_limit_fails_the_run_saying_why(client: Client, queue: str) -> None:
    with anyio.fail_after(180):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start(client, agents.blob_just_over, queue)
            seen: list[EventEnvelope] = []
            with pytest.raises(WorkflowFailureError) as streamed:
                async for envelope in stream_events(handle):
                    seen.append(envelope)
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
    for error in (streamed.value, failure.value):
        text = str(error.cause)
        assert "the model call's context is" in text and f"over the {PAYLOAD_LIMIT} bytes" in text
        assert "context_store" in text
    # the tool's own result fitted (just under): the caller saw it before the run failed
    assert tool_texts(seen) == ["x" * (PAYLOAD_LIMIT - 400)]


async def test_two_large_results_without_a_store_fail_the_run_instead_of_hanging(client: Client, queue: str) -> None:
    with anyio.fail_after(180):
        async with worker(client, task_queue=queue, agents=agents.UNSTORED):
            handle = await start(client, agents.two_blobs, queue)
            with pytest.raises(WorkflowFailureError) as streamed:
                _ = [e async for e in stream_events(handle)]
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
    assert "the model call's context is" in str(streamed.value.cause)
    assert "the model call's context is" in str(failure.value.cause)


async def test_a_tool_result_over_the_limit_is_an_error_result_and_the_tool_runs_once(
    client: Client, queue: str, tool_log: Path
) -> None:
    _, _, result = await run_on_worker(client, queue, agents.blob_too_big, seconds=120)
    assert f"the result of tool 'blob' is {PAYLOAD_LIMIT + 1} bytes" in error_result_text(result[2])
    assert (await anyio.Path(tool_log).read_text()).splitlines() == [f"blob {PAYLOAD_LIMIT - agents.TOOL_OVERHEAD + 1}"]
    assert result[-1].content[0].text == "done"


async def test_with_a_store_large_results_and_transcripts_go_by_reference(
    client: Client, temporal_address: str, queue: str
) -> None:
    with anyio.fail_after(180):
        async with worker(client, task_queue=queue, agents=agents.STORED):
            handle = await start(client, agents.two_blobs_stored, queue)
            envelopes = [e async for e in stream_events(handle)]  # a client without the store reads the events
            reader = await Client.connect(temporal_address, data_converter=stored_data_converter(agents.STORE))
            result = await reader.get_workflow_handle(handle.id).result()
    check_envelopes(envelopes)
    assert tool_texts(envelopes) == ["x" * 1_200_000] * 2
    assert [len(block.text) for m in result[2:4] for block in m.content] == [1_200_000] * 2
    assert result[-1].content[0].text == "done"
    assert await largest_payload(handle) < 256 * 1024  # the history holds keys
    assert len(agents.STORE.memory) >= 3  # two results and the context


async def test_details_that_are_not_json_are_an_error_result_at_once_and_the_tool_runs_once(
    client: Client, queue: str, tool_log: Path
) -> None:
    _, _, result = await run_on_worker(client, queue, agents.odd, seconds=60)
    assert "returned details that are not JSON values" in error_result_text(result[2])
    assert (await anyio.Path(tool_log).read_text()).splitlines() == ["odd_details k"]
