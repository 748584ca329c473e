"""Validating a model's arguments against a schema from elsewhere is bounded, whatever both hold.

One budget covers everything a validation does (the schema's own check, keyword checks,
coercion, each pattern search); schema nodes reached many times over are checked once per value;
nesting is bounded before Python's recursion limit, so nothing but a validation error comes out;
and a run validates in a worker thread, so a batch of costly calls leaves the event loop's other
tasks their turns.
"""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop._tools import _budget, _patterns
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall

from .support import SCRIPTED

MODEL = SCRIPTED


async def _never(*args: Any) -> al.AgentToolResult:
    raise AssertionError("a call with invalid arguments never runs")


def make_tool(schema: dict[str, Any], name: str = "t") -> al.AgentTool:
    return al.AgentTool(name=name, description="", parameters=schema, execute=_never)


def fan_out(depth: int) -> dict[str, Any]:
    """About 1.5 KB of schema whose `$ref`s reach the last definition 2**depth times."""
    defs: dict[str, Any] = {
        f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(depth)
    }
    defs[f"a{depth}"] = {"type": "integer"}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}}


TREE = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"value": {"type": "integer"}, "child": {"$ref": "#/$defs/node"}},
        }
    },
    "properties": {"root": {"$ref": "#/$defs/node"}},
}


def tree(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"value": "not a number"}
    for _ in range(depth):
        node = {"value": 1, "child": node}
    return {"root": node}


def test_a_schema_whose_references_fan_out_25_deep_is_checked_in_well_under_a_second() -> None:
    tool = make_tool(fan_out(25))
    started = time.thread_time()
    with pytest.raises(ValueError) as caught:
        tool.validate({"x": "abc"})
    assert "  - x: 'abc' is not of type 'integer'" in str(caught.value)  # the real error, not the budget's
    assert tool.validate({"x": "5"}) == {"x": 5}  # coerced through every branch
    assert time.thread_time() - started < 1.0


def test_the_schema_check_is_charged_to_the_budget_and_its_failure_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer", "minimum": i} for i in range(300)}}
    monkeypatch.setattr(_budget, "MAX_SCHEMA_STEPS", 200)
    tool = make_tool(schema)
    for _ in range(2):
        with pytest.raises(ValueError, match=r'tool "t" has a JSON schema that takes more than 200 schema checks'):
            tool.validate({"p1": 1})
    monkeypatch.setattr(_budget, "MAX_SCHEMA_STEPS", 100_000)
    with pytest.raises(ValueError, match="takes more than 200 schema checks"):
        tool.validate({"p1": 1})  # remembered: the schema is not checked again
    assert make_tool(schema).validate({"p1": "7"}) == {"p1": 7}


def test_each_pattern_search_counts_against_the_budget() -> None:
    """300 `patternProperties` over 3,000 keys were one check, however many searches they made."""
    patterns = {f"^k{i}_": {"type": "integer"} for i in range(300)}
    tool = make_tool({"type": "object", "patternProperties": patterns})
    started = time.thread_time()
    with pytest.raises(ValueError, match=r"root: the arguments take more than (100000 schema checks|1 s of CPU)"):
        tool.validate({f"key{i}": i for i in range(3000)})
    assert time.thread_time() - started < 2.0
    assert tool.validate({"k7_a": "3"}) == {"k7_a": 3}


@pytest.mark.parametrize("depth", [400, 10_000])
def test_arguments_nested_too_deeply_are_a_validation_error(depth: int) -> None:
    tool = make_tool(TREE)
    with pytest.raises(ValueError, match="the arguments nest more than 64 arrays and objects deep") as caught:
        tool.validate(tree(depth))
    assert "(not shown: they nest more than 64" in str(caught.value)
    with pytest.raises(ValueError, match=r"root\.child\.child\.value: 'not a number' is not of type 'integer'"):
        tool.validate(tree(2))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/d"}}, "$defs": {"d": {"$ref": "#/$defs/d"}}},
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/d"}},
            "$defs": {"d": {"allOf": [{"$ref": "#/$defs/d"}]}},
        },
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/d0"}},
            "$defs": {**{f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(1000)}, "d1000": {"type": "integer"}},
        },
    ],
    ids=["ref-cycle", "allOf-cycle", "ref-chain"],
)
def test_nesting_stops_before_the_recursion_limit_in_any_thread(schema: dict[str, Any]) -> None:
    """jsonschema's `$ref` lookup runs in native code, which turned a RecursionError into a
    `PanicException` (not an `Exception`): the nesting limit stops the validation first."""
    outcomes: list[BaseException | None] = []

    def validate() -> None:
        try:
            make_tool(schema).validate({"a": 1})
        except BaseException as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    validate()  # deep in pytest's stack
    worker = threading.Thread(target=validate)
    worker.start()
    worker.join()
    assert len(outcomes) == 2
    for outcome in outcomes:
        assert isinstance(outcome, ValueError), repr(outcome)
        assert "root: the schema or the arguments nest too deeply" in str(outcome)


def test_a_subschema_with_its_own_dialect_is_bounded_too() -> None:
    """jsonschema checks a subschema that names its `$schema` with that draft's own class, which
    ran `pattern` with Python's backtracking `re` and counted nothing."""
    dialect = "https://json-schema.org/draft/2020-12/schema"
    tool = make_tool(
        {"type": "object", "properties": {"s": {"$schema": dialect, "type": "string", "pattern": "^(a+)+$"}}}
    )
    started = time.thread_time()
    with pytest.raises(ValueError, match=r"s: 'a+!' does not match"):
        tool.validate({"s": "a" * 40 + "!"})
    assert time.thread_time() - started < 1.0


def test_a_native_panic_in_the_validator_is_a_validation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class PanicException(BaseException):  # what pyo3 raises: a BaseException
        pass

    def panic(*args: Any) -> Any:
        raise PanicException("__eq__ failed!")

    tool = make_tool({"type": "object", "properties": {"x": {"type": "integer"}}})
    monkeypatch.setattr("agentloop._tools._tool.validate_with_schema", panic)
    with pytest.raises(ValueError, match=r"root: the validator failed \(PanicException: __eq__ failed!\)"):
        tool.validate({"x": 1})


def test_schema_patterns_use_ecma_262_classes() -> None:
    tool = make_tool(
        {
            "type": "object",
            "properties": {
                "digits": {"type": "string", "pattern": r"^\d+$"},
                "word": {"type": "string", "pattern": r"^\w+$"},
                "spaced": {"type": "string", "pattern": r"^a\sb$"},
                "line": {"type": "string", "pattern": r"^a.b$"},
            },
        }
    )
    assert tool.validate({"digits": "0123", "word": "a_Z9", "spaced": "a\u3000b", "line": "a-b"})
    for field, text in [
        ("digits", "\u0663\u0664"),  # Arabic-Indic digits
        ("digits", "\uff11"),  # a fullwidth one
        ("word", "\u0436\u0443\u043a"),  # Cyrillic letters
        ("spaced", "a\x85b"),  # NEL is not an ECMA-262 space
        ("line", "a\rb"),  # `.` does not match a line end
    ]:
        with pytest.raises(ValueError, match=f"{field}: .* does not match"):
            tool.validate({field: text})


_MEMORY_PROBE = r"""
import resource, sys
import agentloop as al

def peak():  # the peak resident size, in bytes
    size = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return size if sys.platform == "darwin" else size * 1024

async def never(*args):
    raise AssertionError

patterns = [r"\w{%d}" % n for n in range(100, 228)] + [r"[^a]{%d}" % n for n in range(100, 228)]
patterns += [r"^[\u0100-\uffff]{400}x%d$" % n for n in range(128)]
tools = [
    al.AgentTool(name=f"t{i}", description="", parameters={"properties": {"s": {"pattern": p}}}, execute=never)
    for i, p in enumerate(patterns)
]
al.AgentTool(name="first", description="", parameters={"properties": {"s": {"pattern": "x"}}}, execute=never).validate(
    {"s": "x"}
)  # imports and meta-schemas first
before = peak()
for tool in tools:
    try:
        tool.validate({"s": "\u00e9" * 300})
    except ValueError:
        pass
print(peak() - before)
"""


def test_compiled_patterns_take_bounded_memory() -> None:
    """Patterns such as `\\w{100}` ... `\\w{227}` compiled to megabytes each, and 128 of them were kept."""
    root = Path(al.__file__).parent.parent
    probe = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root)}
    )
    grown = int(probe.stdout.strip())
    assert grown < 128 << 20, f"{grown / 2**20:.0f} MiB"


def test_the_pattern_cache_is_bounded_by_estimated_bytes() -> None:
    _patterns._CACHE.clear()
    for n in range(60):
        assert not _patterns.pattern_search(rf"^\p{{L}}{{20}}x{n}$", "abc")
        count, size = _patterns._CACHE.size()
        assert size <= _patterns.CACHED_PATTERN_BYTES
    assert count < 60  # big patterns pushed the older ones out
    with pytest.raises(ValueError, match="over the size limit of 4 MiB"):
        _patterns.pattern_search(r"\p{L}{227}", "abc")


# --- in a run -----------------------------------------------------------------------------


class Watched(al.AgentTool):
    """A tool that records, for each validation in a worker thread, how long it took and how
    often the ticker ran meanwhile (and how long each first try on the event loop took)."""

    def __init__(self, ticks: list[float], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ticks = ticks
        self.spans: list[tuple[float, float, int]] = []
        self.first_tries: list[float] = []

    def validate(self, arguments: Any) -> Any:
        ticks_before, started = len(self.ticks), time.monotonic()
        try:
            return super().validate(arguments)
        finally:
            if threading.current_thread() is threading.main_thread():
                self.first_tries.append(time.monotonic() - started)
            else:
                self.spans.append((started, time.monotonic(), len(self.ticks) - ticks_before))


async def test_fifty_costly_calls_in_one_answer_leave_the_loop_its_turns(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call uses up its whole validation budget (0.1 s of CPU here, to keep the test short).
    Validated on the event loop, the 50 made one stall of the sum of their budgets; now each
    stops its first try on the loop after a few milliseconds and is done again in a worker
    thread, and a ticker task keeps its turns during every validation there.

    The machine may be loaded, so instead of a wall-clock margin the test counts and compares:
    the ticker must have run during nearly every validation, and its longest wait must be a small
    part of the time the validations took together (on the loop, it waited for all of them at once;
    a loaded machine may keep the loop's thread off the CPU for about as long as one of them). The garbage
    collector stops every thread while it runs, for a time that grows with the whole heap: what
    the test suite made before this test is frozen out of its collections, so that its pauses
    are those of this test's own objects."""
    monkeypatch.setattr(_budget, "MAX_SCHEMA_SECONDS", 0.1)
    number = {"type": "integer", "minimum": 0, "maximum": 10**9, "multipleOf": 1, "not": {"const": -1}}
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": number}}}
    costly = {"xs": list(range(30_000))}
    ticks: list[float] = []
    tool = Watched(ticks, name="costly", description="", parameters=schema, execute=_never)
    calls = [ScriptedToolCall(f"c{i}", "costly", costly, args_chunks=["{}"]) for i in range(50)]
    agent = al.Agent(
        model=MODEL,
        tools=[tool],
        stream_fn=ScriptedModel([Response(content=calls), Response(content=[ScriptedText(["done"])])]),
    )
    gc.collect()
    gc.freeze()
    try:
        async with anyio.create_task_group() as tg:

            async def ticker() -> None:
                while True:
                    ticks.append(time.monotonic())
                    await anyio.sleep(0.005)

            tg.start_soon(ticker)
            await agent.prompt("go")
            tg.cancel_scope.cancel()
    finally:
        gc.unfreeze()
    results = [m for m in agent.state.messages if isinstance(m, al.ToolResultMessage)]
    assert len(results) == 50 and all(r.is_error for r in results)
    assert "take more than 0.1 s of CPU" in results[0].content[0].text  # type: ignore[union-attr]
    assert len(tool.spans) == 50 and len(tool.first_tries) == 50
    ticked = sum(1 for _, _, count in tool.spans if count > 0)
    assert ticked >= 45, f"the ticker ran during {ticked} of 50 validations"
    first, last = tool.spans[0][0], tool.spans[-1][1]
    longest = max(b - a for a, b in itertools.pairwise(ticks) if first <= b and a <= last)
    together = sum(end - start for start, end, _ in tool.spans)
    assert longest < together / 10, f"longest wait {longest:.3f} s, the validations together {together:.3f} s"


async def test_trees_nested_too_deeply_end_as_error_results_of_the_run(anyio_backend: object) -> None:
    async def execute(*args: Any) -> str:
        return "ok"

    tool = al.AgentTool(name="walk", description="", parameters=TREE, execute=execute)
    responses = [
        Response(
            content=[
                ScriptedToolCall("deep", "walk", tree(400), args_chunks=["{}"]),
                ScriptedToolCall("deeper", "walk", tree(10_000), args_chunks=["{}"]),
                ScriptedToolCall("fine", "walk", {"root": {"value": "3"}}),
            ]
        ),
        Response(content=[ScriptedText(["done"])]),
    ]
    agent = al.Agent(model=MODEL, tools=[tool], stream_fn=ScriptedModel(responses))
    with anyio.fail_after(60):
        await agent.prompt("go")
    results = {m.tool_call_id: m for m in agent.state.messages if isinstance(m, al.ToolResultMessage)}
    for call_id in ("deep", "deeper"):
        assert results[call_id].is_error
        assert "nest more than 64 arrays and objects deep" in results[call_id].content[0].text  # type: ignore[union-attr]
    assert not results["fine"].is_error
    assert agent.state.messages[-1].text == "done"  # type: ignore[union-attr]
