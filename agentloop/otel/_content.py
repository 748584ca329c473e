"""What content recording writes: messages in the conventions' shape, tool definitions, JSON
with the model call's key masked out."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._types._messages import Usage

__all__ = ("content_text", "counted", "input_tokens", "mask", "message_parts", "plain", "to_json", "tool_definitions")


def counted(usage: Usage) -> bool:
    """Whether the call's token counts were reported: a call that failed before the provider sent
    its usage has none, and the GenAI conventions say a count that is not available is not
    reported (a 0 would read as a real call)."""
    return any((usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens))


def input_tokens(usage: Usage) -> int:
    """All input tokens, cached ones included (the conventions count them in the input)."""
    return usage.input + usage.cache_read + usage.cache_write


def mask(text: str | None, key: str | None) -> str | None:
    if text is None or not key:
        return text
    return text.replace(key, "***")


def to_json(value: Any, key: str | None) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return mask(text, key) or text


def plain(value: Any) -> Any:
    """Tool arguments as JSON can hold them (a pydantic model as its dump)."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def content_text(content: Sequence[Any]) -> str:
    return "\n".join(block.text if block.type == "text" else f"[{block.type}]" for block in content)


def message_parts(message: Any) -> dict[str, Any]:
    """A message in the conventions' shape: `{"role", "parts": [...]}`; images are named, not inlined."""
    role = message.role
    if role == "toolResult":
        return {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": message.tool_call_id, "response": content_text(message.content)}
            ],
        }
    content = message.content
    if isinstance(content, str):
        return {"role": role, "parts": [{"type": "text", "content": content}]}
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.type
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.thinking})
        elif kind == "toolCall":
            parts.append({"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments})
        elif kind == "image":
            parts.append({"type": "blob", "modality": "image", "mime_type": block.mime_type})
    return {"role": "assistant" if role == "assistant" else role, "parts": parts}


def tool_definitions(tools: Sequence[Any], key: str | None) -> str:
    """`gen_ai.tool.definitions`: the tools offered to the model, as the conventions' JSON."""
    definitions = [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description or "",
            "parameters": dict(tool.parameters) if isinstance(tool.parameters, Mapping) else None,
        }
        for tool in tools
    ]
    return to_json(definitions, key)
