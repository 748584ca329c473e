"""`AssistantMessageBuilder`: the partial message of a streaming response, and its events.

Stream functions (the providers, the scripted model of `agentloop.testing`) feed deltas into a
builder and yield the events it returns. Each event carries an immutable snapshot of the message
so far; a snapshot costs O(blocks), not O(text), because streaming text blocks share an
append-only chunk list (`TextContent._streaming`). A long answer therefore costs the same per
delta as a short one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ._events import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ._types import (
    AssistantContent,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)

__all__ = ("AssistantMessageBuilder",)


class AssistantMessageBuilder:
    """Accumulates one streaming response and makes its `AssistantMessageEvent`s.

    Blocks are opened, grown and closed in order; `index` arguments default to the last block.

    Example:
        b = AssistantMessageBuilder(api="my-api", provider="me", model="m1")
        yield b.start()
        yield b.text_start()
        yield b.text_delta("Hel")
        yield b.text_delta("lo")
        yield b.text_end()
        yield b.done("stop")
    """

    __slots__ = ("_api", "_content", "_model", "_parts", "_provider", "_timestamp", "response_id", "usage")

    def __init__(self, *, api: str = "", provider: str = "", model: str = "", timestamp: int | None = None) -> None:
        self._api = api
        self._provider = provider
        self._model = model
        self._timestamp = timestamp if timestamp is not None else now_ms()
        self._content: tuple[AssistantContent, ...] = ()
        self._parts: dict[int, list[str]] = {}
        self.usage = Usage()
        """Token usage so far; the final message carries it."""
        self.response_id: str | None = None

    @property
    def content(self) -> tuple[AssistantContent, ...]:
        """The blocks so far."""
        return self._content

    def snapshot(self, stop_reason: Any = "pending", error_message: str | None = None) -> AssistantMessage:
        """The message so far, as an immutable value."""
        return AssistantMessage(
            content=self._content,
            api=self._api,
            provider=self._provider,
            model=self._model,
            usage=self.usage,
            stop_reason=stop_reason,
            error_message=error_message,
            response_id=self.response_id,
            timestamp=self._timestamp,
        )

    def _index(self, index: int | None) -> int:
        last = len(self._content) - 1
        if index is None:
            index = last
        if not 0 <= index <= last:
            raise IndexError(f"no content block {index} (the message has {last + 1})")
        return index

    def _set(self, index: int, block: AssistantContent) -> None:
        content = self._content
        if index == len(content) - 1:
            self._content = (*content[:-1], block)
        else:
            self._content = (*content[:index], block, *content[index + 1 :])

    def start(self) -> StartEvent:
        """The `start` event."""
        return StartEvent(self.snapshot())

    def text_start(self) -> TextStartEvent:
        """Open a text block at the end."""
        index = len(self._content)
        self._parts[index] = []
        self._content = (*self._content, TextContent(""))
        return TextStartEvent(index, self.snapshot())

    def text_delta(self, delta: str, index: int | None = None) -> TextDeltaEvent:
        """Append text to a text block."""
        index = self._index(index)
        parts = self._parts[index]
        parts.append(delta)
        old = self._content[index]
        self._set(index, TextContent._streaming(parts, len(parts), old.text_signature))  # type: ignore[union-attr]
        return TextDeltaEvent(index, delta, self.snapshot())

    def text_end(self, index: int | None = None, *, signature: str | None = None) -> TextEndEvent:
        """Close a text block."""
        index = self._index(index)
        text = "".join(self._parts.pop(index, ()))
        old = self._content[index]
        block = TextContent(text, text_signature=signature if signature is not None else old.text_signature)  # type: ignore[union-attr]
        self._set(index, block)
        return TextEndEvent(index, text, self.snapshot())

    def thinking_start(self) -> ThinkingStartEvent:
        """Open a thinking block at the end."""
        index = len(self._content)
        self._parts[index] = []
        self._content = (*self._content, ThinkingContent(""))
        return ThinkingStartEvent(index, self.snapshot())

    def thinking_delta(self, delta: str, index: int | None = None) -> ThinkingDeltaEvent:
        """Append reasoning to a thinking block."""
        index = self._index(index)
        parts = self._parts[index]
        parts.append(delta)
        old = self._content[index]
        self._set(index, ThinkingContent._streaming(parts, len(parts), old.thinking_signature))  # type: ignore[union-attr]
        return ThinkingDeltaEvent(index, delta, self.snapshot())

    def thinking_end(
        self, index: int | None = None, *, signature: str | None = None, redacted: bool = False
    ) -> ThinkingEndEvent:
        """Close a thinking block."""
        index = self._index(index)
        text = "".join(self._parts.pop(index, ()))
        old = self._content[index]
        block = ThinkingContent(
            text,
            thinking_signature=signature if signature is not None else old.thinking_signature,  # type: ignore[union-attr]
            redacted=redacted,
        )
        self._set(index, block)
        return ThinkingEndEvent(index, text, self.snapshot())

    def tool_call_start(self, id: str, name: str) -> ToolCallStartEvent:
        """Open a tool call at the end (arguments `{}` until deltas give better)."""
        index = len(self._content)
        self._parts[index] = []
        self._content = (*self._content, ToolCall(id, name, {}))
        return ToolCallStartEvent(index, self.snapshot())

    def tool_call_delta(
        self, delta: str, arguments: Mapping[str, Any] | None = None, index: int | None = None
    ) -> ToolCallDeltaEvent:
        """Record a raw argument fragment; `arguments` (if given) become the partial arguments."""
        index = self._index(index)
        self._parts[index].append(delta)
        if arguments is not None:
            old = self._content[index]
            assert isinstance(old, ToolCall)
            self._set(index, ToolCall(old.id, old.name, arguments, thought_signature=old.thought_signature))
        return ToolCallDeltaEvent(index, delta, self.snapshot())

    def tool_call_text(self, index: int | None = None) -> str:
        """The raw argument text received so far for a tool call."""
        return "".join(self._parts.get(self._index(index), ()))

    def tool_call_end(self, tool_call: ToolCall, index: int | None = None) -> ToolCallEndEvent:
        """Close a tool call with its final block."""
        index = self._index(index)
        self._parts.pop(index, None)
        self._set(index, tool_call)
        return ToolCallEndEvent(index, tool_call, self.snapshot())

    def done(self, reason: Literal["stop", "length", "toolUse"] = "stop") -> DoneEvent:
        """The terminal `done` event with the final message."""
        return DoneEvent(reason, self.snapshot(reason))

    def error(self, reason: Literal["error", "aborted"], message: str) -> ErrorEvent:
        """The terminal `error` event: the partial content kept, `stop_reason` and text set."""
        return ErrorEvent(reason, self.snapshot(reason, message))
