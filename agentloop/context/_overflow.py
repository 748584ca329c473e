"""The context-overflow check, from the providers when they have it (pi-ai's `isContextOverflow`)."""

from __future__ import annotations

import re

from .._types._messages import AssistantMessage

__all__ = ("is_context_overflow",)

try:
    from ..providers import is_context_overflow  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # pragma: no cover - providers without the check
    _OVERFLOW = re.compile(
        r"prompt (?:is )?too long|exceeds the context window|maximum context length|context[_ ]length[_ ]exceeded"
        r"|exceeds the available context size|greater than the context length|too many tokens|token limit exceeded",
        re.IGNORECASE,
    )

    def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:  # type: ignore[misc, unused-ignore]
        """True when `message` failed because its request did not fit the model's window."""
        text = message.error_message
        if message.stop_reason == "error" and text and _OVERFLOW.search(text):
            return True
        if context_window and message.stop_reason == "stop":
            return message.usage.input + message.usage.cache_read > context_window
        return False
