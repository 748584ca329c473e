"""AgentTool construction, JSON-schema validation with coercion, and the @tool decorator."""

from __future__ import annotations

import copy
import json
from typing import Any

import pydantic
import pytest

from agentloop import AbortSignal, AgentTool, AgentToolResult, TextContent, ToolCall, tool
from agentloop._tools._tool import validate_tool_arguments


async def _noop(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult.from_text("ok")


def make(parameters: Any, name: str = "x") -> AgentTool:
    return AgentTool(name=name, description="d", parameters=parameters, execute=_noop)


SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "number"},
        "i": {"type": "integer"},
        "b": {"type": "boolean"},
        "s": {"type": "string"},
        "arr": {"type": "array", "items": {"type": "string"}},
        "o": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
        "e": {"enum": [1, 2, "a"]},
        "c": {"const": 3},
        "u": {"anyOf": [{"type": "number"}, {"type": "string"}]},
    },
}


def error_of(t: AgentTool, args: Any) -> str:
    with pytest.raises(ValueError) as info:
        t.validate(args)
    return str(info.value)


# --- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "needle"),
    [
        ({"name": "bad name"}, ValueError, "tool name"),
        ({"name": ""}, ValueError, "tool name"),
        ({"name": "x" * 129}, ValueError, "tool name"),
        ({"name": 5}, ValueError, "tool name"),
        ({"description": 5}, TypeError, "description"),
        ({"execution_mode": "eventually"}, ValueError, "execution_mode"),
        ({"execute": None}, TypeError, "execute"),
        ({"execute": "not callable"}, TypeError, "execute"),
        ({"parameters": 5}, TypeError, "parameters"),
        ({"parameters": str}, TypeError, "parameters"),
        ({"parameters": [("a", "b")]}, TypeError, "parameters"),
        ({"label": 5}, TypeError, "tool label must be a str or None, got int"),
        ({"prepare_arguments": 5}, TypeError, "tool prepare_arguments must be callable or None, got 5"),
    ],
)
def test_construction_errors_name_the_argument(kwargs: dict[str, Any], exc: type, needle: str) -> None:
    full = {"name": "ok", "description": "d", "parameters": {"type": "object"}, "execute": _noop, **kwargs}
    with pytest.raises(exc, match=needle):
        AgentTool(**full)


def test_construction_defaults_and_subclass_execute() -> None:
    t = AgentTool(name="ns:read_file-2.x", description="", parameters={"type": "object"}, execute=_noop)
    assert (t.label, t.execution_mode, t.prepare_arguments) == ("ns:read_file-2.x", None, None)
    assert repr(t) == "AgentTool(name='ns:read_file-2.x')"

    class Sub(AgentTool):
        async def execute(self, tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
            return AgentToolResult.from_text("sub")

    sub = Sub(name="s", description="d", parameters={"type": "object"}, label="S", execution_mode="sequential")
    assert (sub.label, sub.execution_mode) == ("S", "sequential")


def test_invalid_json_schema_is_reported_on_validate() -> None:
    with pytest.raises(ValueError, match='tool "x" has an invalid JSON schema'):
        make({"type": "object", "properties": {"a": {"type": "bogus"}}}).validate({})


# --- coercion ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"n": "5", "b": "true", "s": 7, "i": "7"}, {"n": 5, "b": True, "s": "7", "i": 7}),
        ({"n": " 3 "}, {"n": 3}),
        ({"n": "2.5"}, {"n": 2.5}),
        ({"n": True}, {"n": 1}),
        ({"i": "7.5"}, {"i": 7}),
        ({"b": "1"}, {"b": True}),
        ({"b": 0}, {"b": False}),
        ({"b": "false"}, {"b": False}),
        ({"s": True}, {"s": "true"}),
        ({"s": 7.0}, {"s": "7"}),
        ({"n": None, "s": "kept"}, {"s": "kept"}),  # null for an optional property is dropped
        ({"arr": "x"}, {"arr": ["x"]}),
        ({"arr": 7}, {"arr": ["7"]}),
        ({"arr": [1, True]}, {"arr": ["1", "true"]}),
        ({"o": {"k": 1}}, {"o": {"k": "1"}}),
        ({"e": "2"}, {"e": 2}),
        ({"e": "a"}, {"e": "a"}),
        ({"c": "3"}, {"c": 3}),
        ({"u": "5"}, {"u": "5"}),  # the string branch passes: the value is kept
        ({"u": 5}, {"u": 5}),
        ({"extra": "kept"}, {"extra": "kept"}),
    ],
)
def test_coercion(args: dict[str, Any], expected: dict[str, Any]) -> None:
    result = make(SCHEMA).validate(args)
    assert result == expected
    assert [type(v) for v in result.values()] == [type(v) for v in expected.values()]


def test_nullable_optional_keeps_null_and_nested_coercion() -> None:
    schema = {
        "type": "object",
        "properties": {
            "maybe": {"type": ["string", "null"]},
            "rows": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        },
    }
    assert make(schema).validate({"maybe": None, "rows": [{"n": "1"}, {"n": 2.0}]}) == {
        "maybe": None,
        "rows": [{"n": 1}, {"n": 2}],
    }


def test_original_arguments_are_never_mutated() -> None:
    t = make(SCHEMA)
    good = {"n": "5", "o": {"k": 1}, "arr": "x", "s": None}
    bad = {"n": "abc", "o": {"k": {}}}
    snapshots = copy.deepcopy(good), copy.deepcopy(bad)
    result = t.validate(good)
    error_of(t, bad)
    assert (good, bad) == snapshots
    assert result is not good and result["o"] is not good["o"]


# --- error messages ---------------------------------------------------------------------------


def test_error_message_shape_lists_every_failing_field() -> None:
    args = {"n": "abc", "o": {"k": {}}, "b": "yes", "e": "zz"}
    message = error_of(make(SCHEMA, name="calc"), args)
    head, received = message.split("\n\nReceived arguments:\n")
    lines = head.splitlines()
    assert lines[0] == 'Validation failed for tool "calc":'
    assert all(line.startswith("  - ") for line in lines[1:])
    assert sorted(line.split(":")[0] for line in lines[1:]) == ["  - b", "  - e", "  - n", "  - o.k"]
    assert json.loads(received) == args
    assert received == json.dumps(args, indent=2, ensure_ascii=False)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({"o": {}}, "  - o.k: must have required property 'k'"),
        ({"n": ""}, None),  # "" -> 0 passes
        ({"arr": ["a", {}]}, "  - arr.1: {} is not of type 'string'"),
    ],
)
def test_error_paths(args: dict[str, Any], line: str | None) -> None:
    t = make(SCHEMA)
    if line is None:
        assert t.validate(args) == {"n": 0}
    else:
        assert error_of(t, args).splitlines()[1] == line


def test_missing_required_property_at_root() -> None:
    t = make({"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}, name="echo")
    assert error_of(t, {}) == (
        'Validation failed for tool "echo":\n'
        "  - value: must have required property 'value'\n\n"
        "Received arguments:\n{}"
    )


def test_validate_tool_arguments() -> None:
    t = make(SCHEMA)
    assert validate_tool_arguments(t, ToolCall("c1", "x", {"n": "1"})) == {"n": 1}
    with pytest.raises(ValueError) as info:
        validate_tool_arguments(t, ToolCall("c1", "x", {}, arguments_error="Unexpected token } in JSON"))
    assert str(info.value) == 'Invalid arguments for tool "x": Unexpected token } in JSON'
    with pytest.raises(ValueError, match=r'^Validation failed for tool "x":\n  - i: '):
        validate_tool_arguments(t, ToolCall("c1", "x", {"i": "many"}))


def test_calls_without_arguments_are_validated_once_per_tool_and_a_validate_override_still_runs() -> None:
    empty = {"type": "object", "properties": {"n": {"type": "integer"}}}
    t = make(empty)
    first, second = (validate_tool_arguments(t, ToolCall(f"c{i}", "x", {})) for i in (1, 2))
    assert first == second == {} and first is not second  # a fresh dict each call
    strict = make({**empty, "required": ["n"]})
    for _ in range(2):  # the answer is remembered, including "not valid"
        with pytest.raises(ValueError, match="must have required property 'n'"):
            validate_tool_arguments(strict, ToolCall("c1", "x", {}))
    seen: list[Any] = []

    class Audited(AgentTool):
        def validate(self, arguments: Any) -> Any:
            seen.append(arguments)
            return super().validate(arguments)

    audited = Audited(name="x", description="", parameters=empty, execute=_noop)
    for i in range(3):
        assert validate_tool_arguments(audited, ToolCall(f"c{i}", "x", {})) == {}
    assert seen == [{}, {}, {}]


# --- pydantic models --------------------------------------------------------------------------


class Point(pydantic.BaseModel):
    x: int
    label: str
    tags: list[int] = []


def test_pydantic_model_parameters() -> None:
    t = make(Point, name="pt")
    assert t.parameters["required"] == ["x", "label"]
    assert t.validate({"x": "5", "label": "a"}) == Point(x=5, label="a")
    message = error_of(t, {"x": "nope", "tags": ["q"]})
    lines = message.split("\n\n")[0].splitlines()
    assert lines[0] == 'Validation failed for tool "pt":'
    assert [line.split(":")[0] for line in lines[1:]] == ["  - x", "  - label", "  - tags.0"]
    assert "  - label: Field required" in lines
    assert message.endswith('Received arguments:\n{\n  "x": "nope",\n  "tags": [\n    "q"\n  ]\n}')


async def test_pydantic_instance_passed_to_execute(anyio_backend: object) -> None:
    seen: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.append(params)
        return AgentToolResult.from_text(f"{params.x}")

    t = AgentTool(name="pt", description="", parameters=Point, execute=execute)
    result = await t.execute("c1", t.validate({"x": 3, "label": "p"}), AbortSignal(), _no_update)
    assert seen == [Point(x=3, label="p")]
    assert result == AgentToolResult.from_text("3")


async def _no_update(result: AgentToolResult) -> None:
    raise AssertionError("unexpected update")


# --- @tool ------------------------------------------------------------------------------------


@tool
async def add(a: int, b: str, c: float = 1.5, *, tool_call_id: str, signal: AbortSignal, on_update: Any) -> str:
    """Add things together.

    The rest of the docstring is not the description.

    Args:
        a: The first
            number.
        b (str): The second.
    """
    await on_update(AgentToolResult.from_text("half way"))
    return f"{a}|{b}|{c}|{tool_call_id}|{signal.aborted}"


def test_tool_decorator_schema_and_docs() -> None:
    assert isinstance(add, AgentTool)
    assert (add.name, add.label, add.description) == ("add", "add", "Add things together.")
    props = add.parameters["properties"]
    assert set(props) == {"a", "b", "c"}
    assert add.parameters["required"] == ["a", "b"]
    assert (props["a"]["type"], props["b"]["type"], props["c"]["type"]) == ("integer", "string", "number")
    assert props["c"]["default"] == 1.5
    assert props["a"]["description"] == "The first number."
    assert props["b"]["description"] == "The second."
    assert "description" not in props["c"]


async def test_tool_decorator_injects_and_coerces(anyio_backend: object) -> None:
    updates: list[AgentToolResult] = []

    async def on_update(result: AgentToolResult) -> None:
        updates.append(result)

    params = add.validate({"a": "5", "b": 7})
    result = await add.execute("call-1", params, AbortSignal(), on_update)
    assert result == AgentToolResult(content=(TextContent("5|7|1.5|call-1|False"),))
    assert updates == [AgentToolResult.from_text("half way")]
    message = error_of(add, {"b": "x", "c": "no"})
    assert [line.split(":")[0] for line in message.splitlines()[1:3]] == ["  - a", "  - c"]


async def test_tool_decorator_return_types(anyio_backend: object) -> None:
    passthrough = AgentToolResult.from_text("raw", details={"k": 1})

    @tool(name="many", description="Override.", label="Many", execution_mode="sequential")
    async def many(kind: str) -> Any:
        """Ignored docstring."""
        return {"str": "hi", "result": passthrough, "dict": {"a": [1, "é"]}, "bad": object()}[kind]

    assert (many.name, many.description, many.label, many.execution_mode) == ("many", "Override.", "Many", "sequential")

    async def run(kind: str) -> AgentToolResult | str:
        return await many.execute("c", many.validate({"kind": kind}), AbortSignal(), _no_update)

    assert await run("str") == AgentToolResult(content=(TextContent("hi"),))
    assert await run("result") is passthrough
    assert await run("dict") == AgentToolResult(content=(TextContent('{"a": [1, "é"]}'),), details={"a": [1, "é"]})
    with pytest.raises(TypeError, match="must return str, AgentToolResult or a JSON value"):
        await run("bad")


def test_tool_decorator_rejects_bad_functions() -> None:
    async def star(*args: int) -> str:
        return ""

    async def kw(**kwargs: int) -> str:
        return ""

    with pytest.raises(TypeError, match="needs a function"):
        tool(int)
    for fn in (star, kw):
        with pytest.raises(TypeError, match=r"\*args or \*\*kwargs"):
            tool(fn)


def test_pydantic_model_parameters_get_the_reference_coercions() -> None:
    class Inner(pydantic.BaseModel):
        label: str

    class Params(pydantic.BaseModel):
        name: str
        count: int = 0
        inner: Inner | None = None

    async def run(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult.from_text("ok")

    tool = AgentTool(name="p", description="", parameters=Params, execute=run)
    args = tool.validate({"name": 7, "count": "3", "inner": {"label": 5}})
    assert args == Params(name="7", count=3, inner=Inner(label="5"))
    assert tool.validate({"name": "x", "inner": None}).inner is None


async def test_tool_decorator_takes_timeout_and_max_concurrency(anyio_backend: object) -> None:
    from agentloop import ToolTimeoutError, within_timeout

    @tool(timeout=0.05, max_concurrency=2)
    async def slow() -> str:
        """Sleep long."""
        import anyio

        await anyio.sleep(10)
        return "never"

    assert (slow.timeout, slow.max_concurrency) == (0.05, 2)
    with pytest.raises(ToolTimeoutError, match=r"timed out after 0\.05 s"):
        await within_timeout(slow, slow.execute("c1", {}, AbortSignal(), _no_update))
    with pytest.raises(ValueError, match="max_concurrency must be a positive int"):
        tool(max_concurrency=0)(slow_function)


async def slow_function() -> str:
    return ""


async def test_within_timeout_names_its_tool_parameter(anyio_backend: object) -> None:
    from agentloop import within_timeout

    async def nothing() -> None:
        pass

    with pytest.raises(TypeError, match="within_timeout's tool must be an AgentTool, got NoneType"):
        await within_timeout(None, nothing())  # type: ignore[arg-type]
