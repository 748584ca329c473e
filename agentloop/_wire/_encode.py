"""`to_json` and `dumps`: the JSON form of events and messages, pi-compatible camelCase.

`to_json` turns an event, a message, a content block or a tool result into plain JSON values
(dicts, lists, strings, numbers) with the TypeScript keys, so a Python and a TypeScript service
can share an event bus; `from_json` (`_decode`) turns them back into equal values. Optional
fields that are None are left out.

A record's `extra` (the keys of its JSON form that agentloop does not model: what pi-agent-core
1.x adds, or an application's own) is written after the record's own keys; an `extra` key that
the record models is refused (set the field instead). A `CustomMessage` writes its `data` beside
`role` and `timestamp`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._types._events import (
    AgentEnd,
    AgentStart,
    DoneEvent,
    ErrorEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PartialEvent,
    TextDeltaEvent,
    TextEndEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
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
from ._json_text import encode_json
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

__all__ = ("assistant_event_json", "block_json", "dumps", "message_json", "to_json", "usage_json")


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _with_extra(out: dict[str, Any], value: Any, known: frozenset[str]) -> dict[str, Any]:
    """`out` with the keys of `value.extra` (the ones the record does not model) added after its own."""
    extra = value.extra
    if extra is None:
        return out
    if not isinstance(extra, Mapping):
        raise TypeError(
            f"{type(value).__name__} extra must be a mapping of JSON keys to values (or None), "
            f"got {type(extra).__name__}"
        )
    for key, item in extra.items():
        if key in known or not isinstance(key, str):
            what = "is a field agentloop models: set the field instead" if key in known else "is not a string"
            raise ValueError(f"{type(value).__name__} extra key {key!r} {what}")
        out[key] = item
    return out


def block_json(block: Any) -> dict[str, Any]:
    """The JSON form of a content block."""
    if isinstance(block, TextContent):
        out: dict[str, Any] = {"type": "text", "text": block.text}
        _put(out, "textSignature", block.text_signature)
        return _with_extra(out, block, TEXT_KEYS)
    if isinstance(block, ThinkingContent):
        out = {"type": "thinking", "thinking": block.thinking}
        _put(out, "thinkingSignature", block.thinking_signature)
        if block.redacted:
            out["redacted"] = True
        return _with_extra(out, block, THINKING_KEYS)
    if isinstance(block, ImageContent):
        return _with_extra({"type": "image", "data": block.data, "mimeType": block.mime_type}, block, IMAGE_KEYS)
    if isinstance(block, ToolCall):
        out = {"type": "toolCall", "id": block.id, "name": block.name, "arguments": dict(block.arguments)}
        _put(out, "thoughtSignature", block.thought_signature)
        _put(out, "argumentsError", block.arguments_error)
        return _with_extra(out, block, TOOL_CALL_KEYS)
    raise TypeError(f"not a content block: {block!r}")


def _cost_json(cost: Cost) -> dict[str, Any]:
    out = {
        "input": cost.input,
        "output": cost.output,
        "cacheRead": cost.cache_read,
        "cacheWrite": cost.cache_write,
        "total": cost.total,
    }
    return _with_extra(out, cost, COST_KEYS)


def usage_json(usage: Usage) -> dict[str, Any]:
    """The JSON form of a `Usage` (with its cost)."""
    out = {
        "input": usage.input,
        "output": usage.output,
        "cacheRead": usage.cache_read,
        "cacheWrite": usage.cache_write,
        "totalTokens": usage.total_tokens,
        "cost": _cost_json(usage.cost),
    }
    return _with_extra(out, usage, USAGE_KEYS)


def message_json(message: Any) -> dict[str, Any]:
    """The JSON form of a message of any role."""
    out: dict[str, Any]
    if isinstance(message, UserMessage):
        content = message.content
        out = {
            "role": "user",
            "content": content if isinstance(content, str) else [block_json(b) for b in content],
            "timestamp": message.timestamp,
        }
        return _with_extra(out, message, USER_KEYS)
    if isinstance(message, AssistantMessage):
        out = {
            "role": "assistant",
            "content": [block_json(b) for b in message.content],
            "api": message.api,
            "provider": message.provider,
            "model": message.model,
            "usage": usage_json(message.usage),
            "stopReason": message.stop_reason,
        }
        _put(out, "errorMessage", message.error_message)
        _put(out, "responseId", message.response_id)
        out["timestamp"] = message.timestamp
        return _with_extra(out, message, ASSISTANT_KEYS)
    if isinstance(message, ToolResultMessage):
        out = {
            "role": "toolResult",
            "toolCallId": message.tool_call_id,
            "toolName": message.tool_name,
            "content": [block_json(b) for b in message.content],
        }
        _put(out, "details", message.details)
        out["isError"] = message.is_error
        out["timestamp"] = message.timestamp
        return _with_extra(out, message, TOOL_RESULT_MESSAGE_KEYS)
    if isinstance(message, CustomMessage):
        return {"role": message.role, **message.data, "timestamp": message.timestamp}
    raise TypeError(f"not a message: {message!r}")


def _tool_result_json(result: AgentToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [block_json(b) for b in result.content]}
    _put(out, "details", result.details)
    _put(out, "isError", result.is_error)
    _put(out, "terminate", result.terminate)
    return _with_extra(out, result, TOOL_RESULT_KEYS)


def assistant_event_json(event: Any, *, partial: bool = True) -> dict[str, Any]:
    """The JSON form of an assistant stream event; without its `partial` for the compact wire form."""
    if isinstance(event, DoneEvent):
        out = {"type": "done", "reason": event.reason, "message": message_json(event.message)}
    elif isinstance(event, ErrorEvent):
        out = {"type": "error", "reason": event.reason, "error": message_json(event.error)}
    elif isinstance(event, PartialEvent):
        out = {"type": event.type}
        index = getattr(event, "content_index", None)  # (every stream event but `start` has one)
        if index is not None:
            out["contentIndex"] = index
        if isinstance(event, (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent)):
            out["delta"] = event.delta
        elif isinstance(event, (TextEndEvent, ThinkingEndEvent)):
            out["content"] = event.content
        elif isinstance(event, ToolCallEndEvent):
            out["toolCall"] = block_json(event.tool_call)
        if partial:
            out["partial"] = message_json(event.partial)
    else:
        raise TypeError(f"not an assistant message event: {event!r}")
    return _with_extra(out, event, EVENT_KEYS[event.type])


def _agent_event_json(event: Any) -> dict[str, Any] | None:
    """The JSON form of an agent event, without its `extra` (None: not an agent event)."""
    match event:
        case AgentStart():
            return {"type": "agent_start"}
        case AgentEnd():
            return {"type": "agent_end", "messages": [message_json(m) for m in event.messages]}
        case TurnStart():
            return {"type": "turn_start"}
        case TurnEnd():
            return {
                "type": "turn_end",
                "message": message_json(event.message),
                "toolResults": [message_json(m) for m in event.tool_results],
            }
        case MessageStart() | MessageEnd():
            return {"type": event.type, "message": message_json(event.message)}
        case MessageUpdate():
            return {
                "type": "message_update",
                "message": message_json(event.message),
                "assistantMessageEvent": assistant_event_json(event.assistant_message_event),
            }
        case ToolExecutionStart():
            return {
                "type": "tool_execution_start",
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
                "args": event.args,
            }
        case ToolExecutionUpdate():
            return {
                "type": "tool_execution_update",
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
                "args": event.args,
                "partialResult": _tool_result_json(event.partial_result),
            }
        case ToolExecutionEnd():
            return {
                "type": "tool_execution_end",
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
                "result": _tool_result_json(event.result),
                "isError": event.is_error,
            }
    return None


def to_json(value: Any) -> dict[str, Any]:
    """The JSON form (plain dicts and lists) of an event, a message, a content block or a tool result."""
    out = _agent_event_json(value)
    if out is not None:
        return _with_extra(out, value, EVENT_KEYS[value.type])
    if isinstance(value, (PartialEvent, DoneEvent, ErrorEvent)):
        return assistant_event_json(value)
    if isinstance(value, (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage)):
        return message_json(value)
    if isinstance(value, (TextContent, ThinkingContent, ImageContent, ToolCall)):
        return block_json(value)
    if isinstance(value, AgentToolResult):
        return _tool_result_json(value)
    raise TypeError(
        f"to_json expects an agentloop event, message, content block or tool result, got {type(value).__name__}"
    )


def dumps(value: Any) -> str:
    """`to_json` as one line of strict JSON that always encodes as UTF-8 (JSONL, event buses).

    Odd values are written as JavaScript's `JSON.stringify` writes them (see `encode_json`): NaN
    and the infinities (in tool arguments, details, a cost) as `null`, which `loads` reads back
    as NaN in a cost; a lone surrogate as its `\\udXXX` escape. Raises TypeError for a value
    `to_json` does not know or details that are not JSON values, and ValueError for a circular or
    absurdly deep value.
    """
    return encode_json(to_json(value))
