"""The JSON-schema keywords that would block the event loop, made safe for untrusted schemas.

A tool's schema may come from a third party (an MCP server, a user config) and its arguments
from the model: nothing in a validation may be unbounded. What jsonschema does unbounded, and
what a tool's validator does instead:

- a `$ref` it cannot resolve locally is fetched over HTTP (blocking, on every validation):
  the validator is made with `local_registry()`, so such a `$ref` is unresolvable, and reported;
- `pattern` / `patternProperties` run Python's backtracking `re` (`^(a+)+$` stalls for seconds
  on a short string): they run on pydantic-core's linear-time engine (`_patterns`);
  `unevaluatedProperties` beside `patternProperties` would still run `re` inside jsonschema, so
  that combination is reported instead of checked;
- `uniqueItems` compares items pairwise (5,000 objects: over a minute): items are compared by a
  canonical hashable form, in time linear in the array;
- `multipleOf` with a float divides as floats, and a huge integer overflows: such an integer is
  checked exactly, with fractions;
- nested `anyOf`s and `$ref`s can multiply work (a schema whose references fan out doubles it at
  each level), and a `$ref` cycle that consumes no data recurses for ever: every keyword check
  is one step of the validation's budget (`_budget`), and one level of its nesting; and when the
  validation keeps a memo (`Budget.memo`: schemas whose `$ref`s mean the same wherever they are
  reached, `memo_safe`), a keyword check of a schema node against a value runs once, its errors
  (each distinct path and message once) given again when the same node meets the same value.

`check_schema` checks a schema against its meta-schema with the same bounded keywords, charged
to the same budget.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema import ValidationError

from ._budget import current, value_key
from ._patterns import pattern_search

__all__ = (
    "bounded_validator_class",
    "check_schema",
    "local_registry",
    "memo_safe",
)

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


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = pattern_search(pattern, instance)
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
                matched = pattern_search(pattern, key)
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
            if any(pattern_search(pattern, key) for pattern in patterns):
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


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal (`1 == 1.0`,
    `true != 1`, objects whatever their key order)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)  # Python's hash agrees with == across int and float
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(_canonical(item) for item in value))
    if value is None:
        return ("null",)
    return ("other", repr(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


def _multiple_of(original: Callable[..., Iterator[ValidationError]]) -> Callable[..., Iterator[ValidationError]]:
    def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        try:
            errors = list(original(validator, divisor, instance, schema))
        except OverflowError:  # an integer too large for a float, divided by a float: exactly,
            # with the numbers as written in decimal (0.1 is a tenth, not the float nearest it)
            if (Fraction(str(instance)) / Fraction(str(divisor))).denominator == 1:
                return
            errors = [ValidationError(f"{instance!r} is not a multiple of {divisor}")]
        yield from errors

    return multiple_of


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


def _unevaluated(original: Callable[..., Iterator[ValidationError]]) -> Callable[..., Iterator[ValidationError]]:
    def unevaluated(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if _mentions(validator.schema, "patternProperties"):
            yield ValidationError(
                "the schema uses unevaluatedProperties together with patternProperties, which cannot be "
                "checked in bounded time; use additionalProperties"
            )
            return
        yield from original(validator, unevaluated, instance, schema)

    return unevaluated


def _counted(check: Callable[..., Iterator[ValidationError]]) -> Callable[..., Iterator[ValidationError]]:
    """`check`, counted as one step and one level of nesting of the current budget (if any), and
    remembered in its memo (if it keeps one)."""

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        budget = current()
        if budget is None:
            errors = check(validator, value, instance, schema)
            if errors is not None:  # a few of jsonschema's keywords return None when nothing failed
                yield from errors
            return
        memo = budget.memo
        budget.enter()
        try:
            if memo is None:
                errors = check(validator, value, instance, schema)
                if errors is not None:
                    yield from errors
                return
            key = (id(check), id(schema), value_key(instance))
            known = memo.get(key)
            if known is None:
                known = memo[key] = (schema, instance, _distinct(check(validator, value, instance, schema)))
        finally:
            budget.leave()
        for error in known[2]:
            yield _fresh(error)

    return counted


def _distinct(errors: Iterator[ValidationError] | None) -> list[ValidationError]:
    """The errors, each path and message once."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for error in errors or ():
        key = (*error.relative_path, error.message)
        if key not in seen:
            seen.add(key)
            out.append(error)
    return out


def _fresh(error: ValidationError) -> ValidationError:
    """A copy of a remembered error for its caller to complete (jsonschema prepends to the paths)."""
    copy = type(error).__new__(type(error))
    copy.__dict__.update(error.__dict__)
    copy.path = copy.relative_path = deque(error.relative_path)
    copy.schema_path = copy.relative_schema_path = deque(error.relative_schema_path)
    copy.__cause__ = error.__cause__
    return copy


_SCOPED = frozenset({"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"})


def memo_safe(schema: Any) -> bool:
    """Whether a keyword check's answer depends only on its schema node and value: the schema has
    no dynamic references and no embedded resource (a `$id` below the root), so every `$ref`
    means the same wherever it is reached from."""
    stack = [schema]
    root = True
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if not _SCOPED.isdisjoint(node) or (not root and isinstance(node.get("$id"), str)):
                return False
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        root = False
    return True


@functools.cache
def bounded_validator_class(cls: Any) -> Any:
    """`cls` with the keywords above made bounded, every keyword counted by `step_budget`."""
    keywords: dict[str, Callable[..., Iterator[ValidationError]]] = dict(cls.VALIDATORS)
    keywords["pattern"] = _pattern
    keywords["patternProperties"] = _pattern_properties
    keywords["additionalProperties"] = _additional_properties
    if "uniqueItems" in keywords:
        keywords["uniqueItems"] = _unique_items
    if "multipleOf" in keywords:
        keywords["multipleOf"] = _multiple_of(keywords["multipleOf"])
    if "unevaluatedProperties" in keywords:
        keywords["unevaluatedProperties"] = _unevaluated(keywords["unevaluatedProperties"])
    return _extend(cls, {name: _counted(check) for name, check in keywords.items()})


def check_schema(cls: Any, schema: Any) -> None:
    """`cls.check_schema(schema)` with the bounded keywords: `SchemaError` when the schema is not
    valid, `TooCostly` when checking it uses up the current budget."""
    meta_cls = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    meta = bounded_validator_class(meta_cls)(
        cls.META_SCHEMA, registry=local_registry(), format_checker=meta_cls.FORMAT_CHECKER
    )
    for error in meta.iter_errors(schema):
        raise jsonschema.SchemaError.create_from(error)
