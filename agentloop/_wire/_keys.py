"""The JSON keys each record models, shared by the encoder and the decoder of the JSON form.

Any other key of a record's JSON object is kept in the record's `extra` when it is read, and
written back after the record's own keys (see `_encode`); an `extra` key that is one of these is
refused when written.
"""

from __future__ import annotations

__all__ = (
    "ASSISTANT_KEYS",
    "COST_KEYS",
    "EVENT_KEYS",
    "IMAGE_KEYS",
    "TEXT_KEYS",
    "THINKING_KEYS",
    "TOOL_CALL_KEYS",
    "TOOL_RESULT_KEYS",
    "TOOL_RESULT_MESSAGE_KEYS",
    "USAGE_KEYS",
    "USER_KEYS",
)

TEXT_KEYS = frozenset({"type", "text", "textSignature"})
THINKING_KEYS = frozenset({"type", "thinking", "thinkingSignature", "redacted"})
IMAGE_KEYS = frozenset({"type", "data", "mimeType"})
TOOL_CALL_KEYS = frozenset({"type", "id", "name", "arguments", "thoughtSignature", "argumentsError"})
COST_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "total"})
USAGE_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"})
USER_KEYS = frozenset({"role", "content", "timestamp"})
ASSISTANT_KEYS = frozenset(
    {"role", "content", "api", "provider", "model", "usage", "stopReason", "errorMessage", "responseId", "timestamp"}
)
TOOL_RESULT_MESSAGE_KEYS = frozenset({"role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"})
TOOL_RESULT_KEYS = frozenset({"content", "details", "isError", "terminate"})
"""The keys of an `AgentToolResult` (a tool's return value, not the message)."""
EVENT_KEYS: dict[str, frozenset[str]] = {
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
"""The keys of each event's JSON object, by its `type`."""
