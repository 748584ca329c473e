"""Thinking levels: the level a call asks for, and its token budget."""

from __future__ import annotations

from typing import Literal

from .._types._messages import Model
from .._types._stream_fn import StreamOptions
from ._request import compat

__all__ = (
    "Level",
    "clamp_thinking_level",
    "model_thinking_level",
    "supported_levels",
    "thinking_budget",
    "thinking_level",
)

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


_EXTENDED_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


def supported_levels(model: Model) -> list[str]:
    """The thinking levels `model` accepts, in order: `off` alone for a model that does not
    reason; otherwise those its `thinking_level_map` compat flag does not map to None, `xhigh`
    and `max` only when the map names them."""
    if not model.reasoning:
        return ["off"]
    mapping = compat(model, "thinking_level_map", None) or {}
    return [
        level
        for level in _EXTENDED_LEVELS
        if not (level in mapping and mapping[level] is None) and (level not in ("xhigh", "max") or level in mapping)
    ]


def clamp_thinking_level(model: Model, level: str) -> str:
    """The level `model` supports nearest to `level`: `level` itself, else the next one up, else
    the next one down (`off` for a model that does not reason)."""
    available = supported_levels(model)
    if level in available:
        return level
    if level not in _EXTENDED_LEVELS:
        return available[0] if available else "off"
    at = _EXTENDED_LEVELS.index(level)
    for candidate in (*_EXTENDED_LEVELS[at:], *reversed(_EXTENDED_LEVELS[:at])):
        if candidate in available:
            return candidate
    return available[0] if available else "off"


def model_thinking_level(model: Model, options: StreamOptions) -> str | None:
    """The level the call asks for, clamped to what `model` supports; None for thinking off."""
    requested = options.reasoning
    if requested is None or requested == "off":
        return None
    level = clamp_thinking_level(model, requested)
    return None if level == "off" else level
