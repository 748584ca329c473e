"""A `Model` as JSON (the camelCase form pi uses), and the field checks for JSON read from outside.

One form for every place a model travels or is stored: the proxy protocol, sessions, Temporal's
payloads. `model_from_json` checks every field and names the bad one; absent fields take the
model's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._types._messages import Model, ModelCost

__all__ = ("get_field", "kind_of", "model_from_json", "model_to_json", "str_map")


def model_to_json(model: Model, *, headers: bool = True) -> dict[str, Any]:
    """The model's fields as a JSON object; `headers=False` leaves its headers out (a store)."""
    cost = model.cost
    out: dict[str, Any] = {
        "id": model.id,
        "name": model.name,
        "api": model.api,
        "provider": model.provider,
        "baseUrl": model.base_url,
        "reasoning": model.reasoning,
        "input": list(model.input),
        "cost": {
            "input": cost.input,
            "output": cost.output,
            "cacheRead": cost.cache_read,
            "cacheWrite": cost.cache_write,
        },
        "contextWindow": model.context_window,
        "maxTokens": model.max_tokens,
    }
    if headers and model.headers is not None:
        out["headers"] = dict(model.headers)
    if model.compat is not None:
        out["compat"] = dict(model.compat)
    return out


def model_from_json(data: Any) -> Model:
    """The model of a JSON object (`model_to_json`'s, or pi's); ValueError naming a bad field."""
    if not isinstance(data, dict):
        raise ValueError(f"model must be an object, got {kind_of(data)}")
    model_id = get_field(data, "id", str, "model")
    if not model_id:
        raise ValueError("model.id must be a non-empty string")
    inputs = get_field(data, "input", list, "model", ["text"])
    if not all(i in ("text", "image") for i in inputs):
        raise ValueError(f"model.input must list 'text' and/or 'image', got {inputs!r}")
    cost = get_field(data, "cost", dict, "model", {})
    number = (int, float)
    return Model(
        id=model_id,
        name=get_field(data, "name", str, "model", ""),
        api=get_field(data, "api", str, "model", ""),
        provider=get_field(data, "provider", str, "model", ""),
        base_url=get_field(data, "baseUrl", str, "model", ""),
        reasoning=get_field(data, "reasoning", bool, "model", False),
        input=tuple(inputs),
        cost=ModelCost(
            input=get_field(cost, "input", number, "model.cost", 0.0),
            output=get_field(cost, "output", number, "model.cost", 0.0),
            cache_read=get_field(cost, "cacheRead", number, "model.cost", 0.0),
            cache_write=get_field(cost, "cacheWrite", number, "model.cost", 0.0),
        ),
        context_window=get_field(data, "contextWindow", int, "model", 0),
        max_tokens=get_field(data, "maxTokens", int, "model", 0),
        headers=str_map(data, "headers", "model"),
        compat=get_field(data, "compat", dict, "model"),
    )


def get_field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = None) -> Any:
    """`data[key]` checked against `kind`; absent or null gives `default`."""
    value = data.get(key)
    if value is None:
        return default
    bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    if not isinstance(value, kind) or bad_bool:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{where}.{key} must be {_article(names)}, got {kind_of(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}.{key} must be a finite number, got {value!r}")
    return value


def _article(names: str) -> str:
    pretty = names.replace("str", "string").replace("int", "integer").replace("float", "number")
    pretty = pretty.replace("dict", "object").replace("list", "array").replace("bool", "boolean")
    pretty = pretty.replace("integer or number", "number")
    return ("an " if pretty[0] in "aeiou" else "a ") + pretty


def kind_of(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer"}.get(
        type(value), f"a {type(value).__name__}"
    )


def str_map(data: Mapping[str, Any], key: str, where: str) -> dict[str, str] | None:
    value = get_field(data, key, dict, where)
    if value is not None and not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where}.{key} must map names to strings")
    return value  # type: ignore[no-any-return]
