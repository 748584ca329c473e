"""The two event protocols: how a model response streams, and what an agent run reports.

Every event is an immutable slotted record whose `type` is the TypeScript event name, so
`match event: case MessageUpdate(...)` and `if event.type == "message_update"` both narrow.

Every event also has `extra`, the keys of its JSON form that agentloop does not model (pi 1.x's
`durationMs` on `tool_execution_end`, ...): set only by `from_json`, None otherwise, compared by
`==` and written back by `to_json` (see `_types`). It is not a dataclass field, so
`dataclasses.replace` makes an event without it.

Most events are frozen slotted dataclasses (`_Record`). The ones made per streamed delta, the
stream events that carry a `partial` and `MessageUpdate`, are small slotted classes that build
their message on first read (`_StreamEvent`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from ._messages import AgentMessage, AgentToolResult, AssistantMessage, ToolCall, ToolResultMessage
from ._record import checked_field, fast_init
from ._snapshot import PartialSnapshot

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "AssistantMessageEvent",
    "DoneEvent",
    "ErrorEvent",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
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
)


class _Event:
    """Base of the events made per delta: `extra`, None unless `_with_extra` gave the event one.

    `extra` costs their constructors nothing: it is this class's attribute, shadowed by an entry
    of the instance's `__dict__` (the only use of that dict, which exists only for the events that
    carry an `extra`).
    """

    __slots__ = ("__dict__",)
    extra: Mapping[str, Any] | None = None
    """The event's JSON keys agentloop does not model (see the module docstring). Read-only."""


_E = TypeVar("_E", bound=_Event)


def _with_extra(event: _E, extra: Mapping[str, Any] | None) -> _E:
    """`event`, carrying `extra` when there is any (how `from_json` and unpickling set it)."""
    if extra:
        object.__setattr__(event, "extra", extra)
    return event


def _rebuilt(cls: type[_E], args: tuple[Any, ...], extra: Mapping[str, Any] | None) -> _E:
    return _with_extra(cls(*args), extra)


def _setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    setter: Callable[[Any, Any], None] = cls.__dict__[name].__set__
    return setter


# --- the assistant streaming protocol (pi-ai AssistantMessageEvent) --------------------------
# `partial` is a snapshot of the message so far. Order: `start` first (it may be missing when a
# request fails before streaming), block events, then exactly one terminal `done` or `error`.


class _StreamEvent(_Event):
    """Base of the events that carry a `partial` snapshot.

    They are made once per delta, and their `partial` is built on first read (most consumers only
    read the delta): `AssistantMessageBuilder` gives them a `PartialSnapshot`, not a message.
    That is why they are small slotted classes, immutable like the records, and not
    dataclasses: a dataclass's field is what it stores, and a frozen dataclass's `__init__` made
    a streamed run more than 10% slower (benchmarks/README.md, "Records").
    """

    __slots__ = ("_partial",)
    _fields: ClassVar[tuple[str, ...]] = ()
    _partial: AssistantMessage | PartialSnapshot
    type: str

    def _part_count(self) -> int | None:
        """How many chunks of the snapshot's open block are this event's (None: all of them)."""
        return None

    @property
    def partial(self) -> AssistantMessage:
        """The message so far (an immutable snapshot)."""
        partial = self._partial
        if isinstance(partial, PartialSnapshot):
            partial = partial.build(self._part_count())
            object.__setattr__(self, "_partial", partial)
        return partial

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return (
            all(getattr(self, f) == getattr(other, f) for f in self._fields)
            and self.partial == other.partial
            and self.extra == other.extra
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable (its partial may hold lists), as `object` lets a subclass say

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({fields}{', ' if fields else ''}partial={self.partial!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), (*(getattr(self, f) for f in self._fields), self.partial), self.extra))


# The events are immutable (`__setattr__` raises), so their constructors store through the slot
# descriptors (`_setter`): the same as `object.__setattr__`, without the lookup, on a path taken per delta.
_set_partial = _setter(_StreamEvent, "_partial")


class StartEvent(_StreamEvent):
    """The response started streaming."""

    __slots__ = ()
    __match_args__ = ("partial",)
    type: Literal["start"] = "start"

    def __init__(self, partial: AssistantMessage | PartialSnapshot) -> None:
        _set_partial(self, partial)


class _IndexEvent(_StreamEvent):
    __slots__ = ("content_index",)
    _fields = ("content_index",)
    __match_args__ = ("content_index", "partial")
    content_index: int
    """Which block of `partial.content` the event is about."""

    def __init__(self, content_index: int, partial: AssistantMessage | PartialSnapshot) -> None:
        _set_index_index(self, content_index)
        _set_partial(self, partial)


_set_index_index = _setter(_IndexEvent, "content_index")


class _DeltaEvent(_StreamEvent):
    __slots__ = ("_chunks", "content_index", "delta")
    _fields = ("content_index", "delta")
    __match_args__ = ("content_index", "delta", "partial")
    content_index: int
    delta: str
    """The text (or raw JSON fragment) appended."""
    _chunks: int | None

    def __init__(self, content_index: int, delta: str, partial: AssistantMessage | PartialSnapshot) -> None:
        _set_delta_index(self, content_index)
        _set_delta(self, delta)
        _set_partial(self, partial)
        _set_chunks(self, None)

    @classmethod
    def _appended(cls: type[_D], snapshot: PartialSnapshot, chunks: int, delta: str) -> _D:
        """The event of a delta appended to the snapshot's open block, which then had `chunks`
        chunks: the snapshot is shared by the block's deltas (`AssistantMessageBuilder`)."""
        event = _new(cls)
        _set_delta_index(event, snapshot.head_count)
        _set_delta(event, delta)
        _set_partial(event, snapshot)
        _set_chunks(event, chunks)
        return event

    def _part_count(self) -> int | None:
        return self._chunks


_D = TypeVar("_D", bound=_DeltaEvent)
_new = object.__new__
_set_delta_index = _setter(_DeltaEvent, "content_index")
_set_delta = _setter(_DeltaEvent, "delta")
_set_chunks = _setter(_DeltaEvent, "_chunks")


class _EndEvent(_StreamEvent):
    __slots__ = ("content", "content_index")
    _fields = ("content_index", "content")
    __match_args__ = ("content_index", "content", "partial")
    content_index: int
    content: str
    """The full text of the block."""

    def __init__(self, content_index: int, content: str, partial: AssistantMessage | PartialSnapshot) -> None:
        _set_end_index(self, content_index)
        _set_end_content(self, content)
        _set_partial(self, partial)


_set_end_index = _setter(_EndEvent, "content_index")
_set_end_content = _setter(_EndEvent, "content")


class TextStartEvent(_IndexEvent):
    """A text block opened at `content_index`."""

    __slots__ = ()
    type: Literal["text_start"] = "text_start"


class TextDeltaEvent(_DeltaEvent):
    """Text appended to the block at `content_index`."""

    __slots__ = ()
    type: Literal["text_delta"] = "text_delta"


class TextEndEvent(_EndEvent):
    """The text block at `content_index` is complete; `content` is its full text."""

    __slots__ = ()
    type: Literal["text_end"] = "text_end"


class ThinkingStartEvent(_IndexEvent):
    """A thinking block opened at `content_index`."""

    __slots__ = ()
    type: Literal["thinking_start"] = "thinking_start"


class ThinkingDeltaEvent(_DeltaEvent):
    """Reasoning appended to the block at `content_index`."""

    __slots__ = ()
    type: Literal["thinking_delta"] = "thinking_delta"


class ThinkingEndEvent(_EndEvent):
    """The thinking block at `content_index` is complete."""

    __slots__ = ()
    type: Literal["thinking_end"] = "thinking_end"


class ToolCallStartEvent(_IndexEvent):
    """A tool call opened at `content_index`."""

    __slots__ = ()
    type: Literal["toolcall_start"] = "toolcall_start"


class ToolCallDeltaEvent(_DeltaEvent):
    """A raw fragment of the tool call's JSON arguments."""

    __slots__ = ()
    type: Literal["toolcall_delta"] = "toolcall_delta"


class ToolCallEndEvent(_StreamEvent):
    """The tool call at `content_index` is complete (its arguments are not validated yet)."""

    __slots__ = ("content_index", "tool_call")
    _fields = ("content_index", "tool_call")
    __match_args__ = ("content_index", "tool_call", "partial")
    type: Literal["toolcall_end"] = "toolcall_end"
    content_index: int
    tool_call: ToolCall

    def __init__(self, content_index: int, tool_call: ToolCall, partial: AssistantMessage | PartialSnapshot) -> None:
        _set_call_index(self, content_index)
        _set_tool_call(self, tool_call)
        _set_partial(self, partial)


_set_call_index = _setter(ToolCallEndEvent, "content_index")
_set_tool_call = _setter(ToolCallEndEvent, "tool_call")


class _Record(_Event):
    """Base of the events that are records: `@fast_init @dataclass(frozen=True, slots=True, eq=False)`.

    Their `extra` is `_Event`'s (no slot, no constructor argument: an event is made per tool call
    and per turn, and only `from_json` gives one an `extra`), so `==`, the hash and pickling are
    written here, over the dataclass fields and `extra`.
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, f.name) for f in dataclasses.fields(self)])

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Record)
        return self._values() == other._values() and self.extra == other.extra

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self._values(), self.extra))


def _as_tuple(owner: object, items: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(items)


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class DoneEvent(_Record):
    """The response finished: `message` is final."""

    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    type: ClassVar[Literal["done"]] = "done"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class ErrorEvent(_Record):
    """The response failed or was aborted: `error` is the final message, partial content kept."""

    reason: Literal["error", "aborted"]
    error: AssistantMessage
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


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class AgentStart(_Record):
    """A run began. Always the first event."""

    type: ClassVar[Literal["agent_start"]] = "agent_start"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class AgentEnd(_Record):
    """A run ended. Always the last event; `messages` are the messages the run added."""

    messages: Sequence[AgentMessage] = checked_field(_as_tuple, fast=tuple)
    type: ClassVar[Literal["agent_end"]] = "agent_end"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class TurnStart(_Record):
    """A turn began: one model response and the tool calls it makes."""

    type: ClassVar[Literal["turn_start"]] = "turn_start"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class TurnEnd(_Record):
    """A turn ended: its assistant message and its tool results in source order."""

    message: AssistantMessage
    tool_results: Sequence[ToolResultMessage] = checked_field(_as_tuple, fast=tuple)
    type: ClassVar[Literal["turn_end"]] = "turn_end"


class _StartOfStream(_Record):
    """Base of `MessageStart`: the event of a streaming response builds its message on first read.

    `_streaming` leaves the `message` field unset and keeps the `start` event; the first read of
    `message` reaches `__getattr__`, which takes the start event's snapshot and stores it.
    """

    __slots__ = ("_start",)
    _start: StartEvent

    if not TYPE_CHECKING:  # (a type checker would accept any attribute of a class with `__getattr__`)

        def __getattr__(self, name: str) -> Any:
            if name != "message":  # (reached only for an attribute not found)
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            message = self._start.partial
            object.__setattr__(self, "message", message)
            return message


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class MessageStart(_StartOfStream):
    """A message began (prompts, queued messages, tool results, and each assistant response)."""

    message: AgentMessage
    type: ClassVar[Literal["message_start"]] = "message_start"

    @classmethod
    def _streaming(cls, start: StartEvent) -> MessageStart:
        """The `message_start` of a streaming response: its message is the `start` event's snapshot,
        built if someone reads it."""
        event = _new(cls)
        object.__setattr__(event, "_start", start)
        return event


class MessageUpdate(_Event):
    """The streaming assistant message changed; `assistant_message_event` says how.

    `message` is the snapshot of the message after the change (the event's `partial`), built on
    first access.
    """

    __slots__ = ("_message", "assistant_message_event")
    __match_args__ = ("message", "assistant_message_event")
    type: Literal["message_update"] = "message_update"
    assistant_message_event: AssistantMessageEvent
    _message: AssistantMessage | None

    def __init__(self, message: AssistantMessage | None, assistant_message_event: AssistantMessageEvent) -> None:
        _set_message(self, message)
        _set_update_event(self, assistant_message_event)

    @property
    def message(self) -> AssistantMessage:
        """The message so far."""
        message = self._message
        if message is None:
            event = self.assistant_message_event
            if isinstance(event, _StreamEvent):
                message = event.partial
            else:  # (a terminal event is not an update, but its message is the one to show)
                message = event.message if isinstance(event, DoneEvent) else event.error
            object.__setattr__(self, "_message", message)
        return message

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("MessageUpdate is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("MessageUpdate is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not MessageUpdate:
            return NotImplemented
        return (
            self.assistant_message_event == other.assistant_message_event
            and self.message == other.message
            and self.extra == other.extra
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable (its partial may hold lists), as `object` lets a subclass say

    def __repr__(self) -> str:
        return f"MessageUpdate(message={self.message!r}, assistant_message_event={self.assistant_message_event!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (MessageUpdate, (self.message, self.assistant_message_event), self.extra))


_set_message = _setter(MessageUpdate, "_message")
_set_update_event = _setter(MessageUpdate, "assistant_message_event")


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class MessageEnd(_Record):
    """A message is complete and part of the transcript."""

    message: AgentMessage
    type: ClassVar[Literal["message_end"]] = "message_end"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class ToolExecutionStart(_Record):
    """A tool call is about to be prepared; `args` are the model's raw arguments."""

    tool_call_id: str
    tool_name: str
    args: Any
    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class ToolExecutionUpdate(_Record):
    """A running tool reported progress."""

    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: AgentToolResult
    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"


@fast_init
@dataclass(frozen=True, slots=True, eq=False)
class ToolExecutionEnd(_Record):
    """A tool call is finalized (after `after_tool_call`)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"


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
