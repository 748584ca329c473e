"""Compaction in a durable run's workflow (`DurableCompactor`): an aborted run starts no summary."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import agentloop as al
from agentloop._core._config import default_convert_to_llm
from agentloop._types._stream_fn import opened_stream
from agentloop.context import Compaction
from agentloop.context._durable import DurableCompactor

from .test_compaction import transcript

WINDOW = al.Model(id="small", api="test", provider="test", context_window=3000)
SETTINGS = Compaction(keep_recent_tokens=1500)


class Summaries:
    """A summarizer that counts its requests."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, request: al.Context, max_tokens: int) -> str:
        self.asked += 1
        return f"summary #{self.asked}"


def compactor(summaries: Summaries, settings: Compaction = SETTINGS) -> DurableCompactor:
    return DurableCompactor(settings, model=WINDOW, system_prompt="", tools=(), summarizer=summaries)


@pytest.mark.anyio
async def test_a_call_over_the_threshold_compacts_unless_the_run_is_aborted() -> None:
    messages = transcript(4)  # about 4,000 tokens: over the window
    summaries = Summaries()
    signal = al.AbortSignal()
    signal.abort()
    assert await compactor(summaries).transform_context(messages, signal) == messages
    assert summaries.asked == 0
    view = await compactor(summaries).transform_context(messages, al.AbortSignal())
    assert summaries.asked == 1 and len(view) < len(messages)


@pytest.mark.anyio
async def test_an_overflow_of_an_aborted_run_is_answered_by_the_aborted_call_not_by_a_summary() -> None:
    summaries = Summaries()
    durable = compactor(summaries, Compaction(auto=False, keep_recent_tokens=1500))
    signal = al.AbortSignal()
    calls: list[bool] = []

    async def stream(
        model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        calls.append(options.signal.aborted)
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        if options.signal.aborted:  # the engines' stream functions: an aborted signal ends the call at once
            yield builder.error("aborted", "Operation aborted")
            return
        signal.abort()  # the abort arrives while the model refuses the request
        yield builder.error("error", "request (4000 tokens) exceeds the available context size (3000 tokens)")

    messages = transcript(4)
    view = await durable.transform_context(messages, signal)
    context = al.Context(system_prompt="", messages=tuple(default_convert_to_llm(view)))
    async with opened_stream(durable.stream(stream)(WINDOW, context, al.StreamOptions(signal=signal))) as answer:
        events = [e async for e in answer]
    assert summaries.asked == 0
    assert calls == [False, True]
    assert isinstance(events[-1], al.ErrorEvent) and events[-1].reason == "aborted"
