"""The Gemini models of the registry, as pi-ai 1.6.1 lists them: the Gemini API (`google`) and
Vertex AI (`google-vertex`). Prices in dollars per million tokens (the base tier: pi-ai also
lists a higher tier for prompts above 200k tokens on some models, which agentloop's costs do not
model). `thinking_level_map` is pi-ai's `thinkingLevelMap`: the levels a model supports (None:
not supported) and what each is sent as."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._types._messages import Model, ModelCost
from ._google import GEMINI_BASE_URL
from ._google_vertex import VERTEX_BASE_URL

__all__ = ("GOOGLE_MODELS",)

_FROM_MINIMAL: Mapping[str, Any] = {
    "off": None,
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": None,
    "max": None,
}
_FROM_LOW: Mapping[str, Any] = {**_FROM_MINIMAL, "minimal": None}
_FROM_LOW_XHIGH: Mapping[str, Any] = {**_FROM_LOW, "xhigh": "xhigh"}
_GEMMA: Mapping[str, Any] = {"off": None, "minimal": "MINIMAL", "low": None, "medium": None, "high": "HIGH"}


def _model(
    api: str,
    provider: str,
    base_url: str,
    model_id: str,
    name: str,
    cost: tuple[float, float, float],
    context_window: int,
    max_tokens: int,
    levels: Mapping[str, Any] | None,
) -> Model:
    return Model(
        id=model_id,
        name=name,
        api=api,
        provider=provider,
        base_url=base_url,
        reasoning=True,
        input=("text", "image"),
        cost=ModelCost(input=cost[0], output=cost[1], cache_read=cost[2]),
        context_window=context_window,
        max_tokens=max_tokens,
        compat={"thinking_level_map": dict(levels)} if levels is not None else None,
    )


def _gemini(
    model_id: str,
    name: str,
    cost: tuple[float, float, float],
    context_window: int,
    max_tokens: int,
    levels: Mapping[str, Any] | None = None,
) -> Model:
    return _model(
        "google-generative-ai", "google", GEMINI_BASE_URL, model_id, name, cost, context_window, max_tokens, levels
    )


def _vertex(
    model_id: str,
    name: str,
    cost: tuple[float, float, float],
    context_window: int,
    max_tokens: int,
    levels: Mapping[str, Any] | None = None,
) -> Model:
    return _model(
        "google-vertex", "google-vertex", VERTEX_BASE_URL, model_id, name, cost, context_window, max_tokens, levels
    )


GOOGLE_MODELS: tuple[Model, ...] = (
    _gemini(
        "deep-research-max-preview-04-2026",
        "Deep Research Max Preview (Apr-21-2026)",
        (2.0, 12.0, 0.2),
        1_048_576,
        65_536,
    ),
    _gemini(
        "deep-research-preview-04-2026", "Deep Research Preview (Apr-21-2026)", (2.0, 12.0, 0.2), 1_048_576, 65_536
    ),
    _gemini("gemini-2.5-flash", "Gemini 2.5 Flash", (0.3, 2.5, 0.03), 1_048_576, 65_536),
    _gemini("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", (0.1, 0.4, 0.01), 1_048_576, 65_536),
    _gemini("gemini-2.5-pro", "Gemini 2.5 Pro", (1.25, 10.0, 0.125), 1_048_576, 65_536),
    _gemini("gemini-3-flash-preview", "Gemini 3 Flash Preview", (0.5, 3.0, 0.05), 1_048_576, 65_536, _FROM_MINIMAL),
    _gemini("gemini-3.1-flash-lite", "Gemini 3.1 Flash Lite", (0.25, 1.5, 0.025), 1_048_576, 65_536, _FROM_MINIMAL),
    _gemini("gemini-3.1-pro-preview", "Gemini 3.1 Pro Preview", (2.0, 12.0, 0.2), 1_048_576, 65_536, _FROM_LOW),
    _gemini(
        "gemini-3.1-pro-preview-customtools",
        "Gemini 3.1 Pro Preview Custom Tools",
        (2.0, 12.0, 0.2),
        1_048_576,
        65_536,
        _FROM_LOW,
    ),
    _gemini("gemini-3.5-flash", "Gemini 3.5 Flash", (1.5, 9.0, 0.15), 1_048_576, 65_536, _FROM_MINIMAL),
    _gemini("gemini-3.5-flash-lite", "Gemini 3.5 Flash Lite", (0.3, 2.5, 0.03), 1_048_576, 65_536, _FROM_MINIMAL),
    _gemini("gemini-3.6-flash", "Gemini 3.6 Flash", (0.75, 3.75, 0.075), 1_048_576, 65_536, _FROM_MINIMAL),
    _gemini("gemini-3.7-flash", "Gemini 3.7 Flash", (0.75, 3.75, 0.075), 1_048_576, 65_536, _FROM_LOW),
    _gemini("gemini-3.8-flash", "Gemini 3.8 Flash", (0.75, 3.75, 0.075), 1_048_576, 65_536, _FROM_LOW),
    _gemini("gemini-4-argon", "Gemini 4 Argon", (2.0, 10.0, 0.1), 1_048_576, 32_768, _FROM_LOW),
    _gemini("gemini-4-carbon", "Gemini 4 Carbon", (2.0, 10.0, 0.1), 1_048_576, 32_768, _FROM_LOW),
    _gemini("gemini-4-hydrogen", "Gemini 4 Hydrogen", (1.5, 7.5, 0.075), 1_048_576, 65_536, _FROM_LOW_XHIGH),
    _gemini("gemini-4-neon", "Gemini 4 Neon", (3.0, 15.0, 0.15), 1_048_576, 65_536, _FROM_LOW_XHIGH),
    _gemini("gemini-flash-latest", "Gemini Flash Latest", (1.5, 9.0, 0.15), 1_048_576, 65_536, _FROM_MINIMAL),
    _gemini(
        "gemini-flash-lite-latest", "Gemini Flash-Lite Latest", (0.25, 1.5, 0.025), 1_048_576, 65_536, _FROM_MINIMAL
    ),
    _gemini("gemini-pro-latest", "Gemini Pro Latest", (2.0, 12.0, 0.2), 1_048_576, 65_536, _FROM_LOW),
    _gemini(
        "gemini-robotics-er-2-preview", "Gemini Robotics-ER 2 Preview", (1.0, 5.0, 0.1), 131_072, 65_536, _FROM_MINIMAL
    ),
    _gemini("gemma-4-26b-a4b-it", "Gemma 4 26B A4B IT", (0.0, 0.0, 0.0), 262_144, 32_768, _GEMMA),
    _gemini("gemma-4-31b-it", "Gemma 4 31B IT", (0.0, 0.0, 0.0), 262_144, 32_768, _GEMMA),
    _vertex("gemini-2.5-flash", "Gemini 2.5 Flash", (0.3, 2.5, 0.03), 1_048_576, 65_536),
    _vertex("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", (0.1, 0.4, 0.01), 1_048_576, 65_536),
    _vertex("gemini-2.5-pro", "Gemini 2.5 Pro", (1.25, 10.0, 0.125), 1_048_576, 65_536),
    _vertex("gemini-3-flash-preview", "Gemini 3 Flash Preview", (0.5, 3.0, 0.05), 1_048_576, 65_536, _FROM_MINIMAL),
    _vertex("gemini-3.1-flash-lite", "Gemini 3.1 Flash Lite", (0.25, 1.5, 0.025), 1_048_576, 65_536, _FROM_MINIMAL),
    _vertex("gemini-3.1-pro-preview", "Gemini 3.1 Pro Preview", (2.0, 12.0, 0.2), 1_048_576, 65_536, _FROM_LOW),
    _vertex(
        "gemini-3.1-pro-preview-customtools",
        "Gemini 3.1 Pro Preview Custom Tools",
        (2.0, 12.0, 0.2),
        1_048_576,
        65_536,
        _FROM_LOW,
    ),
    _vertex("gemini-3.5-flash", "Gemini 3.5 Flash", (1.5, 9.0, 0.15), 1_048_576, 65_536, _FROM_MINIMAL),
    _vertex("gemini-3.5-flash-lite", "Gemini 3.5 Flash Lite", (0.3, 2.5, 0.03), 1_048_576, 65_536, _FROM_MINIMAL),
    _vertex("gemini-3.6-flash", "Gemini 3.6 Flash", (0.75, 3.75, 0.075), 1_048_576, 65_536, _FROM_MINIMAL),
    _vertex("gemini-3.7-flash", "Gemini 3.7 Flash", (0.75, 3.75, 0.075), 1_048_576, 65_536, _FROM_LOW),
    _vertex("gemini-3.8-flash", "Gemini 3.8 Flash", (0.75, 3.75, 0.075), 1_048_576, 65_536, _FROM_LOW),
    _vertex("gemini-4-argon", "Gemini 4 Argon", (2.0, 10.0, 0.1), 1_048_576, 65_536, _FROM_LOW),
    _vertex("gemini-4-carbon", "Gemini 4 Carbon", (2.0, 10.0, 0.1), 1_048_576, 65_536, _FROM_LOW),
    _vertex("gemini-4-hydrogen", "Gemini 4 Hydrogen", (1.5, 7.5, 0.075), 1_048_576, 65_536, _FROM_LOW_XHIGH),
    _vertex("gemini-4-neon", "Gemini 4 Neon", (3.0, 15.0, 0.15), 1_048_576, 65_536, _FROM_LOW_XHIGH),
    _vertex(
        "gemini-robotics-er-2-preview", "Gemini Robotics-ER 2 Preview", (1.0, 5.0, 0.1), 131_072, 65_536, _FROM_MINIMAL
    ),
)
