"""run_agent_loop: the algorithm of PROFILE.md beyond what the conformance traces pin down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any, Literal

import anyio
import pytest

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events

from .support import WaitsAfterDone, as_assistant, last_assistant, text

MODEL = al.Model(id="m", api="faux", provider="faux")


def user(text: str) -> al.UserMessage:
    return al.UserMessage(content=text)


def echo_tool(log: list[str] | None = None, **kwargs: Any) -> al.AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        if log is not None:
            log.append(f"{tool_call_id}:{params.get('value')}")
        return al.AgentToolResult.from_text(f"echo {params.get('value')}", details={"id": tool_call_id})

    schema = {"type": "object", "properties": {"value": {"type": "string"}}}
    return al.AgentTool(name="echo", description="Echo", parameters=schema, execute=execute, **kwargs)


async def run(
    prompts: list[al.AgentMessage],
    model: Any,
    tools: list[al.AgentTool] | None = None,
    context_messages: list[al.AgentMessage] | None = None,
    **config: Any,
) -> tuple[list[al.AgentMessage], list[al.AgentEvent]]:
    events: list[al.AgentEvent] = []
    context = al.AgentContext(system_prompt="sys", messages=context_messages or [], tools=tools or [])
    with anyio.fail_after(5):
        messages = await al.run_agent_loop(
            prompts, context, al.AgentLoopConfig(model=MODEL, **config), events.append, None, model
        )
    check_events(events)
    return messages, events


def types(events: list[al.AgentEvent]) -> list[str]:
    return [e.type for e in events]


async def test_steering_from_the_first_poll_joins_the_first_turn(anyio_backend: object) -> None:
    queue: list[al.AgentMessage] = [user("also this")]
    polls: list[str] = []

    def steering() -> list[al.AgentMessage]:
        polls.append("S")
        return [queue.pop(0)] if queue else []

    def follow_up() -> list[al.AgentMessage]:
        polls.append("F")
        return []

    messages, events = await run(
        [user("go")], ScriptedModel(["ok"]), get_steering_messages=steering, get_follow_up_messages=follow_up
    )
    assert [m.role for m in messages] == ["user", "user", "assistant"]
    assert types(events).count("turn_start") == 1
    assert polls == ["S", "S", "F"]


async def test_follow_ups_run_one_turn_each_and_polls_alternate(anyio_backend: object) -> None:
    follow_ups: list[al.AgentMessage] = [user("f1"), user("f2")]
    polls: list[str] = []

    async def steering() -> list[al.AgentMessage]:
        polls.append("S")
        return []

    async def follow_up() -> list[al.AgentMessage]:
        polls.append("F")
        return [follow_ups.pop(0)] if follow_ups else []

    model = ScriptedModel(["a", "b", "c"])
    messages, events = await run([user("go")], model, get_steering_messages=steering, get_follow_up_messages=follow_up)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert types(events).count("turn_start") == 3
    assert "".join(polls) == "SSFSFSF"  # as the reference: a pending follow-up skips the pre-turn poll


async def test_transform_then_convert_per_call_and_api_key_per_call(anyio_backend: object) -> None:
    seen: list[str] = []
    keys = iter(["k1", "", None])

    def transform(messages: Any, signal: al.AbortSignal) -> Any:
        seen.append(f"transform {len(messages)}")
        return messages[-2:]

    async def convert(messages: Any) -> Any:
        seen.append(f"convert {len(messages)}")
        return [m for m in messages if m.role != "note"]

    async def get_key(provider: str) -> str | None:
        seen.append(f"key {provider}")
        return next(keys)

    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "echo", {"value": "x"})]), "done"])
    options: list[al.StreamOptions] = []

    def stream(m: al.Model, context: al.Context, opts: al.StreamOptions) -> Any:
        options.append(opts)
        return model(m, context, opts)

    note = al.CustomMessage(role="note", data={"text": "n"})
    await run(
        [user("go")],
        stream,
        [echo_tool()],
        context_messages=[note],
        transform_context=transform,
        convert_to_llm=convert,
        get_api_key=get_key,
        api_key="fallback",
    )
    assert seen == ["transform 2", "convert 2", "key faux", "transform 4", "convert 2", "key faux"]
    assert [o.api_key for o in options] == ["k1", "fallback"]
    assert "fallback" not in repr(options[1]) and "k1" not in repr(options[0])
    assert [len(c.messages) for c in model.calls] == [1, 2]


async def test_prepare_next_turn_replaces_context_model_and_thinking(anyio_backend: object) -> None:
    other = al.Model(id="other", api="faux", provider="faux")
    turns: list[al.TurnContext] = []

    def prepare(turn: al.TurnContext) -> al.NextTurn | None:
        turns.append(turn)
        if len(turns) == 1:
            return al.NextTurn(
                context=al.AgentContext(
                    system_prompt="second prompt", messages=turn.context.messages, tools=turn.context.tools
                ),
                model=other,
                thinking_level="high",
                messages=[user("injected")],
            )
        return None

    seen: list[tuple[str, str, Any]] = []
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "echo", {"value": "x"})]), "done"])

    def stream(m: al.Model, context: al.Context, opts: al.StreamOptions) -> Any:
        seen.append((m.id, context.system_prompt, opts.reasoning))
        return model(m, context, opts)

    messages, _ = await run([user("go")], stream, [echo_tool()], prepare_next_turn=prepare, reasoning="low")
    assert seen == [("m", "sys", "low"), ("other", "second prompt", "high")]
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert turns[0].tool_results[0].tool_call_id == "c1"
    assert [m.role for m in turns[0].context.messages] == ["user", "assistant", "toolResult"]


async def test_should_stop_after_turn_ends_the_run_without_polling(anyio_backend: object) -> None:
    polls: list[str] = []

    def steering() -> list[al.AgentMessage]:
        polls.append("S")
        return []

    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "echo", {"value": "x"})]), "never"])
    messages, events = await run(
        [user("go")], model, [echo_tool()], should_stop_after_turn=lambda turn: True, get_steering_messages=steering
    )
    assert types(events)[-2:] == ["turn_end", "agent_end"]
    assert len(model.calls) == 1
    assert polls == ["S"]  # only the poll before the first call
    assert [m.role for m in messages] == ["user", "assistant", "toolResult"]


async def test_max_turns_ends_the_run_after_the_turn_that_reaches_it(anyio_backend: object) -> None:
    calls = [Response(content=[ScriptedToolCall(f"c{i}", "echo", {"value": "x"})]) for i in range(5)]
    model = ScriptedModel(calls)
    messages, events = await run([user("go")], model, [echo_tool()], max_turns=2)
    assert len(model.calls) == 2
    assert types(events).count("turn_end") == 2
    assert messages[-1].role == "toolResult"


async def test_sequential_execution_runs_one_call_at_a_time(anyio_backend: object) -> None:
    order: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        order.append(f"start {tool_call_id}")
        await anyio.sleep(0.02 if tool_call_id == "c1" else 0)
        order.append(f"end {tool_call_id}")
        return al.AgentToolResult.from_text("ok")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "t", {}), ScriptedToolCall("c2", "t", {})]), "ok"])
    _, events = await run([user("go")], model, [tool], tool_execution="sequential")
    assert order == ["start c1", "end c1", "start c2", "end c2"]
    tool_events = [
        (e.type, getattr(e, "tool_call_id", getattr(getattr(e, "message", None), "tool_call_id", None))) for e in events
    ]
    assert tool_events[tool_events.index(("tool_execution_start", "c1")) :][:8] == [
        ("tool_execution_start", "c1"),
        ("tool_execution_end", "c1"),
        ("message_start", "c1"),
        ("message_end", "c1"),
        ("tool_execution_start", "c2"),
        ("tool_execution_end", "c2"),
        ("message_start", "c2"),
        ("message_end", "c2"),
    ]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
@pytest.mark.parametrize("calls", [1, 2])
@pytest.mark.parametrize("abort", [False, True])
async def test_prepare_arguments_runs_before_validation_and_an_abort_during_it_stops_the_call(
    anyio_backend: object, mode: Literal["parallel", "sequential"], calls: int, abort: bool
) -> None:
    signal = al.AbortSignal()
    executed: list[Any] = []

    async def prepare(arguments: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        if arguments["value"] == "abort":
            signal.abort()  # as another task could, while the preparation waits
        return {"value": str(arguments["value"])}

    async def execute(tool_call_id: str, params: Any, sig: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        executed.append(params)
        return al.AgentToolResult.from_text(f"got {params['value']}")

    schema = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
    tool = al.AgentTool(
        name="t",
        description="",
        parameters=schema,
        execute=execute,
        prepare_arguments=prepare,  # type: ignore[arg-type]  # the loop awaits an async one; the annotation says sync
    )
    values: list[Any] = [5] * calls
    if abort:
        values[-1] = "abort"
    model = ScriptedModel(
        [Response(content=[ScriptedToolCall(f"c{i}", "t", {"value": v}) for i, v in enumerate(values)]), "done"]
    )
    events: list[al.AgentEvent] = []
    config = al.AgentLoopConfig(model=MODEL, tool_execution=mode)
    with anyio.fail_after(5):
        messages = await al.run_agent_loop(
            [user("go")], al.AgentContext(tools=[tool]), config, events.append, signal, model
        )
    check_events(events)
    texts = [text(m.content[0]) for m in messages if isinstance(m, al.ToolResultMessage)]
    if not abort:
        assert executed == [{"value": "5"}] * calls  # the integer, made a string before validation
        assert texts == ["got 5"] * calls
    elif mode == "parallel":  # the batch re-checks before executing: answered like a call never started
        assert {"value": "abort"} not in executed
        assert texts[-1] == "Operation aborted"
    else:  # the reference checks before preparing and after before_tool_call only: it executes, aborted
        assert executed[-1] == {"value": "abort"}
        assert texts[-1] == "got abort"


async def test_parallel_calls_overlap_and_results_keep_source_order(anyio_backend: object) -> None:
    # The three calls run together; c1 returns once c2 and c3 are finalized (their after_tool_call ran).
    active = [0]
    peak = [0]
    all_began = anyio.Event()
    others_finalized = anyio.Event()
    finalized: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        if active[0] == 3:
            all_began.set()
        await all_began.wait()
        if tool_call_id == "c1":
            await others_finalized.wait()
        active[0] -= 1
        return al.AgentToolResult.from_text(tool_call_id)

    async def after(context: al.AfterToolCallContext, signal: al.AbortSignal) -> None:  # noqa: ASYNC124 - an async hook, as users write them
        finalized.append(context.tool_call.id)
        if len(finalized) == 2:
            others_finalized.set()

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    calls = [ScriptedToolCall(f"c{i}", "t", {}) for i in (1, 2, 3)]
    model = ScriptedModel([Response(content=calls), "ok"])
    messages, events = await run([user("go")], model, [tool], after_tool_call=after)
    assert peak[0] == 3
    ends = [e.tool_call_id for e in events if isinstance(e, al.ToolExecutionEnd)]
    assert ends[-1] == "c1"  # completion order
    assert [m.tool_call_id for m in messages if isinstance(m, al.ToolResultMessage)] == ["c1", "c2", "c3"]


def same_time_tool(log: list[str]) -> al.AgentTool:
    """Every call starts its 10 ms sleep in its first step, so the calls finish (nearly) together."""

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        log.append(f"+{tool_call_id}")
        await anyio.sleep(0.01)
        return al.AgentToolResult.from_text(tool_call_id)

    return al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)


def many_calls(count: int) -> ScriptedModel:
    return ScriptedModel([Response(content=[ScriptedToolCall(f"c{i:02}", "t", {}) for i in range(count)]), "ok"])


async def test_many_parallel_calls_begin_in_source_order(anyio_backend: object) -> None:
    # Trio runs the tasks of a scheduler pass forwards or backwards (shuffled, once Hypothesis is
    # imported): several runs make every case happen. Calls begin in source order whatever the
    # scheduler does; each call is finalized once, and the results keep the source order.
    ids = [f"c{i:02}" for i in range(40)]
    for _ in range(6):
        log: list[str] = []
        messages, events = await run([user("go")], many_calls(40), [same_time_tool(log)])
        assert log == [f"+{i}" for i in ids]
        assert sorted(e.tool_call_id for e in events if isinstance(e, al.ToolExecutionEnd)) == ids
        assert [m.tool_call_id for m in messages if isinstance(m, al.ToolResultMessage)] == ids


async def test_parallel_ends_reach_a_consumer_that_makes_the_loop_wait(anyio_backend: object) -> None:
    # With a rendezvous stream every `tool_execution_end` waits for the consumer: the calls are
    # finalized one after the other, and the slow consumer sees every event once, ends before results.
    ids = [f"c{i:02}" for i in range(20)]
    context = al.AgentContext(tools=[same_time_tool([])])
    config = al.AgentLoopConfig(model=MODEL)
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        async with al.agent_loop([user("go")], context, config, None, many_calls(20), max_buffer_size=0) as events:
            async for event in events:
                seen.append(event)
                if isinstance(event, al.ToolExecutionEnd):
                    await anyio.sleep(0.001)
    check_events(seen)
    assert sorted(e.tool_call_id for e in seen if isinstance(e, al.ToolExecutionEnd)) == ids
    message_ends = [(i, e.message) for i, e in enumerate(seen) if isinstance(e, al.MessageEnd)]
    results = [(i, m) for i, m in message_ends if isinstance(m, al.ToolResultMessage)]
    assert [m.tool_call_id for _, m in results] == ids
    assert max(i for i, e in enumerate(seen) if isinstance(e, al.ToolExecutionEnd)) < results[0][0]


async def test_parallel_ends_reach_a_slow_listener(anyio_backend: object) -> None:
    ids = [f"c{i:02}" for i in range(20)]
    agent = al.Agent(model=MODEL, tools=[same_time_tool([])], stream_fn=many_calls(20))
    received: list[str] = []
    processed: list[str] = []
    committed: list[bool] = []

    async def listener(event: al.AgentEvent, signal: al.AbortSignal) -> None:
        if isinstance(event, al.ToolExecutionEnd):
            received.append(event.tool_call_id)
            # The listener sees the state this event made, not one a later end already changed.
            committed.append(agent.state.pending_tool_calls == set(ids) - set(received))
            await anyio.sleep(0.001)
            processed.append(event.tool_call_id)

    agent.subscribe(listener)
    with anyio.fail_after(5):
        await agent.prompt("go")
    assert sorted(received) == ids
    assert sorted(processed) == ids
    assert committed == [True] * len(ids)
    assert [m.tool_call_id for m in agent.state.messages if isinstance(m, al.ToolResultMessage)] == ids


async def test_barrier_tool_runs_alone_between_parallel_calls(anyio_backend: object) -> None:
    log: list[str] = []

    def make(name: str, mode: Any) -> al.AgentTool:
        async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
            log.append(f"+{tool_call_id}")
            await anyio.sleep(0.01)
            log.append(f"-{tool_call_id}")
            return al.AgentToolResult.from_text("ok")

        return al.AgentTool(
            name=name, description="", parameters={"type": "object"}, execute=execute, execution_mode=mode
        )

    calls = [
        ScriptedToolCall("a1", "work", {}),
        ScriptedToolCall("b", "lock", {}),
        ScriptedToolCall("a2", "work", {}),
        ScriptedToolCall("a3", "work", {}),
    ]
    await run(
        [user("go")], ScriptedModel([Response(content=calls), "ok"]), [make("work", None), make("lock", "sequential")]
    )
    assert log[:4] == ["+a1", "-a1", "+b", "-b"]
    assert sorted(log[4:6]) == ["+a2", "+a3"]


async def test_progress_updates_and_late_updates(anyio_backend: object) -> None:
    saved: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        await on_update(al.AgentToolResult.from_text("25%"))
        saved.append(on_update)
        return al.AgentToolResult.from_text("done")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    _, events = await run(
        [user("go")], ScriptedModel([Response(content=[ScriptedToolCall("c1", "t", {})]), "ok"]), [tool]
    )
    updates = [e for e in events if isinstance(e, al.ToolExecutionUpdate)]
    assert [text(u.partial_result.content[0]) for u in updates] == ["25%"]
    count = len(events)
    await saved[0](al.AgentToolResult.from_text("late"))
    assert len(events) == count  # progress after the tool finished is ignored


async def test_terminate_only_when_every_result_agrees(anyio_backend: object) -> None:
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        return al.AgentToolResult(content=(al.TextContent("x"),), terminate=params.get("stop") == "yes")

    schema = {"type": "object", "properties": {"stop": {"type": "string"}}}
    tool = al.AgentTool(name="t", description="", parameters=schema, execute=execute)
    both = Response(
        content=[ScriptedToolCall("c1", "t", {"stop": "yes"}), ScriptedToolCall("c2", "t", {"stop": "yes"})]
    )
    model = ScriptedModel([both, "never"])
    await run([user("go")], model, [tool])
    assert len(model.calls) == 1
    mixed = Response(
        content=[ScriptedToolCall("c1", "t", {"stop": "yes"}), ScriptedToolCall("c2", "t", {"stop": "no"})]
    )
    model = ScriptedModel([mixed, "again"])
    await run([user("go")], model, [tool])
    assert len(model.calls) == 2


async def test_hooks_returning_nonsense_and_tools_returning_the_wrong_shape_become_error_results(
    anyio_backend: object,
) -> None:
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> Any:
        return 42 if tool_call_id == "c1" else "plain string"

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    calls = Response(
        content=[ScriptedToolCall("c1", "t", {}), ScriptedToolCall("c2", "t", {}), ScriptedToolCall("c3", "t", {})]
    )

    def before(ctx: al.BeforeToolCallContext, signal: al.AbortSignal) -> Any:
        return {"block": True} if ctx.tool_call.id == "c3" else None

    def after(ctx: al.AfterToolCallContext, signal: al.AbortSignal) -> Any:
        return "nonsense" if ctx.tool_call.id == "c2" else None

    messages, _ = await run(
        [user("go")], ScriptedModel([calls, "ok"]), [tool], before_tool_call=before, after_tool_call=after
    )
    results = {m.tool_call_id: m for m in messages if isinstance(m, al.ToolResultMessage)}
    assert results["c1"].is_error and "returned int, expected an AgentToolResult" in text(results["c1"].content[0])
    assert results["c2"].is_error and "after_tool_call must return" in text(results["c2"].content[0])
    assert results["c3"].is_error and "before_tool_call must return" in text(results["c3"].content[0])


async def test_emit_raising_propagates_and_cancels_running_tools(anyio_backend: object) -> None:
    log: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        try:
            await anyio.sleep(0.01 if tool_call_id == "c1" else 10)
        except anyio.get_cancelled_exc_class():
            log.append(f"cancelled {tool_call_id}")
            raise
        return al.AgentToolResult.from_text("ok")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)

    def emit(event: al.AgentEvent) -> None:
        if isinstance(event, al.ToolExecutionEnd):
            raise LookupError("sink broke")

    calls = Response(content=[ScriptedToolCall("c1", "t", {}), ScriptedToolCall("c2", "t", {})])
    with anyio.fail_after(2), pytest.raises(LookupError, match="sink broke"):
        await al.run_agent_loop(
            [user("go")],
            al.AgentContext(tools=[tool]),
            al.AgentLoopConfig(model=MODEL),
            emit,
            None,
            ScriptedModel([calls]),
        )
    assert log == ["cancelled c2"]


async def test_stream_sources_context_managers_coroutines_and_protocol_errors(anyio_backend: object) -> None:
    entered: list[str] = []
    scripted = ScriptedModel(["one", "two", "three"])

    @asynccontextmanager
    async def as_context(m: al.Model, c: al.Context, o: al.StreamOptions) -> AsyncIterator[Any]:
        entered.append("enter")
        try:
            yield scripted(m, c, o)
        finally:
            entered.append("exit")

    messages, _ = await run([user("go")], as_context)
    assert entered == ["enter", "exit"] and as_assistant(messages[-1]).text == "one"

    async def as_coroutine(m: al.Model, c: al.Context, o: al.StreamOptions) -> Any:
        return scripted(m, c, o)

    messages, _ = await run([user("go")], as_coroutine)
    assert as_assistant(messages[-1]).text == "two"

    async def no_terminal(m: al.Model, c: al.Context, o: al.StreamOptions) -> AsyncIterator[Any]:
        builder = al.AssistantMessageBuilder(api="faux")
        yield builder.start()
        yield builder.text_start()

    messages, _ = await run([user("go")], no_terminal)
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "error"
    assert "without a done or error event" in (last.error_message or "")

    async def unknown(m: al.Model, c: al.Context, o: al.StreamOptions) -> AsyncIterator[Any]:
        yield "nonsense"

    with pytest.raises(TypeError, match="unknown event: 'nonsense'"):
        await run([user("go")], unknown)

    with pytest.raises(TypeError, match="must return an async iterator"):
        await run([user("go")], lambda m, c, o: 42)


@pytest.mark.parametrize("shape", ["generator", "iterator", "awaitable", "context manager"])
@pytest.mark.parametrize("form", ["async with", "bare"])
async def test_a_stream_that_waits_after_its_terminal_event_is_closed_not_read(
    anyio_backend: object, shape: str, form: str
) -> None:
    # The loop reads a model stream up to its terminal event and closes it there (as the
    # reference's `break` out of `for await` does), whatever its shape: one that would wait for
    # more after it (a queue nobody fills) never holds the run.
    queue = WaitsAfterDone()

    def events() -> WaitsAfterDone:
        return queue

    async def generator() -> AsyncIterator[Any]:
        try:
            while True:
                yield await queue.__anext__()
        finally:
            await queue.aclose()

    @asynccontextmanager
    async def as_context() -> AsyncIterator[Any]:
        yield events()

    async def as_awaitable() -> Any:
        return events()

    shapes = {"generator": generator, "iterator": events, "awaitable": as_awaitable, "context manager": as_context}

    def stream_fn(m: al.Model, c: al.Context, o: al.StreamOptions) -> Any:
        return shapes[shape]()

    loop = al.agent_loop([user("go")], al.AgentContext(), al.AgentLoopConfig(model=MODEL), None, stream_fn)
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        if form == "bare":
            async with aclosing(loop) as bare:
                seen = [event async for event in bare]
        else:
            async with loop as stream:
                seen = [event async for event in stream]
    check_events(seen)
    assert last_assistant(seen).text == "hi" and last_assistant(seen).stop_reason == "stop"
    assert queue.closed


async def test_length_stop_fails_tool_calls_without_running_them(anyio_backend: object) -> None:
    log: list[str] = []
    cut = Response(content=[ScriptedToolCall("c1", "echo", {"value": "x"})], stop_reason="length")
    messages, _ = await run([user("go")], ScriptedModel([cut, "retry"]), [echo_tool(log)])
    assert log == []
    result = messages[2]
    assert isinstance(result, al.ToolResultMessage) and result.is_error
    assert "output token limit" in text(result.content[0])


async def test_an_aborted_signal_answers_the_next_call_at_once(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    signal.abort()
    events: list[al.AgentEvent] = []
    with anyio.fail_after(2):
        messages = await al.run_agent_loop(
            [user("go")],
            al.AgentContext(),
            al.AgentLoopConfig(model=MODEL),
            events.append,
            signal,
            ScriptedModel(["x"]),
        )
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.stop_reason == "aborted"


async def test_default_stream_function_dispatches_on_the_api(anyio_backend: object) -> None:
    context = al.AgentContext()
    model = al.Model(id="m", api="nowhere", provider="p")
    with anyio.fail_after(2):
        messages = await al.run_agent_loop([user("go")], context, al.AgentLoopConfig(model=model), lambda e: None)
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage) and last.error_message is not None
    assert last.error_message.startswith("No API provider registered for api: nowhere")
    remove = al.register_api_provider("nowhere", ScriptedModel(["registered"]))
    try:
        messages = await al.run_agent_loop([user("go")], context, al.AgentLoopConfig(model=model), lambda e: None)
        assert as_assistant(messages[-1]).text == "registered"
    finally:
        remove()


async def test_continue_shares_nothing_with_the_callers_list(anyio_backend: object) -> None:
    history: list[al.AgentMessage] = [user("hi")]
    context = al.AgentContext(messages=history)
    events: list[al.AgentEvent] = []
    messages = await al.run_agent_loop_continue(
        context, al.AgentLoopConfig(model=MODEL), events.append, None, ScriptedModel(["x"])
    )
    assert [m.role for m in messages] == ["assistant"]
    assert len(history) == 1
    with pytest.raises(al.InvalidContextError):
        await al.run_agent_loop_continue(al.AgentContext(), al.AgentLoopConfig(model=MODEL), events.append)


def test_config_rejects_bad_values() -> None:
    with pytest.raises(TypeError, match=r"config\.model"):
        al.AgentLoopConfig(model="gpt")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_execution"):
        al.AgentLoopConfig(model=MODEL, tool_execution="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_turns"):
        al.AgentLoopConfig(model=MODEL, max_turns=0)
    with pytest.raises(ValueError, match="tool_abort_grace"):
        al.AgentLoopConfig(model=MODEL, tool_abort_grace=-1)
    with pytest.raises(ValueError, match="reasoning"):
        al.AgentLoopConfig(model=MODEL, reasoning="ultra")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="before_tool_call must be callable"):
        al.AgentLoopConfig(model=MODEL, before_tool_call="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "pattern"),
    [
        ({"max_tokens": "many"}, TypeError, "config.max_tokens must be a positive int or None, got 'many'"),
        ({"max_tokens": True}, TypeError, "config.max_tokens"),
        ({"max_tokens": -5}, ValueError, "config.max_tokens must be a positive int"),
        ({"max_tokens": 0}, ValueError, "config.max_tokens"),
        ({"temperature": "hot"}, TypeError, "config.temperature must be a finite number or None"),
        ({"temperature": float("nan")}, TypeError, "config.temperature"),
        ({"api_key": 5}, TypeError, "config.api_key must be a str or None, got int"),
        ({"session_id": 5}, TypeError, "config.session_id must be a str or None, got int"),
        ({"thinking_budgets": 5}, TypeError, "config.thinking_budgets must be a mapping"),
        ({"thinking_budgets": {"hgh": 100}}, ValueError, "config.thinking_budgets keys must be in"),
        ({"thinking_budgets": {"low": "100"}}, ValueError, r"config.thinking_budgets\['low'\] must be an int >= 0"),
        ({"headers": {"a": 1}}, TypeError, "config.headers must map str to str, got 'a': 1"),
        ({"headers": ["a"]}, TypeError, "config.headers must be a mapping of str to str"),
        ({"metadata": 5}, TypeError, "config.metadata must be a mapping or None, got int"),
        ({"max_retry_delay": -1}, ValueError, "config.max_retry_delay must be a finite number of seconds >= 0"),
        ({"max_retry_delay": float("inf")}, TypeError, "config.max_retry_delay"),
        ({"max_retry_delay": "1"}, TypeError, "config.max_retry_delay"),
        ({"tool_abort_grace": float("nan")}, ValueError, "config.tool_abort_grace"),
        ({"max_turns": 1.5}, ValueError, "config.max_turns"),
    ],
)
def test_config_names_each_bad_option(options: dict[str, Any], error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        al.AgentLoopConfig(model=MODEL, **options)


def test_config_accepts_every_option_at_its_edges() -> None:
    config = al.AgentLoopConfig(
        model=MODEL,
        api_key="k",
        session_id="s",
        temperature=0,
        max_tokens=1,
        thinking_budgets={"low": 0, "high": 10_000},
        headers={"x-a": "b"},
        metadata={"user": 1},
        max_retry_delay=0,
        tool_abort_grace=0,
    )
    assert config.max_tokens == 1 and config.temperature == 0


def test_context_names_a_field_of_the_wrong_shape() -> None:
    with pytest.raises(TypeError, match=r"context.tools must be a sequence of AgentTool, got int"):
        al.agent_loop([], al.AgentContext(tools=5), al.AgentLoopConfig(model=MODEL))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"context.system_prompt must be a str, got int"):
        al.AgentContext(system_prompt=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"context.messages must be a sequence of messages, got str"):
        al.AgentContext(messages="hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"context.tools\[0\] must be an AgentTool"):
        al.agent_loop([], al.AgentContext(tools=["echo"]), al.AgentLoopConfig(model=MODEL))  # type: ignore[list-item]


def test_hook_results_name_a_field_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match=r"BeforeToolCallResult.block must be a bool, got str"):
        al.BeforeToolCallResult(block="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"BeforeToolCallResult.reason must be a str or None"):
        al.BeforeToolCallResult(block=True, reason=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"BeforeToolCallResult.terminate must be a bool or None"):
        al.BeforeToolCallResult(terminate=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AfterToolCallResult.content must be a sequence"):
        al.AfterToolCallResult(content="text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AfterToolCallResult.is_error must be a bool or None, got str"):
        al.AfterToolCallResult(is_error="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AfterToolCallResult.terminate must be a bool or None"):
        al.AfterToolCallResult(terminate=0)  # type: ignore[arg-type]


async def test_a_hook_building_a_bad_result_fails_only_its_call(anyio_backend: object) -> None:
    def before(ctx: al.BeforeToolCallContext, signal: al.AbortSignal) -> al.BeforeToolCallResult | None:
        if ctx.tool_call.id == "c1":
            return al.BeforeToolCallResult(block="yes")  # type: ignore[arg-type]
        return None

    def after(ctx: al.AfterToolCallContext, signal: al.AbortSignal) -> al.AfterToolCallResult:
        return al.AfterToolCallResult(content=["plain"])  # type: ignore[list-item]

    calls = Response(content=[ScriptedToolCall("c1", "echo", {"value": "a"}), ScriptedToolCall("c2", "echo", {})])
    messages, _ = await run(
        [user("go")], ScriptedModel([calls, "ok"]), [echo_tool()], before_tool_call=before, after_tool_call=after
    )
    results = {m.tool_call_id: m for m in messages if isinstance(m, al.ToolResultMessage)}
    assert results["c1"].is_error and "BeforeToolCallResult.block" in text(results["c1"].content[0])
    assert results["c2"].is_error and "AgentToolResult content[0]" in text(results["c2"].content[0])
    assert messages[-1].role == "assistant"


async def test_text_deltas_stream_in_order(anyio_backend: object) -> None:
    chunks = [f"w{i} " for i in range(50)]
    _, events = await run([user("go")], ScriptedModel([Response(content=[ScriptedText(chunks)])]))
    deltas = [
        e.assistant_message_event.delta
        for e in events
        if isinstance(e, al.MessageUpdate) and e.assistant_message_event.type == "text_delta"
    ]
    assert deltas == chunks
    snapshots = [e.message.text for e in events if isinstance(e, al.MessageUpdate)]
    assert snapshots[1] == "w0 " and snapshots[-1] == "".join(chunks)


@pytest.mark.parametrize("sink_kind", ["plain", "async"])
async def test_a_listener_aborting_mid_stream_does_not_wait_for_the_models_next_event(
    anyio_backend: object, sink_kind: str
) -> None:
    # The model ignores the signal and stalls after its first delta; the abort comes from the
    # sink while that delta is delivered. The run must end at once as aborted, not pull (and wait
    # for) one more event from the model.
    closed: list[str] = []

    async def stalling(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        try:
            yield builder.start()
            yield builder.text_start()
            yield builder.text_delta("a")
            await anyio.sleep(30)
            yield builder.text_delta("b")
        finally:
            closed.append("closed")

    signal = al.AbortSignal()
    events: list[al.AgentEvent] = []

    def plain(event: al.AgentEvent) -> None:
        events.append(event)
        if isinstance(event, al.MessageUpdate) and event.assistant_message_event.type == "text_delta":
            signal.abort()

    async def asynchronous(event: al.AgentEvent) -> None:
        plain(event)

    sink = plain if sink_kind == "plain" else asynchronous
    context = al.AgentContext(messages=[user("go")])
    with anyio.fail_after(2):
        await al.run_agent_loop_continue(context, al.AgentLoopConfig(model=MODEL), sink, signal, stalling)
    check_events(events)
    final = last_assistant(events)
    assert final.stop_reason == "aborted" and final.text == "a"
    assert closed == ["closed"]


async def test_an_aborted_stream_keeps_its_own_terminal_message(anyio_backend: object) -> None:
    # A stream that honours the signal ends with its own aborted message (the proxy client says
    # "Request aborted by user"); the loop keeps it, as the reference does, instead of writing its own.
    signal = al.AbortSignal()

    async def honouring(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield builder.start()
        yield builder.text_start()
        yield builder.text_delta("a")
        if options.signal.aborted:  # checked, not awaited: `signal.wait()` is a checkpoint, which the cut cancels
            yield builder.error("aborted", "Request aborted by user")

    events: list[al.AgentEvent] = []

    def sink(event: al.AgentEvent) -> None:
        events.append(event)
        if isinstance(event, al.MessageUpdate) and event.assistant_message_event.type == "text_delta":
            signal.abort()

    context = al.AgentContext(messages=[user("go")])
    with anyio.fail_after(2):
        await al.run_agent_loop_continue(context, al.AgentLoopConfig(model=MODEL), sink, signal, honouring)
    check_events(events)
    final = last_assistant(events)
    assert final.stop_reason == "aborted"
    assert final.error_message == "Request aborted by user"
    assert final.text == "a"


async def test_an_abort_in_a_parallel_batch_cuts_only_what_still_runs(anyio_backend: object) -> None:
    # c0 aborts and returns, c1 ignores the signal (cut after the grace period), c2 stops on the signal
    # and returns its own result, c3 waits for a slot (never begins: "Operation aborted"). The
    # batch is bounded by the grace period, and every call gets exactly one result.
    signal = al.AbortSignal()
    began: list[str] = []
    all_slots_taken = anyio.Event()

    async def execute(tool_call_id: str, params: Any, sig: al.AbortSignal, on_update: Any) -> str:
        began.append(tool_call_id)
        if tool_call_id == "c2":
            all_slots_taken.set()
        if tool_call_id == "c0":
            await all_slots_taken.wait()
            signal.abort()  # the other calls are running or waiting for a slot
            return "quick"
        if tool_call_id == "c1":
            await anyio.sleep(60)  # ignores the signal
        await sig.wait()
        return "stopped"

    tool = al.AgentTool(name="t", description="t", parameters={"type": "object"}, execute=execute)
    model = ScriptedModel([Response(content=[ScriptedToolCall(f"c{i}", "t", {}) for i in range(4)]), "ok"])
    events: list[al.AgentEvent] = []
    context = al.AgentContext(system_prompt="", messages=[], tools=[tool])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.05, max_parallel_tool_calls=3)
    with anyio.fail_after(5):
        start = anyio.current_time()
        await al.run_agent_loop([user("go")], context, config, events.append, signal, model)
        elapsed = anyio.current_time() - start
    check_events(events)
    assert began == ["c0", "c1", "c2"]
    assert elapsed < 2
    ends = {
        e.tool_call_id: (text(e.result.content[0]), e.is_error) for e in events if isinstance(e, al.ToolExecutionEnd)
    }
    assert ends == {
        "c0": ("quick", False),
        "c1": ("Operation aborted", True),
        "c2": ("stopped", False),
        "c3": ("Operation aborted", True),
    }
    results = [e.message for e in events if isinstance(e, al.MessageEnd)]
    assert [m.tool_call_id for m in results if isinstance(m, al.ToolResultMessage)] == ["c0", "c1", "c2", "c3"]


def test_default_convert_to_llm_names_its_parameter_for_a_wrong_type() -> None:
    with pytest.raises(TypeError, match="messages must be a sequence of messages, got str"):
        al.default_convert_to_llm("x")  # type: ignore[arg-type]


async def test_waiting_on_an_aborted_signal_is_a_cancellation_point(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    signal.abort()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await signal.wait()
        pytest.fail("an aborted signal's wait() did not see the cancellation")


async def test_iterating_buffered_events_is_a_cancellation_point(anyio_backend: object) -> None:
    context = al.AgentContext()
    seen: list[str] = []
    with anyio.fail_after(5):
        async with al.agent_loop(
            [user("go")], context, al.AgentLoopConfig(model=MODEL), None, ScriptedModel(["a"])
        ) as events:
            seen.append((await events.__anext__()).type)
            await anyio.sleep(0.01)  # the run has filled the buffer
            with anyio.CancelScope() as scope:
                scope.cancel()
                await events.__anext__()
                pytest.fail("a buffered event was taken inside a cancelled scope")
    assert seen == ["agent_start"]


def test_the_loop_options_are_defined_once_for_the_config_and_the_agent() -> None:
    options = set(al.LoopOptions.__dataclass_fields__)
    assert options <= set(al.AgentLoopConfig.__dataclass_fields__)
    agent = al.Agent(max_turns=3, tool_execution="sequential")
    assert agent.options == al.LoopOptions(max_turns=3, tool_execution="sequential")
    assert agent.options.loop_options()["tool_execution"] == "sequential"
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_turn'"):
        al.Agent(max_turn=3)
