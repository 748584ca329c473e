"""Context accounting: how many tokens a context takes, and whether it fits a model's window.

pi's coding agent's rule: the last assistant message's reported usage counts everything up to
and including that message (the system prompt and tool definitions too); what came after it is
estimated at one token per four characters, an image at 1,200 tokens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._types._messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ("IMAGE_TOKENS", "ContextUsage", "estimate_context", "estimate_text", "estimate_tokens", "usage_tokens")

IMAGE_TOKENS = 1200
"""The estimate for one image (pi counts 4,800 characters)."""


def usage_tokens(usage: Usage) -> int:
    """The tokens a response's usage says its context took, its output included: `total_tokens`,
    or the sum of input, output and cache reads and writes when the provider left it at 0."""
    if not isinstance(usage, Usage):
        raise TypeError(f"usage must be an agentloop.Usage, got {type(usage).__name__}")
    return usage.total_tokens or usage.input + usage.output + usage.cache_read + usage.cache_write


def estimate_text(chars: int) -> int:
    """Tokens for this many characters: one per four, rounded up (it overestimates, on purpose)."""
    return -(-chars // 4)


def _content_chars(content: str | Sequence[Any]) -> tuple[int, int]:
    if isinstance(content, str):
        return len(content), 0
    chars = images = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ImageContent):
            images += 1
    return chars, images


def estimate_tokens(message: AgentMessage) -> int:
    """The estimated tokens of one message (characters / 4; an image `IMAGE_TOKENS`).

    Text, thinking and tool calls (name and JSON arguments) of an assistant message; text and
    images of user messages and tool results; a custom message's `data` as JSON.
    """
    if isinstance(message, AssistantMessage):
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent):
                chars += len(block.text)
            elif isinstance(block, ThinkingContent):
                chars += len(block.thinking)
            elif isinstance(block, ToolCall):
                chars += len(block.name) + len(json.dumps(block.arguments, default=str))
        return estimate_text(chars)
    if isinstance(message, (UserMessage, ToolResultMessage)):
        chars, images = _content_chars(message.content)
        return estimate_text(chars) + images * IMAGE_TOKENS
    return estimate_text(len(json.dumps(message.data, default=str)))


def _reported(message: AgentMessage) -> int:
    """The tokens an assistant message's usage reports (0: none, or an aborted or failed response)."""
    if not isinstance(message, AssistantMessage) or message.stop_reason in ("aborted", "error"):
        return 0
    return usage_tokens(message.usage)


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """How many tokens a context takes.

    Attributes:
        tokens: The total: `usage_tokens + trailing_tokens`.
        usage_tokens: What the last usable assistant message's usage reported (0 without one).
        trailing_tokens: The estimate for the messages after it (all of them without one, plus
            the `overhead` given to `estimate_context`).
        last_usage_index: The index of that assistant message, or None.
    """

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None

    def fits(self, context_window: int, reserve_tokens: int = 0) -> bool:
        """Whether the context leaves `reserve_tokens` free in a window of `context_window` tokens
        (pi's `tokens <= context_window - reserve_tokens`). An unknown window (0) always fits."""
        if context_window <= 0:
            return True
        return self.tokens <= context_window - reserve_tokens


def estimate_context(messages: Sequence[AgentMessage], *, overhead: int = 0, usage_from: int = 0) -> ContextUsage:
    """The tokens `messages` will take as a model's context (pi's `estimateContextTokens`).

    Args:
        messages: The transcript, oldest first.
        overhead: Tokens for what a usage report covers but the messages do not (the system
            prompt, the tool definitions), added only when no usage report is used.
        usage_from: Usage reports of messages before this index are not used (they describe a
            context that has since changed, for example before a compaction).
    """
    for i in range(len(messages) - 1, usage_from - 1, -1):
        reported = _reported(messages[i])
        if reported:
            trailing = sum(estimate_tokens(m) for m in messages[i + 1 :])
            return ContextUsage(reported + trailing, reported, trailing, i)
    estimated = overhead + sum(estimate_tokens(m) for m in messages)
    return ContextUsage(estimated, 0, estimated, None)
