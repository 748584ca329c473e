"""JSON text of any message or event, whatever a tool put in its `details`.

Tool `details` and custom-message data are whatever a tool or a program made. The writers that
must never lose a message or an event to them (session stores, event envelopes, the SSE app)
write JSON text with `encode_lenient`: values JSON cannot hold take a form of their own
(pydantic models dumped, dataclasses as dicts, sets and tuples as lists, bytes decoded, anything
else as its `str()`), and so does what `json` refuses outright: a key that is not a string or a
number, a circular value (the repeated container, as its `str()`), and nesting deeper than
`MAX_DEPTH` (the rest, as its `str()`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._json_text import encode_json

__all__ = ("MAX_DEPTH", "encode_lenient")

MAX_DEPTH = 256
"""How deep the fallback walks before it writes the rest as text."""

_KEY_TYPES = (str, int, float, bool, type(None))


def encode_lenient(data: Any) -> str:
    """Compact, strict JSON text of `data` (JSON values, except where a tool or program put others)."""
    try:
        return encode_json(data, default=_jsonable)
    except (TypeError, ValueError):  # an odd key, a cycle, or nesting json cannot follow
        return encode_json(_plain(data, set(), 0))


def _jsonable(value: Any) -> Any:
    """The JSON form `json` writes in place of a value it cannot hold (its `default` hook)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return _text(value)


def _plain(value: Any, path: set[int], depth: int) -> Any:
    """A copy of `value` made of JSON values only (loops, not comprehensions: one frame a level)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if depth >= MAX_DEPTH or id(value) in path:
        return _text(value)
    if isinstance(value, dict):
        path.add(id(value))
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key if isinstance(key, _KEY_TYPES) else _text(key)] = _plain(item, path, depth + 1)
        path.discard(id(value))
        return out
    if isinstance(value, (list, tuple)):
        path.add(id(value))
        items = []
        for item in value:
            items.append(_plain(item, path, depth + 1))
        path.discard(id(value))
        return items
    try:
        converted = _jsonable(value)
    except Exception:  # a dump or asdict that fails (a circular dataclass, a broken model)
        return _text(value)
    if isinstance(converted, str):
        return converted
    path.add(id(value))
    try:
        return _plain(converted, path, depth + 1)
    finally:
        path.discard(id(value))


def _text(value: Any) -> str:
    """`str(value)`, or a placeholder naming its type when that fails (too deep to show, a bug)."""
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__} that cannot be shown>"
