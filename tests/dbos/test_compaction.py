"""Compaction on DBOS: a run that outgrows a small window compacts several times; every request
fits, no tool call loses its result, the summary is updated, the run is the run of an `Agent`
with the same `Compaction` in one process, and a replay (a fork from the last model step, which
runs the workflow again over the recorded steps) meets the same steps, summarises nothing again
and makes the same last request."""

from __future__ import annotations

import uuid

import anyio
import pytest
from dbos import DBOS

import agentloop as al
from agentloop.context import Compaction
from agentloop.dbos import DBOSAgent, result, start_agent, stream_events
from agentloop.wire import from_json, to_json
from tests.context.windowed import WindowedModel, check_pairs, read, reads_then_answers, text_of

from ..durable_checks import PROMPT, check_envelopes, normalized

pytestmark = pytest.mark.usefixtures("launched_dbos")

TURNS = 24
SETTINGS = Compaction(reserve_tokens=2048, keep_recent_tokens=3000)


def windowed(window: int = 8192) -> WindowedModel:
    return reads_then_answers(TURNS, window)


MODEL = windowed()
compacting = DBOSAgent(
    "compacting", model=MODEL.model, system_prompt="You read files.", tools=[read], stream_fn=MODEL, compaction=SETTINGS
)
OVERFLOWING = windowed()
overflowing = DBOSAgent(  # compacts only when the model refuses a request
    "overflowing",
    model=OVERFLOWING.model,
    system_prompt="You read files.",
    tools=[read],
    stream_fn=OVERFLOWING,
    compaction=Compaction(reserve_tokens=2048, keep_recent_tokens=3000, auto=False),
)


@al.tool
async def dump(path: str) -> str:
    """Dump a file too large for any window."""
    return "x" * 40_000


FLOODED = WindowedModel(
    lambda context: al.AssistantMessage(content=(al.ToolCall("d1", "dump", {"path": "big.bin"}),)), window=8192
)
flooded = DBOSAgent("flooded", model=FLOODED.model, tools=[dump], stream_fn=FLOODED, compaction=SETTINGS)


def reset(model: WindowedModel) -> None:
    model.requests.clear()
    model.summaries.clear()
    model.refused = model.largest = 0


async def steps(workflow_id: str) -> list[tuple[int, str]]:
    return [(s["function_id"], s["function_name"]) for s in await DBOS.list_workflow_steps_async(workflow_id)]


async def test_a_long_run_compacts_fits_its_window_and_replays_without_summarising_again() -> None:
    reset(MODEL)
    workflow_id = await start_agent(compacting, [PROMPT], id=f"compacting-{uuid.uuid4().hex}")
    with anyio.fail_after(120):
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    check_envelopes(envelopes)  # the loop's own events, each once, in order: a compaction adds none
    assert not any(e.type.startswith("compaction") for e in envelopes)

    assert MODEL.refused == 0 and MODEL.largest <= MODEL.window
    assert len(MODEL.requests) == TURNS + 1
    for context in MODEL.requests:
        check_pairs(context)
    assert isinstance(messages[-1], al.AssistantMessage) and text_of(messages[-1]) == "done"
    assert len(MODEL.summaries) >= 3
    for k, request in enumerate(MODEL.summaries[1:], start=1):
        assert f"<previous-summary>\n## Goal\nsummary #{k}" in text_of(request.messages[0])
    assert f"summary #{len(MODEL.summaries)}" in text_of(MODEL.requests[-1].messages[0])

    # The same messages and requests as an Agent compacting in one process: the same rules.
    local = windowed()
    agent = al.Agent(model=local.model, system_prompt="You read files.", tools=[read], stream_fn=local)
    SETTINGS.attach(agent)
    await agent.prompt(PROMPT)
    assert normalized([to_json(m) for m in messages]) == normalized([to_json(m) for m in agent.state.messages])
    assert [[text_of(m) for m in c.messages] for c in MODEL.requests] == [
        [text_of(m) for m in c.messages] for c in local.requests
    ]

    print(f"\n{len(MODEL.summaries)} compactions, largest request {MODEL.largest}/{MODEL.window} tokens")
    recorded = await steps(workflow_id)
    summaries = [name for _, name in recorded if name == "compacting.summary"]
    assert len(summaries) == len(MODEL.summaries)  # one step per summary

    # A replay: the workflow runs again from its start over the recorded steps, up to the last
    # model step, which runs again.
    last_model = max(i for i, name in recorded if name == "compacting.model")
    calls, summarised = len(MODEL.requests), len(MODEL.summaries)
    with anyio.fail_after(60):
        fork = await DBOS.fork_workflow_async(workflow_id, last_model)
        replayed = [from_json(m) for m in await fork.get_result()]
    assert len(MODEL.summaries) == summarised  # nothing summarised again
    assert len(MODEL.requests) == calls + 1  # only the last model call ran again...
    assert MODEL.requests[-1] == MODEL.requests[-2]  # ...with the same compacted context
    assert normalized([to_json(m) for m in replayed]) == normalized([to_json(m) for m in messages])
    assert await steps(fork.workflow_id) == recorded


async def test_an_overflow_is_answered_by_compacting_and_calling_again() -> None:
    reset(OVERFLOWING)
    workflow_id = await start_agent(overflowing, [PROMPT], id=f"overflowing-{uuid.uuid4().hex}")
    with anyio.fail_after(120):
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    check_envelopes(envelopes)
    print(f"\n{OVERFLOWING.refused} requests refused, each answered by a compaction and one more call")
    assert OVERFLOWING.refused >= 2
    assert len(OVERFLOWING.summaries) == OVERFLOWING.refused
    assert isinstance(messages[-1], al.AssistantMessage) and text_of(messages[-1]) == "done"
    assert not [m for m in messages if isinstance(m, al.AssistantMessage) and m.stop_reason == "error"]
    names = [name for _, name in await steps(workflow_id)]
    assert names.count("overflowing.summary") == len(OVERFLOWING.summaries)
    assert names.count("overflowing.model") == TURNS + 1 + OVERFLOWING.refused


async def test_an_overflow_that_compaction_cannot_help_ends_the_run_with_the_providers_error() -> None:
    reset(FLOODED)
    workflow_id = await start_agent(flooded, [PROMPT], id=f"flooded-{uuid.uuid4().hex}")
    with anyio.fail_after(60):
        envelopes = [e async for e in stream_events(workflow_id)]
        messages = await result(workflow_id)
    check_envelopes(envelopes)
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "error"
    assert "exceeds the available context size" in (last.error_message or "")
    # Compacted before the second call (the threshold); refused all the same, and the overflow
    # finds nothing more to compact (the result stays with its call): no second call.
    assert FLOODED.refused == 1 and len(FLOODED.summaries) == 1
    names = [name for _, name in await steps(workflow_id)]
    assert names.count("flooded.summary") == 1 and names.count("flooded.model") == 2


def test_a_dbos_agent_checks_its_compaction() -> None:
    with pytest.raises(TypeError, match="compaction must be an agentloop"):
        DBOSAgent("bad_compaction", model=MODEL.model, compaction={"reserve_tokens": 1})  # type: ignore[arg-type]
