"""The `compaction` span: one per compaction of an instrumented `Compactor`."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer

from ..context._compaction import CompactionEnd, CompactionEvent
from ._spans import CURRENT, RunSpans, end_span

__all__ = ("compaction_listener",)


def compaction_listener(tracer: Tracer, record_content: bool) -> Callable[[CompactionEvent], None]:
    """A compactor listener that opens a `compaction` span at a compaction's start and ends it at
    its end. In a run, the span hangs under the current turn and the summary's `chat` span nests
    in it; a compaction outside a run (`compact()` while idle) hangs under the current context."""
    # A compactor runs one compaction at a time: the open span, and the run it belongs to.
    open_span: list[tuple[Span, RunSpans | None]] = []

    def listener(event: CompactionEvent) -> None:
        run = CURRENT.get()
        if run is not None and run.done:
            run = None
        if not isinstance(event, CompactionEnd):
            parent = run.parent() if run is not None else otel_context.get_current()
            span = tracer.start_span(
                "compaction",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes={
                    "agentloop.compaction.reason": event.reason,
                    "agentloop.compaction.tokens_before": event.tokens_before,
                },
            )
            if run is not None:
                run.compacting = trace.set_span_in_context(span, parent)
            open_span.append((span, run))
            return
        if not open_span:  # subscribed during a compaction
            return
        span, owner = open_span.pop()
        if owner is not None:
            owner.compacting = None
        result = event.result
        if result is None:
            span.set_attribute("agentloop.compaction.compacted_messages", 0)
            end_span(span, "compaction_error" if event.error is not None else None, event.error)
            return
        span.set_attributes(
            {
                "agentloop.compaction.tokens_after": result.tokens_after,
                "agentloop.compaction.compacted_messages": result.compacted,
                "agentloop.compaction.first_kept_index": result.first_kept_index,
                "agentloop.compaction.updated": result.updated,
            }
        )
        if record_content:
            span.set_attribute("agentloop.compaction.summary", result.summary)
        end_span(span, None)

    return listener
