"""Generated whole runs: random responses, tools, hooks, queues, aborts and early exits.

For every generated run, on asyncio and trio: the events obey the grammar, every tool call gets
exactly one result in source order, the Agent's transcript is its history plus `agent_end`'s
messages, no tool is left running when the run or the block ends, and the run ends within a bound
after an abort or an early exit. `AGENTLOOP_PROFILE=long` runs many more examples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedThinking, ScriptedToolCall, check_events

from ._profile import Tally

LONG = os.environ.get("AGENTLOOP_PROFILE") == "long"
EXAMPLES = 1500 if LONG else 40
MODEL = al.Model(id="m", api="faux", provider="faux")
TOOL_KINDS = ("fast", "slow", "raise", "progress", "stubborn", "barrier", "missing")
END_BOUND = 2.0
"""Seconds from an abort, or from the consumer leaving, to the end of the run (the tool grace is 0.01 s)."""
TALLY = Tally("properties")


@dataclass
class Ledger:
    """What the tools did: how many are running now, and how many ran."""

    running: int = 0
    started: int = 0
    log: list[str] = field(default_factory=list)


def make_tools(ledger: Ledger) -> list[al.AgentTool]:
    def make(kind: str) -> al.AgentTool:
        async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
            ledger.running += 1
            ledger.started += 1
            try:
                if kind == "slow":
                    with anyio.move_on_after(0.02):
                        await signal.wait()
                    if signal.aborted:
                        raise al.ToolError("stopped")
                elif kind == "raise":
                    raise RuntimeError("tool failed")
                elif kind == "progress":
                    for i in range(3):
                        on_update(al.AgentToolResult.from_text(f"{i}"))
                        await anyio.sleep(0.002)
                elif kind == "stubborn":
                    await anyio.sleep(0.05)  # ignores the abort: the grace period cuts it
                elif kind == "barrier":
                    await anyio.sleep(0.003)
                return al.AgentToolResult(content=(al.TextContent(f"{kind} ok"),), terminate=params.get("stop") == 1)
            finally:
                ledger.running -= 1

        return al.AgentTool(
            name=kind,
            description=kind,
            parameters={"type": "object", "properties": {"stop": {"type": "integer"}}},
            execute=execute,
            execution_mode="sequential" if kind == "barrier" else None,
        )

    return [make(kind) for kind in TOOL_KINDS if kind != "missing"]


calls = st.lists(st.tuples(st.sampled_from(TOOL_KINDS), st.sampled_from([None, 0, 1, "bad"])), min_size=0, max_size=5)
responses = st.lists(
    st.tuples(
        st.booleans(),  # thinking
        st.lists(st.text(min_size=1, max_size=5), min_size=0, max_size=4),  # text chunks
        calls,
        st.sampled_from([None, None, None, "error", "length", "aborted"]),
        st.sampled_from([0.0, 0.0, 0.001]),  # chunk delay
    ),
    min_size=1,
    max_size=4,
)


@dataclass
class Plan:
    responses: list[Any]
    mode: str
    execution: str
    abort_at: int | None
    exit_at: int | None
    block: bool
    override: str | None
    steering: int
    follow_ups: int


plans = st.builds(
    Plan,
    responses=responses,
    mode=st.sampled_from(["stream", "agent", "sink"]),
    execution=st.sampled_from(["parallel", "sequential"]),
    abort_at=st.one_of(st.none(), st.integers(0, 40)),
    exit_at=st.one_of(st.none(), st.integers(0, 40)),
    block=st.booleans(),
    override=st.sampled_from([None, "terminate", "raise", "error"]),
    steering=st.integers(0, 2),
    follow_ups=st.integers(0, 2),
)


def build_model(plan: Plan) -> ScriptedModel:
    scripted = []
    for n, (thinking, chunks, tool_calls, stop, delay) in enumerate(plan.responses):
        content: list[Any] = []
        if thinking:
            content.append(ScriptedThinking(["hm", "m"]))
        if chunks:
            content.append(ScriptedText(chunks))
        for i, (kind, stop_arg) in enumerate(tool_calls):
            content.append(ScriptedToolCall(f"r{n}c{i}", kind, {} if stop_arg is None else {"stop": stop_arg}))
        scripted.append(Response(content=content, stop_reason=stop, chunk_delay=delay))
    return ScriptedModel(scripted)


def hooks(plan: Plan) -> dict[str, Any]:
    def before(ctx: al.BeforeToolCallContext, signal: al.AbortSignal) -> al.BeforeToolCallResult | None:
        if plan.block and ctx.tool_call.id.endswith("c1"):
            return al.BeforeToolCallResult(block=True, reason="blocked", terminate=True)
        return None

    def after(ctx: al.AfterToolCallContext, signal: al.AbortSignal) -> al.AfterToolCallResult | None:
        if plan.override == "raise" and ctx.tool_call.id.endswith("c0"):
            raise ValueError("after failed")
        if plan.override == "terminate":
            return al.AfterToolCallResult(terminate=True)
        if plan.override == "error":
            return al.AfterToolCallResult(is_error=True)
        return None

    return {"before_tool_call": before, "after_tool_call": after}


def check_results_answer_calls(messages: list[al.AgentMessage]) -> None:
    """Every tool call of a completed assistant message has exactly one result, in source order."""
    for i, message in enumerate(messages):
        if isinstance(message, al.AssistantMessage) and message.stop_reason not in ("error", "aborted"):
            ids = [c.id for c in message.tool_calls]
            following = [
                m.tool_call_id for m in messages[i + 1 : i + 1 + len(ids)] if isinstance(m, al.ToolResultMessage)
            ]
            if i + len(ids) < len(messages) or ids == following:
                assert following == ids, (ids, following)


async def run_plan(plan: Plan) -> None:
    ledger = Ledger()
    tools = make_tools(ledger)
    model = build_model(plan)
    events: list[al.AgentEvent] = []
    signal = al.AbortSignal()
    steering = [al.UserMessage(content=f"steer {i}") for i in range(plan.steering)]
    follow_ups = [al.UserMessage(content=f"follow {i}") for i in range(plan.follow_ups)]
    config = dict(
        tool_execution=plan.execution,
        tool_abort_grace=0.01,
        max_turns=6,
        **hooks(plan),
    )

    aborted_at: list[float] = []

    def observe(event: al.AgentEvent) -> bool:
        """Record an event; True when the consumer leaves early here."""
        events.append(event)
        if plan.abort_at is not None and len(events) == plan.abort_at:
            aborted_at.append(anyio.current_time())
            signal.abort()
        return plan.exit_at is not None and len(events) == plan.exit_at and plan.mode == "stream"

    exited = False
    with anyio.fail_after(10):
        if plan.mode == "agent":
            history: list[al.AgentMessage] = [al.UserMessage(content="earlier")]
            agent = al.Agent(model=MODEL, tools=tools, messages=history, stream_fn=model, **config)
            for m in steering:
                agent.steer(m)
            for m in follow_ups:
                agent.follow_up(m)

            def listen(event: al.AgentEvent, s: al.AbortSignal) -> None:
                observe(event)
                if plan.abort_at is not None and len(events) == plan.abort_at:
                    agent.abort()

            agent.subscribe(listen)
            await agent.prompt("go")
            end = events[-1]
            assert isinstance(end, al.AgentEnd)
            assert agent.state.messages == [*history, *end.messages]
            assert not agent.state.is_streaming and agent.state.pending_tool_calls == frozenset()
        else:
            cfg = al.AgentLoopConfig(
                model=MODEL,
                get_steering_messages=lambda: [steering.pop(0)] if steering else [],
                get_follow_up_messages=lambda: [follow_ups.pop(0)] if follow_ups else [],
                **config,
            )
            context = al.AgentContext(tools=tools)
            prompt = [al.UserMessage(content="go")]
            if plan.mode == "sink":

                def sink(event: al.AgentEvent) -> None:
                    observe(event)  # a sink cannot leave early: only the stream mode exits

                await al.run_agent_loop(prompt, context, cfg, sink, signal, model)
            else:
                async with al.agent_loop(prompt, context, cfg, signal, model) as stream:
                    async for event in stream:
                        if observe(event):
                            exited = True
                            left_at = anyio.current_time()
                            break
                if exited:
                    assert anyio.current_time() - left_at < END_BOUND, "the block took too long to close"
    assert ledger.running == 0, "a tool is still running after the run ended"
    if aborted_at:
        assert anyio.current_time() - aborted_at[0] < END_BOUND, "the run took too long to end after its abort"
    tally(plan, events, exited, bool(aborted_at))
    if exited:
        return
    check_events(events)
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    check_results_answer_calls(list(end.messages))


def tally(plan: Plan, events: list[al.AgentEvent], exited: bool, aborted: bool) -> None:
    TALLY.add("runs")
    TALLY.add(f"runs ({plan.mode})")
    TALLY.add("aborts", aborted)
    TALLY.add("early exits", exited)
    TALLY.add("turns", sum(isinstance(e, al.TurnStart) for e in events))
    TALLY.add("tool calls", sum(isinstance(e, al.ToolExecutionStart) for e in events))
    faults = sum(isinstance(e, al.ToolExecutionEnd) and e.is_error for e in events)
    faults += sum(isinstance(e, al.TurnEnd) and e.message.stop_reason in ("error", "length") for e in events)
    TALLY.add("faults injected (failed tool calls, model errors, cut responses)", faults)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(plan=plans)
def test_generated_runs_keep_every_invariant(backend: str, plan: Plan) -> None:
    anyio.run(run_plan, plan, backend=backend)


def teardown_module() -> None:
    TALLY.write()
