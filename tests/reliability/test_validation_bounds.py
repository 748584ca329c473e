"""Validating a tool's arguments never touches the network and never stalls on a pattern.

Schemas may come from third parties (MCP servers, user configs) and arguments from the model:
a remote `$ref` is never fetched (it is reported as unresolvable, with the reason), and
`pattern` / `patternProperties` run in time linear in the argument (`agentloop._tools._regex`).
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
    with pytest.raises(ValueError, match="a backreference, which cannot be matched in bounded time"):
        tool.validate({"s": "aa"})
    mixed = make_tool(
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "unevaluatedProperties": False}
    )
    with pytest.raises(ValueError, match="unevaluatedProperties"):
        mixed.validate({"y": 1})
