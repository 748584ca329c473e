"""The context-overflow check: `agentloop.providers.is_context_overflow` (pi-ai's
`isContextOverflow`), or, with providers that lack it, the common error texts."""

from __future__ import annotations

import re

from .._types._messages import AssistantMessage

__all__ = ("is_context_overflow",)

_OVERFLOW = re.compile(
    r"prompt (?:is )?too long|exceeds the context window|maximum context length|context[_ ]length[_ ]exceeded"
    r"|exceeds the available context size|greater than the context length|too many tokens|token limit exceeded",
    re.IGNORECASE,
)


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """True when `message` failed because its request did not fit the model's window."""
    from .. import providers  # imported when first needed: the HTTP stack loads only with a model call

    check = getattr(providers, "is_context_overflow", None)
    if check is not None:
        return bool(check(message, context_window))
    text = message.error_message
    if message.stop_reason == "error" and text and _OVERFLOW.search(text):
        return True
    return bool(context_window and message.stop_reason == "stop" and message.usage.input > context_window)
