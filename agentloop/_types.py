"""Messages, content blocks, usage and the model description.

Everything here is an immutable value: messages travel through buffered event streams and outlive
the state that produced them, so a message a consumer holds never changes under it. Field names are
snake_case; the JSON codec (`_codec.py`) maps them to the TypeScript camelCase keys.

The records the codec reads from JSON objects (content blocks, messages, usage, cost, tool
results, and the events in `_events.py`) also carry `extra`: the keys of their JSON form that
agentloop does not model (the fields pi-agent-core 1.x adds, or an application's own), None when
there are none. `to_json` writes them back, so a value read from another generation round-trips
whole. `extra` takes part in `==` (a value is equal to another only if both write the same JSON;
it is left out of the hash, which stays that of the modelled fields) and not in `repr`. Here it
is a keyword-only field (a slot) that every constructor sets; the events, made per delta, keep it
without a slot (see `_events._Event`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
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


class _Default:
    """An argument not given (None may be a value): shown as `<default>` in signatures."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


_UNSET: Any = _Default()


def _checked_extra(owner: object, extra: object) -> Any:
    """`extra` given to a constructor (not None): a mapping, kept; an empty one is None."""
    if not isinstance(extra, Mapping):
        raise TypeError(
            f"{type(owner).__name__} extra must be a mapping of JSON keys to values (or None), "
            f"got {type(extra).__name__}"
        )
    return extra or None


def _store_extra(owner: object, extra: object) -> None:
    """`__post_init__` of a dataclass given `extra`: check it, and keep an empty one as None."""
    if _checked_extra(owner, extra) is None:
        object.__setattr__(owner, "extra", None)


def _extra_field() -> Any:
    """The dataclass field `extra`: keyword-only, None by default, compared but not hashed or shown."""
    return field(default=None, kw_only=True, hash=False, repr=False)


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """Set a field of a frozen slotted class from its own `__init__`.

    The hot message classes (built per tool call and per turn) write their `__init__` by hand with
    these: about half the cost of the `object.__setattr__` calls a frozen dataclass makes.
    """
    return cls.__dict__[name].__set__  # type: ignore[no-any-return]


class _LazyText:
    """Base for text-bearing blocks whose text may be the join of a shared, append-only chunk list.

    A streaming response grows one block by a delta at a time. Joining the whole text for every
    snapshot would make a long answer quadratic, so a snapshot keeps a reference to the chunk list
    and how many chunks it covers, and joins them once, on first access.
    """

    __slots__ = ("_n", "_parts", "_value")

    _value: str | None
    _parts: list[str] | None
    _n: int

    def _init_text(self, value: str) -> None:
        if type(value) is not str and not isinstance(value, str):
            raise TypeError(f"{type(self).__name__} text must be a str, got {type(value).__name__}")
        _set_value(self, value)
        _set_parts(self, None)
        _set_n(self, 0)

    def _text(self) -> str:
        value = self._value
        if value is None:
            parts = self._parts
            assert parts is not None
            value = "".join(parts[: self._n]) if self._n != len(parts) else "".join(parts)
            # Caching a derived value: the block stays observably immutable.
            object.__setattr__(self, "_value", value)
            object.__setattr__(self, "_parts", None)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


_set_value = _slot_setter(_LazyText, "_value")
_set_parts = _slot_setter(_LazyText, "_parts")
_set_n = _slot_setter(_LazyText, "_n")


class TextContent(_LazyText):
    """A block of text in a message."""

    __slots__ = ("extra", "text_signature")
    __match_args__ = ("text",)
    type: ClassVar[Literal["text"]] = "text"
    text_signature: str | None
    """Provider metadata attached to the block (for example an OpenAI Responses message id)."""
    extra: Mapping[str, Any] | None
    """The block's JSON keys agentloop does not model (see the module docstring). Read-only."""

    def __init__(
        self, text: str = "", *, text_signature: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        self._init_text(text)
        _set_text_signature(self, text_signature)
        _set_text_extra(self, None if extra is None else _checked_extra(self, extra))

    @classmethod
    def _streaming(cls, parts: list[str], n: int, text_signature: str | None = None) -> TextContent:
        block = object.__new__(cls)
        _set_value(block, None)
        _set_parts(block, parts)
        _set_n(block, n)
        _set_text_signature(block, text_signature)
        _set_text_extra(block, None)
        return block

    @property
    def text(self) -> str:
        """The text of the block."""
        return self._text()

    def __eq__(self, other: object) -> bool:
        if type(other) is not TextContent:
            return NotImplemented
        return self.text == other.text and self.text_signature == other.text_signature and self.extra == other.extra

    def __hash__(self) -> int:
        return hash((TextContent, self.text, self.text_signature))

    def __repr__(self) -> str:
        extra = f", text_signature={self.text_signature!r}" if self.text_signature is not None else ""
        return f"TextContent(text={self.text!r}{extra})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle (the slots cannot be set back)
        return (_text_content, (self.text, self.text_signature, self.extra))


_set_text_signature = _slot_setter(TextContent, "text_signature")
_set_text_extra = _slot_setter(TextContent, "extra")


class ThinkingContent(_LazyText):
    """A block of model reasoning."""

    __slots__ = ("extra", "redacted", "thinking_signature")
    __match_args__ = ("thinking",)
    type: ClassVar[Literal["thinking"]] = "thinking"
    thinking_signature: str | None
    """Opaque provider signature that lets the same provider verify the reasoning later."""
    redacted: bool
    """True when the provider redacted the reasoning; the payload is in `thinking_signature`."""
    extra: Mapping[str, Any] | None
    """The block's JSON keys agentloop does not model (see the module docstring). Read-only."""

    def __init__(
        self,
        thinking: str = "",
        *,
        thinking_signature: str | None = None,
        redacted: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self._init_text(thinking)
        _set_thinking_signature(self, thinking_signature)
        _set_redacted(self, redacted)
        _set_thinking_extra(self, None if extra is None else _checked_extra(self, extra))

    @classmethod
    def _streaming(cls, parts: list[str], n: int, thinking_signature: str | None = None) -> ThinkingContent:
        block = object.__new__(cls)
        _set_value(block, None)
        _set_parts(block, parts)
        _set_n(block, n)
        _set_thinking_signature(block, thinking_signature)
        _set_redacted(block, False)
        _set_thinking_extra(block, None)
        return block

    @property
    def thinking(self) -> str:
        """The reasoning text."""
        return self._text()

    def __eq__(self, other: object) -> bool:
        if type(other) is not ThinkingContent:
            return NotImplemented
        return (self.thinking, self.thinking_signature, self.redacted, self.extra) == (
            other.thinking,
            other.thinking_signature,
            other.redacted,
            other.extra,
        )

    def __hash__(self) -> int:
        return hash((ThinkingContent, self.thinking, self.thinking_signature, self.redacted))

    def __repr__(self) -> str:
        extra = ""
        if self.thinking_signature is not None:
            extra += f", thinking_signature={self.thinking_signature!r}"
        if self.redacted:
            extra += ", redacted=True"
        return f"ThinkingContent(thinking={self.thinking!r}{extra})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_thinking_content, (self.thinking, self.thinking_signature, self.redacted, self.extra))


_set_thinking_signature = _slot_setter(ThinkingContent, "thinking_signature")
_set_redacted = _slot_setter(ThinkingContent, "redacted")
_set_thinking_extra = _slot_setter(ThinkingContent, "extra")


def _text_content(text: str, text_signature: str | None, extra: Mapping[str, Any] | None = None) -> TextContent:
    return TextContent(text, text_signature=text_signature, extra=extra)


def _thinking_content(
    thinking: str, thinking_signature: str | None, redacted: bool, extra: Mapping[str, Any] | None = None
) -> ThinkingContent:
    return ThinkingContent(thinking, thinking_signature=thinking_signature, redacted=redacted, extra=extra)


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
        if self.extra is not None:
            _store_extra(self, self.extra)


@dataclass(frozen=True, slots=True, init=False)
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

    def __init__(
        self,
        id: str,
        name: str,
        arguments: Mapping[str, Any] = _UNSET,
        *,
        thought_signature: str | None = None,
        arguments_error: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        # Hand-written (see `_slot_setter`): a streamed response builds several per call.
        _set_call_id(self, id)
        _set_call_name(self, name)
        _set_call_arguments(self, {} if arguments is _UNSET else arguments)
        _set_call_thought_signature(self, thought_signature)
        _set_call_arguments_error(self, arguments_error)
        _set_call_type(self, "toolCall")
        _set_call_extra(self, None if extra is None else _checked_extra(self, extra))


_set_call_id = _slot_setter(ToolCall, "id")
_set_call_name = _slot_setter(ToolCall, "name")
_set_call_arguments = _slot_setter(ToolCall, "arguments")
_set_call_thought_signature = _slot_setter(ToolCall, "thought_signature")
_set_call_arguments_error = _slot_setter(ToolCall, "arguments_error")
_set_call_type = _slot_setter(ToolCall, "type")
_set_call_extra = _slot_setter(ToolCall, "extra")


UserContent: TypeAlias = TextContent | ImageContent
_USER_BLOCKS = (TextContent, ImageContent)
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
        if self.extra is not None:
            _store_extra(self, self.extra)


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
        if self.extra is not None:
            _store_extra(self, self.extra)


_ZERO_USAGE = Usage()


def _blocks(owner: object, content: object, what: str, hint: str = "") -> None:
    """Store `content` as a tuple of text and image blocks, or raise a TypeError naming the field.

    Cheap on the hot path: one type check for the tuple and one per block (usually one or two).
    """
    if type(content) is not tuple:
        if not isinstance(content, (list, tuple)):
            raise TypeError(
                f"{what} must be a list or tuple of TextContent/ImageContent, got {type(content).__name__}{hint}"
            )
        content = tuple(content)
        object.__setattr__(owner, "content", content)
    for block in content:
        if type(block) is not TextContent and type(block) is not ImageContent and not isinstance(block, _USER_BLOCKS):
            i = next(i for i, b in enumerate(content) if b is block)
            raise TypeError(f"{what}[{i}] must be a TextContent or ImageContent, got {type(block).__name__}{hint}")


def _check_timestamp(owner: object, timestamp: object) -> None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError(
            f"{type(owner).__name__} timestamp must be an int (milliseconds since the epoch), "
            f"got {type(timestamp).__name__}"
        )


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
        if self.extra is not None:
            _store_extra(self, self.extra)
        content = self.content
        if type(content) is not str and not isinstance(content, str):
            if not isinstance(content, (list, tuple)):
                raise TypeError(
                    "UserMessage content must be a str or a sequence of TextContent/ImageContent blocks, "
                    f"got {type(content).__name__}"
                )
            _blocks(self, content, "UserMessage content")
        if type(self.timestamp) is not int:
            _check_timestamp(self, self.timestamp)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
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

    def __init__(
        self,
        *,
        content: tuple[AssistantContent, ...] = (),
        api: str = "",
        provider: str = "",
        model: str = "",
        usage: Usage = _ZERO_USAGE,
        stop_reason: StopReason = "stop",
        error_message: str | None = None,
        response_id: str | None = None,
        timestamp: int = _UNSET,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        _set_assistant_content(self, content)
        _set_assistant_api(self, api)
        _set_assistant_provider(self, provider)
        _set_assistant_model(self, model)
        _set_assistant_usage(self, usage)
        _set_assistant_stop_reason(self, stop_reason)
        _set_assistant_error_message(self, error_message)
        _set_assistant_response_id(self, response_id)
        _set_assistant_timestamp(self, now_ms() if timestamp is _UNSET else timestamp)
        _set_assistant_role(self, "assistant")
        _set_assistant_extra(self, None if extra is None else _checked_extra(self, extra))

    @property
    def text(self) -> str:
        """The concatenated text blocks (thinking and tool calls left out)."""
        return "".join(b.text for b in self.content if type(b) is TextContent)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of the message, in source order."""
        return tuple([b for b in self.content if type(b) is ToolCall])


_set_assistant_content = _slot_setter(AssistantMessage, "content")
_set_assistant_api = _slot_setter(AssistantMessage, "api")
_set_assistant_provider = _slot_setter(AssistantMessage, "provider")
_set_assistant_model = _slot_setter(AssistantMessage, "model")
_set_assistant_usage = _slot_setter(AssistantMessage, "usage")
_set_assistant_stop_reason = _slot_setter(AssistantMessage, "stop_reason")
_set_assistant_error_message = _slot_setter(AssistantMessage, "error_message")
_set_assistant_response_id = _slot_setter(AssistantMessage, "response_id")
_set_assistant_timestamp = _slot_setter(AssistantMessage, "timestamp")
_set_assistant_role = _slot_setter(AssistantMessage, "role")
_set_assistant_extra = _slot_setter(AssistantMessage, "extra")


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
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

    def __init__(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        content: tuple[UserContent, ...] = (),
        details: Any = None,
        is_error: bool = False,
        timestamp: int = _UNSET,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        _set_result_tool_call_id(self, tool_call_id)
        _set_result_tool_name(self, tool_name)
        _set_result_content(self, content)
        _set_result_details(self, details)
        _set_result_is_error(self, is_error)
        _set_result_timestamp(self, now_ms() if timestamp is _UNSET else timestamp)
        _set_result_role(self, "toolResult")
        _blocks(self, content, "ToolResultMessage content")
        if type(is_error) is not bool:
            raise TypeError(f"ToolResultMessage is_error must be a bool, got {type(is_error).__name__}")
        if timestamp is not _UNSET and type(timestamp) is not int:
            _check_timestamp(self, timestamp)
        _set_result_extra(self, None if extra is None else _checked_extra(self, extra))


_set_result_tool_call_id = _slot_setter(ToolResultMessage, "tool_call_id")
_set_result_tool_name = _slot_setter(ToolResultMessage, "tool_name")
_set_result_content = _slot_setter(ToolResultMessage, "content")
_set_result_details = _slot_setter(ToolResultMessage, "details")
_set_result_is_error = _slot_setter(ToolResultMessage, "is_error")
_set_result_timestamp = _slot_setter(ToolResultMessage, "timestamp")
_set_result_role = _slot_setter(ToolResultMessage, "role")
_set_result_extra = _slot_setter(ToolResultMessage, "extra")


def tool_result_message(
    tool_call_id: str, tool_name: str, result: AgentToolResult, is_error: bool, timestamp: int
) -> ToolResultMessage:
    """The loop's message for a finished call: the result's content is checked already, `is_error` a bool."""
    message = object.__new__(ToolResultMessage)
    _set_result_tool_call_id(message, tool_call_id)
    _set_result_tool_name(message, tool_name)
    _set_result_content(message, result.content)
    _set_result_details(message, result.details)
    _set_result_is_error(message, is_error)
    _set_result_timestamp(message, timestamp)
    _set_result_role(message, "toolResult")
    _set_result_extra(message, None)
    return message


_STANDARD_ROLES = frozenset({"user", "assistant", "toolResult"})


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
        if self.role in _STANDARD_ROLES:
            raise ValueError(
                f"CustomMessage role {self.role!r} is a standard role; "
                "use UserMessage, AssistantMessage or ToolResultMessage"
            )
        clash = {"role", "timestamp"} & set(self.data)
        if clash:
            raise ValueError(f"CustomMessage data cannot use the keys {sorted(clash)}: they are the message's own")
        if type(self.timestamp) is not int:
            _check_timestamp(self, self.timestamp)


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
"""A message an LLM understands."""

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


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Context:
    """What one LLM call sees: the system prompt, the messages and the tools."""

    system_prompt: str = ""
    messages: Sequence[Message] = ()
    tools: Sequence[Any] = ()
    """Tools (`AgentTool` or anything with `name`, `description` and `parameters`)."""

    def __init__(self, *, system_prompt: str = "", messages: Sequence[Message] = (), tools: Sequence[Any] = ()) -> None:
        # Hand-written (see `_slot_setter`): one per model call.
        _set_context_system_prompt(self, system_prompt)
        _set_context_messages(self, messages)
        _set_context_tools(self, tools)


_set_context_system_prompt = _slot_setter(Context, "system_prompt")
_set_context_messages = _slot_setter(Context, "messages")
_set_context_tools = _slot_setter(Context, "tools")


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
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

    def __init__(
        self,
        *,
        content: tuple[UserContent, ...] = (),
        details: Any = None,
        is_error: bool | None = None,
        terminate: bool | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        _set_tool_result_content(self, content)
        _set_tool_result_details(self, details)
        _set_tool_result_is_error(self, is_error)
        _set_tool_result_terminate(self, terminate)
        _blocks(self, content, "AgentToolResult content", " (for plain text use AgentToolResult.from_text(text))")
        if is_error is not None and type(is_error) is not bool:
            raise TypeError(f"AgentToolResult is_error must be a bool or None, got {type(is_error).__name__}")
        if terminate is not None and type(terminate) is not bool:
            raise TypeError(f"AgentToolResult terminate must be a bool or None, got {type(terminate).__name__}")
        _set_tool_result_extra(self, None if extra is None else _checked_extra(self, extra))

    @classmethod
    def from_text(cls, text: str, details: Any = None) -> AgentToolResult:
        """A result with one text block."""
        if cls is not AgentToolResult:
            return cls(content=(TextContent(text),), details=details)
        result = object.__new__(cls)  # the block is known to be valid: the checks of __init__ are skipped
        _set_tool_result_content(result, (TextContent(text),))
        _set_tool_result_details(result, details)
        _set_tool_result_is_error(result, None)
        _set_tool_result_terminate(result, None)
        _set_tool_result_extra(result, None)
        return result


_set_tool_result_content = _slot_setter(AgentToolResult, "content")
_set_tool_result_details = _slot_setter(AgentToolResult, "details")
_set_tool_result_is_error = _slot_setter(AgentToolResult, "is_error")
_set_tool_result_terminate = _slot_setter(AgentToolResult, "terminate")
_set_tool_result_extra = _slot_setter(AgentToolResult, "extra")


def error_result(message: str) -> AgentToolResult:
    """The result the loop records for a failed call: one text block, empty details."""
    return AgentToolResult(content=(TextContent(message),), details={})
