"""The order of a parallel batch (`agentloop._core._tool_order`), one test per rule.

Each test runs several times: trio runs the tasks that are ready in a shuffled order, and the
order of the events must not depend on it.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop._core._tool_order import groups
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

MODEL = al.Model(id="m", api="faux", provider="faux")
REPEAT = 8


def make_tool(name: str, log: list[str], *, delays: dict[str, float] | None = None, **kwargs: Any) -> al.AgentTool:
    """A tool that logs when it begins (before its first wait) and sleeps `delays[call id]` seconds."""

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        log.append(f"begin:{tool_call_id}")
        if params.get("report"):
            on_update(al.AgentToolResult.from_text("at once"))
        delay = (delays or {}).get(tool_call_id, 0.0)
        if delay:
            await anyio.sleep(delay)
        return al.AgentToolResult.from_text(f"{name} {tool_call_id}")

    schema = {"type": "object", "properties": {"report": {"type": "boolean"}}}
    return al.AgentTool(name=name, description=name, parameters=schema, execute=execute, **kwargs)


async def run_batch(
    calls: list[tuple[str, str, dict[str, Any]]], tools: list[al.AgentTool], log: list[str], **config: Any
) -> list[al.AgentEvent]:
    """One parallel batch of `calls`; every event is logged as it is emitted."""
    events: list[al.AgentEvent] = []

    def emit(event: al.AgentEvent) -> None:
        events.append(event)
        if isinstance(event, al.ToolExecutionEnd):
            log.append(f"end:{event.tool_call_id}")
        elif isinstance(event, al.ToolExecutionUpdate):
            log.append(f"update:{event.tool_call_id}")

    model = ScriptedModel([Response(content=[ScriptedToolCall(*call) for call in calls]), "done"])
    context = al.AgentContext(tools=tools)
    with anyio.fail_after(5):
        await al.run_agent_loop(
            [al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL, **config), emit, None, model
        )
    return events


def only(log: list[str], *prefixes: str) -> list[str]:
    return [entry for entry in log if entry.startswith(prefixes)]


def test_groups_cut_the_batch_at_its_barriers() -> None:
    calls = ["a", "B", "c", "d", "E", "F", "g"]
    assert groups(calls, str.isupper) == [["a"], ["B"], ["c", "d"], ["E"], ["F"], ["g"]]
    assert groups([], str.isupper) == []


async def test_calls_begin_in_source_order(anyio_backend: object) -> None:
    for _ in range(REPEAT):
        log: list[str] = []
        calls = [(f"c{i}", "t", {"report": True}) for i in range(1, 6)]
        await run_batch(calls, [make_tool("t", log, delays=dict.fromkeys(("c1", "c2", "c3", "c4", "c5"), 0.01))], log)
        assert only(log, "begin") == [f"begin:c{i}" for i in range(1, 6)]
        assert only(log, "update") == [f"update:c{i}" for i in range(1, 6)]


async def test_a_barrier_begins_after_every_earlier_call_ends_and_later_calls_after_it(anyio_backend: object) -> None:
    for _ in range(REPEAT):
        log: list[str] = []
        delays = {"c1": 0.02, "c2": 0.0, "c3": 0.01, "c4": 0.0}
        tools = [
            make_tool("work", log, delays=delays),
            make_tool("lock", log, delays=delays, execution_mode="sequential"),
        ]
        calls: list[tuple[str, str, dict[str, Any]]] = [
            ("c1", "work", {}),
            ("c2", "work", {}),
            ("c3", "lock", {}),
            ("c4", "work", {}),
        ]
        await run_batch(calls, tools, log)
        order = only(log, "begin", "end")
        assert order[:2] == ["begin:c1", "begin:c2"]
        assert order.index("begin:c3") > max(order.index("end:c1"), order.index("end:c2"))
        assert order.index("begin:c4") > order.index("end:c3")


async def test_calls_are_finalized_in_completion_order_and_their_messages_follow_in_source_order(
    anyio_backend: object,
) -> None:
    for _ in range(REPEAT // 2):
        log: list[str] = []
        delays = {"c1": 0.3, "c2": 0.0, "c3": 0.1}
        calls: list[tuple[str, str, dict[str, Any]]] = [("c1", "t", {}), ("c2", "t", {}), ("c3", "t", {})]
        events = await run_batch(calls, [make_tool("t", log, delays=delays)], log)
        assert only(log, "end") == ["end:c2", "end:c3", "end:c1"]
        messages = [e.message for e in events if isinstance(e, al.MessageEnd)]
        results = [m.tool_call_id for m in messages if isinstance(m, al.ToolResultMessage)]
        assert results == ["c1", "c2", "c3"]


@pytest.mark.parametrize("delay", [0.0, 0.01])
async def test_calls_completing_in_the_same_pass_are_finalized_in_source_order(
    anyio_backend: object, delay: float
) -> None:
    for _ in range(REPEAT):
        log: list[str] = []
        ids = [f"c{i}" for i in range(1, 7)]
        await run_batch([(i, "t", {}) for i in ids], [make_tool("t", log, delays=dict.fromkeys(ids, delay))], log)
        assert only(log, "end") == [f"end:{i}" for i in ids]


class WatchedLog(list[str]):
    """A log that also says when c2's call has ended."""

    def __init__(self) -> None:
        super().__init__()
        self.c2_ended = anyio.Event()

    def append(self, entry: str) -> None:
        super().append(entry)
        if entry == "end:c2":
            self.c2_ended.set()


async def test_after_tool_call_runs_before_the_end_and_a_slow_hook_holds_up_only_its_own_call(
    anyio_backend: object,
) -> None:
    # c1's hook waits until c2's call has ended: were c2's end held up by c1's hook, the batch
    # would never finish and `run_batch` would fail.
    for _ in range(REPEAT // 2):
        log = WatchedLog()

        async def after(ctx: al.AfterToolCallContext, signal: al.AbortSignal, log: WatchedLog = log) -> None:
            log.append(f"after:{ctx.tool_call.id}")
            if ctx.tool_call.id == "c1":
                await log.c2_ended.wait()

        calls: list[tuple[str, str, dict[str, Any]]] = [("c1", "t", {}), ("c2", "t", {})]
        await run_batch(calls, [make_tool("t", log)], log, after_tool_call=after)
        assert only(log, "after", "end") == ["after:c1", "after:c2", "end:c2", "end:c1"]


def handing_over_tool() -> al.AgentTool:
    """c1 hands its `on_update` over and waits; c2 reports once (and waits for the delivery), then
    reports for c1 and for itself right after one another, and lets c1 finish."""
    handed_over: list[Any] = []
    finished = anyio.Event()

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        if tool_call_id == "c1":
            handed_over.append(on_update)
            await finished.wait()
        else:
            await on_update(al.AgentToolResult.from_text("c2 first"))
            handed_over[0](al.AgentToolResult.from_text("c1 first"))
            on_update(al.AgentToolResult.from_text("c2 second"))
            finished.set()
        return al.AgentToolResult.from_text(tool_call_id)

    return al.AgentTool(name="t", description="t", parameters={"type": "object"}, execute=execute)


async def test_updates_are_delivered_in_the_order_reported_whichever_calls_report_them(anyio_backend: object) -> None:
    # Two reports right after one another, as when two tools wake in the same scheduler pass; one
    # task makes both here, so the order reported is the same on every backend. c2's deliveries
    # have begun already and c1's have not: the order delivered must still be the order reported.
    for _ in range(REPEAT):
        log: list[str] = []
        events = await run_batch([("c1", "t", {}), ("c2", "t", {})], [handing_over_tool()], log)
        updates = [e.partial_result.content[0] for e in events if isinstance(e, al.ToolExecutionUpdate)]
        assert [u.text for u in updates if isinstance(u, al.TextContent)] == ["c2 first", "c1 first", "c2 second"]
