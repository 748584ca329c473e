"""A 500-turn run with large tool results against a model with an 8k window."""

from __future__ import annotations

import pytest

import agentloop as al
from agentloop.context import Compaction, CompactionEnd, CompactionEvent, CompactionStart

from .windowed import WindowedModel, check_pairs, text_of

pytestmark = pytest.mark.anyio

TURNS = 500


async def test_a_500_turn_run_with_large_tool_results_always_fits_an_8k_window() -> None:
    agent: al.Agent

    @al.tool
    async def read(path: str) -> str:
        """Read a file."""
        if path == "src/file252.py":
            agent.steer(al.UserMessage(content="steering: also check the tests"))
        return f"{path}:\n" + "line of code\n" * 250  # 3,250 characters: about 930 of the model's tokens

    def answer(context: al.Context) -> al.AssistantMessage:
        n = len(model.requests) - 1
        if n < TURNS:
            call = al.ToolCall(f"c{n}", "read", {"path": f"src/file{n}.py"})
            return al.AssistantMessage(content=(al.TextContent(f"Reading file {n}."), call))
        return al.AssistantMessage(content=(al.TextContent("done" if n == TURNS else "finished"),))

    model = WindowedModel(answer, window=8192)
    agent = al.Agent(model=model.model, system_prompt="You read files.", tools=[read], stream_fn=model)
    compactor = Compaction(reserve_tokens=2048, keep_recent_tokens=3000).attach(agent)
    events: list[CompactionEvent] = []
    compactor.subscribe(events.append)
    compacted_before: list[int] = []  # the index of the request each compaction came before
    during: list[int] = []

    def on_compaction(event: CompactionEvent) -> None:
        if isinstance(event, CompactionEnd) and event.result is not None:
            compacted_before.append(len(model.requests))
        elif isinstance(event, CompactionStart) and len(model.requests) > 400 and not during:
            during.append(len(model.requests))  # a message queued while a compaction runs
            agent.steer(al.UserMessage(content="steering: queued during a compaction"))

    compactor.subscribe(on_compaction)
    agent.follow_up(al.UserMessage(content="follow-up: now finish"))

    await agent.prompt("Read every file of the project.")

    assert agent.state.error_message is None
    assert model.refused == 0  # every request fit: no overflow, no retry
    assert model.largest <= 8192
    assert len(model.requests) == TURNS + 2
    for context in model.requests:
        check_pairs(context)
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    results = [e.result for e in ends if e.result is not None]
    assert len(results) >= 50 and all(r.reason == "threshold" for r in results)
    assert not results[0].updated and all(r.updated for r in results[1:])
    # the summary is updated in place: each summary request carries the one before it
    for k, request in enumerate(model.summaries[1:], start=1):
        assert f"<previous-summary>\n## Goal\nsummary #{k}" in text_of(request.messages[0])
    assert compactor.summary is not None and compactor.summary.startswith(f"## Goal\nsummary #{len(model.summaries)}")
    # the steering message reached the next request, whatever was compacted meanwhile
    steered = next(
        i for i, c in enumerate(model.requests) if "steering: also check the tests" in map(text_of, c.messages)
    )
    assert steered == 253 and text_of(model.requests[steered].messages[-1]) == "steering: also check the tests"
    assert 253 in compacted_before  # that very request was compacted first
    (queued_at,) = during  # queued during the compaction before request `queued_at`: delivered with the next one
    assert text_of(model.requests[queued_at + 1].messages[-1]) == "steering: queued during a compaction"
    assert text_of(model.requests[-1].messages[-1]) == "follow-up: now finish"
    # the agent's transcript keeps the whole history; the model saw the summary and the recent messages
    assert len(agent.state.messages) == 1 + 2 * TURNS + 2 + 1 + 1 + 1
    first = text_of(model.requests[-1].messages[0])
    assert first.startswith("The conversation history before this point was compacted")
    assert "src/file499.py" in "".join(map(text_of, model.requests[-1].messages))
