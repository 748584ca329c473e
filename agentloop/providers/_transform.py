"""Cross-provider handoff: make a transcript produced by any model acceptable to the target model.

The port of pi-ai's `transformMessages`:

* assistant messages that ended in `error` or `aborted` are dropped (incomplete turns; replaying
  them makes some APIs fail, and the model should go on from the last valid state);
* for a message from another model (provider, API or model id differs): thinking is dropped
  (its signatures are only valid for the model that wrote it, and readable thinking sent as text
  would read as part of the visible reply), text and tool calls lose their opaque signatures,
  and tool-call ids are normalised by the target API's rule, the matching tool results
  following the same mapping;
* for a message of the same model: thinking with no text, no signature and not redacted is
  dropped; the rest is replayed as it is;
* a tool call left without a result gets a synthetic error result, "No result provided",
  before the next assistant or user message (and at the end of the transcript), as every API
  requires an answer to each call.
"""

from __future__ import annotations

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
    "mistral_id",
    "mistral_tool_call_ids",
    "normalize_responses_id",
    "short_hash",
    "transform_messages",
)

NO_RESULT_TEXT = "No result provided"

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_MISTRAL_ID_LENGTH = 9


def short_hash(text: str) -> str:
    """pi-ai's `shortHash`: a short stable hash for ids that must be shortened (two 32-bit
    multiplicative hashes of the UTF-16 code units, in base 36), so that the ids derived here
    are the ones pi-ai derives."""
    mask = 0xFFFFFFFF
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(units), 2):
        unit = units[i] | units[i + 1] << 8
        h1 = ((h1 ^ unit) * 2654435761) & mask
        h2 = ((h2 ^ unit) * 1597334677) & mask
    h1 = (((h1 ^ (h1 >> 16)) * 2246822507) & mask) ^ (((h2 ^ (h2 >> 13)) * 3266489909) & mask)
    h2 = (((h2 ^ (h2 >> 16)) * 2246822507) & mask) ^ (((h1 ^ (h1 >> 13)) * 3266489909) & mask)
    return _base36(h2) + _base36(h1)


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out


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


def _alnum(text: str) -> str:
    return "".join(c for c in text if c.isascii() and c.isalnum())


def mistral_id(tool_id: str, attempt: int = 0) -> str:
    """pi-ai's Mistral id of `tool_id`: 9 letters and digits (`attempt` > 0: another one, for a
    clash)."""
    normalized = _alnum(tool_id)
    if attempt == 0 and len(normalized) == _MISTRAL_ID_LENGTH:
        return normalized
    seed = normalized or tool_id
    if attempt:
        seed = f"{seed}:{attempt}"
    return _alnum(short_hash(seed))[:_MISTRAL_ID_LENGTH]


def mistral_tool_call_ids() -> Callable[[str], str]:
    """A function giving each tool-call id of one request its Mistral id, as pi-ai does: exactly
    9 letters and digits (the id itself when it is that once its punctuation is gone, else a
    hash of it), the same id for the same input and never one id for two inputs."""
    ids: dict[str, str] = {}
    owners: dict[str, str] = {}

    def normalize(tool_id: str) -> str:
        known = ids.get(tool_id)
        if known is not None:
            return known
        attempt = 0
        while True:
            candidate = mistral_id(tool_id, attempt)
            owner = owners.get(candidate)
            if owner is None or owner == tool_id:
                ids[tool_id] = candidate
                owners[candidate] = tool_id
                return candidate
            attempt += 1

    return normalize


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
        kept = tuple(block for block in message.content if not _empty_thinking(block))
        return message if len(kept) == len(message.content) else replace(message, content=kept)
    content: list[AssistantContent] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            continue
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


def _empty_thinking(block: AssistantContent) -> bool:
    """A thinking block with nothing to replay: no text, no signature, not redacted."""
    return (
        isinstance(block, ThinkingContent)
        and not block.redacted
        and not block.thinking_signature
        and not block.thinking.strip()
    )
