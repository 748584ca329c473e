"""Thinking levels: the level a call asks for, and its token budget."""

from __future__ import annotations

from typing import Literal

from .._types._stream_fn import StreamOptions

__all__ = ("Level", "thinking_budget", "thinking_level")

Level = Literal["minimal", "low", "medium", "high", "xhigh"]
_DEFAULT_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}


def thinking_level(options: StreamOptions, *, xhigh: bool = False) -> Level | None:
    """The requested level, None for off; `max`/`xhigh` become `xhigh` when the model has it,
    else `high`."""
    level = options.reasoning
    if level is None or level == "off":
        return None
    if level == "xhigh" or level == "max":
        return "xhigh" if xhigh else "high"
    return level


def thinking_budget(options: StreamOptions, level: Level) -> int:
    """Thinking tokens for a level: `options.thinking_budgets` over the reference defaults."""
    budgets = dict(_DEFAULT_BUDGETS)
    if options.thinking_budgets:
        budgets.update(options.thinking_budgets)
    key = "high" if level == "xhigh" and "xhigh" not in budgets else level
    return int(budgets[key])
