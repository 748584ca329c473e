"""The shared conformance scenarios that a durable run can play, through the engine, against the
reference's golden traces: the same events as the in-process loop (and the TypeScript one).

A scenario qualifies when it runs the loop (`agent_loop`, `agent_loop_continue`) without hooks,
injections or queues: a `TemporalAgent` has none of those (steering and abort are signals, tested
in test_temporal_run). The trace compared is the agent events in the conformance runner's form
(`event_line`), without what a durable run does not stream: `message_update` (the model
activity consumes the token deltas) and `tool_execution_update` (a tool's progress stays in its
activity). The harness's own lines (`llm:call`, `tool:execute`) happen in activities and are
left out; the number of messages the run returned is compared too. Calls of a parallel batch
end in the order their activities finish (the reference breaks a tie by source order): a run of
consecutive `tool_execution_end` lines is compared as a set.
"""

from __future__ import annotations

import difflib
import json
import uuid
from pathlib import Path
from typing import Any

import anyio
from temporalio.client import Client

from agentloop.temporal import TemporalAgent, start_agent, stream_events, worker

from ..conformance.run import MODEL, Scenario, build_message, event_line
from ..durable_checks import ends_as_sets

PUBLIC = Path(__file__).resolve().parents[1] / "conformance" / "public"
NOT_STREAMED = frozenset({"message_update", "tool_execution_update"})
AGENT_EVENTS = frozenset(
    {"agent_start", "agent_end", "turn_start", "turn_end", "message_start", "message_end"}
    | {"tool_execution_start", "tool_execution_end"}
)
DIFFERENT = {
    "continue_empty_context_error": "the workflow fails (test_a_run_without_prompts_continues_the_transcript...)",
    "continue_last_assistant_error": "the workflow fails (test_a_run_without_prompts_continues_the_transcript...)",
    "loop_stream_throws": "a stream that raises fails the model activity: 'The model call failed: ...' once retried",
}
"""Scenarios that qualify but end differently in a durable run, and why."""


def playable() -> list[dict[str, Any]]:
    scenarios = []
    for path in sorted((PUBLIC / "scenarios").glob("*.json")):
        data = json.loads(path.read_text())
        simple = not (data.get("config") or data.get("injections") or data.get("queues") or data.get("agent"))
        if simple and data["entry"] in ("agent_loop", "agent_loop_continue") and data["name"] not in DIFFERENT:
            scenarios.append(data)
    return scenarios


def durable_agent(data: dict[str, Any]) -> TemporalAgent:
    """The scenario's tools and scripted model, as the conformance runner makes them, in an agent."""
    scenario = Scenario(data)
    return TemporalAgent(
        f"conformance-{data['name']}",
        model=MODEL,
        tools=[scenario.make_tool(t) for t in data.get("tools", [])],
        system_prompt=(data.get("context") or {}).get("systemPrompt", ""),
        stream_fn=scenario.stream_fn,
    )


SCENARIOS = playable()
AGENTS = {data["name"]: durable_agent(data) for data in SCENARIOS}


def golden(name: str) -> tuple[list[dict[str, Any]], int | None]:
    lines = [json.loads(line) for line in (PUBLIC / "golden" / f"{name}.jsonl").read_text().splitlines() if line]
    returned = next((line["messages"] for line in lines if line["type"] == "return"), None)
    return [line for line in lines if line["type"] in AGENT_EVENTS], returned


async def test_the_loop_scenarios_give_the_golden_events_through_the_engine(client: Client) -> None:
    assert len(SCENARIOS) >= 15  # the scenarios are there (and qualify)
    queue = f"conformance-{uuid.uuid4().hex}"
    traces: dict[str, tuple[list[dict[str, Any]], int]] = {}

    async def play(data: dict[str, Any]) -> None:
        context = data.get("context") or {}
        prompts = [build_message(p) for p in data.get("prompts", [])] if data["entry"] == "agent_loop" else []
        handle = await start_agent(
            client,
            AGENTS[data["name"]].name,
            prompts,
            messages=[build_message(m) for m in context.get("messages", [])],
            id=f"conformance-{data['name']}-{uuid.uuid4().hex}",
            task_queue=queue,
        )
        lines = [event_line(e.event) async for e in stream_events(handle) if e.type not in NOT_STREAMED]
        traces[data["name"]] = lines, len(await handle.result())

    with anyio.fail_after(60):
        async with worker(client, task_queue=queue, agents=list(AGENTS.values())), anyio.create_task_group() as group:
            for data in SCENARIOS:
                group.start_soon(play, data)
    differing = {}
    for data in SCENARIOS:
        expected, returned = golden(data["name"])
        lines, count = traces[data["name"]]
        expected, lines = ends_as_sets(expected), ends_as_sets(lines)
        if lines != expected or count != returned:
            differing[data["name"]] = (
                "\n".join(
                    difflib.unified_diff([json.dumps(x) for x in expected], [json.dumps(x) for x in lines], lineterm="")
                )
                + f"\nreturned {count} messages, the reference {returned}"
            )
    assert not differing, f"traces differ from the golden ones: {list(differing)}\n" + "\n".join(differing.values())
