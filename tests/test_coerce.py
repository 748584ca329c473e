"""The reference's coercions, case by case (pi-schema's convert and coerce passes)."""

from __future__ import annotations

from typing import Any

import pytest

import agentloop as al


async def _noop(*args: Any) -> al.AgentToolResult:
    return al.AgentToolResult.from_text("ok")


def coerce(schema: dict[str, Any], value: Any) -> Any:
    tool = al.AgentTool(
        name="t", description="", parameters={"type": "object", "properties": {"v": schema}}, execute=_noop
    )
    return tool.validate({"v": value})["v"]


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "number"}, "0x10", 16),
        ({"type": "number"}, "1e3", 1000),
        ({"type": "number"}, "", 0),
        ({"type": "number"}, "TRUE", 1),
        ({"type": "number"}, False, 0),
        ({"type": "integer"}, "12.9", 12),
        ({"type": "integer"}, "-3", -3),
        ({"type": "boolean"}, "False", False),
        ({"type": "boolean"}, 0, False),
        ({"type": "string"}, 2.5, "2.5"),
        ({"type": "string"}, 1e22, "1e+22"),
        ({"type": "null"}, "", None),
        ({"type": "null"}, "null", None),
        ({"type": "null"}, 0, None),
        ({"const": 5}, "5", 5),
        ({"const": "on"}, "on", "on"),
        ({"const": True}, "true", True),
        ({"enum": [1, 2, "x"]}, "2", 2),
        ({"enum": ["a", "b"]}, "a", "a"),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "7", "7"),
        ({"oneOf": [{"type": "boolean"}, {"type": "null"}]}, "true", True),
        ({"allOf": [{"type": "integer"}, {"minimum": 0}]}, "4", 4),
        ({"type": "array", "items": {"type": "integer"}}, ["1", 2], [1, 2]),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}, ["1", 2], [1, "2"]),
        ({"items": {"type": "integer"}}, ["3"], [3]),
        (
            {"type": "object", "patternProperties": {"^n_": {"type": "integer"}}},
            {"n_a": "1", "s": "x"},
            {"n_a": 1, "s": "x"},
        ),
        ({"type": "object", "additionalProperties": {"type": "boolean"}}, {"a": "true"}, {"a": True}),
        ({"properties": {"a": {"type": "integer"}}}, {"a": "9"}, {"a": 9}),
        ({"type": ["integer", "null"]}, "5", 5),
        ({"type": ["integer", "null"]}, None, None),
        ({"type": ["boolean", "string"]}, 1, True),
        ({"type": ["string", "integer"]}, 3, 3),
        (
            {"type": "object", "properties": {"o": {"type": "object", "properties": {"x": {"type": "number"}}}}},
            {"o": {"x": "1.5"}},
            {"o": {"x": 1.5}},
        ),
    ],
)
def test_coercion(schema: dict[str, Any], value: Any, expected: Any) -> None:
    got = coerce(schema, value)
    assert got == expected and type(got) is type(expected)


def test_local_references_are_followed_and_cycles_stop() -> None:
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/node"}},
        "$defs": {
            "node": {"type": "object", "properties": {"n": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}
        },
    }
    tool = al.AgentTool(name="t", description="", parameters=schema, execute=_noop)
    assert tool.validate({"node": {"n": "1", "next": {"n": "2"}}}) == {"node": {"n": 1, "next": {"n": 2}}}
    dangling = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}, "$defs": {}}
    with pytest.raises(ValueError):
        al.AgentTool(name="t", description="", parameters=dangling, execute=_noop).validate({"x": "1"})


def test_draft_07_tuple_items() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}},
    }
    tool = al.AgentTool(name="t", description="", parameters=schema, execute=_noop)
    assert tool.validate({"pair": ["1", 2]}) == {"pair": [1, "2"]}


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2], "abc", "1e999", "0xZZ", "Infinity"])
def test_values_that_do_not_convert_fail_validation(value: Any) -> None:
    with pytest.raises(ValueError, match="Validation failed"):
        coerce({"type": "number"}, value)


def test_a_ref_cycle_that_consumes_no_data_is_a_validation_error() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/d"}}, "$defs": {"d": {"$ref": "#/$defs/d"}}}
    tool = al.AgentTool(name="t", description="", parameters=schema, execute=_noop)
    with pytest.raises(ValueError, match="nest too deeply"):
        tool.validate({"a": 1})
