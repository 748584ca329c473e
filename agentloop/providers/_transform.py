"""Cross-provider handoff: make a transcript produced by any model acceptable to the target model.

The port of pi-ai's `transformMessages`:

* assistant messages that ended in `error` or `aborted` are dropped (incomplete turns; replaying
  them makes some APIs fail, and the model should go on from the last valid state);
* for a message from another model (provider, API or model id differs): thinking becomes a
  plain text block (empty thinking is dropped), redacted thinking is dropped, text and tool
  calls lose their opaque signatures, and tool-call ids are normalised by the target API's rule,
  the matching tool results following the same mapping;
* a tool call left without a result gets a synthetic error result, "No result provided",
  before the next assistant or user message (and at the end of the transcript), as every API
  requires an answer to each call.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from .._types._messages import (
    AssistantContent,
    AssistantMessage,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = (
    "NO_RESULT_TEXT",
    "normalize_anthropic_id",
    "normalize_completions_id",
    "normalize_mistral_id",
    "normalize_responses_id",
    "short_hash",
    "transform_messages",
)

NO_RESULT_TEXT = "No result provided"

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_ALNUM = re.compile(r"[^a-zA-Z0-9]")


def short_hash(text: str) -> str:
    """A short stable hash (for ids that must be shortened)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def normalize_anthropic_id(tool_id: str) -> str:
    """Anthropic ids: `^[a-zA-Z0-9_-]+$`, at most 64 characters."""
    return _UNSAFE.sub("_", tool_id)[:64] or "call"


def normalize_completions_id(tool_id: str) -> str:
    """OpenAI chat ids: a Responses id `call|item` keeps its call part; at most 40 characters."""
    if "|" in tool_id:
        call_id = tool_id.split("|", 1)[0]
        return _UNSAFE.sub("_", call_id)[:40] or "call"
    if len(tool_id) > 40:
        return tool_id[:40]
    return tool_id


def normalize_mistral_id(tool_id: str) -> str:
    """Mistral ids: exactly 9 letters and digits."""
    normalized = _ALNUM.sub("", tool_id)
    if len(normalized) < 9:
        return normalized + "ABCDEFGHI"[: 9 - len(normalized)]
    return normalized[:9]


def normalize_responses_id(tool_id: str) -> str:
    """OpenAI Responses ids `call_id|item_id`: safe characters, at most 64 each, the item id
    starting with `fc`, no trailing underscores."""
    if "|" not in tool_id:
        return _UNSAFE.sub("_", tool_id)[:64].rstrip("_") or "call"
    call_id, item_id = tool_id.split("|", 1)
    call_id = _UNSAFE.sub("_", call_id)
    item_id = _UNSAFE.sub("_", item_id)
    if not item_id.startswith("fc"):
        item_id = f"fc_{item_id}"
    return f"{call_id[:64].rstrip('_') or 'call'}|{item_id[:64].rstrip('_')}"


def _is_same_model(message: AssistantMessage, model: Model) -> bool:
    return message.provider == model.provider and message.api == model.api and message.model == model.id


def transform_messages(
    messages: Sequence[Message],
    model: Model,
    normalize_id: Callable[[str], str] | None = None,
) -> list[Message]:
    """The transcript as `model` may receive it (see the module docstring)."""
    id_map: dict[str, str] = {}
    converted: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            converted.append(_convert_assistant(message, model, normalize_id, id_map))
        elif isinstance(message, ToolResultMessage):
            new_id = id_map.get(message.tool_call_id)
            converted.append(replace(message, tool_call_id=new_id) if new_id else message)
        else:
            converted.append(message)

    result: list[Message] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()

    def answer_pending() -> None:
        for call in pending:
            if call.id not in answered:
                result.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=(TextContent(NO_RESULT_TEXT),),
                        is_error=True,
                    )
                )
        pending.clear()
        answered.clear()

    for message in converted:
        if isinstance(message, AssistantMessage):
            answer_pending()
            if message.stop_reason in ("error", "aborted"):
                continue
            pending.extend(message.tool_calls)
            result.append(message)
        elif isinstance(message, ToolResultMessage):
            answered.add(message.tool_call_id)
            result.append(message)
        else:
            if isinstance(message, UserMessage):
                answer_pending()
            result.append(message)
    answer_pending()
    return result


def _convert_assistant(
    message: AssistantMessage,
    model: Model,
    normalize_id: Callable[[str], str] | None,
    id_map: dict[str, str],
) -> AssistantMessage:
    if _is_same_model(message, model):
        return message
    content: list[AssistantContent] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted or not block.thinking.strip():
                continue
            content.append(TextContent(block.thinking))
        elif isinstance(block, TextContent):
            content.append(TextContent(block.text) if block.text_signature is not None else block)
        else:
            call = block
            if call.thought_signature is not None:
                call = replace(call, thought_signature=None)
            if normalize_id is not None:
                new_id = normalize_id(call.id)
                if new_id != call.id:
                    id_map[call.id] = new_id
                    call = replace(call, id=new_id)
            content.append(call)
    return replace(message, content=tuple(content))
