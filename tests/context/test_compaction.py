"""Compaction: the cut point, on demand, before a call, after an overflow."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import agentloop as al
from agentloop.context import (
    Compaction,
    CompactionEnd,
    CompactionError,
    CompactionEvent,
    CompactionStart,
    find_cut_point,
)
from agentloop.testing import check_events

from .windowed import WindowedModel, check_pairs, text_of


def user(tokens: int) -> al.UserMessage:
    return al.UserMessage(content="u" * 4 * tokens)


def call(tokens: int, id: str = "c1") -> al.AssistantMessage:
    return al.AssistantMessage(
        content=(al.TextContent("a" * 4 * tokens), al.ToolCall(id, "t", {})), stop_reason="toolUse"
    )


def result(tokens: int, id: str = "c1") -> al.ToolResultMessage:
    return al.ToolResultMessage(tool_call_id=id, tool_name="t", content=(al.TextContent("r" * 4 * tokens),))


def test_the_cut_keeps_about_keep_recent_tokens_and_lands_on_a_user_or_assistant_message() -> None:
    # 50 tokens each ("t" and "{}" are the call's last token)
    messages: list[al.AgentMessage] = [user(50), call(49), result(50), user(50), call(49)]
    assert find_cut_point(messages, 0, 100) == 3  # 50 + 50 reached at the second user message
    # reached at the tool result (150): the first valid cut point after it is the user message
    assert find_cut_point(messages, 0, 120) == 3
    assert find_cut_point(messages, 0, 151) == 1  # reached at the call (200): cut there


def test_a_huge_tool_result_stays_with_its_call() -> None:
    messages: list[al.AgentMessage] = [user(10), call(9), result(500)]
    assert find_cut_point(messages, 0, 100) == 1
    # a parallel batch: the results stay with their call too
    batch: list[al.AgentMessage] = [user(10), call(9, "c1"), result(300, "c1"), result(300, "c2")]
    assert find_cut_point(batch, 0, 100) == 1


def test_nothing_is_cut_when_the_messages_are_under_the_budget_or_only_results() -> None:
    short: list[al.AgentMessage] = [user(10), call(9), result(10)]
    assert find_cut_point(short, 0, 100) == 0
    assert find_cut_point(short, 2, 1) == 2
    messages: list[al.AgentMessage] = [user(500), call(9), result(10), user(10)]
    assert find_cut_point(messages, 1, 5) == 3  # from a previous cut on


def test_compaction_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="reserve_tokens must be an int >= 0"):
        Compaction(reserve_tokens=-1)
    with pytest.raises(ValueError, match="keep_recent_tokens must be an int >= 1"):
        Compaction(keep_recent_tokens=0)
    with pytest.raises(TypeError, match="auto must be a bool"):
        Compaction(auto=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"model must be an agentloop\.Model"):
        Compaction(model="gpt")  # type: ignore[arg-type]


def transcript(turns: int) -> list[al.AgentMessage]:
    messages: list[al.AgentMessage] = [al.UserMessage(content="Read the files.")]
    for n in range(turns):
        messages.append(
            al.AssistantMessage(content=(al.ToolCall(f"c{n}", "read", {"path": f"f{n}.py"}),), stop_reason="toolUse")
        )
        messages.append(
            al.ToolResultMessage(tool_call_id=f"c{n}", tool_name="read", content=(al.TextContent("x" * 4000),))
        )
    return messages


@pytest.mark.anyio
async def test_compact_on_demand_summarises_then_updates_the_summary_in_place() -> None:
    model = WindowedModel(lambda context: al.AssistantMessage(content=(al.TextContent("ok"),)))
    agent = al.Agent(model=model.model, stream_fn=model, messages=transcript(10))
    compactor = Compaction(keep_recent_tokens=2500).attach(agent)
    events: list[CompactionEvent] = []
    compactor.subscribe(events.append)

    first = await compactor.compact()
    assert first is not None and first.reason == "manual" and not first.updated
    assert first.first_kept_index == 17 and first.compacted == 17  # keeps the last 2 calls with their results
    assert first.read_files == tuple(f"f{n}.py" for n in range(8)) and first.modified_files == ()
    assert (
        first.summary
        == "## Goal\nsummary #1\n\n<read-files>\n" + "\n".join(f"f{n}.py" for n in range(8)) + "\n</read-files>"
    )
    assert first.tokens_after < first.tokens_before
    assert [type(e) for e in events] == [CompactionStart, CompactionEnd]
    view = compactor.context()
    assert text_of(view[0]).startswith("The conversation history before this point was compacted")  # type: ignore[arg-type]
    assert view[1:] == agent.state.messages[17:]
    assert len(agent.state.messages) == 21  # the history stays

    agent.state.messages.extend(transcript(4)[1:])
    second = await compactor.compact("Keep the file names")
    assert second is not None and second.updated and second.first_kept_index == 25
    request = text_of(model.summaries[1].messages[0])
    assert "<previous-summary>\n" + first.summary + "\n</previous-summary>" in request
    assert "Additional focus: Keep the file names" in request
    assert '[Assistant tool calls]: read(path="f8.py")' in request  # only what the first left
    assert 'read(path="f7.py")' not in request
    assert compactor.summary == second.summary


@pytest.mark.anyio
async def test_compact_returns_none_with_nothing_to_compact_and_raises_when_the_summary_fails() -> None:
    model = WindowedModel(lambda context: al.AssistantMessage(content=(al.TextContent("ok"),)), window=100)
    agent = al.Agent(model=model.model, stream_fn=model, messages=transcript(1))
    compactor = Compaction(keep_recent_tokens=10_000).attach(agent)
    assert await compactor.compact() is None
    compactor.settings = Compaction(keep_recent_tokens=10)
    agent.state.messages = transcript(3)
    with pytest.raises(CompactionError, match=r"Summarization failed: request .* exceeds the available context size"):
        await compactor.compact()
    assert compactor.summary is None


@pytest.mark.anyio
async def test_an_overflow_error_is_answered_by_compacting_and_calling_again_once() -> None:
    model = WindowedModel(lambda context: al.AssistantMessage(content=(al.TextContent("fine"),)), window=3000)
    agent = al.Agent(model=model.model, stream_fn=model, messages=transcript(4))
    compactor = Compaction(auto=False, keep_recent_tokens=1500).attach(agent)
    events: list[al.AgentEvent] = []
    agent.subscribe(lambda event, signal: events.append(event))
    reasons: list[str] = []
    compactor.subscribe(lambda event: reasons.append(f"{event.type}:{event.reason}"))

    await agent.prompt("And now?")

    check_events(events)
    assert agent.state.error_message is None and text_of(agent.state.messages[-1]) == "fine"  # type: ignore[arg-type]
    assert model.refused == 1 and len(model.requests) == 1
    assert reasons == ["compaction_start:overflow", "compaction_end:overflow"]
    check_pairs(model.requests[0])
    assert text_of(model.requests[0].messages[-1]) == "And now?"


@pytest.mark.anyio
async def test_an_overflow_that_compaction_cannot_help_ends_the_run_with_the_error() -> None:
    model = WindowedModel(lambda context: al.AssistantMessage(content=(al.TextContent("fine"),)), window=50)
    agent = al.Agent(model=model.model, stream_fn=model)
    Compaction(keep_recent_tokens=10).attach(agent)
    await agent.prompt("x" * 1000)
    assert agent.state.error_message is not None and "exceeds the available context size" in agent.state.error_message
    assert model.refused == 1


@pytest.mark.anyio
async def test_detach_gives_the_agent_back_its_own_hooks() -> None:
    async def mine(messages: Sequence[al.AgentMessage], signal: al.AbortSignal) -> list[al.AgentMessage]:
        return list(messages)

    model = WindowedModel(lambda context: al.AssistantMessage(content=(al.TextContent("ok"),)))
    agent = al.Agent(model=model.model, stream_fn=model, transform_context=mine)
    compactor = Compaction().attach(agent)
    assert agent.options.transform_context != mine and agent.stream_fn != model
    await agent.prompt("hi")  # the agent's own transform_context runs after the compactor's
    compactor.detach()
    assert agent.options.transform_context == mine and agent.stream_fn == model
