"""The core's extension points: tool timeouts and concurrency limits, `wrap_tool_call`,
`propagate`, the clock, and sync tools in a worker thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall, check_events
from tests.support import last_assistant, logged, text, tool_results

MODEL = al.Model(id="m", api="faux", provider="faux")


def calls(*names: str) -> Response:
    return Response(content=[ScriptedToolCall(f"c{i + 1}", name, {}) for i, name in enumerate(names)])


def sleeper(name: str, seconds: float, log: list[str], **options: Any) -> al.AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:
        with logged(log, tool_call_id):
            await anyio.sleep(seconds)
        return f"{name} done"

    return al.AgentTool(
        name=name, description=name, parameters={"type": "object", "properties": {}}, execute=execute, **options
    )


async def run(tools: list[al.AgentTool], model: ScriptedModel, **config: Any) -> list[al.AgentEvent]:
    events: list[al.AgentEvent] = []
    context = al.AgentContext(tools=tools)
    with anyio.fail_after(10):
        await al.run_agent_loop(
            [al.UserMessage(content="go")],
            context,
            al.AgentLoopConfig(model=MODEL, **config),
            events.append,
            None,
            model,
        )
    check_events(events)
    return events


def ends(events: list[al.AgentEvent]) -> list[tuple[str, str, bool]]:
    return [
        (e.tool_call_id, text(e.result.content[0]), e.is_error) for e in events if isinstance(e, al.ToolExecutionEnd)
    ]


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_a_tool_past_its_timeout_gets_an_error_result_and_the_run_goes_on(
    anyio_backend: object, execution: str
) -> None:
    log: list[str] = []
    tools = [sleeper("slow", 10, log, timeout=0.05), sleeper("quick", 0, log)]
    events = await run(tools, ScriptedModel([calls("slow", "quick"), "after"]), tool_execution=execution)
    assert sorted(ends(events)) == [
        ("c1", "Tool slow timed out after 0.05 s", True),
        ("c2", "quick done", False),
    ]
    assert "cancelled c1" in log
    assert last_assistant(events).text == "after"


async def test_max_concurrency_limits_a_tool_and_keeps_source_order(anyio_backend: object) -> None:
    running = 0
    peak = 0
    order: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:
        nonlocal running, peak
        order.append(tool_call_id)
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.02)
        running -= 1
        return "ok"

    limited = al.AgentTool(
        name="limited", description="", parameters={"type": "object"}, execute=execute, max_concurrency=2
    )
    events = await run([limited], ScriptedModel([calls(*["limited"] * 6), "done"]))
    assert peak == 2
    assert order == [f"c{i}" for i in range(1, 7)]
    starts = [e.tool_call_id for e in events if isinstance(e, al.ToolExecutionStart)]
    assert starts == [f"c{i}" for i in range(1, 7)]
    assert [m.tool_call_id for m in tool_results(events)] == [f"c{i}" for i in range(1, 7)]


async def test_max_parallel_tool_calls_limits_a_batch(anyio_backend: object) -> None:
    log: list[str] = []
    tools = [sleeper("a", 0.02, log), sleeper("b", 0.02, log)]
    await run(tools, ScriptedModel([calls("a", "b", "a", "b"), "done"]), max_parallel_tool_calls=1)
    # one at a time: every call ends before the next starts
    assert log == [f"{what} c{i}" for i in range(1, 5) for what in ("start", "end")]


async def test_wrap_tool_call_sees_each_execution_and_decides_its_outcome(anyio_backend: object) -> None:
    seen: list[tuple[str, str, Any]] = []

    async def wrap(invocation: al.ToolInvocation, proceed: Any) -> object:
        seen.append((invocation.tool.name, invocation.tool_call.id, invocation.args))
        if invocation.tool.name == "replayed":
            return "from the journal"  # a durable engine answers without running the tool
        result = await proceed()
        return al.AgentToolResult.from_text(f"wrapped: {result}")

    log: list[str] = []
    tools = [sleeper("live", 0, log), sleeper("replayed", 0, log)]
    events = await run(tools, ScriptedModel([calls("live", "replayed"), "done"]), wrap_tool_call=wrap)
    assert sorted(seen) == [("live", "c1", {}), ("replayed", "c2", {})]
    assert sorted(ends(events)) == [("c1", "wrapped: live done", False), ("c2", "from the journal", False)]
    assert log == ["start c1", "end c1"]


async def test_a_wrapper_sees_a_tools_timeout_as_the_outcome_of_proceed(anyio_backend: object) -> None:
    # The timeout is inside `proceed()`: a durable engine's step records it as the call's outcome
    # (a cut from outside the wrapper would leave nothing recorded, and a replay would run the
    # tool again). Unhandled, it is the call's error result, as without a wrapper.
    recorded: list[str] = []

    async def wrap(invocation: al.ToolInvocation, proceed: Any) -> object:
        try:
            return await proceed()
        except al.ToolTimeoutError as exc:
            recorded.append(str(exc))
            if invocation.tool_call.id == "c1":
                return "recorded: timed out"
            raise

    log: list[str] = []
    tools = [sleeper("slow", 10, log, timeout=0.05)]
    events = await run(tools, ScriptedModel([calls("slow", "slow"), "done"]), wrap_tool_call=wrap)
    assert recorded == ["Tool slow timed out after 0.05 s"] * 2
    assert sorted(ends(events)) == [
        ("c1", "recorded: timed out", False),
        ("c2", "Tool slow timed out after 0.05 s", True),
    ]
    assert sorted(log) == ["cancelled c1", "cancelled c2", "start c1", "start c2"]


class EngineError(Exception):
    """A durable engine's own control-flow exception."""


@pytest.mark.parametrize("where", ["tool", "before_tool_call", "after_tool_call", "wrap_tool_call"])
@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_propagate_exceptions_end_the_run_instead_of_becoming_results(
    anyio_backend: object, where: str, execution: str
) -> None:
    failed: list[str] = []

    async def fail(*args: Any) -> Any:
        if not failed:  # the first call only: several at once would come out as an ExceptionGroup
            failed.append(where)
            raise EngineError(f"from {where}")
        if where == "wrap_tool_call":
            return await args[1]()
        if where == "tool":
            return "ok"
        return None

    async def ok(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:  # noqa: ASYNC124 - an async tool, as users write them
        return "ok"

    tool = al.AgentTool(
        name="t", description="", parameters={"type": "object"}, execute=fail if where == "tool" else ok
    )
    hooks = {} if where == "tool" else {where: fail}
    model = ScriptedModel([calls("t", "t"), "never"])
    events: list[al.AgentEvent] = []
    config = al.AgentLoopConfig(model=MODEL, propagate=(EngineError,), tool_execution=execution, **hooks)  # type: ignore[arg-type]
    with anyio.fail_after(5), pytest.raises(EngineError, match=f"from {where}"):
        await al.run_agent_loop(
            [al.UserMessage(content="go")], al.AgentContext(tools=[tool]), config, events.append, None, model
        )
    assert len(model.calls) == 1
    assert not any(isinstance(e, al.ToolExecutionEnd) and e.is_error for e in events)


async def test_other_exceptions_still_become_error_results(anyio_backend: object) -> None:
    async def fail(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:  # noqa: ASYNC124 - an async tool, as users write them
        raise ValueError("an ordinary failure")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=fail)
    events = await run([tool], ScriptedModel([calls("t"), "done"]), propagate=(EngineError,))
    assert ends(events) == [("c1", "an ordinary failure", True)]


async def test_the_clock_stamps_the_messages_the_loop_makes(anyio_backend: object) -> None:
    log: list[str] = []
    signal = al.AbortSignal()
    events = await run([sleeper("t", 0, log)], ScriptedModel([calls("t"), "done"]), clock=lambda: 1_000)
    assert [m.timestamp for m in tool_results(events)] == [1_000]
    signal.abort()
    aborted: list[al.AgentEvent] = []
    await al.run_agent_loop(
        [al.UserMessage(content="go")],
        al.AgentContext(),
        al.AgentLoopConfig(model=MODEL, clock=lambda: 2_000),
        aborted.append,
        signal,
        lambda model, context, options: _silent(),
    )
    assert last_assistant(aborted).stop_reason == "aborted"
    assert last_assistant(aborted).timestamp == 2_000


async def _silent() -> Any:
    await anyio.sleep_forever()
    yield  # pragma: no cover


def test_bad_options_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        al.AgentTool(name="t", description="", parameters={}, execute=_silent, timeout=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrency must be a positive int"):
        al.AgentTool(name="t", description="", parameters={}, execute=_silent, max_concurrency=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_parallel_tool_calls must be a positive int"):
        al.AgentLoopConfig(model=MODEL, max_parallel_tool_calls=0)
    with pytest.raises(TypeError, match="propagate must be a tuple of exception classes"):
        al.AgentLoopConfig(model=MODEL, propagate=(int,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clock must be callable"):
        al.AgentLoopConfig(model=MODEL, clock=5)  # type: ignore[arg-type]


async def test_a_sync_tool_runs_in_a_worker_thread(anyio_backend: object) -> None:
    threads: list[str] = []

    @al.tool
    def blocking(seconds: float, on_update: Any) -> str:
        """Block the thread it runs in."""
        threads.append(threading.current_thread().name)
        on_update(al.AgentToolResult.from_text("half way"))
        time.sleep(seconds)
        return f"slept {seconds}"

    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "blocking", {"seconds": 0.01})]), "done"])
    events = await run([blocking], model)
    assert threads and threads[0] != threading.current_thread().name
    assert ends(events) == [("c1", "slept 0.01", False)]
    updates = [e for e in events if isinstance(e, al.ToolExecutionUpdate)]
    assert [text(u.partial_result.content[0]) for u in updates] == ["half way"]


async def test_an_aborted_sync_tool_is_answered_after_the_grace_period(anyio_backend: object) -> None:
    release = threading.Event()

    @al.tool
    def stuck() -> str:
        """Ignore the abort."""
        release.wait(5)
        return "too late"

    signal = al.AbortSignal()
    events: list[al.AgentEvent] = []

    async def abort_soon() -> None:
        await anyio.sleep(0.05)
        signal.abort()

    model = ScriptedModel([calls("stuck"), "never"])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.05)
    try:
        with anyio.fail_after(3):
            async with anyio.create_task_group() as tg:
                tg.start_soon(abort_soon)
                await al.run_agent_loop(
                    [al.UserMessage(content="go")], al.AgentContext(tools=[stuck]), config, events.append, signal, model
                )
    finally:
        release.set()
    assert ends(events) == [("c1", "Operation aborted", True)]


@pytest.mark.parametrize("form", ["run_agent_loop", "async with", "bare"])
async def test_observe_sees_every_event_in_the_loop_s_task(anyio_backend: object, form: str) -> None:
    observed: list[str] = []
    delivered: list[str] = []
    log: list[str] = []
    config = al.AgentLoopConfig(model=MODEL, observe=lambda event: observed.append(event.type))
    context = al.AgentContext(tools=[sleeper("t", 0, log)])
    model = ScriptedModel([calls("t", "t"), "done"])
    prompts = [al.UserMessage(content="go")]
    with anyio.fail_after(5):
        if form == "run_agent_loop":
            await al.run_agent_loop(prompts, context, config, lambda e: delivered.append(e.type), None, model)
        elif form == "async with":
            async with al.agent_loop(prompts, context, config, None, model) as events:
                async for event in events:
                    delivered.append(event.type)
        else:
            async for event in al.agent_loop(prompts, context, config, None, model):
                assert observed[-1] == event.type  # observed just before it is yielded
                delivered.append(event.type)
    assert observed == delivered
    assert observed[0] == "agent_start" and observed[-1] == "agent_end"
    assert observed.count("tool_execution_end") == 2


def test_observe_must_be_callable() -> None:
    with pytest.raises(TypeError, match="observe must be callable"):
        al.AgentLoopConfig(model=MODEL, observe="print")  # type: ignore[arg-type]


async def test_the_agent_takes_the_same_options(anyio_backend: object) -> None:
    seen_options: list[al.StreamOptions] = []
    wrapped: list[str] = []
    observed: list[str] = []
    script = ScriptedModel([calls("t"), "done"])

    def stream_fn(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        seen_options.append(options)
        return script(model, context, options)

    async def wrap(invocation: al.ToolInvocation, proceed: Any) -> object:
        wrapped.append(invocation.tool_call.id)
        return await proceed()

    agent = al.Agent(
        model=MODEL,
        tools=[sleeper("t", 0, [])],
        stream_fn=stream_fn,
        temperature=0.25,
        headers={"x-team": "a"},
        metadata={"user": "u1"},
        api_key="sk-test",
        wrap_tool_call=wrap,
        observe=lambda event: observed.append(event.type),
        clock=lambda: 7,
        max_parallel_tool_calls=1,
    )
    with anyio.fail_after(5):
        await agent.prompt("go")
    options = seen_options[0]
    assert (options.temperature, options.headers, options.metadata, options.api_key) == (
        0.25,
        {"x-team": "a"},
        {"user": "u1"},
        "sk-test",
    )
    assert wrapped == ["c1"]
    assert observed[0] == "agent_start" and observed[-1] == "agent_end"
    assert [m.timestamp for m in agent.state.messages if isinstance(m, al.ToolResultMessage)] == [7]


def test_the_agent_names_a_bad_option() -> None:
    with pytest.raises(ValueError, match=r"^max_parallel_tool_calls must be a positive int"):
        al.Agent(max_parallel_tool_calls=0)
    with pytest.raises(TypeError, match=r"^observe must be callable"):
        al.Agent(observe=3)
