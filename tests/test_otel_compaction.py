"""The `compaction` span of an instrumented compactor."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentloop as al
from agentloop.context import Compaction, CompactionError
from agentloop.otel import Tracing
from tests.context.windowed import WindowedModel
from tests.sessions.compaction_child import answer, read
from tests.spans import exporter as exporter  # the fixture


def by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in spans if span.context is not None}


async def test_each_compaction_is_a_span_under_its_turn_with_the_summary_call_inside(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    model = WindowedModel(answer, window=2048)
    agent = al.Agent(model=model.model, system_prompt="You read files.", tools=[read], stream_fn=model)
    tracing = Tracing(tracer_provider=provider, record_content=True)
    tracing.instrument_agent(agent)  # first: the compactor's summary calls go through the traced stream
    compactor = tracing.instrument_compactor(Compaction(reserve_tokens=400, keep_recent_tokens=500).attach(agent))

    for step in range(3):
        await agent.prompt(f"Read the files, step {step}.")
        assert agent.state.error_message is None
    await compactor.compact("Keep the file names")  # outside a run

    spans = memory.get_finished_spans()
    index = by_id(spans)
    compactions = [s for s in spans if s.name == "compaction"]
    assert len(compactions) == len(model.summaries) >= 2
    *in_run, manual = compactions
    for span in in_run:
        attributes = dict(span.attributes or {})
        assert attributes["agentloop.compaction.reason"] == "threshold"
        tokens_before = attributes["agentloop.compaction.tokens_before"]
        tokens_after = attributes["agentloop.compaction.tokens_after"]
        assert isinstance(tokens_before, int) and isinstance(tokens_after, int) and tokens_after < tokens_before
        compacted = attributes["agentloop.compaction.compacted_messages"]
        assert isinstance(compacted, int) and compacted > 0
        assert str(attributes["agentloop.compaction.summary"]).startswith("## Goal\nsummary #")
        assert span.parent is not None and index[span.parent.span_id].name == "turn"
        assert span.status.status_code is not StatusCode.ERROR
    assert [dict(s.attributes or {})["agentloop.compaction.updated"] for s in in_run] == [False] + [True] * (
        len(in_run) - 1
    )
    # the summary's model call nests in its compaction
    summary_calls = [s for s in spans if s.name == "chat windowed" and s.parent and index[s.parent.span_id] in in_run]
    assert len(summary_calls) == len(in_run)
    assert dict(manual.attributes or {})["agentloop.compaction.reason"] == "manual"
    assert manual.parent is None


async def test_a_failed_summary_ends_the_span_with_compaction_error(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    model = WindowedModel(answer, window=2048)

    async def failing(
        model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield builder.error("error", "the summary model is down")

    agent = al.Agent(model=model.model, system_prompt="You read files.", tools=[read], stream_fn=model)
    compactor = Compaction(reserve_tokens=400, keep_recent_tokens=500, auto=False, stream_fn=failing).attach(agent)
    Tracing(tracer_provider=provider).instrument_compactor(compactor)
    await agent.prompt("Read the files.")
    with pytest.raises(CompactionError):
        await compactor.compact()
    (span,) = [s for s in memory.get_finished_spans() if s.name == "compaction"]
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "compaction_error"
    assert "the summary model is down" in (span.status.description or "")
    with pytest.raises(TypeError, match="compactor must be"):
        Tracing(tracer_provider=provider).instrument_compactor(agent)  # type: ignore[arg-type]
