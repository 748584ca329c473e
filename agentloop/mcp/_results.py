"""What comes back from a server, in agentloop's records: tool results, prompts, resources, and
the input schema with the keywords that would run a server's regular expressions left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp.types as mcp_types

from .._types._messages import AgentToolResult, ImageContent, TextContent

__all__ = ("error_result", "local_schema", "mcp_result", "prompt_messages", "resource_contents")

_UNCHECKED_KEYWORDS = frozenset({"pattern", "patternProperties"})
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})


def mcp_result(result: mcp_types.CallToolResult) -> AgentToolResult:
    """An MCP `CallToolResult` as an `AgentToolResult`.

    Text and images stay as they are; other blocks (audio, resources, links) become a line of
    text; `structuredContent` becomes `details` (as the server sent it: it is not checked against
    the tool's `outputSchema`, whose patterns would run the server's regular expressions here).
    """
    return AgentToolResult(
        content=tuple(_block(block) for block in result.content),
        details=result.structured_content,
        is_error=True if result.is_error else None,
    )


def prompt_messages(result: mcp_types.GetPromptResult) -> list[tuple[str, TextContent | ImageContent]]:
    """A prompt's messages as `(role, block)` pairs (`role` is "user" or "assistant")."""
    return [(message.role, _block(message.content)) for message in result.messages]


def resource_contents(result: mcp_types.ReadResourceResult) -> list[TextContent | ImageContent]:
    """A resource's contents: text as text, images as images, other binary data as a line of text."""
    blocks: list[TextContent | ImageContent] = []
    for item in result.contents:
        if isinstance(item, mcp_types.TextResourceContents):
            blocks.append(TextContent(item.text))
        elif (item.mime_type or "").startswith("image/"):
            blocks.append(ImageContent(data=item.blob, mime_type=item.mime_type or "image/png"))
        else:
            blocks.append(TextContent(f"[blob {item.mime_type or 'application/octet-stream'}: {item.uri}]"))
    return blocks


def error_result(text: str) -> AgentToolResult:
    return AgentToolResult(content=(TextContent(text),), is_error=True)


def _block(block: Any) -> TextContent | ImageContent:
    if isinstance(block, mcp_types.TextContent):
        return TextContent(block.text)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(data=block.data, mime_type=block.mime_type)
    return TextContent(_describe(block))


def _describe(block: Any) -> str:
    """A content block agentloop has no type for (audio, a resource, a link), as a line of text."""
    kind = getattr(block, "type", type(block).__name__)
    resource = getattr(block, "resource", None)
    if resource is not None and isinstance(getattr(resource, "text", None), str):
        return str(resource.text)
    uri = getattr(block, "uri", None) or getattr(resource, "uri", None)
    return f"[{kind}{': ' + str(uri) if uri else ''}]"


def local_schema(schema: Any) -> dict[str, Any]:
    """The server's input schema without the keywords that would run its regular expressions."""
    local = _without_patterns(schema)
    return local if isinstance(local, dict) else {"type": "object"}


def _without_patterns(value: Any, names: bool = False) -> Any:
    """A copy of a schema node; `names` says its keys are property names, not keywords."""
    if isinstance(value, Mapping):
        return {
            str(key): _without_patterns(item, not names and key in _NAMED_SCHEMAS)
            for key, item in value.items()
            if names or key not in _UNCHECKED_KEYWORDS
        }
    if isinstance(value, list):
        return [_without_patterns(item) for item in value]
    return value
