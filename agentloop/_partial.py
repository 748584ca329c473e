"""`AssistantMessageBuilder`: the partial message of a streaming response, and its events.

Stream functions (the providers, the scripted model of `agentloop.testing`) feed deltas into a
builder and yield the events it returns. Each event carries a snapshot of the message so far.
A delta costs O(1) whatever the length of the answer: the open text block keeps its chunks in an
append-only list, an event captures only (blocks, chunk count) in a tuple, and the
`AssistantMessage` snapshot is built from the capture when someone reads `event.partial`.
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
    _ZERO_USAGE,
    AssistantContent,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)

__all__ = ("AssistantMessageBuilder", "appends_only")


def _with_arguments(call: ToolCall, arguments: Mapping[str, Any]) -> ToolCall:
    """The tool call with its partial arguments so far."""
    return ToolCall(call.id, call.name, arguments, thought_signature=call.thought_signature)


def _build(
    capture: tuple[Any, ...], stop_reason: Any = "pending", error_message: str | None = None
) -> AssistantMessage:
    """The snapshot an event captured: (build, header, earlier blocks, their count, last block,
    parts, part count, kind); parts are the chunks of the last block while it is open (text,
    thinking), or its partial arguments (a tool call)."""
    _, header, head, count, last, parts, part_count, kind = capture
    if last is None:
        return _message(header, (), stop_reason, error_message)
    if parts is not None:
        if kind == "text":
            last = TextContent._streaming(parts, part_count, last.text_signature)
        elif kind == "thinking":
            last = ThinkingContent._streaming(parts, part_count, last.thinking_signature)
        else:
            last = _with_arguments(last, parts)
    return _message(header, (*head[:count], last), stop_reason, error_message)


def appends_only(before: Any, after: Any) -> bool:
    """Whether `after`'s partial is the message `before` captured with only `after.delta` appended
    to the open text or thinking block, told in O(1) from two captures of one builder: `before` is
    an earlier event's capture (its `_partial` as it was when that event was seen: a consumer that
    reads its `partial` later replaces it by the message), `after` an event. False when either is
    not a capture, or anything else changed. The compact wire form relies on it."""
    old, new = before, after._partial
    if type(old) is not tuple or type(new) is not tuple:
        return False
    _, header, head, count, last, parts, part_count, kind = new
    return bool(
        parts is not None
        and part_count > 0
        and (
            kind == "text"
            if type(after) is TextDeltaEvent
            else kind == "thinking" and type(after) is ThinkingDeltaEvent
        )
        and after.content_index == count
        and old[5] is parts
        and old[6] == part_count - 1
        and old[1] is header
        and old[2] is head
        and old[3] == count
        and old[4] is last
        and parts[part_count - 1] is after.delta
    )


def _message(
    header: tuple[Any, ...], content: tuple[AssistantContent, ...], stop_reason: Any, error_message: str | None
) -> AssistantMessage:
    api, provider, model, usage, response_id, timestamp = header
    return AssistantMessage(
        content=content,
        api=api,
        provider=provider,
        model=model,
        usage=usage,
        stop_reason=stop_reason,
        error_message=error_message,
        response_id=response_id,
        timestamp=timestamp,
    )


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

    __slots__ = ("_head", "_header", "_kind", "_last", "_parts", "_tool_text")

    def __init__(self, *, api: str = "", provider: str = "", model: str = "", timestamp: int | None = None) -> None:
        # (api, provider, model, usage, response_id, timestamp): what every snapshot shares
        self._header: tuple[Any, ...] = (
            api,
            provider,
            model,
            _ZERO_USAGE,
            None,
            timestamp if timestamp is not None else now_ms(),
        )
        # The blocks: `_head` then `_last`. Events capture `_head` with its length, so it only
        # grows (a change to an earlier block copies it first): a new or changed last block costs
        # O(1), not a copy of every block.
        self._head: list[AssistantContent] = []
        self._last: AssistantContent | None = None
        # The last block while it is open: the chunks of a text or thinking block, or the partial
        # arguments of a tool call (built into its `ToolCall` when a snapshot or the next block
        # needs them, not at every delta).
        self._parts: Any = None
        self._kind = ""  # "text", "thinking" or "toolCall": what the open block is
        self._tool_text: dict[int, list[str]] = {}

    # --- metadata that the final message carries ------------------------------------------
    @property
    def usage(self) -> Usage:
        """Token usage so far; the final message carries it."""
        return self._header[3]  # type: ignore[no-any-return]

    @usage.setter
    def usage(self, usage: Usage) -> None:
        header = self._header
        self._header = (*header[:3], usage, *header[4:])

    @property
    def response_id(self) -> str | None:
        """The provider's id for the response."""
        return self._header[4]  # type: ignore[no-any-return]

    @response_id.setter
    def response_id(self, response_id: str | None) -> None:
        header = self._header
        self._header = (*header[:4], response_id, header[5])

    @property
    def content(self) -> tuple[AssistantContent, ...]:
        """The blocks so far."""
        return self.snapshot().content

    def _capture(self) -> tuple[Any, ...]:
        parts = self._parts
        head = self._head
        if parts is None:
            return (_build, self._header, head, len(head), self._last, None, 0, "")
        return (_build, self._header, head, len(head), self._last, parts, len(parts), self._kind)

    def snapshot(self, stop_reason: Any = "pending", error_message: str | None = None) -> AssistantMessage:
        """The message so far, as an immutable value."""
        return _build(self._capture(), stop_reason, error_message)

    # --- blocks ---------------------------------------------------------------------------
    def _count(self) -> int:
        return len(self._head) + (self._last is not None)

    def _block(self, index: int) -> AssistantContent:
        head = self._head
        return head[index] if index < len(head) else self._last  # type: ignore[return-value]

    def _index(self, index: int | None, kind: type) -> int:
        last = self._count() - 1
        if index is None:
            index = last
        if not 0 <= index <= last:
            raise IndexError(f"no content block {index} (the message has {last + 1})")
        block = self._block(index)
        if type(block) is not kind:
            raise ValueError(f"content block {index} is a {type(block).__name__}, not a {kind.__name__}")
        return index

    def _close_open(self) -> None:
        """Freeze the open text/thinking block (a new block starts, or the response ends)."""
        parts = self._parts
        if parts is None:
            return
        old = self._last
        kind = self._kind
        if kind == "toolCall":
            self._last = _with_arguments(old, parts)  # type: ignore[arg-type]
        elif kind == "text":
            self._last = TextContent("".join(parts), text_signature=old.text_signature)  # type: ignore[union-attr]
        else:
            self._last = ThinkingContent("".join(parts), thinking_signature=old.thinking_signature)  # type: ignore[union-attr]
        self._parts = None

    def _append(self, block: AssistantContent) -> int:
        """Add a block at the end (closing the open one); return its index."""
        if self._parts is not None:
            self._close_open()
        last = self._last
        if last is not None:
            self._head.append(last)
        self._last = block
        return len(self._head)

    def _set(self, index: int, block: AssistantContent) -> None:
        head = self._head
        if index == len(head):
            self._last = block
            self._parts = None  # (a tool call's partial arguments: replaced too)
        else:  # an earlier block: events captured the list, so change a copy
            head = self._head = list(head)
            head[index] = block

    def start(self) -> StartEvent:
        """The `start` event."""
        return StartEvent(self._capture())  # type: ignore[arg-type]

    def text_start(self) -> TextStartEvent:
        """Open a text block at the end."""
        index = self._append(TextContent(""))
        self._parts, self._kind = [], "text"
        return TextStartEvent(index, self._capture())  # type: ignore[arg-type]

    def text_delta(self, delta: str, index: int | None = None) -> TextDeltaEvent:
        """Append text to a text block."""
        parts = self._parts
        if parts is not None and self._kind == "text" and (index is None or index == len(self._head)):
            parts.append(delta)
            head = self._head
            return TextDeltaEvent(
                len(head),
                delta,
                (_build, self._header, head, len(head), self._last, parts, len(parts), "text"),  # type: ignore[arg-type]
            )
        index = self._index(index, TextContent)  # not the open block: the rare, O(text) path
        old = self._block(index)
        assert isinstance(old, TextContent)
        self._set(index, TextContent(old.text + delta, text_signature=old.text_signature))
        return TextDeltaEvent(index, delta, self._capture())  # type: ignore[arg-type]

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
        return TextEndEvent(index, block.text, self._capture())  # type: ignore[arg-type]

    def thinking_start(self) -> ThinkingStartEvent:
        """Open a thinking block at the end."""
        index = self._append(ThinkingContent(""))
        self._parts, self._kind = [], "thinking"
        return ThinkingStartEvent(index, self._capture())  # type: ignore[arg-type]

    def thinking_delta(self, delta: str, index: int | None = None) -> ThinkingDeltaEvent:
        """Append reasoning to a thinking block."""
        parts = self._parts
        if parts is not None and self._kind == "thinking" and (index is None or index == len(self._head)):
            parts.append(delta)
            head = self._head
            return ThinkingDeltaEvent(
                len(head),
                delta,
                (_build, self._header, head, len(head), self._last, parts, len(parts), "thinking"),  # type: ignore[arg-type]
            )
        index = self._index(index, ThinkingContent)  # not the open block: the rare, O(text) path
        old = self._block(index)
        assert isinstance(old, ThinkingContent)
        self._set(index, ThinkingContent(old.thinking + delta, thinking_signature=old.thinking_signature))
        return ThinkingDeltaEvent(index, delta, self._capture())  # type: ignore[arg-type]

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
        return ThinkingEndEvent(index, block.thinking, self._capture())  # type: ignore[arg-type]

    def tool_call_start(self, id: str, name: str) -> ToolCallStartEvent:
        """Open a tool call at the end (arguments `{}` until deltas give better)."""
        block = ToolCall(id, name, {})
        index = self._append(block)
        self._tool_text[index] = []
        return ToolCallStartEvent(index, (_build, self._header, self._head, index, block, None, 0, ""))  # type: ignore[arg-type]

    def _call_index(self, index: int | None) -> int:
        """The index of the tool call a call event is about: by default the last block."""
        if index is None and type(self._last) is ToolCall:
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
                self._parts, self._kind = arguments, "toolCall"
            else:
                old = self._block(index)
                assert isinstance(old, ToolCall)
                self._set(index, _with_arguments(old, arguments))
        return ToolCallDeltaEvent(index, delta, self._capture())  # type: ignore[arg-type]

    def tool_call_text(self, index: int | None = None) -> str:
        """The raw argument text received so far for a tool call."""
        return "".join(self._tool_text.get(self._index(index, ToolCall), ()))

    def tool_call_end(self, tool_call: ToolCall, index: int | None = None) -> ToolCallEndEvent:
        """Close a tool call with its final block."""
        index = self._call_index(index)
        self._tool_text.pop(index, None)
        self._set(index, tool_call)
        return ToolCallEndEvent(index, tool_call, self._capture())  # type: ignore[arg-type]

    # --- the end --------------------------------------------------------------------------
    def set_content(self, content: tuple[AssistantContent, ...]) -> None:
        """Replace every block (a provider that knows the final blocks better than the deltas)."""
        content = tuple(content)
        self._parts = None
        self._head = list(content[:-1])
        self._last = content[-1] if content else None

    def done(self, reason: Literal["stop", "length", "toolUse"] = "stop") -> DoneEvent:
        """The terminal `done` event with the final message."""
        if self._parts is not None:
            self._close_open()
        last = self._last
        content = () if last is None else (*self._head, last)
        return DoneEvent(reason, _message(self._header, content, reason, None))

    def error(self, reason: Literal["error", "aborted"], message: str) -> ErrorEvent:
        """The terminal `error` event: the partial content kept, `stop_reason` and text set."""
        self._close_open()
        return ErrorEvent(reason, self.snapshot(reason, message))
