"""Prompt caching: what `StreamOptions.cache_retention` asks of each API, as pi-ai 1.6.1 sends it.

- Anthropic Messages (and Anthropic-format gateways): `cache_control: {"type": "ephemeral"}` on
  the system prompt, the last tool and the last user message; `long` adds `"ttl": "1h"` unless the
  model's compat flag `supports_long_cache_retention` is false; `none` marks nothing.
- OpenAI: the session id as `prompt_cache_key` (at most 64 characters) unless the retention is
  `none`, and `prompt_cache_retention: "24h"` for `long`.
"""

from __future__ import annotations

from typing import Any, Literal

from .._types._messages import Model
from .._types._stream_fn import StreamOptions
from ._request import compat

__all__ = (
    "CACHE_RETENTIONS",
    "CacheRetention",
    "anthropic_cache_control",
    "cache_retention",
    "prompt_cache_key",
)

CacheRetention = Literal["none", "short", "long"]
CACHE_RETENTIONS: tuple[CacheRetention, ...] = ("none", "short", "long")
_MAX_CACHE_KEY = 64
"""OpenAI's longest `prompt_cache_key`, in characters."""


def cache_retention(options: StreamOptions) -> CacheRetention:
    """The retention a call asks for; `short` when it names none."""
    return options.cache_retention or "short"


def anthropic_cache_control(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    """The `cache_control` mark of a request; None when nothing is to be cached."""
    retention = cache_retention(options)
    if retention == "none":
        return None
    if retention == "long" and compat(model, "supports_long_cache_retention", True):
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def prompt_cache_key(options: StreamOptions) -> str | None:
    """The session id as an OpenAI `prompt_cache_key`, cut to 64 characters."""
    key = options.session_id
    return key[:_MAX_CACHE_KEY] if key else None
