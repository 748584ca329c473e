"""The JSON form of events and messages: pi-compatible camelCase, round-trip exact.

`to_json` turns an event, a message, a content block or a tool result into plain JSON values
(dicts, lists, strings, numbers) with the TypeScript keys, so a Python and a TypeScript service
can share an event bus; `from_json` turns them back into the same values
(`from_json(to_json(x)) == x`). Optional fields that are None are left out.

`from_json` checks every field and names the one of the wrong type; `dumps` always writes strict
JSON that encodes as UTF-8 (non-finite numbers as null, lone surrogates escaped, as JavaScript's
`JSON.stringify` writes them).

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
  part of the value (`==`), so `from_json(to_json(v)) == v` holds for these values too. An
  `extra` key that the record models is refused by `to_json` (set the field instead).
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
from typing import Any

from .._types._constants import AGENT_MESSAGE_TYPES, DONE_REASONS, ERROR_REASONS, STOP_REASONS
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
    _with_extra,
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

__all__ = (
    "decode_json",
    "dumps",
    "encode_json",
    "from_json",
    "loads",
    "to_json",
    "tool_result_from_json",
)


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


# The JSON keys each record models; any other key of its JSON object is kept in its `extra`.
_TEXT_KEYS = frozenset({"type", "text", "textSignature"})
_THINKING_KEYS = frozenset({"type", "thinking", "thinkingSignature", "redacted"})
_IMAGE_KEYS = frozenset({"type", "data", "mimeType"})
_TOOL_CALL_KEYS = frozenset({"type", "id", "name", "arguments", "thoughtSignature", "argumentsError"})
_COST_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "total"})
_USAGE_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"})
_USER_KEYS = frozenset({"role", "content", "timestamp"})
_ASSISTANT_KEYS = frozenset(
    {"role", "content", "api", "provider", "model", "usage", "stopReason", "errorMessage", "responseId", "timestamp"}
)
_TOOL_RESULT_MESSAGE_KEYS = frozenset({"role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"})
_TOOL_RESULT_KEYS = frozenset({"content", "details", "isError", "terminate"})
_EVENT_KEYS: dict[str, frozenset[str]] = {
    "start": frozenset({"type", "partial"}),
    **dict.fromkeys(("text_start", "thinking_start", "toolcall_start"), frozenset({"type", "contentIndex", "partial"})),
    **dict.fromkeys(
        ("text_delta", "thinking_delta", "toolcall_delta"), frozenset({"type", "contentIndex", "delta", "partial"})
    ),
    **dict.fromkeys(("text_end", "thinking_end"), frozenset({"type", "contentIndex", "content", "partial"})),
    "toolcall_end": frozenset({"type", "contentIndex", "toolCall", "partial"}),
    "done": frozenset({"type", "reason", "message"}),
    "error": frozenset({"type", "reason", "error"}),
    "agent_start": frozenset({"type"}),
    "agent_end": frozenset({"type", "messages"}),
    "turn_start": frozenset({"type"}),
    "turn_end": frozenset({"type", "message", "toolResults"}),
    "message_start": frozenset({"type", "message"}),
    "message_update": frozenset({"type", "message", "assistantMessageEvent"}),
    "message_end": frozenset({"type", "message"}),
    "tool_execution_start": frozenset({"type", "toolCallId", "toolName", "args"}),
    "tool_execution_update": frozenset({"type", "toolCallId", "toolName", "args", "partialResult"}),
    "tool_execution_end": frozenset({"type", "toolCallId", "toolName", "result", "isError"}),
}


def _put_extra(out: dict[str, Any], value: Any, known: frozenset[str]) -> dict[str, Any]:
    """`out` with the keys of `value.extra` (the ones the record does not model) added after its own.

    The encoders call it only when there is an `extra`: most values have none.
    """
    for key, item in value.extra.items():
        if key in known or type(key) is not str:
            what = "is a field agentloop models: set the field instead" if key in known else "is not a string"
            raise ValueError(f"{type(value).__name__} extra key {key!r} {what}")
        out[key] = item
    return out


# --- encoding -------------------------------------------------------------------------------


def _block(block: Any) -> dict[str, Any]:
    kind = type(block)
    if kind is TextContent:
        out = {"type": "text", "text": block.text}
        _put(out, "textSignature", block.text_signature)
        if block.extra:
            _put_extra(out, block, _TEXT_KEYS)
        return out
    if kind is ThinkingContent:
        out = {"type": "thinking", "thinking": block.thinking}
        _put(out, "thinkingSignature", block.thinking_signature)
        if block.redacted:
            out["redacted"] = True
        if block.extra:
            _put_extra(out, block, _THINKING_KEYS)
        return out
    if kind is ImageContent:
        out = {"type": "image", "data": block.data, "mimeType": block.mime_type}
        if block.extra:
            _put_extra(out, block, _IMAGE_KEYS)
        return out
    if kind is ToolCall:
        out = {"type": "toolCall", "id": block.id, "name": block.name, "arguments": dict(block.arguments)}
        _put(out, "thoughtSignature", block.thought_signature)
        _put(out, "argumentsError", block.arguments_error)
        if block.extra:
            _put_extra(out, block, _TOOL_CALL_KEYS)
        return out
    raise TypeError(f"not a content block: {block!r}")


def _usage(usage: Usage) -> dict[str, Any]:
    cost = usage.cost
    cost_json = {
        "input": cost.input,
        "output": cost.output,
        "cacheRead": cost.cache_read,
        "cacheWrite": cost.cache_write,
        "total": cost.total,
    }
    out = {
        "input": usage.input,
        "output": usage.output,
        "cacheRead": usage.cache_read,
        "cacheWrite": usage.cache_write,
        "totalTokens": usage.total_tokens,
        "cost": _put_extra(cost_json, cost, _COST_KEYS) if cost.extra else cost_json,
    }
    if usage.extra:
        _put_extra(out, usage, _USAGE_KEYS)
    return out


def _message(message: Any) -> dict[str, Any]:
    kind = type(message)
    if kind is UserMessage:
        content = message.content
        out = {
            "role": "user",
            "content": content if isinstance(content, str) else [_block(b) for b in content],
            "timestamp": message.timestamp,
        }
        if message.extra:
            _put_extra(out, message, _USER_KEYS)
        return out
    if kind is AssistantMessage:
        out = {
            "role": "assistant",
            "content": [_block(b) for b in message.content],
            "api": message.api,
            "provider": message.provider,
            "model": message.model,
            "usage": _usage(message.usage),
            "stopReason": message.stop_reason,
        }
        _put(out, "errorMessage", message.error_message)
        _put(out, "responseId", message.response_id)
        out["timestamp"] = message.timestamp
        if message.extra:
            _put_extra(out, message, _ASSISTANT_KEYS)
        return out
    if kind is ToolResultMessage:
        out = {
            "role": "toolResult",
            "toolCallId": message.tool_call_id,
            "toolName": message.tool_name,
            "content": [_block(b) for b in message.content],
        }
        _put(out, "details", message.details)
        out["isError"] = message.is_error
        out["timestamp"] = message.timestamp
        if message.extra:
            _put_extra(out, message, _TOOL_RESULT_MESSAGE_KEYS)
        return out
    if kind is CustomMessage:
        return {"role": message.role, **message.data, "timestamp": message.timestamp}
    raise TypeError(f"not a message: {message!r}")


def _tool_result(result: AgentToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [_block(b) for b in result.content]}
    _put(out, "details", result.details)
    _put(out, "isError", result.is_error)
    _put(out, "terminate", result.terminate)
    if result.extra:
        _put_extra(out, result, _TOOL_RESULT_KEYS)
    return out


def _assistant_event(event: Any, *, partial: bool = True) -> dict[str, Any]:
    """The JSON form of an assistant stream event; without its `partial` for the compact wire form."""
    out: dict[str, Any] = {"type": event.type}
    kind = type(event)
    if kind is DoneEvent:
        out = {"type": "done", "reason": event.reason, "message": _message(event.message)}
        if event.extra:
            _put_extra(out, event, _EVENT_KEYS["done"])
        return out
    if kind is ErrorEvent:
        out = {"type": "error", "reason": event.reason, "error": _message(event.error)}
        if event.extra:
            _put_extra(out, event, _EVENT_KEYS["error"])
        return out
    if kind is not StartEvent:
        out["contentIndex"] = event.content_index
    if kind in (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent):
        out["delta"] = event.delta
    elif kind in (TextEndEvent, ThinkingEndEvent):
        out["content"] = event.content
    elif kind is ToolCallEndEvent:
        out["toolCall"] = _block(event.tool_call)
    if partial:
        out["partial"] = _message(event.partial)
    if event.extra:
        _put_extra(out, event, _EVENT_KEYS[event.type])
    return out


def to_json(value: Any) -> dict[str, Any]:
    """The JSON form (plain dicts and lists) of an event, a message, a content block or a tool result."""
    kind = type(value)
    encoder = _ENCODERS.get(kind)
    if encoder is not None:
        out = encoder(value)
        if value.extra:
            _put_extra(out, value, _EVENT_KEYS[value.type])
        return out
    if kind in _ASSISTANT_EVENTS.values() or kind is DoneEvent or kind is ErrorEvent:
        return _assistant_event(value)
    if kind in AGENT_MESSAGE_TYPES:
        return _message(value)
    if kind in (TextContent, ThinkingContent, ImageContent, ToolCall):
        return _block(value)
    if kind is AgentToolResult:
        return _tool_result(value)
    raise TypeError(f"to_json expects an agentloop event, message, content block or tool result, got {kind.__name__}")


_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    AgentStart: lambda e: {"type": "agent_start"},
    AgentEnd: lambda e: {"type": "agent_end", "messages": [_message(m) for m in e.messages]},
    TurnStart: lambda e: {"type": "turn_start"},
    TurnEnd: lambda e: {
        "type": "turn_end",
        "message": _message(e.message),
        "toolResults": [_message(m) for m in e.tool_results],
    },
    MessageStart: lambda e: {"type": "message_start", "message": _message(e.message)},
    MessageUpdate: lambda e: {
        "type": "message_update",
        "message": _message(e.message),
        "assistantMessageEvent": _assistant_event(e.assistant_message_event),
    },
    MessageEnd: lambda e: {"type": "message_end", "message": _message(e.message)},
    ToolExecutionStart: lambda e: {
        "type": "tool_execution_start",
        "toolCallId": e.tool_call_id,
        "toolName": e.tool_name,
        "args": e.args,
    },
    ToolExecutionUpdate: lambda e: {
        "type": "tool_execution_update",
        "toolCallId": e.tool_call_id,
        "toolName": e.tool_name,
        "args": e.args,
        "partialResult": _tool_result(e.partial_result),
    },
    ToolExecutionEnd: lambda e: {
        "type": "tool_execution_end",
        "toolCallId": e.tool_call_id,
        "toolName": e.tool_name,
        "result": _tool_result(e.result),
        "isError": e.is_error,
    },
}

# --- decoding -------------------------------------------------------------------------------
#
# Every field is checked against its type; a failure is a `_Bad` (a ValueError) that knows the
# path of the field inside the value being decoded, so the message reads
# `cannot decode 'turn_end': message.usage.input must be an integer, got a string ('lots')`.
# The path is built only when something fails: the checks of a valid value cost a type test each.


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
    if type(value) is str or isinstance(value, str):
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "a string", value)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _wrong(key, "a string (or absent)", value)


def _int(data: Mapping[str, Any], key: str, default: Any = _MISSING) -> int:
    value = data.get(key, default)
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "an integer", value)


def _cost_number(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key, 0.0)
    if type(value) is float or type(value) is int:
        return value
    if value is None:  # `dumps` writes a non-finite number as null, as JSON.stringify does
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(key, "a number", value)
    return value


def _bool(data: Mapping[str, Any], key: str, default: Any = _MISSING) -> bool:
    value = data.get(key, default)
    if type(value) is bool:
        return value
    raise _missing(key) if value is _MISSING else _wrong(key, "a boolean (true or false)", value)


def _opt_bool(data: Mapping[str, Any], key: str) -> bool | None:
    value = data.get(key)
    if value is None or type(value) is bool:
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
    if type(items) is not list and not isinstance(items, (list, tuple)):
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


def _extra(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """The keys of `data` that its record does not model.

    The decoders call it only when there are some (`known.issuperset(data)` is false): most
    objects have none.
    """
    return {k: v for k, v in data.items() if k not in known}


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
            extra=None if _TEXT_KEYS.issuperset(data) else _extra(data, _TEXT_KEYS),
        )
    if kind == "thinking":
        return ThinkingContent(
            _str(data, "thinking"),
            thinking_signature=_opt_str(data, "thinkingSignature"),
            redacted=_bool(data, "redacted", False),
            extra=None if _THINKING_KEYS.issuperset(data) else _extra(data, _THINKING_KEYS),
        )
    if kind == "image":
        return ImageContent(
            _str(data, "data"),
            _str(data, "mimeType"),
            extra=None if _IMAGE_KEYS.issuperset(data) else _extra(data, _IMAGE_KEYS),
        )
    if kind == "toolCall":
        return ToolCall(
            _str(data, "id"),
            _str(data, "name"),
            dict(_object(data, "arguments")),
            thought_signature=_opt_str(data, "thoughtSignature"),
            arguments_error=_opt_str(data, "argumentsError"),
            extra=None if _TOOL_CALL_KEYS.issuperset(data) else _extra(data, _TOOL_CALL_KEYS),
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
        extra=None if _COST_KEYS.issuperset(data) else _extra(data, _COST_KEYS),
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
        extra=None if _USAGE_KEYS.issuperset(data) else _extra(data, _USAGE_KEYS),
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
            extra=None if _USER_KEYS.issuperset(data) else _extra(data, _USER_KEYS),
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
            extra=None if _ASSISTANT_KEYS.issuperset(data) else _extra(data, _ASSISTANT_KEYS),
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
            extra=None if _TOOL_RESULT_MESSAGE_KEYS.issuperset(data) else _extra(data, _TOOL_RESULT_MESSAGE_KEYS),
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
        extra=None if _TOOL_RESULT_KEYS.issuperset(data) else _extra(data, _TOOL_RESULT_KEYS),
    )


def tool_result_from_json(data: Any) -> AgentToolResult:
    """An `AgentToolResult` from its JSON form (ValueError, naming the field, if it is not one)."""
    return _tool_result_from(data)


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
    if type(message) is not AssistantMessage:
        raise _Bad(f"must be an assistant message, got role {message.role!r}", field=True)
    return message


def _tool_result_message(data: Any) -> ToolResultMessage:
    message = _message_from(data)
    if type(message) is not ToolResultMessage:
        raise _Bad(f"must be a toolResult message, got role {message.role!r}", field=True)
    return message


def _tool_call_block(data: Any) -> ToolCall:
    block = _block_from(data)
    if type(block) is not ToolCall:
        raise _Bad(f"must be a toolCall block, got {block.type!r}", field=True)
    return block


def _assistant_event_from(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise _Bad(f"an assistant message event must be an object, got {_described(data)}")
    event = _assistant_event_fields(data)
    known = _EVENT_KEYS[event.type]
    return event if known.issuperset(data) else _with_extra(event, _extra(data, known))


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
    event = _agent_event_fields(kind, data)
    known = _EVENT_KEYS[kind]
    return event if known.issuperset(data) else _with_extra(event, _extra(data, known))


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


# --- text -----------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    """`to_json` as one line of strict JSON that always encodes as UTF-8 (JSONL, event buses).

    What JSON or UTF-8 cannot carry is written the way JavaScript's `JSON.stringify` writes it,
    so that no event is ever lost to an odd value a model or a tool produced:

    - NaN and the infinities (in tool arguments, details, a cost) are written as `null`;
      `loads` reads a null cost back as NaN.
    - A lone surrogate (`"\\ud800"`, which UTF-8 cannot encode) is written as the escape
      `\\ud800`, which is valid JSON; `loads` gives back the same string.

    Other non-ASCII text is written as is. Raises TypeError for a value `to_json` does not know
    or details that are not JSON values, and ValueError for a circular or absurdly deep value.
    """
    return encode_json(to_json(value))


_strict_encoders: dict[Callable[[Any], Any] | None, Callable[[Any], str]] = {}


def encode_json(data: Any, default: Callable[[Any], Any] | None = None) -> str:
    """Compact, strict JSON text of JSON values, always encodable as UTF-8 (see `dumps`).

    For the writers of JSON text (sessions, envelopes, the SSE app): `default` is `json.dumps`'s
    hook for values JSON cannot hold.
    """
    import json  # here, not at the top: `import agentloop` stays light

    try:
        try:
            encode = _strict_encoders.get(default)
            if encode is None:  # one encoder per `default` hook, not one made per call (per event)
                encode = json.JSONEncoder(
                    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=default
                ).encode
                if len(_strict_encoders) < 16:
                    _strict_encoders[default] = encode
            text = encode(data)
        except ValueError:  # NaN or an infinity somewhere (or a circular value, which _finite meets)
            if default is not None:
                data = json.loads(json.dumps(data, default=default))
            text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise ValueError("the value is circular or nests too deeply to write as JSON") from None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates, inside strings: escape them as \udXXX
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _finite(value: Any) -> Any:
    """A copy of `value` with non-finite numbers as None (keys as JavaScript names them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {_finite_key(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _finite_key(key: Any) -> Any:
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if key != key else ("Infinity" if key > 0 else "-Infinity")
    return key


def decode_json(text: str | bytes, *, constants: bool = False) -> Any:
    """The value of JSON text, read as JavaScript's `JSON.parse` reads it: ValueError (never
    RecursionError) for text that is not JSON or nests too deeply to read.

    NaN and the infinities are not JSON and are refused, unless `constants` is true (then they
    are read as Python's `json` writes them).
    """
    import json  # here, not at the top: `import agentloop` stays light

    try:
        return json.loads(text) if constants else json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes) -> Any:
    """`from_json` of a JSON string (ValueError, saying why, for text that is not one)."""
    return from_json(decode_json(text, constants=True))
