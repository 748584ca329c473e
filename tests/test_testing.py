"""agentloop.testing: the scripted model and the event grammar checker."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.testing import (
    EventOrderError,
    Response,
    ScriptedModel,
    ScriptedText,
    ScriptedThinking,
    ScriptedToolCall,
    check_events,
)

MODEL = al.Model(id="m", api="faux", provider="faux")


async def play(model: ScriptedModel, signal: al.AbortSignal | None = None) -> list[Any]:
    options = al.StreamOptions(signal=signal or al.AbortSignal())
    return [event async for event in model(MODEL, al.Context(), options)]


async def test_scripted_model_streams_blocks_and_records_calls(anyio_backend: object) -> None:
    model = ScriptedModel(
        [
            Response(
                content=[
                    ScriptedThinking(["hm", "m"]),
                    ScriptedText("hi"),
                    ScriptedToolCall("c1", "t", args_chunks=['{"a":', "1}"]),
                ]
            )
        ]
    )
    events = await play(model)
    assert [e.type for e in events] == [
        "start",
        "thinking_start", "thinking_delta", "thinking_delta", "thinking_end",
        "text_start", "text_delta", "text_end",
        "toolcall_start", "toolcall_delta", "toolcall_delta", "toolcall_end",
        "done",
    ]  # fmt: skip
    assert events[9].partial.content[2].arguments == {}  # incomplete JSON keeps the old arguments
    assert events[10].partial.content[2].arguments == {"a": 1}
    final = events[-1].message
    assert final.stop_reason == "toolUse" and final.tool_calls[0].arguments == {"a": 1}
    assert len(model.calls) == 1


async def test_scripted_errors_and_exhaustion(anyio_backend: object) -> None:
    model = ScriptedModel(
        [
            Response(content=["partial"], stop_reason="error", fail_before_start=True),
            Response(content=["x"], stop_reason="aborted", error_message="custom"),
            Response(content=["abc"], raise_on_call=RuntimeError("boom"), raise_after=2),
        ]
    )
    first = await play(model)
    assert [e.type for e in first] == ["error"]
    assert first[0].error.error_message == "Scripted error" and first[0].error.text == "partial"
    second = await play(model)
    assert second[-1].error.error_message == "custom" and second[-1].reason == "aborted"
    with pytest.raises(RuntimeError, match="boom"):
        await play(model)
    assert (await play(model))[-1].error.error_message == "No more scripted responses"
    with pytest.raises(TypeError, match="must be a Response"):
        ScriptedModel([42])  # type: ignore[list-item]


async def test_scripted_model_sees_an_aborted_signal(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    signal.abort()
    events = await play(ScriptedModel(["hi"]), signal)
    assert [e.type for e in events] == ["error"] and events[0].reason == "aborted"


def run_events(tool_calls: int = 1) -> list[al.AgentEvent]:
    async def main() -> list[al.AgentEvent]:
        events: list[al.AgentEvent] = []
        tool = al.AgentTool(
            name="t",
            description="",
            parameters={"type": "object"},
            execute=lambda *a: _ok(),
        )
        calls = [ScriptedToolCall(f"c{i}", "t", {}) for i in range(tool_calls)]
        await al.run_agent_loop(
            [al.UserMessage(content="go")],
            al.AgentContext(tools=[tool]),
            al.AgentLoopConfig(model=MODEL),
            events.append,
            None,
            ScriptedModel([Response(content=calls), "done"]),
        )
        return events

    return anyio.run(main)


async def _ok() -> al.AgentToolResult:
    return al.AgentToolResult.from_text("ok")


def test_check_events_accepts_a_real_run_and_rejects_broken_ones() -> None:
    events = run_events(2)
    check_events(events)
    broken: list[tuple[list[al.AgentEvent], str]] = [
        ([], "starts with agent_start"),
        (events[:-1], "ends with agent_end"),
        (events[1:], "starts with agent_start"),
        ([*events[:3], events[0], *events[3:]], "agent_start appears once"),
        ([e for e in events if e.type != "message_end"], "message_start outside a turn or inside another message"),
        ([e for i, e in enumerate(events) if not (e.type == "turn_end" and i <= 20)], "turn_start inside a turn"),
        (
            [e for e in events if not (isinstance(e, al.ToolExecutionEnd) and e.tool_call_id == "c1")],
            "started but not ended",
        ),
        (
            [e for e in events if not (isinstance(e, al.ToolExecutionStart) and e.tool_call_id == "c0")],
            "outside its execution",
        ),
    ]
    for sequence, rule in broken:
        with pytest.raises(EventOrderError, match=rule):
            check_events(sequence)
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    with pytest.raises(EventOrderError, match=r"agent_end\.messages"):
        check_events([*events[:-1], al.AgentEnd(end.messages[:-1])])
    results = [i for i, e in enumerate(events) if isinstance(e, al.TurnEnd)]
    first = events[results[0]]
    assert isinstance(first, al.TurnEnd)
    swapped = al.TurnEnd(first.message, tuple(reversed(first.tool_results)))
    with pytest.raises(EventOrderError, match="in source order"):
        check_events([*events[: results[0]], swapped, *events[results[0] + 1 :]])
