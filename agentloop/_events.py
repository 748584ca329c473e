"""The two event protocols: how a model response streams, and what an agent run reports.

Every event is a frozen dataclass whose `type` is the TypeScript event name, so
`match event: case MessageUpdate(...)` and `if event.type == "message_update"` both narrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from ._types import AgentMessage, AgentToolResult, AssistantMessage, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from typing_extensions import TypeAlias

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

# --- the assistant streaming protocol (pi-ai AssistantMessageEvent) --------------------------
# `partial` is a snapshot of the message so far. Order: `start` first (it may be missing when a
# request fails before streaming), block events, then exactly one terminal `done` or `error`.


@dataclass(frozen=True, slots=True)
class StartEvent:
    """The response started streaming."""

    partial: AssistantMessage
    type: Literal["start"] = field(default="start", init=False)


@dataclass(frozen=True, slots=True)
class TextStartEvent:
    """A text block opened at `content_index`."""

    content_index: int
    partial: AssistantMessage
    type: Literal["text_start"] = field(default="text_start", init=False)


@dataclass(frozen=True, slots=True)
class TextDeltaEvent:
    """Text appended to the block at `content_index`."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True)
class TextEndEvent:
    """The text block at `content_index` is complete; `content` is its full text."""

    content_index: int
    content: str
    partial: AssistantMessage
    type: Literal["text_end"] = field(default="text_end", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingStartEvent:
    """A thinking block opened at `content_index`."""

    content_index: int
    partial: AssistantMessage
    type: Literal["thinking_start"] = field(default="thinking_start", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingDeltaEvent:
    """Reasoning appended to the block at `content_index`."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["thinking_delta"] = field(default="thinking_delta", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingEndEvent:
    """The thinking block at `content_index` is complete."""

    content_index: int
    content: str
    partial: AssistantMessage
    type: Literal["thinking_end"] = field(default="thinking_end", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallStartEvent:
    """A tool call opened at `content_index`."""

    content_index: int
    partial: AssistantMessage
    type: Literal["toolcall_start"] = field(default="toolcall_start", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallDeltaEvent:
    """A raw fragment of the tool call's JSON arguments."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["toolcall_delta"] = field(default="toolcall_delta", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallEndEvent:
    """The tool call at `content_index` is complete (its arguments are not validated yet)."""

    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage
    type: Literal["toolcall_end"] = field(default="toolcall_end", init=False)


@dataclass(frozen=True, slots=True)
class DoneEvent:
    """The response finished: `message` is final."""

    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    type: Literal["done"] = field(default="done", init=False)


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The response failed or was aborted: `error` is the final message, partial content kept."""

    reason: Literal["error", "aborted"]
    error: AssistantMessage
    type: Literal["error"] = field(default="error", init=False)


AssistantMessageEvent: TypeAlias = Union[
    StartEvent,
    TextStartEvent,
    TextDeltaEvent,
    TextEndEvent,
    ThinkingStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ToolCallStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    DoneEvent,
    ErrorEvent,
]
"""One event of a streaming model response."""

# --- the agent events (pi-agent-core AgentEvent) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentStart:
    """A run began. Always the first event."""

    type: Literal["agent_start"] = field(default="agent_start", init=False)


@dataclass(frozen=True, slots=True)
class AgentEnd:
    """A run ended. Always the last event; `messages` are the messages the run added."""

    messages: Sequence[AgentMessage]
    type: Literal["agent_end"] = field(default="agent_end", init=False)


@dataclass(frozen=True, slots=True)
class TurnStart:
    """A turn began: one model response and the tool calls it makes."""

    type: Literal["turn_start"] = field(default="turn_start", init=False)


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn ended: its assistant message and its tool results in source order."""

    message: AssistantMessage
    tool_results: Sequence[ToolResultMessage]
    type: Literal["turn_end"] = field(default="turn_end", init=False)


@dataclass(frozen=True, slots=True)
class MessageStart:
    """A message began (prompts, queued messages, tool results, and each assistant response)."""

    message: AgentMessage
    type: Literal["message_start"] = field(default="message_start", init=False)


@dataclass(frozen=True, slots=True)
class MessageUpdate:
    """The streaming assistant message changed; `assistant_message_event` says how."""

    message: AssistantMessage
    assistant_message_event: AssistantMessageEvent
    type: Literal["message_update"] = field(default="message_update", init=False)


@dataclass(frozen=True, slots=True)
class MessageEnd:
    """A message is complete and part of the transcript."""

    message: AgentMessage
    type: Literal["message_end"] = field(default="message_end", init=False)


@dataclass(frozen=True, slots=True)
class ToolExecutionStart:
    """A tool call is about to be prepared; `args` are the model's raw arguments."""

    tool_call_id: str
    tool_name: str
    args: Any
    type: Literal["tool_execution_start"] = field(default="tool_execution_start", init=False)


@dataclass(frozen=True, slots=True)
class ToolExecutionUpdate:
    """A running tool reported progress."""

    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: AgentToolResult
    type: Literal["tool_execution_update"] = field(default="tool_execution_update", init=False)


@dataclass(frozen=True, slots=True)
class ToolExecutionEnd:
    """A tool call is finalized (after `after_tool_call`)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    type: Literal["tool_execution_end"] = field(default="tool_execution_end", init=False)


AgentEvent: TypeAlias = Union[
    AgentStart,
    AgentEnd,
    TurnStart,
    TurnEnd,
    MessageStart,
    MessageUpdate,
    MessageEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolExecutionEnd,
]
"""One event of an agent run."""
