"""The bare form: `async for event in agent_loop(...)`, without `async with`.

Its contract (README, "Two ways to iterate"): the same events in the same order as the `async
with` form; a tool batch's events arrive when the batch has ended; leaving early cleans the run up
when the generator is closed (at once with `contextlib.aclosing`); abort, errors and outer
cancellation behave as in the `async with` form.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, nullcontext
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events
from tests.support import agent_end, last_assistant, text

MODEL = al.Model(id="m", api="faux", provider="faux")


def sleeper(
    log: list[str], seconds: float, name: str = "sleep", *, until: anyio.Event | None = None, **tool: Any
) -> al.AgentTool:
    """A tool that sleeps `seconds`, then waits for `until` if given."""

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        log.append(f"start {tool_call_id}")
        on_update(al.AgentToolResult.from_text(f"working {tool_call_id}"))
        try:
            await anyio.sleep(seconds)
            if until is not None:
                await until.wait()
        except anyio.get_cancelled_exc_class():
            log.append(f"cancelled {tool_call_id}")
            raise
        log.append(f"end {tool_call_id}")
        return al.AgentToolResult.from_text(f"slept {seconds}")

    return al.AgentTool(
        name=name, description="Sleep", parameters={"type": "object", "properties": {}}, execute=execute, **tool
    )


def calls(*ids: str, tool: str = "sleep") -> Response:
    return Response(content=[ScriptedToolCall(i, tool, {}) for i in ids])


Scenario = Callable[[list[str]], tuple[ScriptedModel, list[al.AgentTool], dict[str, Any]]]


def text_only(log: list[str]) -> tuple[ScriptedModel, list[al.AgentTool], dict[str, Any]]:
    return ScriptedModel([Response(content=[ScriptedText(["Hel", "lo"])])]), [], {}


def parallel_tools(log: list[str]) -> tuple[ScriptedModel, list[al.AgentTool], dict[str, Any]]:
    # c1 runs until c2 has ended (c2's after_tool_call opens the gate): c2's tool_execution_end
    # comes first, the results in source order
    gate = anyio.Event()

    async def after(context: al.AfterToolCallContext, signal: al.AbortSignal) -> None:  # noqa: ASYNC124 - an async hook, as users write them
        if context.tool_call.id == "c2":
            gate.set()

    tools = [sleeper(log, 0.0, until=gate), sleeper(log, 0.0, name="quick")]
    model = ScriptedModel(
        [Response(content=[ScriptedToolCall("c1", "sleep", {}), ScriptedToolCall("c2", "quick", {})]), "done"]
    )
    return model, tools, {"after_tool_call": after}


def sequential_tools(log: list[str]) -> tuple[ScriptedModel, list[al.AgentTool], dict[str, Any]]:
    return ScriptedModel([calls("c1", "c2"), "done"]), [sleeper(log, 0.01)], {"tool_execution": "sequential"}


def barrier_and_hooks(log: list[str]) -> tuple[ScriptedModel, list[al.AgentTool], dict[str, Any]]:
    tools = [sleeper(log, 0.02), sleeper(log, 0.0, name="gate", execution_mode="sequential")]
    model = ScriptedModel(
        [
            Response(
                content=[
                    ScriptedToolCall("c1", "sleep", {}),
                    ScriptedToolCall("c2", "gate", {}),
                    ScriptedToolCall("c3", "sleep", {}),
                ]
            ),
            "done",
        ]
    )

    async def after(context: al.AfterToolCallContext, signal: al.AbortSignal) -> None:  # noqa: ASYNC124 - an async hook, as users write them
        log.append(f"after {context.tool_call.id}")

    return model, tools, {"after_tool_call": after, "max_turns": 5}


def model_error(log: list[str]) -> tuple[ScriptedModel, list[al.AgentTool], dict[str, Any]]:
    return ScriptedModel([calls("c1"), Response(content=[ScriptedText("x")], raise_after=0)]), [sleeper(log, 0)], {}


SCENARIOS = [text_only, parallel_tools, sequential_tools, barrier_and_hooks]


def signature(event: al.AgentEvent) -> tuple[Any, ...]:
    """What must be equal in both forms (timestamps differ from run to run)."""
    if isinstance(event, (al.MessageStart, al.MessageEnd)):
        return (event.type, event.message.role, getattr(event.message, "text", None))
    if isinstance(event, al.MessageUpdate):
        return (event.type, event.assistant_message_event.type)
    if isinstance(event, (al.ToolExecutionStart, al.ToolExecutionUpdate)):
        return (event.type, event.tool_call_id)
    if isinstance(event, al.ToolExecutionEnd):
        return (event.type, event.tool_call_id, event.is_error, event.result.content)
    if isinstance(event, al.TurnEnd):
        return (event.type, event.message.stop_reason, tuple(r.tool_call_id for r in event.tool_results))
    return (event.type,)


def run(scenario: Scenario, log: list[str], signal: al.AbortSignal | None = None) -> al.AgentLoopStream:
    model, tools, config = scenario(log)
    context = al.AgentContext(system_prompt="sys", tools=tools)
    return al.agent_loop(
        [al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL, **config), signal, model
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_both_forms_give_the_same_events_in_the_same_order(anyio_backend: object, scenario: Scenario) -> None:
    with anyio.fail_after(5):
        async with run(scenario, []) as events:
            with_form = [event async for event in events]
        bare_log: list[str] = []
        bare = [event async for event in run(scenario, bare_log)]
    check_events(bare)
    assert [signature(e) for e in bare] == [signature(e) for e in with_form]
    assert bare[-1].type == "agent_end"


async def test_a_batch_s_events_arrive_when_the_batch_has_ended(anyio_backend: object) -> None:
    log: list[str] = []
    seen: list[str] = []
    with anyio.fail_after(5):
        async for event in run(parallel_tools, log):
            if event.type == "tool_execution_start":
                seen.append(f"{event.type} {event.tool_call_id}: {' / '.join(log)}")
    # by the time the first tool_execution_start is yielded, both tools have run to their end
    assert seen[0] == "tool_execution_start c1: start c1 / start c2 / end c2 / end c1"


class Probe:
    """A stream function (text in `chunks` deltas, or one tool call) that records when it is closed."""

    def __init__(self, responses: list[Response | str]) -> None:
        self.model = ScriptedModel(responses)
        self.opened = 0
        self.closed = 0

    def __call__(self, model: al.Model, context: al.Context, options: al.StreamOptions) -> AsyncIterator[Any]:
        return self.play(model, context, options)

    async def play(self, model: al.Model, context: al.Context, options: al.StreamOptions) -> AsyncIterator[Any]:
        self.opened += 1
        try:
            async with aclosing(self.model(model, context, options)) as events:  # type: ignore[type-var]
                async for event in events:
                    yield event  # noqa: ASYNC119 - aclosing of the scripted stream: no scope
        finally:
            self.closed += 1


def probe_run(probe: Probe, log: list[str]) -> al.AgentLoopStream:
    context = al.AgentContext(tools=[sleeper(log, 0.01)])
    return al.agent_loop([al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL), None, probe)


PROBE_SCRIPT: list[Response | str] = [calls("c1", "c2"), Response(content=[ScriptedText(["a", "b", "c"])])]


def count_events() -> int:
    async def count() -> int:
        return len([e async for e in probe_run(Probe(PROBE_SCRIPT), [])])

    return anyio.run(count)


EVENT_COUNT = count_events()


@pytest.mark.parametrize("closing", [True, False], ids=["aclosing", "dropped"])
async def test_break_at_every_event_closes_the_run(anyio_backend: object, closing: bool) -> None:
    # What the process held before the test is left out of `gc.collect()` (`break_and_drop`): a
    # collection then scans this test's objects, not everything the test session has made.
    gc.freeze()
    try:
        await break_at_every_event(anyio_backend, closing)
    finally:
        gc.unfreeze()


async def break_at_every_event(anyio_backend: object, closing: bool) -> None:
    for index in range(EVENT_COUNT):
        probe = Probe(PROBE_SCRIPT)
        log: list[str] = []
        with anyio.fail_after(5):
            if closing:
                async with aclosing(probe_run(probe, log)) as events:
                    n = 0
                    async for _event in events:
                        if n == index:
                            break
                        n += 1
            else:
                await break_and_drop(probe_run(probe, log), index, expect_warning=anyio_backend == "trio")
                for _ in range(10):  # a dropped generator is closed by the event loop, soon after
                    await anyio.lowlevel.checkpoint()
                    if probe.closed == probe.opened:
                        break
        assert probe.closed == probe.opened, f"break at event {index}: a model stream left open"
        # no tool is ever left running: a batch's events are yielded after the batch
        assert log.count("start c1") == log.count("end c1")


async def break_and_drop(loop: al.AgentLoopStream, index: int, *, expect_warning: bool) -> None:
    """Break out of a bare loop without closing it; trio warns about the dropped generator."""
    with pytest.warns(ResourceWarning, match="aclosing") if expect_warning else nullcontext():
        n = 0
        async for _event in loop:
            if n == index:
                break
            n += 1
        del loop, _event
        gc.collect()


async def test_an_exception_in_the_body_comes_out_unwrapped(anyio_backend: object) -> None:
    probe = Probe(PROBE_SCRIPT)
    with anyio.fail_after(5), pytest.raises(LookupError, match="mine"):
        async with aclosing(probe_run(probe, [])) as events:
            async for event in events:
                if event.type == "message_update":
                    raise LookupError("mine")
    assert probe.closed == probe.opened == 1


async def test_a_stream_function_that_raises_comes_out_unwrapped(anyio_backend: object) -> None:
    model = ScriptedModel([Response(content=[ScriptedText("x")], raise_on_call=KeyError("boom"))])
    loop = al.agent_loop(
        [al.UserMessage(content="go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), None, model
    )
    with anyio.fail_after(5), pytest.raises(KeyError, match="boom"):
        async for _event in loop:
            pass


async def test_a_tool_batch_failure_comes_out_unwrapped(anyio_backend: object) -> None:
    def fail() -> list[al.AgentMessage]:
        raise AttributeError("hook failed")

    model = ScriptedModel([calls("c1", "c2"), "done"])
    context = al.AgentContext(tools=[sleeper([], 0)])
    config = al.AgentLoopConfig(model=MODEL, get_steering_messages=fail)
    with anyio.fail_after(5), pytest.raises(AttributeError, match="hook failed"):
        async for _event in al.agent_loop([al.UserMessage(content="go")], context, config, None, model):
            pass


@pytest.mark.parametrize("where", ["model stream", "tool batch"])
async def test_an_outer_timeout_is_a_plain_cancellation(anyio_backend: object, where: str) -> None:
    log: list[str] = []
    if where == "model stream":
        probe = Probe([Response(content=[ScriptedText(["a", "b"])], chunk_delay=10)])
    else:
        probe = Probe([calls("c1"), "done"])
    context = al.AgentContext(tools=[sleeper(log, 10)])
    loop = al.agent_loop([al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL), None, probe)
    seen: list[str] = []
    with anyio.fail_after(5):
        with anyio.move_on_after(0.1) as scope:
            async with aclosing(loop) as events:
                async for event in events:
                    seen.append(event.type)
    assert scope.cancelled_caught
    assert "agent_end" not in seen
    assert probe.closed == probe.opened
    if where == "tool batch":
        assert log == ["start c1", "cancelled c1"]


async def test_abort_during_the_model_stream_ends_the_run_with_an_aborted_message(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    probe = Probe([Response(content=[ScriptedText(["a", "b", "c"])], chunk_delay=0.01)])
    loop = al.agent_loop(
        [al.UserMessage(content="go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), signal, probe
    )
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        async for event in loop:
            seen.append(event)
            if event.type == "message_update" and not signal.aborted:
                signal.abort()
    check_events(seen)
    assert [e.type for e in seen[-3:]] == ["message_end", "turn_end", "agent_end"]
    assert last_assistant(seen).stop_reason == "aborted"
    assert probe.closed == probe.opened == 1


async def test_abort_cuts_a_stream_function_that_ignores_the_signal(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    closed: list[str] = []

    async def stalls(model: al.Model, context: al.Context, options: al.StreamOptions) -> AsyncIterator[Any]:
        script = ScriptedModel([Response(content=[ScriptedText(["a", "b"])])])
        try:
            async with aclosing(script(model, context, options)) as events:  # type: ignore[type-var]
                async for event in events:
                    yield event  # noqa: ASYNC119 - aclosing of the scripted stream: no scope
                    if event.type == "text_delta":
                        await anyio.sleep_forever()  # ignores options.signal
        finally:
            closed.append("closed")

    seen: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            loop = al.agent_loop(
                [al.UserMessage(content="go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), signal, stalls
            )
            async for event in loop:
                seen.append(event.type)
                if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
                    tg.start_soon(abort_soon, signal)
    assert seen[-3:] == ["message_end", "turn_end", "agent_end"]
    assert closed == ["closed"]


@pytest.mark.parametrize("shape", ["awaitable", "context manager"])
async def test_abort_while_a_stream_function_s_result_opens_ends_the_run(anyio_backend: object, shape: str) -> None:
    # A stream function that returns an awaitable or an async context manager: in a bare run the
    # first read awaits or enters it, in an abort cut like any read; the cut leaves it closed.
    signal = al.AbortSignal()
    log: list[str] = []

    class Opening:
        """An async context manager that takes forever to open (it ignores the signal)."""

        async def __aenter__(self) -> AsyncIterator[Any]:
            log.append("enter")
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def __aexit__(self, *exc_info: object) -> None:
            log.append("exit")

    async def opening(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        log.append("await")
        await anyio.sleep_forever()

    stream_fn = opening if shape == "awaitable" else (lambda model, context, options: Opening())
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_soon, signal)
            loop = al.agent_loop(
                [al.UserMessage(content="go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), signal, stream_fn
            )
            async for event in loop:
                seen.append(event)
    check_events(seen)
    assert [e.type for e in seen[-4:]] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert last_assistant(seen).stop_reason == "aborted"
    assert log == (["await"] if shape == "awaitable" else ["enter"])


async def abort_soon(signal: al.AbortSignal) -> None:
    await anyio.sleep(0.02)
    signal.abort()


async def test_abort_during_a_batch_answers_the_calls_and_ends_the_run(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    log: list[str] = []
    model = ScriptedModel([calls("c1", "c2"), "never"])
    context = al.AgentContext(tools=[sleeper(log, 10)])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.01)
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_soon, signal)
            async for event in al.agent_loop([al.UserMessage(content="go")], context, config, signal, model):
                seen.append(event)
    check_events(seen)
    ends = [e for e in seen if isinstance(e, al.ToolExecutionEnd)]
    assert [(e.tool_call_id, text(e.result.content[0]), e.is_error) for e in ends] == [
        ("c1", "Operation aborted", True),
        ("c2", "Operation aborted", True),
    ]
    assert sorted(log) == ["cancelled c1", "cancelled c2", "start c1", "start c2"]
    assert seen[-1].type == "agent_end"
    assert len(model.calls) == 2  # the run went on to its next turn, whose stream saw the abort


async def test_a_run_is_used_once_either_way(anyio_backend: object) -> None:
    loop = al.agent_loop(
        [al.UserMessage(content="go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), None, ScriptedModel(["hi"])
    )
    assert [e.type async for e in loop][-1] == "agent_end"
    with pytest.raises(RuntimeError, match="only once"):
        async with loop:
            pass
    with pytest.raises(RuntimeError, match="only once"):
        loop.__aiter__()


def test_awaiting_a_run_says_how_to_use_it() -> None:
    loop = al.agent_loop(
        [al.UserMessage(content="go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), None, ScriptedModel(["hi"])
    )
    with pytest.raises(TypeError, match="async with agent_loop"):
        loop.__await__()


async def test_continue_works_bare(anyio_backend: object) -> None:
    context = al.AgentContext(messages=[al.UserMessage(content="go")])
    events = [
        e async for e in al.agent_loop_continue(context, al.AgentLoopConfig(model=MODEL), None, ScriptedModel(["hi"]))
    ]
    check_events(events)
    assert [m.role for m in agent_end(events).messages] == ["assistant"]
