"""Compaction on Temporal: a run that outgrows a small window compacts several times; every
request fits, no tool call loses its result, the summary is updated, the run is the run of an
`Agent` with the same `Compaction` in one process, a worker that replays every workflow task
(no cache) and the Replayer meet no non-determinism, nothing is summarised twice, and the
compaction goes over continue-as-new with a compacted transcript."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Replayer

import agentloop as al
from agentloop.context import Compaction
from agentloop.temporal import (
    PAYLOAD_LIMIT,
    AgentLoopPlugin,
    AgentWorkflow,
    TemporalAgent,
    start_agent,
    stream_events,
    worker,
)
from agentloop.wire import to_json
from tests.context.windowed import WindowedModel, check_pairs, read, reads_then_answers, text_of

from ..durable_checks import PROMPT, check_envelopes, normalized

TURNS = 24
SETTINGS = Compaction(reserve_tokens=2048, keep_recent_tokens=3000)


def windowed(window: int = 8192) -> WindowedModel:
    return reads_then_answers(TURNS, window)


MODEL = windowed()
compacting = TemporalAgent(
    "compacting",
    model=MODEL.model,
    system_prompt="You read files.",
    tools=[read],
    stream_fn=MODEL,
    turns_per_history=7,
    compaction=SETTINGS,
)
OVERFLOWING = windowed()
overflowing = TemporalAgent(  # compacts only when the model refuses a request
    "overflowing",
    model=OVERFLOWING.model,
    system_prompt="You read files.",
    tools=[read],
    stream_fn=OVERFLOWING,
    turns_per_history=100,
    compaction=Compaction(reserve_tokens=2048, keep_recent_tokens=3000, auto=False),
)


class HangingSummary:
    """A summary model that answers nothing until its call is cancelled; `started` is set when
    it is asked."""

    def __init__(self) -> None:
        self.started = anyio.Event()

    async def __call__(
        self, model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        self.started.set()
        await anyio.sleep_forever()
        yield al.ErrorEvent("error", al.AssistantMessage())  # never reached: a stream function is a generator


HANGING = HangingSummary()
hanging_summary = TemporalAgent(
    "hanging_summary",
    model=windowed().model,
    system_prompt="You read files.",
    tools=[read],
    stream_fn=windowed(),
    turns_per_history=100,
    compaction=Compaction(reserve_tokens=2048, keep_recent_tokens=3000, stream_fn=HANGING),
)


@al.tool
async def dump(part: int) -> str:
    """Dump a large file."""
    return f"part {part}:\n" + "x" * 300_000


def dumps_then_answers(model: WindowedModel) -> WindowedModel:
    """`model` answering each request with a call of `dump` (the run never ends by itself)."""

    def answer(context: al.Context) -> al.AssistantMessage:
        n = len(model.requests) - 1
        return al.AssistantMessage(content=(al.ToolCall(f"d{n}", "dump", {"part": n}),))

    model.answer = answer
    return model


DUMPING = dumps_then_answers(WindowedModel(lambda context: al.AssistantMessage(), window=200_000))
dumping = TemporalAgent(  # its context stays small, but every message it adds goes into the next history
    "dumping",
    model=DUMPING.model,
    tools=[dump],
    stream_fn=DUMPING,
    turns_per_history=1,
    compaction=Compaction(reserve_tokens=2048, keep_recent_tokens=3000),
)


def reset(model: WindowedModel) -> None:
    model.requests.clear()
    model.summaries.clear()
    model.refused = model.largest = 0


async def histories(client: Client, workflow_id: str) -> list[Any]:
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    return [
        await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        for run in sorted(runs, key=lambda r: r.start_time)
    ]


def activities(history: Any, suffix: str) -> int:
    return sum(
        1
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name.endswith(suffix)
    )


def run_input(history: Any) -> dict[str, Any]:
    """The `AgentRun` a history started with, as JSON."""
    started = history.events[0].workflow_execution_started_event_attributes
    return json.loads(started.input.payloads[0].data)  # type: ignore[no-any-return]


async def in_process_run(model: WindowedModel, settings: Compaction) -> tuple[list[al.AgentMessage], WindowedModel]:
    """The same conversation with an `Agent` and `settings.attach` in this process."""
    local = reads_then_answers(TURNS, model.window)
    agent = al.Agent(model=local.model, system_prompt="You read files.", tools=[read], stream_fn=local)
    settings.attach(agent)
    await agent.prompt(PROMPT)
    return list(agent.state.messages), local


async def test_a_long_run_compacts_fits_its_window_replays_and_carries_the_compaction_over_continue_as_new(
    client: Client, queue: str
) -> None:
    reset(MODEL)
    with anyio.fail_after(120):
        # No workflow cache: every workflow task replays the history from its start, summaries included.
        async with worker(client, task_queue=queue, agents=[compacting, overflowing], max_cached_workflows=0):
            run_id = f"compacting-{uuid.uuid4().hex}"
            handle = await start_agent(client, "compacting", [PROMPT], id=run_id, task_queue=queue)
            envelopes = [e async for e in stream_events(handle)]
            result = await handle.result()
    check_envelopes(envelopes)  # the loop's own events, each once, in order: a compaction adds none
    assert not any(e.type.startswith("compaction") for e in envelopes)

    # Every request fit, and kept each tool call with its result; the run ended well.
    assert MODEL.refused == 0 and MODEL.largest <= MODEL.window
    assert len(MODEL.requests) == TURNS + 1
    for context in MODEL.requests:
        check_pairs(context)
    assert isinstance(result[-1], al.AssistantMessage) and text_of(result[-1]) == "done"
    assert len(result) == 1 + 2 * TURNS + 1  # the result is every message of the run

    # Several compactions, each summary updating the one before.
    assert len(MODEL.summaries) >= 3
    for k, request in enumerate(MODEL.summaries[1:], start=1):
        assert f"<previous-summary>\n## Goal\nsummary #{k}" in text_of(request.messages[0])
    last = text_of(MODEL.requests[-1].messages[0])
    assert last.startswith("The conversation history before this point was compacted")
    assert f"summary #{len(MODEL.summaries)}" in last

    # The same requests and messages as an Agent compacting in one process: the same rules.
    expected, local = await in_process_run(MODEL, SETTINGS)
    assert normalized([to_json(m) for m in result]) == normalized([to_json(m) for m in expected])
    assert [[text_of(m) for m in c.messages] for c in MODEL.requests] == [
        [text_of(m) for m in c.messages] for c in local.requests
    ]

    # Histories: each summary activity ran once (a replay reads it from the history), and a new
    # history starts with the compacted transcript and the compaction's state.
    recorded = await histories(client, handle.id)
    compactions, largest = len(MODEL.summaries), MODEL.largest
    print(f"\n{compactions} compactions over {len(recorded)} histories, largest request {largest}/{MODEL.window}")
    assert len(recorded) >= 3
    assert sum(activities(h, ".summary") for h in recorded) == len(MODEL.summaries)
    carried = [run_input(h) for h in recorded[1:]]
    compacted = [c for c in carried if c["state"]["compaction"] is not None]
    assert compacted, "no history started after a compaction"
    for data in compacted:
        state = data["state"]
        assert state["compaction"]["firstKeptIndex"] == 0
        assert len(data["messages"]) < len(state["runMessages"])  # what was summarised is left behind
    replayer = Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin([compacting, overflowing])])
    for history in recorded:
        await replayer.replay_workflow(history)


async def test_an_overflow_is_answered_by_compacting_and_calling_again(client: Client, queue: str) -> None:
    reset(OVERFLOWING)
    with anyio.fail_after(120):
        async with worker(client, task_queue=queue, agents=[compacting, overflowing], max_cached_workflows=0):
            run_id = f"overflowing-{uuid.uuid4().hex}"
            handle = await start_agent(client, "overflowing", [PROMPT], id=run_id, task_queue=queue)
            envelopes = [e async for e in stream_events(handle)]
            result = await handle.result()
    check_envelopes(envelopes)
    print(f"\n{OVERFLOWING.refused} requests refused, each answered by a compaction and one more call")
    assert OVERFLOWING.refused >= 2  # the model refused, and each time the call was made again
    assert len(OVERFLOWING.summaries) == OVERFLOWING.refused
    assert isinstance(result[-1], al.AssistantMessage) and text_of(result[-1]) == "done"
    errors = [m for m in result if isinstance(m, al.AssistantMessage) and m.stop_reason == "error"]
    assert errors == []  # the loop saw one answer per call: the refusals stayed inside the stream
    (history,) = await histories(client, handle.id)
    assert activities(history, ".summary") == len(OVERFLOWING.summaries)
    assert activities(history, ".model") == TURNS + 1 + OVERFLOWING.refused
    await Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin([compacting, overflowing])]).replay_workflow(
        history
    )


async def test_an_abort_cancels_a_summary_in_flight_and_the_run_ends_aborted(client: Client, queue: str) -> None:
    HANGING.started = anyio.Event()
    with anyio.fail_after(60):
        async with worker(client, task_queue=queue, agents=[hanging_summary]):
            run_id = f"hanging-{uuid.uuid4().hex}"
            handle = await start_agent(client, "hanging_summary", [PROMPT], id=run_id, task_queue=queue)
            await HANGING.started.wait()
            await handle.signal(AgentWorkflow.abort)
            result = await handle.result()
    last = result[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "aborted"
    (history,) = await histories(client, handle.id)
    assert activities(history, ".summary") == 1
    await Replayer(workflows=[AgentWorkflow], plugins=[AgentLoopPlugin([hanging_summary])]).replay_workflow(history)


async def test_without_a_store_a_compacting_run_whose_messages_outgrow_a_payload_fails_clearly(
    client: Client, queue: str
) -> None:
    """Compaction keeps the model's context small, not the run's messages (its result), which a
    new history carries: the run fails with `PayloadTooLarge` before it leaves the history."""
    reset(DUMPING)
    with anyio.fail_after(60):
        async with worker(client, task_queue=queue, agents=[dumping]):
            handle = await start_agent(client, "dumping", [PROMPT], id=f"dumping-{uuid.uuid4().hex}", task_queue=queue)
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
    text = str(failure.value.cause)
    assert "the run carried into the next history" in text and f"over the {PAYLOAD_LIMIT} bytes" in text
    assert "context_store" in text
    assert DUMPING.summaries  # it compacted: every request fitted the window
    assert DUMPING.refused == 0 and DUMPING.largest <= DUMPING.window


def test_a_temporal_agent_checks_its_compaction() -> None:
    with pytest.raises(TypeError, match="compaction must be an agentloop"):
        TemporalAgent("bad_compaction", model=MODEL.model, compaction={"reserve_tokens": 1})  # type: ignore[arg-type]
    assert compacting.summary_activity_name == "compacting.summary"
    assert len(compacting.activities) == 3  # the model, the tool, the summary
