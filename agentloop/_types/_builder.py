"""`AssistantMessageBuilder`: the partial message of a streaming response, and its events.

Stream functions (the providers, the scripted model of `agentloop.testing`) feed deltas into a
builder and yield the events it returns. Each event carries a snapshot of the message so far.
A delta costs O(1) whatever the length of the answer: the open text block keeps its chunks in an
append-only list, an event captures a `PartialSnapshot` (the builder's lists and how much of them
is its own), and the `AssistantMessage` is built from it when someone reads `event.partial`.
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
from ._messages import (
    _ZERO_USAGE,
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)
from ._snapshot import Header, PartialSnapshot, message, with_arguments

__all__ = ("AssistantMessageBuilder",)


class AssistantMessageBuilder:
    """Accumulates one streaming response and makes its `AssistantMessageEvent`s.

    Blocks are opened, grown and closed in order; `index` arguments default to the last block.

    Example:
        ```python
        b = AssistantMessageBuilder(api="my-api", provider="me", model="m1")
        yield b.start()
        yield b.text_start()
        yield b.text_delta("Hel")
        yield b.text_delta("lo")
        yield b.text_end()
        yield b.done("stop")
        ```
    """

    __slots__ = ("_head", "_header", "_kind", "_last", "_parts", "_shared", "_tool_text")

    def __init__(self, *, api: str = "", provider: str = "", model: str = "", timestamp: int | None = None) -> None:
        self._header = Header(api, provider, model, _ZERO_USAGE, None, now_ms() if timestamp is None else timestamp)
        # The blocks: `_head` then `_last`. Events capture `_head` with its length, so it only
        # grows (a change to an earlier block copies it first): a new or changed last block costs
        # O(1), not a copy of every block.
        self._head: list[AssistantContent] = []
        self._last: AssistantContent | None = None
        # The last block while it is open: the chunks of a text or thinking block, or the partial
        # arguments of a tool call (built into its `ToolCall` when a snapshot or the next block
        # needs them, not at every delta).
        self._parts: list[str] | Mapping[str, Any] | None = None
        self._kind = ""  # "text", "thinking" or "toolCall": what the open block is
        self._tool_text: dict[int, list[str]] = {}
        # The snapshot the deltas of the open text or thinking block share (None: not made yet,
        # or something else changed since: every change but a delta sets it back to None).
        self._shared: PartialSnapshot | None = None

    # --- metadata that the final message carries ------------------------------------------
    @property
    def usage(self) -> Usage:
        """Token usage so far; the final message carries it."""
        return self._header.usage

    @usage.setter
    def usage(self, usage: Usage) -> None:
        self._header = self._header._replace(usage=usage)
        self._shared = None

    @property
    def response_id(self) -> str | None:
        """The provider's id for the response."""
        return self._header.response_id

    @response_id.setter
    def response_id(self, response_id: str | None) -> None:
        self._header = self._header._replace(response_id=response_id)
        self._shared = None

    @property
    def response_model(self) -> str | None:
        """The model that answered, when the provider names another than the one asked for (the
        final message carries it as `extra["responseModel"]`, pi's `responseModel`)."""
        return self._header.response_model

    @response_model.setter
    def response_model(self, response_model: str | None) -> None:
        self._header = self._header._replace(response_model=response_model)
        self._shared = None

    @property
    def content(self) -> tuple[AssistantContent, ...]:
        """The blocks so far."""
        return self.snapshot().content

    def _capture(self) -> PartialSnapshot:
        """A snapshot of the message for one event (the open block's chunks so far copied)."""
        parts, head = self._parts, self._head
        return PartialSnapshot(
            self._header, head, len(head), self._last, tuple(parts) if isinstance(parts, list) else parts
        )

    def _delta_snapshot(self, parts: list[str]) -> PartialSnapshot:
        """The snapshot the deltas of the open block share, made at the first one."""
        head = self._head
        shared = self._shared = PartialSnapshot(self._header, head, len(head), self._last, parts)
        return shared

    def snapshot(self, stop_reason: StopReason = "pending", error_message: str | None = None) -> AssistantMessage:
        """The message so far, as an immutable value."""
        return self._capture().build(None, stop_reason, error_message)

    # --- blocks ---------------------------------------------------------------------------
    def _count(self) -> int:
        return len(self._head) + (self._last is not None)

    def _block(self, index: int) -> AssistantContent | None:
        head = self._head
        return head[index] if index < len(head) else self._last

    def _index(self, index: int | None, kind: type) -> int:
        last = self._count() - 1
        if index is None:
            index = last
        if not 0 <= index <= last:
            raise IndexError(f"no content block {index} (the message has {last + 1})")
        block = self._block(index)
        if not isinstance(block, kind):
            raise ValueError(f"content block {index} is a {type(block).__name__}, not a {kind.__name__}")
        return index

    def _close_open(self) -> None:
        """Freeze the open block (a new block starts, or the response ends)."""
        parts, last = self._parts, self._last
        if parts is None:
            return
        if isinstance(last, ToolCall):
            assert not isinstance(parts, list)
            self._last = with_arguments(last, parts)
        elif isinstance(last, TextContent):
            self._last = TextContent("".join(parts), text_signature=last.text_signature)
        elif isinstance(last, ThinkingContent):
            self._last = ThinkingContent("".join(parts), thinking_signature=last.thinking_signature)
        self._parts = self._shared = None

    def _append(self, block: AssistantContent) -> int:
        """Add a block at the end (closing the open one); return its index."""
        if self._parts is not None:
            self._close_open()
        last = self._last
        if last is not None:
            self._head.append(last)
        self._last = block
        self._shared = None
        return len(self._head)

    def _set(self, index: int, block: AssistantContent) -> None:
        self._shared = None
        head = self._head
        if index == len(head):
            self._last = block
            self._parts = None  # (a tool call's partial arguments: replaced too)
        else:  # an earlier block: events captured the list, so change a copy
            head = self._head = list(head)
            head[index] = block

    def start(self) -> StartEvent:
        """The `start` event."""
        return StartEvent(self._capture())

    def text_start(self) -> TextStartEvent:
        """Open a text block at the end."""
        index = self._append(TextContent(""))
        self._parts, self._kind = [], "text"
        return TextStartEvent(index, self._capture())

    def text_delta(self, delta: str, index: int | None = None) -> TextDeltaEvent:
        """Append text to a text block."""
        parts = self._parts
        if isinstance(parts, list) and self._kind == "text" and (index is None or index == len(self._head)):
            parts.append(delta)
            shared = self._shared
            if shared is None:
                shared = self._delta_snapshot(parts)
            return TextDeltaEvent(shared.head_count, delta, (shared, len(parts)))
        index = self._index(index, TextContent)  # not the open block: the rare, O(text) path
        old = self._block(index)
        assert isinstance(old, TextContent)
        self._set(index, TextContent(old.text + delta, text_signature=old.text_signature))
        return TextDeltaEvent(index, delta, self._capture())

    def text_end(self, index: int | None = None, *, signature: str | None = None) -> TextEndEvent:
        """Close a text block."""
        index = self._index(index, TextContent)
        if index == len(self._head):
            self._close_open()
        block = self._block(index)
        assert isinstance(block, TextContent)
        if signature is not None:
            block = TextContent(block.text, text_signature=signature)
            self._set(index, block)
        return TextEndEvent(index, block.text, self._capture())

    def thinking_start(self) -> ThinkingStartEvent:
        """Open a thinking block at the end."""
        index = self._append(ThinkingContent(""))
        self._parts, self._kind = [], "thinking"
        return ThinkingStartEvent(index, self._capture())

    def thinking_delta(self, delta: str, index: int | None = None) -> ThinkingDeltaEvent:
        """Append reasoning to a thinking block."""
        parts = self._parts
        if isinstance(parts, list) and self._kind == "thinking" and (index is None or index == len(self._head)):
            parts.append(delta)
            shared = self._shared
            if shared is None:
                shared = self._delta_snapshot(parts)
            return ThinkingDeltaEvent(shared.head_count, delta, (shared, len(parts)))
        index = self._index(index, ThinkingContent)  # not the open block: the rare, O(text) path
        old = self._block(index)
        assert isinstance(old, ThinkingContent)
        self._set(index, ThinkingContent(old.thinking + delta, thinking_signature=old.thinking_signature))
        return ThinkingDeltaEvent(index, delta, self._capture())

    def thinking_end(
        self, index: int | None = None, *, signature: str | None = None, redacted: bool = False
    ) -> ThinkingEndEvent:
        """Close a thinking block."""
        index = self._index(index, ThinkingContent)
        if index == len(self._head):
            self._close_open()
        block = self._block(index)
        assert isinstance(block, ThinkingContent)
        if signature is not None or redacted:
            block = ThinkingContent(
                block.thinking,
                thinking_signature=signature if signature is not None else block.thinking_signature,
                redacted=redacted,
            )
            self._set(index, block)
        return ThinkingEndEvent(index, block.thinking, self._capture())

    def tool_call_start(self, id: str, name: str) -> ToolCallStartEvent:
        """Open a tool call at the end (arguments `{}` until deltas give better)."""
        block = ToolCall(id, name, {})
        index = self._append(block)
        self._tool_text[index] = []
        return ToolCallStartEvent(index, self._capture())

    def _call_index(self, index: int | None) -> int:
        """The index of the tool call a call event is about: by default the last block."""
        if index is None and isinstance(self._last, ToolCall):
            return len(self._head)  # the usual case (nothing is open: a block opened after a call is the last)
        return self._index(index, ToolCall)

    def tool_call_delta(
        self, delta: str, arguments: Mapping[str, Any] | None = None, index: int | None = None
    ) -> ToolCallDeltaEvent:
        """Record a raw argument fragment; `arguments` (if given) become the partial arguments."""
        index = self._call_index(index)
        text = self._tool_text.get(index)
        if text is None:
            self._tool_text[index] = [delta]
        else:
            text.append(delta)
        if arguments is not None:
            if index == len(self._head):  # the last block: its `ToolCall` is built when needed
                self._parts, self._kind, self._shared = arguments, "toolCall", None
            else:
                old = self._block(index)
                assert isinstance(old, ToolCall)
                self._set(index, with_arguments(old, arguments))
        return ToolCallDeltaEvent(index, delta, self._capture())

    def tool_call_text(self, index: int | None = None) -> str:
        """The raw argument text received so far for a tool call."""
        return "".join(self._tool_text.get(self._index(index, ToolCall), ()))

    def tool_call_end(self, tool_call: ToolCall, index: int | None = None) -> ToolCallEndEvent:
        """Close a tool call with its final block."""
        index = self._call_index(index)
        self._tool_text.pop(index, None)
        self._set(index, tool_call)
        return ToolCallEndEvent(index, tool_call, self._capture())

    # --- the end --------------------------------------------------------------------------
    def set_content(self, content: tuple[AssistantContent, ...]) -> None:
        """Replace every block (a provider that knows the final blocks better than the deltas)."""
        content = tuple(content)
        self._parts = self._shared = None
        self._head = list(content[:-1])
        self._last = content[-1] if content else None

    def done(self, reason: Literal["stop", "length", "toolUse"] = "stop") -> DoneEvent:
        """The terminal `done` event with the final message."""
        if self._parts is not None:
            self._close_open()
        last = self._last
        return DoneEvent(reason, message(self._header, () if last is None else (*self._head, last), reason, None))

    def error(self, reason: Literal["error", "aborted"], message: str) -> ErrorEvent:
        """The terminal `error` event: the partial content kept, `stop_reason` and text set."""
        self._close_open()
        return ErrorEvent(reason, self.snapshot(reason, message))
