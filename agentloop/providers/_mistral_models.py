"""The models pi-ai 1.6.1 lists for the `mistral` provider (ids, names, prices in dollars per
million tokens, context windows, output limits, thinking levels)."""

from __future__ import annotations

from collections.abc import Mapping

from .._types._messages import Model, ModelCost

__all__ = ("MISTRAL_MODELS",)


# The thinking levels (pi-ai's `thinkingLevelMap`): what a level is sent as; None (and, for `xhigh`
# and `max`, no entry): the level is not offered and the nearest offered one is used instead.
_OFF_LOW_HIGH_MAX: Mapping[str, str | None] = {
    "off": "none",
    "minimal": None,
    "low": "low",
    "medium": None,
    "high": "high",
    "xhigh": None,
    "max": "max",
}
_OFF_HIGH_MAX: Mapping[str, str | None] = {
    "off": "none",
    "minimal": None,
    "low": None,
    "medium": None,
    "high": "high",
    "xhigh": None,
    "max": "max",
}
_OFF_HIGH: Mapping[str, str | None] = {
    "off": "none",
    "minimal": None,
    "low": None,
    "medium": None,
    "high": "high",
    "xhigh": None,
    "max": None,
}
_LOW_MEDIUM_HIGH: Mapping[str, str | None] = {
    "off": None,
    "minimal": None,
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": None,
    "max": None,
}
_LOW_HIGH_MAX: Mapping[str, str | None] = {
    "off": None,
    "minimal": None,
    "low": "low",
    "medium": None,
    "high": "high",
    "xhigh": None,
    "max": "max",
}


def _mistral(
    model_id: str,
    name: str,
    cost: tuple[float, float, float, float],
    context_window: int,
    max_tokens: int,
    *,
    reasoning: bool,
    images: bool = True,
    levels: Mapping[str, str | None] | None = None,
) -> Model:
    return Model(
        id=model_id,
        name=name,
        api="mistral-conversations",
        provider="mistral",
        base_url="https://api.mistral.ai",
        reasoning=reasoning,
        input=("text", "image") if images else ("text",),
        cost=ModelCost(input=cost[0], output=cost[1], cache_read=cost[2], cache_write=cost[3]),
        context_window=context_window,
        max_tokens=max_tokens,
        compat={"thinking_level_map": levels} if levels is not None else None,
    )


MISTRAL_MODELS: tuple[Model, ...] = (
    _mistral("codestral-2508", "Codestral 25.08", (0.3, 0.9, 0.03, 0.0), 256_000, 8_192, reasoning=False, images=False),
    _mistral(
        "codestral-latest", "Codestral (latest)", (0.3, 0.9, 0.03, 0.0), 256_000, 4_096, reasoning=False, images=False
    ),
    _mistral(
        "deepseek-v4-1-flash-1017",
        "DeepSeek V4.1 Flash 1017",
        (0.3, 1.2, 0.007, 0.0),
        1_048_576,
        128_000,
        reasoning=True,
        levels=_OFF_LOW_HIGH_MAX,
    ),
    _mistral(
        "glm-5-2",
        "GLM-5.2",
        (1.4, 4.4, 0.14, 0.0),
        1_048_576,
        131_072,
        reasoning=True,
        images=False,
        levels=_OFF_HIGH_MAX,
    ),
    _mistral(
        "magistral-medium-latest",
        "Magistral Medium (latest)",
        (1.5, 7.5, 0.15, 0.0),
        262_144,
        262_144,
        reasoning=True,
        levels=_OFF_HIGH,
    ),
    _mistral("ministral-14b-2512", "Ministral 3 14B", (0.2, 0.2, 0.02, 0.0), 262_144, 262_144, reasoning=False),
    _mistral(
        "ministral-14b-latest", "Ministral 3 14B (latest)", (0.2, 0.2, 0.02, 0.0), 262_144, 262_144, reasoning=False
    ),
    _mistral("ministral-3b-2512", "Ministral 3 3B", (0.1, 0.1, 0.01, 0.0), 131_072, 131_072, reasoning=False),
    _mistral(
        "ministral-3b-latest", "Ministral 3 3B (latest)", (0.1, 0.1, 0.01, 0.0), 131_072, 131_072, reasoning=False
    ),
    _mistral("ministral-8b-2512", "Ministral 3 8B", (0.15, 0.15, 0.015, 0.0), 262_144, 262_144, reasoning=False),
    _mistral(
        "ministral-8b-latest", "Ministral 3 8B (latest)", (0.15, 0.15, 0.015, 0.0), 262_144, 262_144, reasoning=False
    ),
    _mistral("mistral-large-2512", "Mistral Large 3", (0.5, 1.5, 0.05, 0.0), 262_144, 262_144, reasoning=False),
    _mistral(
        "mistral-large-4",
        "Mistral Large 4",
        (0.7, 2.1, 0.07, 0.0),
        1_048_576,
        262_144,
        reasoning=True,
        levels=_LOW_MEDIUM_HIGH,
    ),
    _mistral(
        "mistral-large-latest",
        "Mistral Large (latest)",
        (0.7, 2.1, 0.07, 0.0),
        1_048_576,
        262_144,
        reasoning=True,
        levels=_LOW_MEDIUM_HIGH,
    ),
    _mistral(
        "mistral-medium-2604",
        "Mistral Medium 3.5",
        (1.5, 7.5, 0.15, 0.0),
        262_144,
        262_144,
        reasoning=True,
        levels=_OFF_HIGH,
    ),
    _mistral(
        "mistral-medium-latest",
        "Mistral Medium (latest)",
        (1.5, 7.5, 0.15, 0.0),
        262_144,
        262_144,
        reasoning=True,
        levels=_OFF_HIGH,
    ),
    _mistral(
        "mistral-small-2603",
        "Mistral Small 4",
        (0.15, 0.6, 0.015, 0.0),
        262_144,
        256_000,
        reasoning=True,
        levels=_OFF_HIGH,
    ),
    _mistral(
        "mistral-small-latest",
        "Mistral Small (latest)",
        (0.15, 0.6, 0.015, 0.0),
        262_144,
        256_000,
        reasoning=True,
        levels=_OFF_HIGH,
    ),
    _mistral(
        "voxtral-small-2507", "Voxtral Small", (0.1, 0.4, 0.01, 0.0), 32_768, 32_000, reasoning=False, images=False
    ),
    _mistral(
        "voxtral-small-latest",
        "Voxtral Small (latest)",
        (0.1, 0.4, 0.01, 0.0),
        32_768,
        32_000,
        reasoning=False,
        images=False,
    ),
    _mistral(
        "zai-glm-5-2",
        "GLM-5.2",
        (1.4, 4.4, 0.14, 0.0),
        1_048_576,
        131_072,
        reasoning=True,
        images=False,
        levels=_OFF_HIGH_MAX,
    ),
    _mistral(
        "zai-glm-5-3",
        "GLM-5.3",
        (1.4, 4.4, 0.14, 0.0),
        1_048_576,
        131_072,
        reasoning=True,
        images=False,
        levels=_LOW_HIGH_MAX,
    ),
    _mistral(
        "zai-glm-5-3-flash",
        "GLM-5.3-Flash",
        (0.15, 0.5, 0.03, 0.0),
        1_048_576,
        131_072,
        reasoning=True,
        levels=_LOW_HIGH_MAX,
    ),
)
