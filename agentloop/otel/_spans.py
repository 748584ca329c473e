"""The spans of a run in progress, found by context, and how spans end."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

import anyio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from .._types._events import AgentEvent
from ._content import mask

__all__ = ("CURRENT", "ERROR_TYPES", "RunSpans", "chain_observe", "current_in", "end_span", "fail_span")

ERROR_TYPES = {"error": "model_error", "aborted": "aborted"}
"""The `error.type` of a message's stop reason, when it is a failure."""


class RunSpans:
    """The spans of one run in progress, found through `CURRENT` by the model and tool wrappers."""

    __slots__ = (
        "api_key",
        "compacting",
        "context",
        "described",
        "done",
        "input_tokens",
        "last",
        "output_tokens",
        "previous",
        "recording",
        "span",
        "tools_running",
        "turn",
        "turns",
    )

    def __init__(self, span: Span, previous: RunSpans | None) -> None:
        self.span = span
        self.recording = span.is_recording()
        self.context = trace.set_span_in_context(span)
        self.previous = previous
        self.turn: tuple[Span, otel_context.Context] | None = None
        self.compacting: otel_context.Context | None = None  # a compaction's span, while it runs
        self.turns = 0
        self.described = False
        self.input_tokens: int | None = None  # None until a model call reports its usage
        self.output_tokens: int | None = None
        self.api_key: str | None = None  # the key the last model call got: masked out of recorded text
        self.done = False
        self.tools_running = 0
        self.last = time.time_ns()  # the last sign of life: where a run found dead ends

    def parent(self) -> otel_context.Context:
        """Where a model or tool call of this run hangs: the compaction under way (its summary's
        call), else the current turn, else the run."""
        if self.compacting is not None:
            return self.compacting
        return self.turn[1] if self.turn is not None else self.context

    def end_turn(self, error_type: str | None, description: str | None = None, end_time: int | None = None) -> None:
        if self.turn is not None:
            span = self.turn[0]
            self.turn = None
            end_span(span, error_type, description, end_time)

    def fail(self, error_type: str, description: str | None, end_time: int | None = None) -> None:
        """End the turn and the run: the run is ending without its `agent_end` (cancelled, or an exception)."""
        if self.done:
            return
        self.end_turn(error_type, description, end_time)
        self.done = True
        end_span(self.span, error_type, description, end_time)


CURRENT: ContextVar[RunSpans | None] = ContextVar("agentloop_otel_run", default=None)


def chain_observe(
    first: Callable[[AgentEvent], None], second: Callable[[AgentEvent], None]
) -> Callable[[AgentEvent], None]:
    def observe(event: AgentEvent) -> None:
        first(event)
        second(event)

    return observe


async def current_in(
    context: otel_context.Context, proceed: Callable[[], Awaitable[object]], run: RunSpans | None
) -> object:
    """Await a tool call with `context` current (its own spans nest there), in this task only."""
    token = otel_context.attach(context)
    if run is not None:
        run.tools_running += 1  # a run started meanwhile in this task nests in this one
    try:
        return await proceed()
    finally:
        otel_context.detach(token)
        if run is not None:
            run.tools_running -= 1
            run.last = time.time_ns()


def end_span(span: Span, error_type: str | None, description: str | None = None, end_time: int | None = None) -> None:
    if error_type is not None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, description or error_type))
    span.end(end_time)


def fail_span(span: Span, run: RunSpans | None, exc: BaseException, aborted: bool, key: str | None) -> str:
    """A model call cut by an exception: abort (the run goes on) or anything else (the run
    ends). Returns the `error.type` it set."""
    description: str | None
    if isinstance(exc, (anyio.get_cancelled_exc_class(), GeneratorExit)):
        if aborted:
            end_span(span, "aborted", "aborted")
            return "aborted"
        error_type, description = "cancelled", "cancelled"
    else:
        error_type, description = type(exc).__qualname__, mask(str(exc), key)
    end_span(span, error_type, description)
    if run is not None:
        run.fail(error_type, description)
    return error_type
