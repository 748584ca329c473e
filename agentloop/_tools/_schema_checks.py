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
  reached, `memo_safe`), what a keyword that applies subschemas found for a schema node and a
  value is remembered the second time they meet, so a node reached many times over (through
  `$ref`s that fan out) is checked at most twice per value.

`check_schema` checks a schema against its meta-schema with the same bounded keywords, charged
to the same budget.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import attrs
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


def _counted(
    check: Callable[..., Iterator[ValidationError]], applies: bool
) -> Callable[..., Iterator[ValidationError]]:
    """`check`, counted as one step and one level of nesting of the current budget (if any), and
    remembered in its memo (if it keeps one) when the keyword `applies` subschemas: a node
    reached many times over costs what its subschemas cost, and a keyword that checks the value
    itself costs one step."""

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        budget = current()
        if budget is None:
            errors = check(validator, value, instance, schema)
            if errors is not None:  # a few of jsonschema's keywords return None when nothing failed
                yield from errors
            return
        memo = budget.memo if applies else None
        budget.enter()
        try:
            if memo is None:
                errors = check(validator, value, instance, schema)
                if errors is not None:
                    yield from errors
                return
            key = (id(check), id(schema), value_key(instance))
            known = memo.get(key, _UNSEEN)
            if known is not _UNSEEN and known is not None:
                for record in known[2]:
                    yield _replayed(record)
                return
            # Given as they come (a caller that wants the first error stops there), each path and
            # message once. What is remembered stays alive for the whole validation, and the
            # garbage collector's pauses grow with it: only a check that went to its end, cost
            # some steps, and meets the value for the second time (the first may be the last).
            left = budget.left
            seen: set[tuple[Any, ...]] = set()
            records: list[tuple[Any, ...]] = []
            errors = check(validator, value, instance, schema)
            for error in errors if errors is not None else ():
                line = (*error.relative_path, error.message)
                if line in seen:
                    continue
                seen.add(line)
                if known is None:
                    records.append(_record(error))
                yield error
            if left - budget.left >= _REMEMBERED_COST:
                memo[key] = None if known is _UNSEEN else (schema, instance, tuple(records))
        finally:
            budget.leave()

    return counted


_UNSEEN = object()
_REMEMBERED_COST = 16
"""The steps a keyword check (with the checks below it) must take to be remembered."""
_APPLICATORS = frozenset(
    {
        "$ref",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "properties",
        "patternProperties",
        "additionalProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "dependentSchemas",
        "dependencies",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


def _record(error: ValidationError) -> tuple[Any, ...]:
    """What is remembered of an error as a keyword check gave it: no sub-errors (`context`),
    which nothing here reads, so nothing that holds a cycle."""
    return (
        type(error),
        error.message,
        error.validator,
        error.validator_value,
        error.instance,
        error.schema,
        tuple(error.relative_path),
        tuple(error.relative_schema_path),
        error.cause,
        getattr(error, "_type_checker", None),
    )


def _replayed(record: tuple[Any, ...]) -> ValidationError:
    """A new error from a record, for its caller to complete (jsonschema prepends to the paths)."""
    kind, message, keyword, keyword_value, instance, schema, path, schema_path, cause, type_checker = record
    error: ValidationError = kind(
        message,
        validator=keyword,
        path=path,
        cause=cause,
        validator_value=keyword_value,
        instance=instance,
        schema=schema,
        schema_path=schema_path,
        type_checker=type_checker,
    )
    return error


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
    """`cls` with the keywords above made bounded, every keyword counted by the validation's
    budget; a subschema with its own `$schema` is checked by the bounded class of its draft."""
    if getattr(cls, "_agentloop_bounded", False):
        return cls
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
    bounded = _extend(cls, {name: _counted(check, name in _APPLICATORS) for name, check in keywords.items()})
    bounded._agentloop_bounded = True
    bounded._agentloop_fields = [(field.name, field.alias) for field in attrs.fields(bounded) if field.init]
    # jsonschema's `evolve` picks the class of a subschema's `$schema` (as `validator_for` does),
    # which would be its unbounded class: this one picks the bounded class of that draft.
    bounded.evolve = _evolve
    return bounded


def _evolve(self: Any, **changes: Any) -> Any:
    schema = changes.setdefault("schema", self.schema)
    kind = bounded_validator_class(jsonschema.validators.validator_for(schema, default=type(self)))
    for name, alias in type(self)._agentloop_fields:
        if alias not in changes:
            changes[alias] = getattr(self, name)
    return kind(**changes)


def check_schema(cls: Any, schema: Any) -> None:
    """`cls.check_schema(schema)` with the bounded keywords: `SchemaError` when the schema is not
    valid, `TooCostly` when checking it uses up the current budget."""
    meta_cls = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    meta = bounded_validator_class(meta_cls)(
        cls.META_SCHEMA, registry=local_registry(), format_checker=meta_cls.FORMAT_CHECKER
    )
    for error in meta.iter_errors(schema):
        raise jsonschema.SchemaError.create_from(error)
