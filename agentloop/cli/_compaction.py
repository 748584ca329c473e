"""`agentloop chat`'s compaction: the context compacted as it fills the model's window, on
`/compact [instructions]`, and how full it is in the status line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core._agent import Agent
from .._types._events import AgentEnd, MessageEnd
from ._printer import Printer, one_line

if TYPE_CHECKING:
    from ..context import Compactor

__all__ = ("COMPACT_COMMAND", "compact_command", "gauge_text", "is_compact", "terminal_compaction")

COMPACT_COMMAND = "/compact"


def terminal_compaction(agent: Agent, printer: Printer, local: bool) -> Compactor:
    """Compact the agent's context as it fills the model's window, and keep the printer's
    context gauge up to date (the status line, and a note after each compaction)."""
    from .. import providers
    from ..context import Compaction, CompactionEnd, CompactionEvent

    window = agent.state.model.context_window
    quarter = window // 4 if window > 0 else 16384
    compactor = Compaction(
        reserve_tokens=min(16384, quarter),
        keep_recent_tokens=min(20000, quarter),
        # the embedded model's stream picks tools from examples: its summary is a plain chat answer
        stream_fn=providers.stream_simple if local else None,
    ).attach(agent)

    def gauge(event: object = None, signal: object = None) -> None:
        if event is None or isinstance(event, (MessageEnd, AgentEnd)):
            printer.context = gauge_text(compactor.usage().tokens, window)

    def on_compaction(event: CompactionEvent) -> None:
        if not isinstance(event, CompactionEnd):
            printer.status = "compacting the context"
            return
        printer.status = "waiting for the model" if agent.state.is_streaming else ""
        if event.result is not None:
            result = event.result
            printer.say(
                f"(context compacted: {result.compacted} messages summarised, "
                f"{_k(result.tokens_before)} → {_k(result.tokens_after)} tokens)"
            )
        elif event.error is not None:
            printer.say(f"(could not compact the context: {one_line(event.error)})")
        gauge()

    compactor.subscribe(on_compaction)
    agent.subscribe(gauge)
    gauge()
    return compactor


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def gauge_text(tokens: int, window: int) -> str:
    """How full the context is, for the status line: `context 2.1k/4.1k (52%)`."""
    if window <= 0:
        return f"context {_k(tokens)}"
    return f"context {_k(tokens)}/{_k(window)} ({round(100 * tokens / window)}%)"


def is_compact(line: str) -> bool:
    return line == COMPACT_COMMAND or line.startswith(COMPACT_COMMAND + " ")


async def compact_command(compactor: Compactor, line: str, printer: Printer) -> None:
    """`/compact [instructions]`: compact the context now."""
    from ..context import CompactionError

    instructions = line[len(COMPACT_COMMAND) :].strip() or None
    try:
        if await compactor.compact(instructions) is None:
            printer.say("(nothing to compact yet)")
    except CompactionError as exc:  # the listener said so already
        del exc
