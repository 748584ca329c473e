"""The two event protocols: how a model response streams, and what an agent run reports.

Every event is an immutable slotted record whose `type` is the TypeScript event name, so
`match event: case MessageUpdate(...)` and `if event.type == "message_update"` both narrow.

Every event also has `extra`, the keys of its JSON form that agentloop does not model (pi 1.x's
`durationMs` on `tool_execution_end`, ...): set only by `from_json`, None otherwise, compared by
`==` and written back by `to_json` (see `_types`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from ._types import AgentMessage, AgentToolResult, AssistantMessage, ToolCall, ToolResultMessage
from ._types import _slot_setter as _setter

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
    """Base of every event: `extra`, None unless `_with_extra` gave the event one.

    Events are made per delta, so `extra` costs their constructors nothing: it is this class's
    attribute, shadowed by an entry of the instance's `__dict__` (the only use of that dict, which
    exists only for the events that carry an `extra`).
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


# --- the assistant streaming protocol (pi-ai AssistantMessageEvent) --------------------------
# `partial` is a snapshot of the message so far. Order: `start` first (it may be missing when a
# request fails before streaming), block events, then exactly one terminal `done` or `error`.


class _StreamEvent(_Event):
    """Base of the events that carry a `partial` snapshot.

    They are made once per delta, so they are small slotted classes, immutable like the
    dataclasses, whose `partial` may be captured cheaply by `AssistantMessageBuilder` and built
    into an `AssistantMessage` on first access (most consumers only read the delta).
    """

    __slots__ = ("_partial",)
    _fields: ClassVar[tuple[str, ...]] = ()
    _partial: Any
    type: str

    @property
    def partial(self) -> AssistantMessage:
        """The message so far (an immutable snapshot)."""
        partial = self._partial
        if type(partial) is tuple:  # a capture: (build, *state), see AssistantMessageBuilder
            partial = partial[0](partial)
            object.__setattr__(self, "_partial", partial)
        return partial  # type: ignore[no-any-return]

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

    __hash__ = None  # type: ignore[assignment]

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

    def __init__(self, partial: AssistantMessage) -> None:
        _set_partial(self, partial)


class _IndexEvent(_StreamEvent):
    __slots__ = ("content_index",)
    _fields = ("content_index",)
    __match_args__ = ("content_index", "partial")
    content_index: int
    """Which block of `partial.content` the event is about."""

    def __init__(self, content_index: int, partial: AssistantMessage) -> None:
        _set_index_index(self, content_index)
        _set_partial(self, partial)


_set_index_index = _setter(_IndexEvent, "content_index")


class _DeltaEvent(_StreamEvent):
    __slots__ = ("content_index", "delta")
    _fields = ("content_index", "delta")
    __match_args__ = ("content_index", "delta", "partial")
    content_index: int
    delta: str
    """The text (or raw JSON fragment) appended."""

    def __init__(self, content_index: int, delta: str, partial: AssistantMessage) -> None:
        _set_delta_index(self, content_index)
        _set_delta(self, delta)
        _set_partial(self, partial)


_set_delta_index = _setter(_DeltaEvent, "content_index")
_set_delta = _setter(_DeltaEvent, "delta")


class _EndEvent(_StreamEvent):
    __slots__ = ("content", "content_index")
    _fields = ("content_index", "content")
    __match_args__ = ("content_index", "content", "partial")
    content_index: int
    content: str
    """The full text of the block."""

    def __init__(self, content_index: int, content: str, partial: AssistantMessage) -> None:
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

    def __init__(self, content_index: int, tool_call: ToolCall, partial: AssistantMessage) -> None:
        _set_call_index(self, content_index)
        _set_tool_call(self, tool_call)
        _set_partial(self, partial)


_set_call_index = _setter(ToolCallEndEvent, "content_index")
_set_tool_call = _setter(ToolCallEndEvent, "tool_call")


class _Record(_Event):
    """Base of the other events: immutable, slotted, compared, hashed and shown by their fields.

    Hand-written rather than `dataclass(frozen=True, slots=True)`: each dataclass costs about half
    a millisecond of `import agentloop`, and these constructors run for every event.
    """

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields) and self.extra == other.extra

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f) for f in self._fields))

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), tuple(getattr(self, f) for f in self._fields), self.extra))


class DoneEvent(_Record):
    """The response finished: `message` is final."""

    __slots__ = ("message", "reason")
    _fields = ("reason", "message")
    __match_args__ = ("reason", "message")
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage

    def __init__(self, reason: Literal["stop", "length", "toolUse"], message: AssistantMessage) -> None:
        _set_DoneEvent_reason(self, reason)
        _set_DoneEvent_message(self, message)


_set_DoneEvent_reason = _setter(DoneEvent, "reason")
_set_DoneEvent_message = _setter(DoneEvent, "message")


class ErrorEvent(_Record):
    """The response failed or was aborted: `error` is the final message, partial content kept."""

    __slots__ = ("error", "reason")
    _fields = ("reason", "error")
    __match_args__ = ("reason", "error")
    type: Literal["error"] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage

    def __init__(self, reason: Literal["error", "aborted"], error: AssistantMessage) -> None:
        _set_ErrorEvent_reason(self, reason)
        _set_ErrorEvent_error(self, error)


_set_ErrorEvent_reason = _setter(ErrorEvent, "reason")
_set_ErrorEvent_error = _setter(ErrorEvent, "error")


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


class AgentStart(_Record):
    """A run began. Always the first event."""

    __slots__ = ()
    type: Literal["agent_start"] = "agent_start"


class AgentEnd(_Record):
    """A run ended. Always the last event; `messages` are the messages the run added."""

    __slots__ = ("messages",)
    _fields = ("messages",)
    __match_args__ = ("messages",)
    type: Literal["agent_end"] = "agent_end"
    messages: Sequence[AgentMessage]

    def __init__(self, messages: Sequence[AgentMessage]) -> None:
        _set_AgentEnd_messages(self, messages if type(messages) is tuple else tuple(messages))


_set_AgentEnd_messages = _setter(AgentEnd, "messages")


class TurnStart(_Record):
    """A turn began: one model response and the tool calls it makes."""

    __slots__ = ()
    type: Literal["turn_start"] = "turn_start"


class TurnEnd(_Record):
    """A turn ended: its assistant message and its tool results in source order."""

    __slots__ = ("message", "tool_results")
    _fields = ("message", "tool_results")
    __match_args__ = ("message", "tool_results")
    type: Literal["turn_end"] = "turn_end"
    message: AssistantMessage
    tool_results: Sequence[ToolResultMessage]

    def __init__(self, message: AssistantMessage, tool_results: Sequence[ToolResultMessage]) -> None:
        _set_TurnEnd_message(self, message)
        _set_TurnEnd_tool_results(self, tool_results if type(tool_results) is tuple else tuple(tool_results))


_set_TurnEnd_message = _setter(TurnEnd, "message")
_set_TurnEnd_tool_results = _setter(TurnEnd, "tool_results")


class MessageStart(_Record):
    """A message began (prompts, queued messages, tool results, and each assistant response).

    For a streaming response `message` is the `start` event's snapshot, built on first access.
    """

    __slots__ = ("_message",)
    _fields = ("message",)
    __match_args__ = ("message",)
    type: Literal["message_start"] = "message_start"
    _message: AgentMessage | StartEvent

    def __init__(self, message: AgentMessage) -> None:
        _set_MessageStart_message(self, message)

    @classmethod
    def _streaming(cls, start: StartEvent) -> MessageStart:
        """The `message_start` of a streaming response: the snapshot is built if someone reads it."""
        event = object.__new__(cls)
        _set_MessageStart_message(event, start)
        return event

    @property
    def message(self) -> AgentMessage:
        """The message."""
        message = self._message
        if type(message) is StartEvent:
            message = message.partial
            _set_MessageStart_message(self, message)
        return message  # type: ignore[return-value]


_set_MessageStart_message = _setter(MessageStart, "_message")


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
            message = self.assistant_message_event.partial  # type: ignore[union-attr]
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

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageUpdate(message={self.message!r}, assistant_message_event={self.assistant_message_event!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (MessageUpdate, (self.message, self.assistant_message_event), self.extra))


_set_message = _setter(MessageUpdate, "_message")
_set_update_event = _setter(MessageUpdate, "assistant_message_event")


class MessageEnd(_Record):
    """A message is complete and part of the transcript."""

    __slots__ = ("message",)
    _fields = ("message",)
    __match_args__ = ("message",)
    type: Literal["message_end"] = "message_end"
    message: AgentMessage

    def __init__(self, message: AgentMessage) -> None:
        _set_MessageEnd_message(self, message)


_set_MessageEnd_message = _setter(MessageEnd, "message")


class ToolExecutionStart(_Record):
    """A tool call is about to be prepared; `args` are the model's raw arguments."""

    __slots__ = ("args", "tool_call_id", "tool_name")
    _fields = ("tool_call_id", "tool_name", "args")
    __match_args__ = ("tool_call_id", "tool_name", "args")
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any

    def __init__(self, tool_call_id: str, tool_name: str, args: Any) -> None:
        _set_ToolExecutionStart_tool_call_id(self, tool_call_id)
        _set_ToolExecutionStart_tool_name(self, tool_name)
        _set_ToolExecutionStart_args(self, args)


_set_ToolExecutionStart_tool_call_id = _setter(ToolExecutionStart, "tool_call_id")
_set_ToolExecutionStart_tool_name = _setter(ToolExecutionStart, "tool_name")
_set_ToolExecutionStart_args = _setter(ToolExecutionStart, "args")


class ToolExecutionUpdate(_Record):
    """A running tool reported progress."""

    __slots__ = ("args", "partial_result", "tool_call_id", "tool_name")
    _fields = ("tool_call_id", "tool_name", "args", "partial_result")
    __match_args__ = ("tool_call_id", "tool_name", "args", "partial_result")
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: AgentToolResult

    def __init__(self, tool_call_id: str, tool_name: str, args: Any, partial_result: AgentToolResult) -> None:
        _set_ToolExecutionUpdate_tool_call_id(self, tool_call_id)
        _set_ToolExecutionUpdate_tool_name(self, tool_name)
        _set_ToolExecutionUpdate_args(self, args)
        _set_ToolExecutionUpdate_partial_result(self, partial_result)


_set_ToolExecutionUpdate_tool_call_id = _setter(ToolExecutionUpdate, "tool_call_id")
_set_ToolExecutionUpdate_tool_name = _setter(ToolExecutionUpdate, "tool_name")
_set_ToolExecutionUpdate_args = _setter(ToolExecutionUpdate, "args")
_set_ToolExecutionUpdate_partial_result = _setter(ToolExecutionUpdate, "partial_result")


class ToolExecutionEnd(_Record):
    """A tool call is finalized (after `after_tool_call`)."""

    __slots__ = ("is_error", "result", "tool_call_id", "tool_name")
    _fields = ("tool_call_id", "tool_name", "result", "is_error")
    __match_args__ = ("tool_call_id", "tool_name", "result", "is_error")
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool

    def __init__(self, tool_call_id: str, tool_name: str, result: AgentToolResult, is_error: bool) -> None:
        _set_ToolExecutionEnd_tool_call_id(self, tool_call_id)
        _set_ToolExecutionEnd_tool_name(self, tool_name)
        _set_ToolExecutionEnd_result(self, result)
        _set_ToolExecutionEnd_is_error(self, is_error)


_set_ToolExecutionEnd_tool_call_id = _setter(ToolExecutionEnd, "tool_call_id")
_set_ToolExecutionEnd_tool_name = _setter(ToolExecutionEnd, "tool_name")
_set_ToolExecutionEnd_result = _setter(ToolExecutionEnd, "result")
_set_ToolExecutionEnd_is_error = _setter(ToolExecutionEnd, "is_error")


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
