"""The JSON-schema keywords that would block the event loop, made safe for untrusted schemas.

jsonschema fetches a `$ref` it cannot resolve locally over HTTP (blocking, without a timeout,
on every validation) and matches `pattern` / `patternProperties` with Python's backtracking
`re`, which a pattern like `^(a+)+$` stalls for seconds on a short argument. A tool's validator
is made with `local_registry()` (no retrieval: such a `$ref` is unresolvable, and reported) and
from `bounded_validator_class(cls)`, whose pattern keywords match with `compile_bounded`
(linear in the argument's length). `unevaluatedProperties` beside `patternProperties` would
still run `re` inside jsonschema, so that combination is reported instead of checked.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema import ValidationError
from jsonschema._keywords import unevaluatedProperties

from ._regex import compile_bounded

__all__ = ("bounded_validator_class", "local_registry")

_unevaluated_properties: Any = unevaluatedProperties  # typed as returning None: it is a generator
_extend: Any = jsonschema.validators.extend


def _no_retrieval(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


@functools.cache
def local_registry() -> referencing.Registry[Any]:
    """The meta-schemas jsonschema knows, and nothing fetched from anywhere."""
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

    refusing = referencing.Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]
    combined: referencing.Registry[Any] = REGISTRY.combine(refusing)
    return combined


def _search(pattern: str, text: str) -> bool:
    return compile_bounded(pattern).search(text)


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(pattern, instance)
    except ValueError as exc:
        yield ValidationError(f"the schema's pattern cannot be checked: {exc}")
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = _search(pattern, key)
            except ValueError as exc:
                yield ValidationError(f"the schema's patternProperties cannot be checked: {exc}")
                return
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:
        if key in properties:
            continue
        try:
            if any(_search(pattern, key) for pattern in patterns):
                continue
        except ValueError:
            continue  # reported by patternProperties
        extras.append(key)
    if validator.is_type(allowed, "object"):
        for key in extras:
            yield from validator.descend(instance[key], allowed, path=key)
    elif not allowed and extras:
        shown = ", ".join(repr(key) for key in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{shown} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({shown} {verb} unexpected)")


def _mentions(value: Any, keyword: str) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if keyword in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _unevaluated(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if _mentions(validator.schema, "patternProperties"):
        yield ValidationError(
            "the schema uses unevaluatedProperties together with patternProperties, which cannot be "
            "checked in bounded time; use additionalProperties"
        )
        return
    yield from _unevaluated_properties(validator, unevaluated, instance, schema)


@functools.cache
def bounded_validator_class(cls: Any) -> Any:
    """`cls` with the pattern keywords matched by `compile_bounded`."""
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if "unevaluatedProperties" in cls.VALIDATORS:
        keywords["unevaluatedProperties"] = _unevaluated
    return _extend(cls, keywords)
