"""`PartialSnapshot`: what a streaming event captured of its response, built into a message on read.

`AssistantMessageBuilder` gives every event it makes a snapshot of the message so far, and the
event builds its `partial` from it on first read (`_events.PartialEvent.partial`): most consumers
only read the delta, and a delta is captured in constant time whatever the length of the answer
(the deltas of one block share one snapshot of the builder's lists, which only grow).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ._messages import AssistantContent, AssistantMessage, StopReason, TextContent, ThinkingContent, ToolCall, Usage

__all__ = ("Header", "PartialSnapshot", "message", "with_arguments")


class Header(NamedTuple):
    """The fields every snapshot of one response shares (replaced whole when one of them changes)."""

    api: str
    provider: str
    model: str
    usage: Usage
    response_id: str | None
    timestamp: int
    response_model: str | None = None
    """The model that answered, when the provider names another than the one asked for (pi's
    `responseModel`, kept in the message's `extra`)."""


class PartialSnapshot(NamedTuple):
    """The message so far, as events captured it; `build()` makes the `AssistantMessage`.

    One snapshot serves every delta of an open text or thinking block: its `parts` is the block's
    append-only chunk list, and a delta event keeps, beside it, how many chunks are its own (the
    `part_count` given to `build`). Any other change to the message makes a new snapshot.

    Example: after `text_start()` and the deltas "Hel" and "lo", both delta events hold the
    snapshot `(header, head=[], head_count=0, last=TextContent(""), parts=["Hel", "lo"])`, the
    first with 1 chunk of its own (it builds "Hel"), the second with 2 ("Hello").
    """

    header: Header
    head: list[AssistantContent]
    """The builder's closed blocks. The list only grows (the builder copies it before it changes
    an earlier block), so the first `head_count` are this snapshot's."""
    head_count: int
    last: AssistantContent | None
    """The last block, as it was when the snapshot was taken (None: no block yet)."""
    parts: list[str] | tuple[str, ...] | Mapping[str, Any] | None
    """While `last` is open: the chunks of its text or thinking (the builder's append-only list
    shared by the deltas, or a tuple of the chunks when the snapshot is one event's own), or a tool
    call's partial arguments."""

    def build(
        self, part_count: int | None = None, stop_reason: StopReason = "pending", error_message: str | None = None
    ) -> AssistantMessage:
        """The `AssistantMessage` of this snapshot, with the first `part_count` chunks of the open
        text (all of them by default)."""
        last, parts = self.last, self.parts
        if isinstance(parts, (list, tuple)):
            text = "".join(parts[:part_count])
            if isinstance(last, TextContent):
                last = TextContent(text, text_signature=last.text_signature)
            elif isinstance(last, ThinkingContent):
                last = ThinkingContent(text, thinking_signature=last.thinking_signature)
        elif parts is not None and isinstance(last, ToolCall):
            last = with_arguments(last, parts)
        content = () if last is None else (*self.head[: self.head_count], last)
        return message(self.header, content, stop_reason, error_message)


def message(
    header: Header, content: tuple[AssistantContent, ...], stop_reason: StopReason, error_message: str | None
) -> AssistantMessage:
    """The `AssistantMessage` of `header` with `content`."""
    return AssistantMessage(
        content=content,
        api=header.api,
        provider=header.provider,
        model=header.model,
        usage=header.usage,
        stop_reason=stop_reason,
        error_message=error_message,
        response_id=header.response_id,
        timestamp=header.timestamp,
        extra=None if header.response_model is None else {"responseModel": header.response_model},
    )


def with_arguments(call: ToolCall, arguments: Mapping[str, Any]) -> ToolCall:
    """The tool call with its partial arguments so far."""
    return ToolCall(call.id, call.name, arguments, thought_signature=call.thought_signature)
