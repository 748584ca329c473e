"""Validating a tool's arguments never touches the network and never stalls on a pattern.

Schemas may come from third parties (MCP servers, user configs) and arguments from the model:
a remote `$ref` is never fetched (it is reported as unresolvable, with the reason), and
`pattern` / `patternProperties` run in time linear in the argument (pydantic-core's engine); the
keywords jsonschema runs in more than linear time are bounded, and every validation stops after
`MAX_SCHEMA_STEPS` checks or `MAX_SCHEMA_SECONDS` of CPU, reported as a validation error.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest

import agentloop as al

EVIL = "^(a+)+$"


def make_tool(schema: dict[str, Any]) -> al.AgentTool:
    async def execute(*args: Any) -> al.AgentToolResult:
        raise AssertionError("not called")

    return al.AgentTool(name="t", description="", parameters=schema, execute=execute)


def test_a_remote_ref_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[Any] = []

    def urlopen(*args: Any, **kwargs: Any) -> Any:
        fetched.append(args)
        raise OSError("no network in this test")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    schema = {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}}
    tool = make_tool(schema)
    for _ in range(3):
        with pytest.raises(ValueError, match="cannot be resolved") as caught:
            tool.validate({"x": 1})
        assert "not fetched" in str(caught.value)
    assert fetched == []
    local = make_tool(
        {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/n"}}}
    )
    assert local.validate({"x": "5"}) == {"x": 5}  # local refs still work (and coerce)


def refused_in(tool: al.AgentTool, arguments: dict[str, Any]) -> float:
    """Seconds `tool.validate(arguments)` takes to refuse the arguments."""
    started = time.perf_counter()
    with pytest.raises(ValueError):
        tool.validate(arguments)
    return time.perf_counter() - started


def test_a_catastrophic_pattern_does_not_stall_validation() -> None:
    tool = make_tool({"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}})
    for text in ("a" * 26 + "!", "a" * 10_000 + "!"):
        seconds = refused_in(tool, {"s": text})
        assert seconds < 1.0, (len(text), seconds)
    assert tool.validate({"s": "aaa"}) == {"s": "aaa"}
    with pytest.raises(ValueError, match="does not match"):
        tool.validate({"s": "ab"})


def test_pattern_properties_and_additional_properties_are_bounded() -> None:
    tool = make_tool(
        {
            "type": "object",
            "patternProperties": {EVIL: {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    key = "a" * 26 + "!"
    assert refused_in(tool, {key: 1}) < 1.0
    with pytest.raises(ValueError, match=r"does not match any of the regexes"):
        tool.validate({key: 1})
    assert tool.validate({"aaa": "7"}) == {"aaa": 7}  # coerced by the pattern's schema
    names = make_tool({"type": "object", "propertyNames": {"pattern": EVIL}})
    assert refused_in(names, {key: 1}) < 1.0


def test_patterns_that_cannot_be_bounded_are_reported() -> None:
    tool = make_tool({"type": "object", "properties": {"s": {"type": "string", "pattern": r"(a)\1"}}})
    with pytest.raises(
        ValueError, match="not a pattern the linear-time engine accepts: backreferences are not supported"
    ):
        tool.validate({"s": "aa"})
    mixed = make_tool(
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "unevaluatedProperties": False}
    )
    with pytest.raises(ValueError, match="unevaluatedProperties"):
        mixed.validate({"y": 1})


def test_unique_items_over_many_objects_is_linear() -> None:
    """5,000 distinct objects took 80 s with jsonschema's pairwise comparison."""
    tool = make_tool({"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}})
    many = [{"a": i, "b": [str(i), {"c": None}]} for i in range(5000)]
    started = time.process_time()
    assert tool.validate({"xs": many}) == {"xs": many}
    assert time.process_time() - started < 3.0
    with pytest.raises(ValueError, match="has non-unique elements"):
        tool.validate({"xs": [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]})  # JSON equality: key order, 1 == 1.0
    assert tool.validate({"xs": [True, 1, False, 0, None, "1"]})["xs"] == [True, 1, False, 0, None, "1"]
    with pytest.raises(ValueError, match="has non-unique elements"):
        tool.validate({"xs": [[1, {"x": "y"}], [1.0, {"x": "y"}]]})


def test_coercing_a_wide_union_over_many_items_stops_with_a_validation_error() -> None:
    """An `anyOf` of 40 object shapes over 200 items that all need converting: it ends within about
    the budget, with the items' errors or the budget's."""
    shapes = [
        {
            "type": "object",
            "properties": {f"k{i}": {"type": "integer"}, "kind": {"const": f"s{i}"}},
            "required": [f"k{i}", "kind"],
        }
        for i in range(40)
    ]
    tool = make_tool({"type": "object", "properties": {"items": {"type": "array", "items": {"anyOf": shapes}}}})
    started = time.process_time()
    items = r"items\.199: .* is not valid under any of the given schemas"
    budget = r"root: the arguments take more than (100000 schema checks|1 s of CPU)"
    with pytest.raises(ValueError, match=f"{items}|{budget}"):
        tool.validate({"items": [{"k39": "x", "kind": "s39"} for _ in range(200)]})
    assert time.process_time() - started < 2.0
    few = tool.validate({"items": [{"k39": "5", "kind": "s39"} for _ in range(3)]})
    assert few == {"items": [{"k39": 5, "kind": "s39"}] * 3}  # a real call still coerces


def test_references_that_fan_out_are_checked_once_per_node() -> None:
    defs: dict[str, Any] = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(40)}
    defs["a40"] = {"type": "integer"}
    tool = make_tool({"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}})
    started = time.process_time()
    with pytest.raises(ValueError, match="x: 'zz' is not valid under any of the given schemas"):
        tool.validate({"x": "zz"})
    assert tool.validate({"x": "7"}) == {"x": 7}
    assert time.process_time() - started < 1.0


def test_multiple_of_a_float_with_a_huge_integer_is_checked_exactly() -> None:
    tool = make_tool({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.1}}})
    assert tool.validate({"n": 10**4000}) == {"n": 10**4000}
    third = make_tool({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0.3}}})
    with pytest.raises(ValueError, match=r"is not a multiple of 0\.3"):
        third.validate({"n": 10**4000 + 1})
    assert third.validate({"n": 3 * 10**4000}) == {"n": 3 * 10**4000}
