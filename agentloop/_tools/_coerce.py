"""Argument coercion before JSON-schema validation, as the reference's validator does it.

Models often send `"42"` for a number, `"true"` for a boolean, `7` for a string, a single value
for an array, or `null` for an omitted optional property. The reference (pi-schema, pi-ai 1.6)
converts those before validating, in three passes; this is a port of them:

1. drop `null` for optional properties whose schema does not accept null;
2. convert each value towards its schema (`const`, `enum`, unions, `allOf`, `type`);
3. coerce primitives for schemas whose `type` is a list.

Values are JSON values (dict, list, str, int, float, bool, None). Nothing is changed in place,
and a value that needs no change comes back as the same object.

Schemas may come from third parties: each step counts against the validation's budget
(`_budget`: steps, CPU time, nesting), and passes 2 and 3 remember what they answered for each
schema node and value, so a schema whose nodes are reached many times over (`$ref`s that fan
out, `allOf`s of the same node) costs each node once per distinct value, not once per path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeGuard

from ._budget import MAX_SCHEMA_SECONDS, MAX_SCHEMA_STEPS, Budget, current, value_key
from ._patterns import pattern_search

__all__ = (
    "Passes",
    "coerce_arguments",
)

_NUMBER_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_RADIX_RE = re.compile(r"^0([xXoObB])([0-9a-fA-F]+)$")
_BIG_INT_RE = re.compile(r"^-?(0|[1-9]\d*)(?:n|\.\d+)?$")

Passes = Callable[[Any, Any], "bool | None"]


class _Missing:
    pass


_NO = _Missing()


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _num(value: float) -> int | float:
    """JavaScript has one number type: integral values print without a fraction."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _js_number(text: str) -> float | None:
    """JavaScript's `Number(text)` when finite, else None."""
    stripped = text.strip()
    if stripped == "":
        return 0
    if _NUMBER_RE.match(stripped):
        result = float(stripped)
        return result if math.isfinite(result) else None
    radix = _RADIX_RE.match(stripped)
    if radix:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1).lower()]
        try:
            return int(radix.group(2), base)
        except ValueError:
            return None
    return None


def _js_string(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    assert isinstance(value, float)
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _try_string(value: object) -> object:
    if type(value) is bool or _is_number(value):
        return _js_string(value)
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return _NO


def _try_number(value: object) -> object:
    if type(value) is bool:
        return 1 if value else 0
    if _is_number(value):
        return value
    if value is None:
        return 0
    if not isinstance(value, str):
        return _NO
    number = _js_number(value)
    if number is not None:
        return _num(number)
    lower = value.lower()
    if lower == "false":
        return 0
    if lower == "true":
        return 1
    big = _BIG_INT_RE.match(value)
    if big and abs(int(big.group(0).rstrip("n").split(".")[0])) <= 2**53 - 1:
        return int(big.group(0).rstrip("n").split(".")[0])
    return _NO


def _try_boolean(value: object) -> object:
    if type(value) is bool:
        return value
    if _is_number(value):
        return False if value == 0 else True if value == 1 else _NO
    if value is None:
        return False
    if not isinstance(value, str):
        return _NO
    lower = value.lower()
    if lower == "false" or value == "0":
        return False
    if lower == "true" or value == "1":
        return True
    return _NO


def _try_null(value: object) -> object:
    if value is False or (_is_number(value) and value == 0) or value is None:
        return None
    if isinstance(value, str) and (value.lower() in ("undefined", "null") or value in ("", "0")):
        return None
    return _NO


def _same(a: object, b: object) -> bool:
    """JavaScript's `===` for JSON values: containers by identity, scalars by type and value."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    return a == b and (a is None) == (b is None)


def _convert_literal(literal: object, value: object) -> object:
    if _same(literal, value):
        return value
    if isinstance(literal, str):
        result = _try_string(value)
    elif type(literal) is bool:
        result = _try_boolean(value)
    elif _is_number(literal):
        result = _try_number(value)
    else:
        return value
    return result if result is not _NO and _same(result, literal) else value


def _same_items(old: list[Any] | dict[str, Any], new: list[Any] | dict[str, Any]) -> bool:
    if isinstance(old, dict):
        assert isinstance(new, dict)
        return all(new[key] is item for key, item in old.items())
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))


class _Coercer:
    def __init__(self, root: dict[str, Any], passes: Passes, budget: Budget) -> None:
        self.root = root
        self.passes = passes
        self.budget = budget
        self.converted: dict[tuple[int, object], tuple[Any, Any]] = {}
        self.typed: dict[tuple[int, object], tuple[Any, Any]] = {}

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node: Any = self.root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    # pass 1 -----------------------------------------------------------------------------
    def drop_optional_nulls(self, value: Any, schema: Any) -> Any:
        if not isinstance(schema, dict) or not isinstance(value, (list, dict)):
            return value
        self.budget.enter()
        try:
            return self._drop_optional_nulls(value, schema)
        finally:
            self.budget.leave()

    def _drop_optional_nulls(self, value: Any, schema: dict[str, Any]) -> Any:
        if isinstance(value, list):
            items = [
                item if (s := _item_schema(schema, i)) is None else self.drop_optional_nulls(item, s)
                for i, item in enumerate(value)
            ]
            return value if _same_items(value, items) else items
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value
        required = set(schema.get("required") or ())
        out = dict(value)
        for key, prop in properties.items():
            if key not in value:
                continue
            is_ref = isinstance(prop, dict) and isinstance(prop.get("$ref"), str)
            if value[key] is None and key not in required and not is_ref and self.passes(prop, None) is False:
                del out[key]
                continue
            out[key] = self.drop_optional_nulls(value[key], prop)
        return value if len(out) == len(value) and _same_items(value, out) else out

    # pass 2 -----------------------------------------------------------------------------
    def convert(self, node: Any, value: Any) -> Any:
        if not isinstance(node, dict):
            return value
        key = (id(node), value_key(value))
        known = self.converted.get(key)
        if known is not None:
            return known[1]
        self.budget.enter()
        try:
            result = self._convert(node, value)
        finally:
            self.budget.leave()
        self.converted[key] = (value, result)
        return result

    def _convert(self, node: dict[str, Any], value: Any) -> Any:
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = self.resolve(ref)
            if not isinstance(target, dict):
                return value
            return self.convert(target, value)
        if "const" in node:
            return _convert_literal(node["const"], value)
        if isinstance(node.get("enum"), list):
            members = node["enum"]
            if any(_same(m, value) for m in members):
                return value
            for member in members:
                candidate = _convert_literal(member, value)
                if candidate is not value and self.passes(node, candidate) is True:
                    return candidate
            return value
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                return self.convert_union(node, node[key], value)
        if isinstance(node.get("allOf"), list):
            for member in node["allOf"]:
                value = self.convert(member, value)
            return self.convert_members(node, value)
        kind = node.get("type")
        if kind == "string":
            result = _try_string(value)
        elif kind == "number":
            result = _try_number(value)
        elif kind == "integer":
            result = _try_number(value)
            if result is not _NO:
                assert isinstance(result, (int, float))
                return math.trunc(result)
        elif kind == "boolean":
            result = _try_boolean(value)
        elif kind == "null":
            result = _try_null(value)
        elif kind == "array" or (kind is None and ("items" in node or "prefixItems" in node)):
            return self.convert_array(node, value)
        elif kind == "object" or (kind is None and ("properties" in node or "patternProperties" in node)):
            return self.convert_object(node, value)
        else:
            return value
        return value if result is _NO else result

    def convert_union(self, node: dict[str, Any], branches: list[Any], value: Any) -> Any:
        if any(self.passes(branch, value) is True for branch in branches):
            return self.convert_members(node, value)
        for branch in branches:
            candidate = self.convert_members(node, self.convert(branch, value))
            if self.passes(node, candidate) is True:
                return candidate
        return self.convert_members(node, value)

    def convert_members(self, node: dict[str, Any], value: Any) -> Any:
        if "properties" in node or "patternProperties" in node or "additionalProperties" in node:
            return self.convert_object(node, value)
        return value

    def convert_array(self, node: dict[str, Any], value: Any) -> Any:
        items = node.get("items")
        prefix = items if isinstance(items, list) else node.get("prefixItems")
        if isinstance(prefix, list):
            if not isinstance(value, list):
                return value
            rest = None if isinstance(items, list) else items
            converted = [self.convert(prefix[i] if i < len(prefix) else rest, item) for i, item in enumerate(value)]
            return value if _same_items(value, converted) else converted
        if isinstance(value, list):
            if items is None:
                return value
            converted = [self.convert(items, item) for item in value]
            return value if _same_items(value, converted) else converted
        return [self.convert(items, value) if isinstance(items, dict) else value]

    def convert_object(self, node: dict[str, Any], value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        assert isinstance(properties, dict)
        patterns = _patterns(node)
        additional = node.get("additionalProperties")
        out = {}
        for key, item in value.items():
            matched = key in properties
            if matched:
                item = self.convert(properties[key], item)
            for pattern, schema in patterns:
                if _searches(pattern, key):
                    matched = True
                    item = self.convert(schema, item)
            if not matched and isinstance(additional, dict):
                item = self.convert(additional, item)
            out[key] = item
        return value if _same_items(value, out) else out

    # pass 3 -----------------------------------------------------------------------------
    def coerce_types(self, value: Any, schema: Any) -> Any:
        if not isinstance(schema, dict):
            return value
        key = (id(schema), value_key(value))
        known = self.typed.get(key)
        if known is not None:
            return known[1]
        self.budget.enter()
        try:
            result = self._coerce_types(value, schema)
        finally:
            self.budget.leave()
        self.typed[key] = (value, result)
        return result

    def _coerce_types(self, value: Any, schema: dict[str, Any]) -> Any:
        for member in schema.get("allOf") or ():
            value = self.coerce_types(value, member)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                value = self.coerce_union(value, schema[key])
        kind = schema.get("type")
        types = (
            [kind]
            if isinstance(kind, str)
            else [t for t in kind if isinstance(t, str)]
            if isinstance(kind, list)
            else []
        )
        if types and not (len(types) > 1 and any(_matches_type(value, t) for t in types)):
            for t in types:
                candidate = _coerce_primitive(value, t)
                if candidate is not _NO:
                    value = candidate
                    break
        if "object" in types and isinstance(value, dict):
            value = self.coerce_properties(value, schema)
        if "array" in types and isinstance(value, list):
            items = [
                item if not isinstance(s := _item_schema(schema, i), dict) else self.coerce_types(item, s)
                for i, item in enumerate(value)
            ]
            value = value if _same_items(value, items) else items
        return value

    def coerce_union(self, value: Any, branches: list[Any]) -> Any:
        if any(self.passes(branch, value) is True for branch in branches):
            return value
        for branch in branches:
            coerced = self.coerce_types(value, branch)
            if self.passes(branch, coerced) is True:
                return coerced
        return value

    def coerce_properties(self, value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        assert isinstance(properties, dict)
        additional = schema.get("additionalProperties")
        out = dict(value)
        for key, prop in properties.items():
            if key in out:
                out[key] = self.coerce_types(out[key], prop)
        for key in value:
            matched = key in properties
            for pattern, item in _patterns(schema):
                if _searches(pattern, key):
                    matched = True
                    out[key] = self.coerce_types(out[key], item)
            if not matched and isinstance(additional, dict):
                out[key] = self.coerce_types(out[key], additional)
        return value if _same_items(value, out) else out


def _patterns(node: dict[str, Any]) -> list[tuple[str, Any]]:
    """The node's `patternProperties`."""
    patterns = node.get("patternProperties")
    return list(patterns.items()) if isinstance(patterns, dict) else []


def _searches(pattern: str, key: str) -> bool:
    """Whether `pattern` matches `key`, in linear time (keys come from the model); a pattern the
    engine refuses matches nothing here, and the validation reports it."""
    try:
        return pattern_search(pattern, key)
    except ValueError:
        return False


def _item_schema(schema: dict[str, Any], index: int) -> Any:
    items = schema.get("items")
    if isinstance(items, list):
        return items[index] if index < len(items) else None
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    return items


def _matches_type(value: object, kind: str) -> bool:
    if kind == "number":
        return _is_number(value)
    if kind == "integer":
        return _is_number(value) and float(value).is_integer()
    if kind == "boolean":
        return type(value) is bool
    if kind == "string":
        return isinstance(value, str)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return False


def _coerce_primitive(value: object, kind: str) -> object:
    if kind in ("number", "integer"):
        if value is None:
            return 0
        if isinstance(value, str) and value.strip() != "":
            parsed = _js_number(value)
            if parsed is not None and (kind == "number" or float(parsed).is_integer()):
                return _num(parsed)
        if type(value) is bool:
            return 1 if value else 0
        return _NO
    if kind == "boolean":
        if value is None:
            return False
        if value == "true" or (_is_number(value) and value == 1):
            return True
        if value == "false" or (_is_number(value) and value == 0):
            return False
        return _NO
    if kind == "string":
        if value is None:
            return ""
        if type(value) is bool or _is_number(value):
            return _js_string(value)
        return _NO
    if kind == "null":
        if value == "" or value is False or (_is_number(value) and value == 0):
            return None
        return _NO
    return _NO


def coerce_arguments(schema: dict[str, Any], value: Any, passes: Passes) -> Any:
    """`value` converted towards `schema`; `passes(node, value)` says whether a value fits a node.

    Charged to the current validation's budget (a budget of its own outside one)."""
    coercer = _Coercer(schema, passes, current() or Budget(MAX_SCHEMA_STEPS, MAX_SCHEMA_SECONDS))
    value = coercer.drop_optional_nulls(value, schema)
    value = coercer.convert(schema, value)
    return coercer.coerce_types(value, schema)
