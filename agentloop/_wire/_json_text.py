"""JSON text as JavaScript reads and writes it: `encode_json` and `decode_json`.

The writers of JSON text (sessions, envelopes, the SSE app, `dumps`) and its readers (providers,
stores, `loads`) go through these two, so that what JSON or UTF-8 cannot carry is written the
way JavaScript's `JSON.stringify` writes it and text that is not JSON is one ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ("decode_json", "encode_json")

_strict_encoders: dict[Callable[[Any], Any] | None, Callable[[Any], str]] = {}


def encode_json(data: Any, default: Callable[[Any], Any] | None = None) -> str:
    """Compact, strict JSON text of JSON values that always encodes as UTF-8.

    What JSON or UTF-8 cannot carry is written the way JavaScript's `JSON.stringify` writes it,
    so that no value is ever lost to an odd number or string a model or a tool produced:

    - NaN and the infinities are written as `null` (`loads` reads a null cost back as NaN).
    - A lone surrogate (`"\\ud800"`, which UTF-8 cannot encode) is written as the escape
      `\\ud800`, which is valid JSON; `decode_json` gives back the same string.

    Other non-ASCII text is written as is. `default` is `json.dumps`'s hook for values JSON
    cannot hold; without one such a value raises TypeError. A circular or absurdly deep value
    raises ValueError.
    """
    import json  # here, not at the top: `import agentloop` stays light

    try:
        try:
            encode = _strict_encoders.get(default)
            if encode is None:  # (one encoder per `default` hook, kept)
                encode = json.JSONEncoder(
                    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=default
                ).encode
                if len(_strict_encoders) < 16:
                    _strict_encoders[default] = encode
            text = encode(data)
        except ValueError:  # NaN or an infinity somewhere (or a circular value, which _finite meets)
            if default is not None:
                data = json.loads(json.dumps(data, default=default))
            text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise ValueError("the value is circular or nests too deeply to write as JSON") from None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates, inside strings: escape them as \udXXX
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _finite(value: Any) -> Any:
    """A copy of `value` with non-finite numbers as None (keys as JavaScript names them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {_finite_key(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _finite_key(key: Any) -> Any:
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if key != key else ("Infinity" if key > 0 else "-Infinity")
    return key


def decode_json(text: str | bytes, *, constants: bool = False) -> Any:
    """The value of JSON text, read as JavaScript's `JSON.parse` reads it: ValueError (never
    RecursionError) for text that is not JSON or nests too deeply to read.

    NaN and the infinities are not JSON and are refused, unless `constants` is true (then they
    are read as Python's `json` writes them).
    """
    import json  # here, not at the top: `import agentloop` stays light

    try:
        return json.loads(text) if constants else json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
