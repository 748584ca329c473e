"""Messages, content blocks, usage and the model description.

Everything here is an immutable value: messages travel through buffered event streams and outlive
the state that produced them, so a message a consumer holds never changes under it. Field names are
snake_case; the JSON codec (`_wire._encode`, `_wire._decode`) maps them to the TypeScript camelCase keys.

The records the codec reads from JSON objects (content blocks, messages, usage, cost, tool
results, and the events in `_events.py`) also carry `extra`: the keys of their JSON form that
agentloop does not model (the fields pi-agent-core 1.x adds, or an application's own), None when
there are none. `to_json` writes them back, so a value read from another generation round-trips
whole. `extra` takes part in `==` (a value is equal to another only if both write the same JSON;
it is left out of the hash, which stays that of the modelled fields) and not in `repr`. It is a
keyword-only field of every record (an empty mapping is stored as None).

The records are plain frozen slotted dataclasses; the ones that check or convert a field (a list
of blocks kept as a tuple, a timestamp that must be an int) do it in `__post_init__`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "LLM_ROLES",
    "AgentMessage",
    "AgentToolResult",
    "AssistantContent",
    "AssistantMessage",
    "ContentBlock",
    "Context",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "Message",
    "Model",
    "ModelCost",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserContent",
    "UserMessage",
    "error_result",
    "ended_message",
    "now_ms",
    "tool_result_message",
)

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted", "pending"]
"""Why a response ended. `pending` only appears on partial messages while a response streams."""

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
"""How hard a reasoning model should think; `off` disables reasoning."""


def now_ms() -> int:
    """The current time as integer milliseconds since the epoch (JavaScript's `Date.now()`)."""
    return int(time.time() * 1000)


def _check_extra(record: Any) -> None:
    """`record.extra` must be a mapping (or None); an empty one is stored as None."""
    extra = record.extra
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise TypeError(
                f"{type(record).__name__} extra must be a mapping of JSON keys to values (or None), "
                f"got {type(extra).__name__}"
            )
        if not extra:
            object.__setattr__(record, "extra", None)


def _extra_field() -> Any:
    """The dataclass field `extra`: keyword-only, None by default, compared but not hashed or shown."""
    return field(default=None, kw_only=True, hash=False, repr=False)


def _check_timestamp(record: Any) -> None:
    timestamp = record.timestamp
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError(
            f"{type(record).__name__} timestamp must be an int (milliseconds since the epoch), "
            f"got {type(timestamp).__name__}"
        )


def _check_text(record: Any, text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{type(record).__name__} text must be a str, got {type(text).__name__}")


def _check_bool(record: Any, name: str, *, optional: bool) -> None:
    """The field `name` of `record` must be a bool (or None, when `optional`)."""
    value = getattr(record, name)
    if not isinstance(value, bool) and not (optional and value is None):
        expected = "a bool or None" if optional else "a bool"
        raise TypeError(f"{type(record).__name__} {name} must be {expected}, got {type(value).__name__}")


@dataclass(frozen=True, slots=True, repr=False)
class TextContent:
    """A block of text in a message."""

    text: str = ""
    text_signature: str | None = field(default=None, kw_only=True)
    """Provider metadata attached to the block (for example an OpenAI Responses message id)."""
    extra: Mapping[str, Any] | None = _extra_field()
    """The block's JSON keys agentloop does not model (see the module docstring). Read-only."""
    type: ClassVar[Literal["text"]] = "text"

    def __post_init__(self) -> None:
        _check_text(self, self.text)
        _check_extra(self)

    def __repr__(self) -> str:
        extra = f", text_signature={self.text_signature!r}" if self.text_signature is not None else ""
        return f"TextContent(text={self.text!r}{extra})"


@dataclass(frozen=True, slots=True, repr=False)
class ThinkingContent:
    """A block of model reasoning."""

    thinking: str = ""
    thinking_signature: str | None = field(default=None, kw_only=True)
    """Opaque provider signature that lets the same provider verify the reasoning later."""
    redacted: bool = field(default=False, kw_only=True)
    """True when the provider redacted the reasoning; the payload is in `thinking_signature`."""
    extra: Mapping[str, Any] | None = _extra_field()
    """The block's JSON keys agentloop does not model (see the module docstring). Read-only."""
    type: ClassVar[Literal["thinking"]] = "thinking"

    def __post_init__(self) -> None:
        _check_text(self, self.thinking)
        _check_extra(self)

    def __repr__(self) -> str:
        extra = ""
        if self.thinking_signature is not None:
            extra += f", thinking_signature={self.thinking_signature!r}"
        if self.redacted:
            extra += ", redacted=True"
        return f"ThinkingContent(thinking={self.thinking!r}{extra})"


@dataclass(frozen=True, slots=True)
class ImageContent:
    """An image, base64-encoded."""

    data: str
    """Base64 image bytes."""
    mime_type: str
    """For example `image/png`."""
    type: Literal["image"] = field(default="image", init=False)
    extra: Mapping[str, Any] | None = _extra_field()
    """The block's JSON keys agentloop does not model (see the module docstring). Read-only."""

    def __post_init__(self) -> None:
        _check_extra(self)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call requested by the model."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The arguments as the model sent them (not validated). Treat as read-only."""
    thought_signature: str | None = field(default=None, kw_only=True)
    """Google's opaque reasoning signature for this call."""
    arguments_error: str | None = field(default=None, kw_only=True)
    """Set by a provider when the argument text was not a JSON object (`arguments` is then `{}`)."""
    type: Literal["toolCall"] = field(default="toolCall", init=False)
    extra: Mapping[str, Any] | None = _extra_field()
    """The call's JSON keys agentloop does not model (pi 1.x's `namespace`, ...). Read-only."""

    def __post_init__(self) -> None:
        _check_extra(self)


UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall
ContentBlock: TypeAlias = TextContent | ThinkingContent | ImageContent | ToolCall


@dataclass(frozen=True, slots=True)
class Cost:
    """Cost of a response in dollars."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    extra: Mapping[str, Any] | None = _extra_field()
    """The cost's JSON keys agentloop does not model (pi 1.x's `totalFromProvider`, ...). Read-only."""

    def __post_init__(self) -> None:
        _check_extra(self)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of a response and what they cost."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = field(default_factory=Cost)
    extra: Mapping[str, Any] | None = _extra_field()
    """The usage's JSON keys agentloop does not model (pi 1.x's `cacheWrite1h`, `reasoning`, ...).

    Read-only.
    """

    def __post_init__(self) -> None:
        _check_extra(self)


def _store_blocks(record: Any, what: str, hint: str = "") -> None:
    """`record.content` as a tuple of text and image blocks, or a TypeError naming the field."""
    content = record.content
    if not isinstance(content, (list, tuple)):
        raise TypeError(
            f"{what} must be a list or tuple of TextContent/ImageContent, got {type(content).__name__}{hint}"
        )
    for i, block in enumerate(content):
        if not isinstance(block, (TextContent, ImageContent)):
            raise TypeError(f"{what}[{i}] must be a TextContent or ImageContent, got {type(block).__name__}{hint}")
    if not isinstance(content, tuple):
        object.__setattr__(record, "content", tuple(content))


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A message from the user: a string, or text and image blocks."""

    content: str | tuple[UserContent, ...]
    timestamp: int = field(default_factory=now_ms)
    """Milliseconds since the epoch."""
    role: Literal["user"] = field(default="user", init=False)
    extra: Mapping[str, Any] | None = _extra_field()
    """The message's JSON keys agentloop does not model (see the module docstring). Read-only."""

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            if not isinstance(self.content, (list, tuple)):
                raise TypeError(
                    "UserMessage content must be a str or a sequence of TextContent/ImageContent blocks, "
                    f"got {type(self.content).__name__}"
                )
            _store_blocks(self, "UserMessage content")
        _check_timestamp(self)
        _check_extra(self)

    @property
    def text(self) -> str:
        """The text of the message: `content` when it is a string, else the concatenated text blocks
        (images left out)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextContent))


_ZERO_USAGE = Usage()


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """A response from the model."""

    content: tuple[AssistantContent, ...] = ()
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = _ZERO_USAGE
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    """Set when `stop_reason` is `error` or `aborted`."""
    response_id: str | None = None
    """The provider's id for the response, when it sends one."""
    timestamp: int = field(default_factory=now_ms)
    role: Literal["assistant"] = field(default="assistant", init=False)
    extra: Mapping[str, Any] | None = _extra_field()
    """The message's JSON keys agentloop does not model (pi 1.x's `durationMs`, `thinkingLevel`, ...).

    Read-only.
    """

    def __post_init__(self) -> None:
        _check_extra(self)

    @property
    def text(self) -> str:
        """The concatenated text blocks (thinking and tool calls left out)."""
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of the message, in source order."""
        return tuple(b for b in self.content if isinstance(b, ToolCall))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """The result of one tool call, sent back to the model."""

    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...] = ()
    details: Any = None
    """Structured data for the application (not sent to the model)."""
    is_error: bool = False
    timestamp: int = field(default_factory=now_ms)
    role: Literal["toolResult"] = field(default="toolResult", init=False)
    extra: Mapping[str, Any] | None = _extra_field()
    """The message's JSON keys agentloop does not model (pi 1.x's `durationMs`, `usage`, ...). Read-only."""

    def __post_init__(self) -> None:
        _store_blocks(self, "ToolResultMessage content")
        _check_bool(self, "is_error", optional=False)
        _check_timestamp(self)
        _check_extra(self)

    @property
    def text(self) -> str:
        """The concatenated text blocks (images left out)."""
        return "".join(b.text for b in self.content if isinstance(b, TextContent))


def tool_result_message(
    tool_call_id: str, tool_name: str, result: AgentToolResult, is_error: bool, timestamp: int
) -> ToolResultMessage:
    """The loop's message for a finished call."""
    return ToolResultMessage(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        content=result.content,
        details=result.details,
        is_error=is_error,
        timestamp=timestamp,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomMessage:
    """An application-defined message with any other role (notifications, memos, UI markers).

    The loop keeps custom messages in the transcript and passes them to `transform_context` and
    `convert_to_llm`; the default converter leaves them out of what the model sees.
    """

    role: str
    data: Mapping[str, Any] = field(default_factory=dict)
    """The message's own fields; in JSON they sit beside `role` and `timestamp`."""
    timestamp: int = field(default_factory=now_ms)

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not self.role:
            raise ValueError(f"CustomMessage role must be a non-empty str, got {self.role!r}")
        if not isinstance(self.data, Mapping):
            raise TypeError(f"CustomMessage data must be a mapping, got {type(self.data).__name__}")
        if self.role in LLM_ROLES:
            raise ValueError(
                f"CustomMessage role {self.role!r} is a standard role; "
                "use UserMessage, AssistantMessage or ToolResultMessage"
            )
        clash = {"role", "timestamp"} & set(self.data)
        if clash:
            raise ValueError(f"CustomMessage data cannot use the keys {sorted(clash)}: they are the message's own")
        _check_timestamp(self)


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
"""A message an LLM understands."""

LLM_ROLES = ("user", "assistant", "toolResult")
"""The roles of `Message` (the ones a model understands); any other role is a `CustomMessage`'s."""

AgentMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | CustomMessage
"""Anything in an agent's transcript."""


@dataclass(frozen=True, slots=True)
class ModelCost:
    """Dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """What a stream function needs to know about a model."""

    id: str
    name: str = ""
    api: str = ""
    """The wire API, for example `openai-completions` or `anthropic-messages`."""
    provider: str = ""
    """Passed to `get_api_key`; for example `openai`."""
    base_url: str = ""
    reasoning: bool = False
    input: tuple[Literal["text", "image"], ...] = ("text",)
    cost: ModelCost = field(default_factory=ModelCost)
    context_window: int = 0
    max_tokens: int = 0
    headers: Mapping[str, str] | None = None
    compat: Mapping[str, Any] | None = None


class ToolSpec:
    """What a model needs to know about a tool: any object with these three attributes works."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What one LLM call sees: the system prompt, the messages and the tools."""

    system_prompt: str = ""
    messages: Sequence[Message] = ()
    tools: Sequence[Any] = ()
    """Tools (`AgentTool` or anything with `name`, `description` and `parameters`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentToolResult:
    """What a tool returns: content for the model, details for the application.

    Returning `is_error=True` reports a failure without raising (the details are kept);
    `terminate=True` asks the loop to stop after this batch when every result of it agrees.
    """

    content: tuple[UserContent, ...] = ()
    details: Any = None
    is_error: bool | None = None
    terminate: bool | None = None
    extra: Mapping[str, Any] | None = _extra_field()
    """The result's JSON keys agentloop does not model (pi 1.x's `structuredContent`, `usage`, ...).

    Read-only.
    """

    def __post_init__(self) -> None:
        _store_blocks(self, "AgentToolResult content", " (for plain text use AgentToolResult.from_text(text))")
        _check_bool(self, "is_error", optional=True)
        _check_bool(self, "terminate", optional=True)
        _check_extra(self)

    @classmethod
    def from_text(cls, text: str, details: Any = None) -> AgentToolResult:
        """A result with one text block."""
        return cls(content=(TextContent(text),), details=details)


def error_result(message: str) -> AgentToolResult:
    """The result the loop records for a failed call: one text block, empty details."""
    return AgentToolResult(content=(TextContent(message),), details={})


def ended_message(
    model: Model,
    reason: Literal["error", "aborted"],
    text: str,
    timestamp: int,
    partial: AssistantMessage | None = None,
) -> AssistantMessage:
    """The message a model call ends with when it did not finish (it failed, or was aborted): what
    it had said so far (`partial`), or no content, with `reason` and `text` as its stop reason and
    error message."""
    if partial is not None:
        return replace(partial, stop_reason=reason, error_message=text, timestamp=timestamp)
    return AssistantMessage(
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason=reason,
        error_message=text,
        timestamp=timestamp,
    )
