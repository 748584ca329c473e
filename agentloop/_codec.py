"""The JSON form of events and messages: pi-compatible camelCase, round-trip exact.

`to_json` turns an event, a message, a content block or a tool result into plain JSON values
(dicts, lists, strings, numbers) with the TypeScript keys, so a Python and a TypeScript service
can share an event bus; `from_json` turns them back into the same values
(`from_json(to_json(x)) == x`). Optional fields that are None are left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._events import (
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
from ._types import (
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

__all__ = ("dumps", "from_json", "loads", "to_json", "tool_result_from_json")


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


# --- encoding -------------------------------------------------------------------------------


def _block(block: Any) -> dict[str, Any]:
    kind = type(block)
    if kind is TextContent:
        out = {"type": "text", "text": block.text}
        _put(out, "textSignature", block.text_signature)
        return out
    if kind is ThinkingContent:
        out = {"type": "thinking", "thinking": block.thinking}
        _put(out, "thinkingSignature", block.thinking_signature)
        if block.redacted:
            out["redacted"] = True
        return out
    if kind is ImageContent:
        return {"type": "image", "data": block.data, "mimeType": block.mime_type}
    if kind is ToolCall:
        out = {"type": "toolCall", "id": block.id, "name": block.name, "arguments": dict(block.arguments)}
        _put(out, "thoughtSignature", block.thought_signature)
        _put(out, "argumentsError", block.arguments_error)
        return out
    raise TypeError(f"not a content block: {block!r}")


def _usage(usage: Usage) -> dict[str, Any]:
    cost = usage.cost
    return {
        "input": usage.input,
        "output": usage.output,
        "cacheRead": usage.cache_read,
        "cacheWrite": usage.cache_write,
        "totalTokens": usage.total_tokens,
        "cost": {
            "input": cost.input,
            "output": cost.output,
            "cacheRead": cost.cache_read,
            "cacheWrite": cost.cache_write,
            "total": cost.total,
        },
    }


def _message(message: Any) -> dict[str, Any]:
    kind = type(message)
    if kind is UserMessage:
        content = message.content
        return {
            "role": "user",
            "content": content if isinstance(content, str) else [_block(b) for b in content],
            "timestamp": message.timestamp,
        }
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
        return out
    if kind is CustomMessage:
        return {"role": message.role, **message.data, "timestamp": message.timestamp}
    raise TypeError(f"not a message: {message!r}")


def _tool_result(result: AgentToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [_block(b) for b in result.content]}
    _put(out, "details", result.details)
    _put(out, "isError", result.is_error)
    _put(out, "terminate", result.terminate)
    return out


def _assistant_event(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event.type}
    kind = type(event)
    if kind is DoneEvent:
        return {"type": "done", "reason": event.reason, "message": _message(event.message)}
    if kind is ErrorEvent:
        return {"type": "error", "reason": event.reason, "error": _message(event.error)}
    if kind is not StartEvent:
        out["contentIndex"] = event.content_index
    if kind in (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent):
        out["delta"] = event.delta
    elif kind in (TextEndEvent, ThinkingEndEvent):
        out["content"] = event.content
    elif kind is ToolCallEndEvent:
        out["toolCall"] = _block(event.tool_call)
    out["partial"] = _message(event.partial)
    return out


def to_json(value: Any) -> dict[str, Any]:
    """The JSON form (plain dicts and lists) of an event, a message, a content block or a tool result."""
    kind = type(value)
    encoder = _ENCODERS.get(kind)
    if encoder is not None:
        return encoder(value)
    if kind in _ASSISTANT_EVENTS.values() or kind is DoneEvent or kind is ErrorEvent:
        return _assistant_event(value)
    if kind in (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage):
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


def _need(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ValueError(f"{where}: missing key {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}: {key!r} has the wrong type ({type(value).__name__})")
    return value


def _block_from(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"content block must be an object, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "text":
        return TextContent(_need(data, "text", str, "text block"), text_signature=data.get("textSignature"))
    if kind == "thinking":
        return ThinkingContent(
            _need(data, "thinking", str, "thinking block"),
            thinking_signature=data.get("thinkingSignature"),
            redacted=bool(data.get("redacted", False)),
        )
    if kind == "image":
        return ImageContent(_need(data, "data", str, "image block"), _need(data, "mimeType", str, "image block"))
    if kind == "toolCall":
        return ToolCall(
            _need(data, "id", str, "toolCall block"),
            _need(data, "name", str, "toolCall block"),
            dict(_need(data, "arguments", Mapping, "toolCall block")),
            thought_signature=data.get("thoughtSignature"),
            arguments_error=data.get("argumentsError"),
        )
    raise ValueError(f"unknown content block type {kind!r}")


def _usage_from(data: Mapping[str, Any]) -> Usage:
    cost = data.get("cost") or {}
    return Usage(
        input=data.get("input", 0),
        output=data.get("output", 0),
        cache_read=data.get("cacheRead", 0),
        cache_write=data.get("cacheWrite", 0),
        total_tokens=data.get("totalTokens", 0),
        cost=Cost(
            input=cost.get("input", 0.0),
            output=cost.get("output", 0.0),
            cache_read=cost.get("cacheRead", 0.0),
            cache_write=cost.get("cacheWrite", 0.0),
            total=cost.get("total", 0.0),
        ),
    )


def _message_from(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"message must be an object, got {type(data).__name__}")
    role = data.get("role")
    timestamp = data.get("timestamp", 0)
    if role == "user":
        content = data.get("content", "")
        return UserMessage(
            content=content if isinstance(content, str) else tuple(_block_from(b) for b in content),
            timestamp=timestamp,
        )
    if role == "assistant":
        content = data.get("content", ())
        if not isinstance(content, (list, tuple)):
            raise ValueError(f"assistant content must be a list, got {type(content).__name__}")
        return AssistantMessage(
            content=tuple(_block_from(b) for b in content),
            api=data.get("api", ""),
            provider=data.get("provider", ""),
            model=data.get("model", ""),
            usage=_usage_from(data.get("usage") or {}),
            stop_reason=data.get("stopReason", "stop"),
            error_message=data.get("errorMessage"),
            response_id=data.get("responseId"),
            timestamp=timestamp,
        )
    if role == "toolResult":
        content = data.get("content", ())
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return ToolResultMessage(
            tool_call_id=_need(data, "toolCallId", str, "toolResult message"),
            tool_name=_need(data, "toolName", str, "toolResult message"),
            content=tuple(_block_from(b) for b in content),
            details=data.get("details"),
            is_error=bool(data.get("isError", False)),
            timestamp=timestamp,
        )
    if isinstance(role, str) and role:
        rest = {k: v for k, v in data.items() if k not in ("role", "timestamp")}
        return CustomMessage(role=role, data=rest, timestamp=timestamp)
    raise ValueError(f"message has no valid role: {role!r}")


def tool_result_from_json(data: Any) -> AgentToolResult:
    """An `AgentToolResult` from its JSON form."""
    if not isinstance(data, Mapping):
        raise ValueError(f"tool result must be an object, got {type(data).__name__}")
    return AgentToolResult(
        content=tuple(_block_from(b) for b in data.get("content", ())),
        details=data.get("details"),
        is_error=data.get("isError"),
        terminate=data.get("terminate"),
    )


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


def _assistant_event_from(data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"an assistant message event must be an object, got {type(data).__name__}")
    kind = data.get("type")
    if kind not in _ASSISTANT_EVENTS and kind not in ("done", "error"):
        raise ValueError(f"unknown assistant message event type {kind!r}")
    if kind == "done":
        return DoneEvent(data["reason"], _message_from(data["message"]))
    if kind == "error":
        return ErrorEvent(data["reason"], _message_from(data["error"]))
    cls = _ASSISTANT_EVENTS[kind]
    partial = _message_from(_need(data, "partial", Mapping, f"{kind} event"))
    if cls is StartEvent:
        return StartEvent(partial)
    index = _need(data, "contentIndex", int, f"{kind} event")
    if cls in (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent):
        return cls(index, _need(data, "delta", str, f"{kind} event"), partial)
    if cls in (TextEndEvent, ThinkingEndEvent):
        return cls(index, _need(data, "content", str, f"{kind} event"), partial)
    if cls is ToolCallEndEvent:
        return ToolCallEndEvent(index, _block_from(data["toolCall"]), partial)
    return cls(index, partial)


def from_json(data: Any) -> Any:
    """The agentloop value of a JSON form made by `to_json`.

    That is an event, a message, a content block, or a tool result (an object with `content` and
    neither `type` nor `role`). Raises ValueError, naming what is wrong, for anything else.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"from_json expects a JSON object, got {type(data).__name__}")
    try:
        return _decode(data)
    except ValueError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        what = data.get("type") or data.get("role") or "value"
        detail = f"missing key {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"cannot decode {what!r}: {detail}") from None


def _decode(data: Mapping[str, Any]) -> Any:
    if "role" in data:
        return _message_from(data)
    kind = data.get("type")
    if kind is None:
        if "content" in data:
            return tool_result_from_json(data)
        raise ValueError("from_json expects an object with a 'type' (event, block) or a 'role' (message)")
    if not isinstance(kind, str):
        raise ValueError(f"'type' must be a string, got {type(kind).__name__}")
    if kind in _ASSISTANT_EVENTS or kind in ("done", "error"):
        return _assistant_event_from(data)
    if kind in ("text", "thinking", "image", "toolCall"):
        return _block_from(data)
    if kind == "agent_start":
        return AgentStart()
    if kind == "agent_end":
        return AgentEnd(tuple(_message_from(m) for m in data["messages"]))
    if kind == "turn_start":
        return TurnStart()
    if kind == "turn_end":
        return TurnEnd(_message_from(data["message"]), tuple(_message_from(m) for m in data["toolResults"]))
    if kind == "message_start":
        return MessageStart(_message_from(data["message"]))
    if kind == "message_update":
        return MessageUpdate(_message_from(data["message"]), _assistant_event_from(data["assistantMessageEvent"]))
    if kind == "message_end":
        return MessageEnd(_message_from(data["message"]))
    if kind == "tool_execution_start":
        return ToolExecutionStart(data["toolCallId"], data["toolName"], data.get("args"))
    if kind == "tool_execution_update":
        return ToolExecutionUpdate(
            data["toolCallId"], data["toolName"], data.get("args"), tool_result_from_json(data["partialResult"])
        )
    if kind == "tool_execution_end":
        return ToolExecutionEnd(
            data["toolCallId"], data["toolName"], tool_result_from_json(data["result"]), bool(data["isError"])
        )
    raise ValueError(f"unknown event type {kind!r}")


def dumps(value: Any) -> str:
    """`to_json` as a compact JSON string (one line: ready for JSONL and event buses)."""
    return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """`from_json` of a JSON string."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None
    return from_json(data)
