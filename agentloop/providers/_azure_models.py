"""The models pi-ai 1.6.1 lists for the `azure` provider on the Responses API (ids, names, prices
in dollars per million tokens, context windows, output limits, thinking levels).

Their base URL is empty: a request goes where `$AZURE_OPENAI_BASE_URL` or
`$AZURE_OPENAI_RESOURCE_NAME` say, unless the model is given one (`azure_openai_model`). pi-ai's
higher rates above 272k input tokens (GPT-5.4 and later) are not modelled: the cost is at the base
rates.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._types._messages import Model, ModelCost

__all__ = ("AZURE_MODELS",)


# The thinking levels (pi-ai's `thinkingLevelMap`): what a level is sent as; None (and, for `xhigh`
# and `max`, no entry): the level is not offered and the nearest offered one is used instead.
_NO_OFF: Mapping[str, str | None] = {"off": None}
_NO_OFF_XHIGH: Mapping[str, str | None] = {"off": None, "xhigh": "xhigh"}
_MEDIUM_TO_XHIGH: Mapping[str, str | None] = {"off": None, "xhigh": "xhigh", "minimal": None, "low": None}
_NO_OFF_TO_MAX: Mapping[str, str | None] = {"off": None, "xhigh": "xhigh", "max": "max"}
_LOW_TO_MAX: Mapping[str, str | None] = {
    "off": None,
    "minimal": None,
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
_OFF_TO_MAX: Mapping[str, str | None] = {"xhigh": "xhigh", "max": "max"}
_OFF_LOW_TO_MAX: Mapping[str, str | None] = {
    "off": "none",
    "minimal": None,
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}


def _azure(
    model_id: str,
    name: str,
    cost: tuple[float, float, float, float],
    context_window: int,
    max_tokens: int,
    *,
    reasoning: bool,
    levels: Mapping[str, str | None] | None = None,
) -> Model:
    return Model(
        id=model_id,
        name=name,
        api="azure-openai-responses",
        provider="azure",
        base_url="",
        reasoning=reasoning,
        input=("text", "image"),
        cost=ModelCost(input=cost[0], output=cost[1], cache_read=cost[2], cache_write=cost[3]),
        context_window=context_window,
        max_tokens=max_tokens,
        compat={"thinking_level_map": levels} if levels is not None else None,
    )


AZURE_MODELS: tuple[Model, ...] = (
    _azure("chat-latest", "Chat Latest", (5.0, 30.0, 0.5, 0.0), 400_000, 128_000, reasoning=True),
    _azure("gpt-4.1", "GPT-4.1", (2.0, 8.0, 0.5, 0.0), 1_047_576, 32_768, reasoning=False),
    _azure("gpt-4.1-mini", "GPT-4.1 mini", (0.4, 1.6, 0.1, 0.0), 1_047_576, 32_768, reasoning=False),
    _azure("gpt-4o", "GPT-4o", (2.5, 10.0, 1.25, 0.0), 128_000, 16_384, reasoning=False),
    _azure("gpt-4o-2024-08-06", "GPT-4o (2024-08-06)", (2.5, 10.0, 1.25, 0.0), 128_000, 16_384, reasoning=False),
    _azure("gpt-4o-2024-11-20", "GPT-4o (2024-11-20)", (2.5, 10.0, 1.25, 0.0), 128_000, 16_384, reasoning=False),
    _azure("gpt-4o-mini", "GPT-4o mini", (0.15, 0.6, 0.075, 0.0), 128_000, 16_384, reasoning=False),
    _azure("gpt-5", "GPT-5", (1.25, 10.0, 0.125, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF),
    _azure("gpt-5-mini", "GPT-5 Mini", (0.25, 2.0, 0.025, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF),
    _azure("gpt-5-nano", "GPT-5 Nano", (0.05, 0.4, 0.005, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF),
    _azure("gpt-5-pro", "GPT-5 Pro", (15.0, 120.0, 0.0, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF),
    _azure("gpt-5.1", "GPT-5.1", (1.25, 10.0, 0.125, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF),
    _azure("gpt-5.2", "GPT-5.2", (1.75, 14.0, 0.175, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH),
    _azure(
        "gpt-5.2-pro", "GPT-5.2 Pro", (21.0, 168.0, 0.0, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH
    ),
    _azure(
        "gpt-5.3-codex",
        "GPT-5.3 Codex",
        (1.75, 14.0, 0.175, 0.0),
        400_000,
        128_000,
        reasoning=True,
        levels=_NO_OFF_XHIGH,
    ),
    _azure("gpt-5.4", "GPT-5.4", (2.5, 15.0, 0.25, 0.0), 1_050_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH),
    _azure(
        "gpt-5.4-mini", "GPT-5.4 mini", (0.75, 4.5, 0.075, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH
    ),
    _azure(
        "gpt-5.4-nano", "GPT-5.4 nano", (0.2, 1.25, 0.02, 0.0), 400_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH
    ),
    _azure(
        "gpt-5.4-pro", "GPT-5.4 Pro", (30.0, 180.0, 0.0, 0.0), 1_050_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH
    ),
    _azure("gpt-5.5", "GPT-5.5", (5.0, 30.0, 0.5, 0.0), 1_050_000, 128_000, reasoning=True, levels=_NO_OFF_XHIGH),
    _azure(
        "gpt-5.5-pro",
        "GPT-5.5 Pro",
        (30.0, 180.0, 0.0, 0.0),
        1_050_000,
        128_000,
        reasoning=True,
        levels=_MEDIUM_TO_XHIGH,
    ),
    _azure(
        "gpt-5.6-cyber",
        "GPT-5.6 Cyber",
        (12.5, 75.0, 1.25, 15.625),
        400_000,
        128_000,
        reasoning=True,
        levels=_NO_OFF_TO_MAX,
    ),
    _azure(
        "gpt-5.6-luna",
        "GPT-5.6 Luna",
        (0.2, 1.2, 0.02, 0.25),
        1_050_000,
        128_000,
        reasoning=True,
        levels=_NO_OFF_TO_MAX,
    ),
    _azure(
        "gpt-5.6-sol", "GPT-5.6 Sol", (4.0, 20.0, 0.4, 5.0), 1_050_000, 128_000, reasoning=True, levels=_NO_OFF_TO_MAX
    ),
    _azure(
        "gpt-5.6-terra",
        "GPT-5.6 Terra",
        (2.0, 12.0, 0.2, 2.5),
        1_050_000,
        128_000,
        reasoning=True,
        levels=_NO_OFF_TO_MAX,
    ),
    _azure(
        "gpt-6-astra", "GPT-6 Astra", (10.0, 50.0, 1.0, 12.5), 1_050_000, 128_000, reasoning=True, levels=_LOW_TO_MAX
    ),
    _azure(
        "gpt-6-cyber", "GPT-6 Cyber", (20.0, 100.0, 2.0, 25.0), 1_050_000, 128_000, reasoning=True, levels=_OFF_TO_MAX
    ),
    _azure(
        "gpt-6-luna", "GPT-6 Luna", (0.1, 0.5, 0.01, 0.125), 1_050_000, 128_000, reasoning=True, levels=_OFF_LOW_TO_MAX
    ),
    _azure("gpt-6-sol", "GPT-6 Sol", (2.0, 10.0, 0.2, 2.5), 1_050_000, 128_000, reasoning=True, levels=_OFF_LOW_TO_MAX),
    _azure("gpt-6.1-sol", "GPT-6.1 Sol", (2.0, 10.0, 0.1, 2.5), 1_050_000, 128_000, reasoning=True, levels=_LOW_TO_MAX),
    _azure(
        "gpt-6.1-terra",
        "GPT-6.1 Terra",
        (1.0, 5.0, 0.05, 1.25),
        1_050_000,
        128_000,
        reasoning=True,
        levels=_OFF_LOW_TO_MAX,
    ),
    _azure(
        "gpt-6.2-astra", "GPT-6.2 Astra", (8.0, 40.0, 0.4, 10.0), 1_050_000, 128_000, reasoning=True, levels=_LOW_TO_MAX
    ),
    _azure("gpt-6.2-sol", "GPT-6.2 Sol", (2.0, 10.0, 0.1, 2.5), 1_050_000, 128_000, reasoning=True, levels=_LOW_TO_MAX),
    _azure("gpt-daybreak-blue-latest", "Daybreak Blue", (4.0, 20.0, 0.4, 5.0), 1_050_000, 128_000, reasoning=True),
    _azure("gpt-daybreak-red-latest", "Daybreak Red", (12.5, 75.0, 1.25, 15.625), 400_000, 128_000, reasoning=True),
    _azure("o3", "o3", (2.0, 8.0, 0.5, 0.0), 200_000, 100_000, reasoning=True),
    _azure("o3-pro", "o3-pro", (20.0, 80.0, 0.0, 0.0), 200_000, 100_000, reasoning=True),
)
