"""The two event protocols: how a model response streams, and what an agent run reports.

Every event is a frozen slotted dataclass whose class variable `type` is the TypeScript event
name, so `match event: case MessageUpdate(...)` and `if event.type == "message_update"` both narrow.

Every event also has `extra`, the keys of its JSON form that agentloop does not model (pi 1.x's
`durationMs` on `tool_execution_end`, ...): a keyword-only field, None unless `from_json` (or the
caller) gives one, compared by `==`, left out of the hash and the repr, kept by
`dataclasses.replace` and written back by `to_json` (see `_messages`).

The stream events that carry a `partial` (all but `done` and `error`) store what was captured of
the message so far in the field `_partial`: the message itself, or the `PartialSnapshot` that
`AssistantMessageBuilder` took, which the first read of `partial` builds into the message (most
consumers read only the delta). Their `==` and `repr` show `partial`. A `MessageUpdate`'s
`message` is its stream event's `partial`, unless the update was made with a message of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ._messages import AgentMessage, AgentToolResult, AssistantMessage, ToolCall, ToolResultMessage, _extra_field
from ._snapshot import PartialSnapshot

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "AssistantMessageEvent",
    "Captured",
    "DoneEvent",
    "ErrorEvent",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "PartialEvent",
    "StartEvent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
    "appends_only",
    "captured",
    "own_message",
)


# --- the assistant streaming protocol (pi-ai AssistantMessageEvent) --------------------------
# `partial` is a snapshot of the message so far. Order: `start` first (it may be missing when a
# request fails before streaming), block events, then exactly one terminal `done` or `error`.


Captured: TypeAlias = "AssistantMessage | PartialSnapshot | tuple[PartialSnapshot, int]"
"""What a stream event holds of its message (its field `_partial`): the message itself, a
`PartialSnapshot`, or, for a text or thinking delta, the snapshot that the deltas of its block share
(`AssistantMessageBuilder`) and how many of the block's chunks are the event's own."""


class PartialEvent:
    """Base of the stream events that carry a `partial`, the message so far, built on first read.

    Each subclass is a `@dataclass(frozen=True, slots=True, eq=False, repr=False)` whose fields
    end with `_partial` (what was captured: the message, or a `PartialSnapshot`) and `extra`;
    `==` and `repr` are written here, over the other fields and `partial` (the `__eq__` makes
    the events unhashable: a partial may hold dicts).
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    type: ClassVar[str]
    _partial: Captured
    extra: Mapping[str, Any] | None

    @property
    def partial(self) -> AssistantMessage:
        """The message so far (an immutable value)."""
        partial = self._partial
        if isinstance(partial, PartialSnapshot):
            partial = partial.build()
        elif not isinstance(partial, AssistantMessage):  # a delta's (shared snapshot, chunks of its own)
            snapshot, chunks = partial
            partial = snapshot.build(chunks)
        else:
            return partial
        object.__setattr__(self, "_partial", partial)  # built once; the event stays immutable
        return partial

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, PartialEvent)
        compared = [f.name for f in fields(self) if f.compare]
        return [getattr(self, n) for n in compared] == [getattr(other, n) for n in compared] and (
            self.partial == other.partial
        )

    def __repr__(self) -> str:
        shown = "".join(f"{f.name}={getattr(self, f.name)!r}, " for f in fields(self) if f.repr)
        return f"{type(self).__name__}({shown}partial={self.partial!r})"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StartEvent(PartialEvent):
    """The response started streaming."""

    _partial: Captured = field(repr=False, compare=False)
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["start"]] = "start"
    __match_args__ = ("partial",)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _IndexEvent(PartialEvent):
    content_index: int
    """Which block of `partial.content` the event is about."""
    _partial: Captured = field(repr=False, compare=False)
    extra: Mapping[str, Any] | None = _extra_field()
    __match_args__ = ("content_index", "partial")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _DeltaEvent(PartialEvent):
    content_index: int
    delta: str
    """The text (or raw JSON fragment) appended."""
    _partial: Captured = field(repr=False, compare=False)
    extra: Mapping[str, Any] | None = _extra_field()
    __match_args__ = ("content_index", "delta", "partial")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _EndEvent(PartialEvent):
    content_index: int
    content: str
    """The full text of the block."""
    _partial: Captured = field(repr=False, compare=False)
    extra: Mapping[str, Any] | None = _extra_field()
    __match_args__ = ("content_index", "content", "partial")


class TextStartEvent(_IndexEvent):
    """A text block opened at `content_index`."""

    __slots__ = ()
    type: ClassVar[Literal["text_start"]] = "text_start"


class TextDeltaEvent(_DeltaEvent):
    """Text appended to the block at `content_index`."""

    __slots__ = ()
    type: ClassVar[Literal["text_delta"]] = "text_delta"


class TextEndEvent(_EndEvent):
    """The text block at `content_index` is complete; `content` is its full text."""

    __slots__ = ()
    type: ClassVar[Literal["text_end"]] = "text_end"


class ThinkingStartEvent(_IndexEvent):
    """A thinking block opened at `content_index`."""

    __slots__ = ()
    type: ClassVar[Literal["thinking_start"]] = "thinking_start"


class ThinkingDeltaEvent(_DeltaEvent):
    """Reasoning appended to the block at `content_index`."""

    __slots__ = ()
    type: ClassVar[Literal["thinking_delta"]] = "thinking_delta"


class ThinkingEndEvent(_EndEvent):
    """The thinking block at `content_index` is complete."""

    __slots__ = ()
    type: ClassVar[Literal["thinking_end"]] = "thinking_end"


class ToolCallStartEvent(_IndexEvent):
    """A tool call opened at `content_index`."""

    __slots__ = ()
    type: ClassVar[Literal["toolcall_start"]] = "toolcall_start"


class ToolCallDeltaEvent(_DeltaEvent):
    """A raw fragment of the tool call's JSON arguments."""

    __slots__ = ()
    type: ClassVar[Literal["toolcall_delta"]] = "toolcall_delta"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ToolCallEndEvent(PartialEvent):
    """The tool call at `content_index` is complete (its arguments are not validated yet)."""

    content_index: int
    tool_call: ToolCall
    _partial: Captured = field(repr=False, compare=False)
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["toolcall_end"]] = "toolcall_end"
    __match_args__ = ("content_index", "tool_call", "partial")


@dataclass(frozen=True, slots=True)
class DoneEvent:
    """The response finished: `message` is final."""

    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["done"]] = "done"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The response failed or was aborted: `error` is the final message, partial content kept."""

    reason: Literal["error", "aborted"]
    error: AssistantMessage
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["error"]] = "error"


AssistantMessageEvent: TypeAlias = (
    StartEvent
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ThinkingStartEvent
    | ThinkingDeltaEvent
    | ThinkingEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | DoneEvent
    | ErrorEvent
)
"""One event of a streaming model response."""

# --- the agent events (pi-agent-core AgentEvent) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentStart:
    """A run began. Always the first event."""

    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["agent_start"]] = "agent_start"


@dataclass(frozen=True, slots=True)
class AgentEnd:
    """A run ended. Always the last event; `messages` are the messages the run added."""

    messages: Sequence[AgentMessage]
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["agent_end"]] = "agent_end"

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))


@dataclass(frozen=True, slots=True)
class TurnStart:
    """A turn began: one model response and the tool calls it makes."""

    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["turn_start"]] = "turn_start"


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn ended: its assistant message and its tool results in source order."""

    message: AssistantMessage
    tool_results: Sequence[ToolResultMessage]
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["turn_end"]] = "turn_end"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_results", tuple(self.tool_results))


@dataclass(frozen=True, slots=True)
class MessageStart:
    """A message began (prompts, queued messages, tool results, and each assistant response)."""

    message: AgentMessage
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["message_start"]] = "message_start"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class MessageUpdate:
    """The streaming assistant message changed; `assistant_message_event` says how.

    `message` is the message after the change: the one given to the constructor, or (given None,
    as the loop does) the event's `partial`.
    """

    _message: AssistantMessage | None
    assistant_message_event: AssistantMessageEvent
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["message_update"]] = "message_update"
    __match_args__ = ("message", "assistant_message_event")

    @property
    def message(self) -> AssistantMessage:
        """The message so far."""
        if self._message is not None:
            return self._message
        event = self.assistant_message_event
        if isinstance(event, DoneEvent):  # (a terminal event is not an update, but its message is the one to show)
            return event.message
        if isinstance(event, ErrorEvent):
            return event.error
        return event.partial

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not MessageUpdate:
            return NotImplemented
        assert isinstance(other, MessageUpdate)
        return (
            self.assistant_message_event == other.assistant_message_event
            and self.message == other.message
            and self.extra == other.extra
        )

    def __repr__(self) -> str:
        return f"MessageUpdate(message={self.message!r}, assistant_message_event={self.assistant_message_event!r})"


@dataclass(frozen=True, slots=True)
class MessageEnd:
    """A message is complete and part of the transcript."""

    message: AgentMessage
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["message_end"]] = "message_end"


@dataclass(frozen=True, slots=True)
class ToolExecutionStart:
    """A tool call is about to be prepared; `args` are the model's raw arguments."""

    tool_call_id: str
    tool_name: str
    args: Any
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"


@dataclass(frozen=True, slots=True)
class ToolExecutionUpdate:
    """A running tool reported progress."""

    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: AgentToolResult
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"


@dataclass(frozen=True, slots=True)
class ToolExecutionEnd:
    """A tool call is finalized (after `after_tool_call`)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    extra: Mapping[str, Any] | None = _extra_field()
    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"


def captured(event: PartialEvent) -> Captured:
    """What `event` holds of its message now (see `Captured`): until the first read of `partial`,
    what it was made with; then the message."""
    return event._partial


def appends_only(event: object, before: object) -> bool:
    """Whether `event` is a text or thinking delta whose snapshot is the one an earlier event had
    `captured` (`before`) with only its delta appended to the open block (the compact wire form
    then sends the delta alone). False when anything else changed, or cannot be told so."""
    if not isinstance(event, (TextDeltaEvent, ThinkingDeltaEvent)):
        return False
    now = event._partial
    if isinstance(now, (PartialSnapshot, AssistantMessage)) or isinstance(before, (PartialSnapshot, AssistantMessage)):
        return False
    if not isinstance(before, tuple) or len(before) != 2:
        return False
    snapshot, chunks = now
    parts = snapshot.parts
    return (
        before[0] is snapshot
        and before[1] == chunks - 1
        and isinstance(parts, list)
        and parts[chunks - 1] is event.delta
    )


def own_message(update: MessageUpdate) -> AssistantMessage | None:
    """The message `update` was made with (None: its `message` is its stream event's)."""
    return update._message


AgentEvent: TypeAlias = (
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
)
"""One event of an agent run."""
