"""`from_json` and `loads`: events and messages from their JSON form, every field checked.

`from_json` turns the plain JSON values `to_json` makes back into the same values
(`from_json(to_json(x)) == x`). Every field is checked against its type; a failure is one
ValueError naming the value, the path of the field and what was expected, for example
`cannot decode 'turn_end': message.usage.input must be an integer, got a string ('lots')`.

Both pi generations are read, so an event bus or a store shared with TypeScript services can
hold either, and both round-trip exactly (`to_json(from_json(x)) == x`):

- Every key of a JSON object that its record does not model is kept in the record's `extra` (a
  mapping, None when there is none) and written back after the record's own keys. That covers
  what pi-agent-core 1.x adds (on assistant messages `durationMs`, `thinkingLevel`,
  `providerThinkingLevel`, `responseModel`, `diagnostics`, `rawStopReason`, `endTurn` and
  `deferred`; on tool results `durationMs`, `usage` and `nestedCalls`; in usage `cacheWrite1h`,
  `reasoning` and `cost.totalFromProvider`; on tool calls `namespace`; on `tool_execution_end`
  `durationMs`; on an `AgentToolResult` `structuredContent` and `usage`), the `partialJson` the
  0.73 proxy client leaves on a streaming tool call, and an application's own keys. `extra` is
  part of the value (`==`), so `from_json(to_json(v)) == v` holds for these values too.
- A 1.x `system` message (`content`, `sections`, `toolsAdded`, `toolsRemoved`) is a
  `CustomMessage` with role "system": every field is kept and written back unchanged.
- The stop reason `deferred` (a 1.x deferred response) has no agentloop equivalent: a message or
  `done` event with it is refused with a ValueError that says so.

What stays inexact is the reading of absent or null optional fields (an absent `usage` is
written back as zero usage, a null `errorMessage` is left out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .._types._constants import DONE_REASONS, ERROR_REASONS, STOP_REASONS
from .._types._events import (
    AgentEnd,
    AgentStart,
    DoneEvent,
    ErrorEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
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
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from .._types._messages import (
    AgentToolResult,
    AssistantMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._json_text import decode_json
from ._keys import (
    ASSISTANT_KEYS,
    COST_KEYS,
    EVENT_KEYS,
    IMAGE_KEYS,
    TEXT_KEYS,
    THINKING_KEYS,
    TOOL_CALL_KEYS,
    TOOL_RESULT_KEYS,
    TOOL_RESULT_MESSAGE_KEYS,
    USAGE_KEYS,
    USER_KEYS,
)

__all__ = ("from_json", "loads", "tool_result_from_json", "usage_from_json")


class _Bad(ValueError):
    """A decoding failure at a path; `str()` renders `path must be ..., got ...` or `path: problem`."""

    def __init__(self, problem: str, key: str | int | None = None, *, field: bool = False) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str | int] = [] if key is None else [key]
        self.field = field  # the last part of the path is the field the problem is about

    def inside(self, key: str | int) -> _Bad:
        self.path.insert(0, key)
        return self

    def __str__(self) -> str:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path).lstrip(".")
        if not path:
            return self.problem
        return f"{path} {self.problem}" if self.field else f"{path}: {self.problem}"


_MISSING: Any = object()

_JSON_TYPES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
    tuple: "an array",
    type(None): "null",
}


def _described(value: Any) -> str:
    name = _JSON_TYPES.get(type(value))
    if name is None:
        name = "an object" if isinstance(value, Mapping) else f"a {type(value).__name__}"
    if isinstance(value, str):
        text = repr(value[:41])
    elif isinstance(value, float) or (
        isinstance(value, int) and not isinstance(value, bool) and value.bit_length() < 64
    ):
        text = repr(value)
    else:
        return name
    return f"{name} ({text[:40]}...)" if len(text) > 42 else f"{name} ({text})"


def _wrong(key: str | int, expected: str, value: Any) -> _Bad:
    return _Bad(f"must be {expected}, got {_described(value)}", key, field=True)


def _missing(key: str) -> _Bad:
    return _Bad(f"missing key {key!r}")


def _str(data: Mapping[str, Any], key: str, default: Any = _MISSING) -> str:
    value = data.get(key, default)
    if isinstance(value, str):
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "a string", value)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _wrong(key, "a string (or absent)", value)


def _int(data: Mapping[str, Any], key: str, default: Any = _MISSING) -> int:
    value = data.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "an integer", value)


def _cost_number(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key, 0.0)
    if value is None:  # `dumps` writes a non-finite number as null, as JSON.stringify does
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(key, "a number", value)
    return value


def _bool(data: Mapping[str, Any], key: str, default: Any = _MISSING) -> bool:
    value = data.get(key, default)
    if isinstance(value, bool):
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "a boolean (true or false)", value)


def _opt_bool(data: Mapping[str, Any], key: str) -> bool | None:
    value = data.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise _wrong(key, "a boolean (or absent)", value)


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, _MISSING)
    if isinstance(value, Mapping):
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "an object", value)


def _one_of(data: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: Any = _MISSING) -> Any:
    value = data.get(key, default)
    if isinstance(value, str) and value in allowed:
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "one of " + ", ".join(map(repr, allowed)), value)


def _each(data: Mapping[str, Any], key: str, decode: Callable[[Any], Any], default: Any = _MISSING) -> tuple[Any, ...]:
    """The decoded items of the array at `key`; a failure names the item's index."""
    items = data.get(key, default)
    if not isinstance(items, (list, tuple)):
        raise _missing(key) if items is _MISSING else _wrong(key, "an array", items)
    out = []
    for i, item in enumerate(items):
        try:
            out.append(decode(item))
        except _Bad as exc:
            raise exc.inside(i).inside(key) from None
    return tuple(out)


def _inside(key: str, decode: Callable[[Any], Any], value: Any) -> Any:
    try:
        return decode(value)
    except _Bad as exc:
        raise exc.inside(key) from None


_DEFERRED = "stopReason 'deferred' (a pi-agent-core 1.x deferred response) has no agentloop equivalent"
_USER_BLOCKS = ("text", "image")
_ASSISTANT_BLOCKS = ("text", "thinking", "toolCall")


def _extra(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any] | None:
    """The keys of `data` that its record does not model (None when there are none)."""
    return None if known.issuperset(data) else {k: v for k, v in data.items() if k not in known}


def _block_from(data: Any, allowed: tuple[str, ...] | None = None) -> Any:
    if not isinstance(data, Mapping):
        raise _Bad(f"a content block must be an object, got {_described(data)}")
    kind = data.get("type")
    if allowed is not None and kind not in allowed and kind in ("text", "thinking", "image", "toolCall"):
        raise _wrong("type", "one of " + ", ".join(repr(a) for a in allowed) + " here", kind)
    if kind == "text":
        return TextContent(
            _str(data, "text"),
            text_signature=_opt_str(data, "textSignature"),
            extra=_extra(data, TEXT_KEYS),
        )
    if kind == "thinking":
        return ThinkingContent(
            _str(data, "thinking"),
            thinking_signature=_opt_str(data, "thinkingSignature"),
            redacted=_bool(data, "redacted", False),
            extra=_extra(data, THINKING_KEYS),
        )
    if kind == "image":
        return ImageContent(
            _str(data, "data"),
            _str(data, "mimeType"),
            extra=_extra(data, IMAGE_KEYS),
        )
    if kind == "toolCall":
        return ToolCall(
            _str(data, "id"),
            _str(data, "name"),
            dict(_object(data, "arguments")),
            thought_signature=_opt_str(data, "thoughtSignature"),
            arguments_error=_opt_str(data, "argumentsError"),
            extra=_extra(data, TOOL_CALL_KEYS),
        )
    raise _Bad(f"unknown content block type {kind!r}")


def _user_block(data: Any) -> Any:
    return _block_from(data, _USER_BLOCKS)


def _assistant_block(data: Any) -> Any:
    return _block_from(data, _ASSISTANT_BLOCKS)


def _cost_from(data: Any) -> Cost:
    if not isinstance(data, Mapping):
        raise _Bad(f"must be an object, got {_described(data)}", field=True)
    return Cost(
        input=_cost_number(data, "input"),
        output=_cost_number(data, "output"),
        cache_read=_cost_number(data, "cacheRead"),
        cache_write=_cost_number(data, "cacheWrite"),
        total=_cost_number(data, "total"),
        extra=_extra(data, COST_KEYS),
    )


def _usage_from(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        raise _Bad(f"must be an object, got {_described(data)}", field=True)
    cost = data.get("cost")
    return Usage(
        input=_int(data, "input", 0),
        output=_int(data, "output", 0),
        cache_read=_int(data, "cacheRead", 0),
        cache_write=_int(data, "cacheWrite", 0),
        total_tokens=_int(data, "totalTokens", 0),
        cost=Cost() if cost is None else _inside("cost", _cost_from, cost),
        extra=_extra(data, USAGE_KEYS),
    )


def _message_from(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise _Bad(f"a message must be an object, got {_described(data)}")
    role = data.get("role")
    if role == "user":
        content = data.get("content", "")
        return UserMessage(
            content=content if isinstance(content, str) else _each(data, "content", _user_block),
            timestamp=_int(data, "timestamp", 0),
            extra=_extra(data, USER_KEYS),
        )
    if role == "assistant":
        if data.get("stopReason") == "deferred":
            raise _Bad(_DEFERRED)
        usage = data.get("usage")
        return AssistantMessage(
            content=_each(data, "content", _assistant_block, ()),
            api=_str(data, "api", ""),
            provider=_str(data, "provider", ""),
            model=_str(data, "model", ""),
            usage=Usage() if usage is None else _inside("usage", _usage_from, usage),
            stop_reason=_one_of(data, "stopReason", STOP_REASONS, "stop"),
            error_message=_opt_str(data, "errorMessage"),
            response_id=_opt_str(data, "responseId"),
            timestamp=_int(data, "timestamp", 0),
            extra=_extra(data, ASSISTANT_KEYS),
        )
    if role == "toolResult":
        content = data.get("content", ())
        return ToolResultMessage(
            tool_call_id=_str(data, "toolCallId"),
            tool_name=_str(data, "toolName"),
            content=(TextContent(content),) if isinstance(content, str) else _each(data, "content", _user_block, ()),
            details=data.get("details"),
            is_error=_bool(data, "isError", False),
            timestamp=_int(data, "timestamp", 0),
            extra=_extra(data, TOOL_RESULT_MESSAGE_KEYS),
        )
    if isinstance(role, str) and role:
        rest = {k: v for k, v in data.items() if k not in ("role", "timestamp")}
        return CustomMessage(role=role, data=rest, timestamp=_int(data, "timestamp", 0))
    raise _Bad(f"message has no valid role: {role!r}")


def _tool_result_from(data: Any) -> AgentToolResult:
    if not isinstance(data, Mapping):
        raise _Bad(f"a tool result must be an object, got {_described(data)}")
    return AgentToolResult(
        content=_each(data, "content", _user_block, ()),
        details=data.get("details"),
        is_error=_opt_bool(data, "isError"),
        terminate=_opt_bool(data, "terminate"),
        extra=_extra(data, TOOL_RESULT_KEYS),
    )


def tool_result_from_json(data: Any) -> AgentToolResult:
    """An `AgentToolResult` from its JSON form (ValueError, naming the field, if it is not one)."""
    return _tool_result_from(data)


def usage_from_json(data: Any) -> Usage:
    """A `Usage` from its JSON form (ValueError, naming the field, if it is not one)."""
    return _usage_from(data)


_ASSISTANT_EVENTS: dict[str, type] = {
    "start": StartEvent,
    "text_start": TextStartEvent,
    "text_delta": TextDeltaEvent,
    "text_end": TextEndEvent,
    "thinking_start": ThinkingStartEvent,
    "thinking_delta": ThinkingDeltaEvent,
    "thinking_end": ThinkingEndEvent,
    "toolcall_start": ToolCallStartEvent,
    "toolcall_delta": ToolCallDeltaEvent,
    "toolcall_end": ToolCallEndEvent,
}


def _assistant_message(data: Any) -> AssistantMessage:
    message = _message_from(data)
    if not isinstance(message, AssistantMessage):
        raise _Bad(f"must be an assistant message, got role {message.role!r}", field=True)
    return message


def _tool_result_message(data: Any) -> ToolResultMessage:
    message = _message_from(data)
    if not isinstance(message, ToolResultMessage):
        raise _Bad(f"must be a toolResult message, got role {message.role!r}", field=True)
    return message


def _tool_call_block(data: Any) -> ToolCall:
    block = _block_from(data)
    if not isinstance(block, ToolCall):
        raise _Bad(f"must be a toolCall block, got {block.type!r}", field=True)
    return block


def _with_extra(event: Any, data: Mapping[str, Any]) -> Any:
    """`event`, carrying the keys of its JSON object `data` that it does not model."""
    extra = _extra(data, EVENT_KEYS[event.type])
    return event if extra is None else replace(event, extra=extra)


def _assistant_event_from(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise _Bad(f"an assistant message event must be an object, got {_described(data)}")
    return _with_extra(_assistant_event_fields(data), data)


def _assistant_event_fields(data: Mapping[str, Any]) -> Any:
    kind = data.get("type")
    if kind == "done":
        if data.get("reason") == "deferred":
            raise _Bad(_DEFERRED.replace("stopReason", "reason"))
        reason = _one_of(data, "reason", DONE_REASONS)
        return DoneEvent(reason, _inside("message", _assistant_message, _object(data, "message")))
    if kind == "error":
        reason = _one_of(data, "reason", ERROR_REASONS)
        return ErrorEvent(reason, _inside("error", _assistant_message, _object(data, "error")))
    cls = _ASSISTANT_EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise _Bad(f"unknown assistant message event type {kind!r}")
    partial = _inside("partial", _assistant_message, _object(data, "partial"))
    if cls is StartEvent:
        return StartEvent(partial)
    index = _int(data, "contentIndex")
    if cls in (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent):
        return cls(index, _str(data, "delta"), partial)
    if cls in (TextEndEvent, ThinkingEndEvent):
        return cls(index, _str(data, "content"), partial)
    if cls is ToolCallEndEvent:
        return ToolCallEndEvent(index, _inside("toolCall", _tool_call_block, _object(data, "toolCall")), partial)
    return cls(index, partial)


def from_json(data: Any) -> Any:
    """The agentloop value of a JSON form made by `to_json`.

    That is an event, a message, a content block, or a tool result (an object with `content` and
    neither `type` nor `role`). Every field is checked: anything else raises ValueError naming the
    value, the path of the field and what was expected, for example
    `cannot decode 'assistant': usage.input must be an integer, got a string ('lots')`.
    Optional fields may be absent or null; a null cost reads as NaN (`dumps` writes NaN as null).
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"from_json expects a JSON object, got {_described(data)}")
    try:
        return _decode(data)
    except _Bad as exc:
        raise ValueError(_cannot_decode(data, exc)) from None
    except ValueError:
        raise
    except RecursionError:
        raise ValueError("the value nests too deeply") from None
    except TypeError as exc:  # a constructor's own check (the ones above should leave none)
        raise ValueError(_cannot_decode(data, exc)) from None


def _cannot_decode(data: Mapping[str, Any], exc: Exception) -> str:
    what = data.get("type") or data.get("role")
    return f"cannot decode {what!r}: {exc}" if isinstance(what, str) and what else str(exc)


def _decode(data: Mapping[str, Any]) -> Any:
    if "role" in data:
        return _message_from(data)
    kind = data.get("type")
    if kind is None:
        if "content" in data:
            return _tool_result_from(data)
        raise ValueError("from_json expects an object with a 'type' (event, block) or a 'role' (message)")
    if not isinstance(kind, str):
        raise ValueError(f"'type' must be a string, got {_described(kind)}")
    if kind in _ASSISTANT_EVENTS or kind in ("done", "error"):
        return _assistant_event_from(data)
    if kind in ("text", "thinking", "image", "toolCall"):
        return _block_from(data)
    return _with_extra(_agent_event_fields(kind, data), data)


def _agent_event_fields(kind: str, data: Mapping[str, Any]) -> Any:
    if kind == "agent_start":
        return AgentStart()
    if kind == "agent_end":
        return AgentEnd(_each(data, "messages", _message_from))
    if kind == "turn_start":
        return TurnStart()
    if kind == "turn_end":
        return TurnEnd(
            _inside("message", _assistant_message, _object(data, "message")),
            _each(data, "toolResults", _tool_result_message),
        )
    if kind == "message_start":
        return MessageStart(_inside("message", _message_from, _object(data, "message")))
    if kind == "message_update":
        return MessageUpdate(
            _inside("message", _assistant_message, _object(data, "message")),
            _inside("assistantMessageEvent", _assistant_event_from, _object(data, "assistantMessageEvent")),
        )
    if kind == "message_end":
        return MessageEnd(_inside("message", _message_from, _object(data, "message")))
    if kind == "tool_execution_start":
        return ToolExecutionStart(_str(data, "toolCallId"), _str(data, "toolName"), data.get("args"))
    if kind == "tool_execution_update":
        return ToolExecutionUpdate(
            _str(data, "toolCallId"),
            _str(data, "toolName"),
            data.get("args"),
            _inside("partialResult", _tool_result_from, _object(data, "partialResult")),
        )
    if kind == "tool_execution_end":
        return ToolExecutionEnd(
            _str(data, "toolCallId"),
            _str(data, "toolName"),
            _inside("result", _tool_result_from, _object(data, "result")),
            _bool(data, "isError"),
        )
    raise ValueError(f"unknown event type {kind!r}")


def loads(text: str | bytes) -> Any:
    """`from_json` of a JSON string (ValueError, saying why, for text that is not one)."""
    return from_json(decode_json(text, constants=True))
