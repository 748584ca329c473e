"""The contract every streaming API keeps: full run, early exit, errors, abort, outer cancellation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio
import anyio.lowlevel
import pytest

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events

from .support import agent_end, as_assistant, last_assistant, logged, text, tool_results

MODEL = al.Model(id="m", api="faux", provider="faux")


class Running:
    """Set once `calls` tool calls have begun: a test aborts "while the tools run" on it, not after a delay."""

    def __init__(self, calls: int) -> None:
        self.left = calls
        self.all_began = anyio.Event()

    def began(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.all_began.set()


def make_sleeper(
    log: list[str], seconds: float = 10.0, honour_abort: bool = False, running: Running | None = None
) -> al.AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        with logged(log, tool_call_id):
            if running is not None:
                running.began()
            if honour_abort:
                with anyio.move_on_after(seconds):
                    await signal.wait()
                if signal.aborted:
                    raise al.ToolError("stopped on abort")
            else:
                await anyio.sleep(seconds)
        return al.AgentToolResult.from_text("slept")

    return sleep_tool(execute)


def sleep_tool(execute: Any) -> al.AgentTool:
    """The tool that `tool_response` calls, doing what `execute` does."""
    return al.AgentTool(
        name="sleep", description="Sleep", parameters={"type": "object", "properties": {}}, execute=execute
    )


def tool_response(*ids: str) -> Response:
    return Response(content=[ScriptedToolCall(i, "sleep", {}) for i in ids])


def loop(model: ScriptedModel, tools: list[al.AgentTool] | None = None, **config: Any) -> al.AgentLoopStream:
    context = al.AgentContext(system_prompt="sys", tools=tools or [])
    return al.agent_loop(
        [al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL, **config), None, model
    )


async def test_full_run(anyio_backend: object) -> None:
    model = ScriptedModel([Response(content=[ScriptedText(["Hel", "lo"])])])
    with anyio.fail_after(5):
        async with loop(model) as events:
            seen = [event async for event in events]
    check_events(seen)
    assert [e.type for e in seen][:4] == ["agent_start", "turn_start", "message_start", "message_end"]
    end = seen[-1]
    assert isinstance(end, al.AgentEnd)
    assert [m.role for m in end.messages] == ["user", "assistant"]
    assert as_assistant(end.messages[-1]).text == "Hello"


async def test_result_drains_and_returns_new_messages(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        async with loop(ScriptedModel(["hi"])) as events:
            messages = await events.result()
    assert [m.role for m in messages] == ["user", "assistant"]


async def test_break_while_a_slow_tool_runs_cancels_it_and_makes_no_further_call(anyio_backend: object) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_response("c1"), "never"])
    with anyio.fail_after(2):
        async with loop(model, [make_sleeper(log)]) as events:
            async for event in events:
                if event.type == "tool_execution_start":
                    break
            # the tool is still running (or about to): leaving the block must cancel it
    assert log in (["start c1", "cancelled c1"], [])
    assert len(model.calls) == 1


async def test_consumer_exception_comes_out_unwrapped(anyio_backend: object) -> None:
    log: list[str] = []
    with anyio.fail_after(2), pytest.raises(KeyError, match="mine"):
        async with loop(ScriptedModel([tool_response("c1")]), [make_sleeper(log)]) as events:
            async for event in events:
                if event.type == "tool_execution_start":
                    raise KeyError("mine")


async def test_callback_exception_comes_out_unwrapped(anyio_backend: object) -> None:
    def convert(messages: Any) -> Any:
        raise ValueError("converter failed")

    seen: list[str] = []
    with anyio.fail_after(2), pytest.raises(ValueError, match="converter failed"):
        async with loop(ScriptedModel(["hi"]), convert_to_llm=convert) as events:
            async for event in events:
                seen.append(event.type)
    assert seen[:4] == ["agent_start", "turn_start", "message_start", "message_end"]


async def test_stream_function_raising_propagates_from_both_apis(anyio_backend: object) -> None:
    boom = RuntimeError("connection reset")
    with anyio.fail_after(2):
        with pytest.raises(RuntimeError, match="connection reset"):
            async with loop(ScriptedModel([Response(raise_on_call=boom)])) as events:
                async for _ in events:
                    pass
        sink: list[al.AgentEvent] = []
        with pytest.raises(RuntimeError, match="connection reset"):
            await al.run_agent_loop(
                [al.UserMessage(content="go")],
                al.AgentContext(),
                al.AgentLoopConfig(model=MODEL),
                sink.append,
                None,
                ScriptedModel([Response(raise_on_call=boom)]),
            )
        assert [e.type for e in sink] == ["agent_start", "turn_start", "message_start", "message_end"]


async def test_abort_during_the_model_stream_ends_with_an_aborted_message(anyio_backend: object) -> None:
    signal = al.AbortSignal()
    model = ScriptedModel([Response(content=[ScriptedText(["a", "b", "c", "d"])], chunk_delay=0.05)])
    context = al.AgentContext()
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(2):
        async with al.agent_loop(
            [al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL), signal, model
        ) as events:
            async for event in events:
                seen.append(event)
                if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
                    signal.abort()
    check_events(seen)
    final = seen[-1]
    assert isinstance(final, al.AgentEnd)
    last = final.messages[-1]
    assert isinstance(last, al.AssistantMessage)
    assert last.stop_reason == "aborted"
    assert last.error_message == "Request was aborted"
    assert last.text == "a"


async def test_abort_during_a_tool_answers_every_call_and_ends(anyio_backend: object) -> None:
    log: list[str] = []
    signal = al.AbortSignal()
    model = ScriptedModel([tool_response("c1", "c2"), "never"])
    running = Running(2)
    context = al.AgentContext(tools=[make_sleeper(log, honour_abort=True, running=running)])

    with anyio.fail_after(2):
        seen = await _collect_aborting(
            al.agent_loop([al.UserMessage(content="go")], context, al.AgentLoopConfig(model=MODEL), signal, model),
            signal,
            running,
        )
    check_events(seen)
    ends = [e for e in seen if isinstance(e, al.ToolExecutionEnd)]
    # both tools wake on the same abort: their completion order is the scheduler's
    assert sorted((e.tool_call_id, e.is_error, text(e.result.content[0])) for e in ends) == [
        ("c1", True, "stopped on abort"),
        ("c2", True, "stopped on abort"),
    ]
    results = [m.tool_call_id for m in tool_results(seen)]
    assert results == ["c1", "c2"]  # transcript in source order
    last = last_assistant(seen)
    assert last.stop_reason == "aborted"
    assert len(model.calls) == 2  # the next call sees the aborted signal and ends at once


async def test_abort_cancels_a_tool_that_ignores_it_after_the_grace_period(anyio_backend: object) -> None:
    log: list[str] = []
    signal = al.AbortSignal()
    model = ScriptedModel([tool_response("c1"), "never"])
    running = Running(1)
    context = al.AgentContext(tools=[make_sleeper(log, seconds=30, running=running)])

    with anyio.fail_after(2):
        seen = await _collect_aborting(
            al.agent_loop(
                [al.UserMessage(content="go")],
                context,
                al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.1),
                signal,
                model,
            ),
            signal,
            running,
        )
    end = next(e for e in seen if isinstance(e, al.ToolExecutionEnd))
    assert end.is_error and text(end.result.content[0]) == "Operation aborted"
    assert log == ["start c1", "cancelled c1"]
    check_events(seen)


@pytest.mark.parametrize(("mode", "calls"), [("parallel", 1), ("sequential", 1), ("parallel", 2)])
async def test_a_tool_that_honours_the_abort_in_time_leaves_no_deadline_behind(
    anyio_backend: object, mode: Literal["parallel", "sequential"], calls: int
) -> None:
    # The grace period ends while the run waits for a slow consumer (buffer 0): it must cut nothing.
    signal = al.AbortSignal()

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        if tool_call_id == ids[-1]:
            signal.abort()  # while the tools run: the grace period starts
        await anyio.sleep(0.01)
        return al.AgentToolResult.from_text("stopped in time")

    tool = sleep_tool(execute)
    ids = [f"c{k}" for k in range(1, calls + 1)]
    model = ScriptedModel([tool_response(*ids), "never"])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.05, tool_execution=mode)
    context = al.AgentContext(tools=[tool])
    seen: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        async with al.agent_loop(
            [al.UserMessage(content="go")], context, config, signal, model, max_buffer_size=0
        ) as events:
            async for event in events:
                seen.append(event)
                if isinstance(event, (al.ToolExecutionEnd, al.TurnEnd)):
                    await anyio.sleep(0.1)  # past the grace period, with the run waiting to send
    check_events(seen)
    ends = [e for e in seen if isinstance(e, al.ToolExecutionEnd)]
    assert [(e.is_error, text(e.result.content[0])) for e in ends] == [(False, "stopped in time")] * calls
    assert isinstance(seen[-1], al.AgentEnd)
    assert last_assistant(seen).stop_reason == "aborted"


async def test_a_tool_running_an_agent_loop_on_the_same_signal_sees_it_cut_at_once(anyio_backend: object) -> None:
    # Two runs' abort scopes in one task, one inside the other: the inner model stream (which
    # ignores the signal) is cut at once, the outer tool is not cut (its grace is 10 s).
    signal = al.AbortSignal()

    async def stuck_model(
        model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        builder = al.AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield builder.start()
        await anyio.sleep(30)
        yield builder.done("stop")

    inner: list[al.AgentMessage] = []
    running = Running(1)

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        running.began()
        config = al.AgentLoopConfig(model=MODEL)
        context = al.AgentContext()
        inner.extend(
            await al.run_agent_loop(
                [al.UserMessage(content="inner")], context, config, lambda e: None, signal, stuck_model
            )
        )
        return al.AgentToolResult.from_text("inner run ended")

    tool = sleep_tool(execute)
    model = ScriptedModel([tool_response("c1"), "never"])

    with anyio.fail_after(5):
        seen = await _collect_aborting(
            al.agent_loop(
                [al.UserMessage(content="go")],
                al.AgentContext(tools=[tool]),
                al.AgentLoopConfig(model=MODEL, tool_abort_grace=10),
                signal,
                model,
            ),
            signal,
            running,
        )
    assert as_assistant(inner[-1]).stop_reason == "aborted"
    end = next(e for e in seen if isinstance(e, al.ToolExecutionEnd))
    assert (end.is_error, text(end.result.content[0])) == (False, "inner run ended")
    check_events(seen)
    assert last_assistant(seen).stop_reason == "aborted"


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_runs_sharing_a_signal_leave_nothing_registered_on_it(
    anyio_backend: object, mode: Literal["parallel", "sequential"]
) -> None:
    # One signal for many runs (a service's shutdown signal): every abort scope a run made, for
    # the model, a tool in the run's task or a tool task of a batch, is gone when the run ends.
    signal = al.AbortSignal()

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        await anyio.lowlevel.checkpoint()
        return al.AgentToolResult.from_text("ok")

    for _ in range(3):
        model = ScriptedModel([tool_response("a"), tool_response("b", "c", "d"), "done"])
        context = al.AgentContext(tools=[sleep_tool(execute)])
        config = al.AgentLoopConfig(model=MODEL, tool_execution=mode)
        with anyio.fail_after(5):
            events = await _collect(al.agent_loop([al.UserMessage(content="go")], context, config, signal, model))
        assert sum(isinstance(e, al.ToolExecutionEnd) for e in events) == 4
        assert signal._callbacks == {}


@pytest.mark.parametrize("after_hook", [False, True])
async def test_the_grace_cut_of_a_parallel_batch_answers_each_call_as_its_tool_ended(
    anyio_backend: object, after_hook: bool
) -> None:
    # One batch, three tools, an abort while they run (grace 0.1 s): "ignore" sleeps on and is
    # cut; "swallow" catches the cut, reports progress and returns a result of its own, which is
    # kept; "honour" returns on the abort. What is left of a cut call (its update, the
    # after_tool_call hook, which awaits) still runs in full.
    log: list[str] = []
    running = Running(3)

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        running.began()
        if tool_call_id == "honour":
            await signal.wait()
            return al.AgentToolResult.from_text("stopped in time")
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            log.append(f"cut {tool_call_id}")
            if tool_call_id == "ignore":
                raise
        on_update(al.AgentToolResult.from_text("after the cut"))
        return al.AgentToolResult.from_text("swallowed the cut")

    async def after(context: al.AfterToolCallContext, signal: al.AbortSignal) -> al.AfterToolCallResult:
        await anyio.sleep(0.01)  # a cut task would be cancelled here
        log.append(f"after {context.tool_call.id}")
        return al.AfterToolCallResult(details={"hooked": True})

    signal = al.AbortSignal()
    model = ScriptedModel([tool_response("ignore", "swallow", "honour"), "never"])
    context = al.AgentContext(tools=[sleep_tool(execute)])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.1, after_tool_call=after if after_hook else None)
    with anyio.fail_after(3):
        start = anyio.current_time()
        seen = await _collect_aborting(
            al.agent_loop([al.UserMessage(content="go")], context, config, signal, model), signal, running
        )
        elapsed = anyio.current_time() - start
    check_events(seen)
    assert 0.1 <= elapsed < 2  # the cut the grace period after the abort, and no longer
    assert sorted(entry for entry in log if entry.startswith("cut")) == ["cut ignore", "cut swallow"]
    ends = {e.tool_call_id: e for e in seen if isinstance(e, al.ToolExecutionEnd)}
    assert {i: (e.is_error, text(e.result.content[0])) for i, e in ends.items()} == {
        "ignore": (True, "Operation aborted"),
        "swallow": (False, "swallowed the cut"),
        "honour": (False, "stopped in time"),
    }
    if after_hook:
        assert sorted(entry for entry in log if entry.startswith("after")) == [
            "after honour",
            "after ignore",
            "after swallow",
        ]
        assert all(e.result.details == {"hooked": True} for e in ends.values())
    updates = [e for e in seen if isinstance(e, al.ToolExecutionUpdate)]
    assert [(e.tool_call_id, text(e.partial_result.content[0])) for e in updates] == [("swallow", "after the cut")]
    assert seen.index(updates[0]) < seen.index(ends["swallow"])  # finalized after its update
    results = [m.tool_call_id for m in tool_results(seen)]
    assert results == ["ignore", "swallow", "honour"]


@pytest.mark.parametrize("leave_after", [0.02, 0.2])  # during the grace period, or after the cut
async def test_leaving_the_block_after_an_abort_of_parallel_tools_cancels_everything_quietly(
    anyio_backend: object, leave_after: float
) -> None:
    log: list[str] = []
    signal = al.AbortSignal()
    model = ScriptedModel([tool_response("c1", "c2", "c3"), "never"])
    running = Running(3)
    context = al.AgentContext(tools=[make_sleeper(log, seconds=30, running=running)])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=0.1)
    seen: list[str] = []
    with anyio.fail_after(2):
        async with al.agent_loop([al.UserMessage(content="go")], context, config, signal, model) as events:
            async for event in events:
                seen.append(event.type)
                if seen.count("tool_execution_start") == 3:
                    await running.all_began.wait()  # the tools are running
                    signal.abort()
                    await anyio.sleep(leave_after)
                    break
    assert sorted(log) == ["cancelled c1", "cancelled c2", "cancelled c3", "start c1", "start c2", "start c3"]


async def test_a_parallel_batch_that_stops_in_time_does_not_wait_for_the_grace_period(anyio_backend: object) -> None:
    # Grace 30 s: every tool stops soon after the abort, so nothing may wait for the period to end.
    running = Running(3)

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        running.began()
        await signal.wait()
        await anyio.sleep(0.02)  # still running when the grace period begins
        return al.AgentToolResult.from_text("stopped in time")

    signal = al.AbortSignal()
    model = ScriptedModel([tool_response("c1", "c2", "c3"), "never"])
    context = al.AgentContext(tools=[sleep_tool(execute)])
    config = al.AgentLoopConfig(model=MODEL, tool_abort_grace=30)
    with anyio.fail_after(2):
        seen = await _collect_aborting(
            al.agent_loop([al.UserMessage(content="go")], context, config, signal, model), signal, running
        )
    check_events(seen)
    ends = [e for e in seen if isinstance(e, al.ToolExecutionEnd)]
    assert sorted((e.tool_call_id, text(e.result.content[0])) for e in ends) == [
        (f"c{k}", "stopped in time") for k in (1, 2, 3)
    ]


async def _collect(stream: al.AgentLoopStream) -> list[al.AgentEvent]:
    async with stream as events:
        return [event async for event in events]


async def _collect_aborting(
    stream: al.AgentLoopStream, signal: al.AbortSignal, running: Running
) -> list[al.AgentEvent]:
    """Collect a run's events; `signal` aborts once its tool calls have all begun."""

    async def abort_while_they_run() -> None:
        await running.all_began.wait()
        signal.abort()

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_while_they_run)
        events = await _collect(stream)
    return events


async def test_outer_timeout_stays_a_plain_cancellation(anyio_backend: object) -> None:
    log: list[str] = []
    model = ScriptedModel([tool_response("c1"), "never"])
    with anyio.fail_after(2):
        with anyio.move_on_after(0.1) as scope:
            async with loop(model, [make_sleeper(log)]) as events:
                async for _ in events:
                    pass
    assert scope.cancelled_caught
    assert log == ["start c1", "cancelled c1"]


async def test_enter_and_leave_without_iterating_makes_no_model_call(anyio_backend: object) -> None:
    model = ScriptedModel(["hi"])
    with anyio.fail_after(2):
        async with loop(model):
            await anyio.sleep(0.01)
    assert model.calls == []


async def test_aclose_stops_the_run_while_the_block_goes_on(anyio_backend: object) -> None:
    model = ScriptedModel([Response(content=[ScriptedText(["x"] * 500)]), "never"])
    with anyio.fail_after(2):
        async with loop(model) as events:
            first = await events.__anext__()
            await events.aclose()
            await anyio.sleep(0.05)
            with pytest.raises(StopAsyncIteration):
                await events.__anext__()
    assert first.type == "agent_start"
    assert len(model.calls) <= 1


@pytest.mark.parametrize("buffer", [0, 4])
async def test_aclose_while_a_tool_reports_progress_stops_the_tool_and_leaves_nothing_running(
    anyio_backend: object, buffer: int
) -> None:
    # Updates that are waiting for room run in the stream's task group: closing the receive side
    # must stop them and the tool, not leave a delivery parked when the block ends.
    log: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        try:
            for i in range(1000):
                on_update(al.AgentToolResult.from_text(str(i)))  # not awaited
                await anyio.sleep(0.001)
        except anyio.get_cancelled_exc_class():
            log.append("cancelled")
            raise
        return al.AgentToolResult.from_text("done")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "t", {})]), "never"])
    context = al.AgentContext(tools=[tool])
    with anyio.fail_after(5):
        async with al.agent_loop(
            [al.UserMessage(content="go")],
            context,
            al.AgentLoopConfig(model=MODEL),
            None,
            model,
            max_buffer_size=buffer,
        ) as events:
            async for event in events:
                if event.type == "tool_execution_update":
                    break
            await events.aclose()
            await anyio.sleep(0.05)  # the block goes on; the run has stopped
            assert log == ["cancelled"]
    assert len(model.calls) == 1


async def test_leaving_while_a_progress_update_waits_for_the_consumer_is_quiet(anyio_backend: object) -> None:
    # The update waits for the consumer (rendezvous stream) while the tool sleeps; the consumer
    # leaves. Trio may unwind the cancelled run, which closes the sending side, before the waiting
    # update resumes: the update must see a consumer that left (not a closed stream) and the block
    # end quietly. Twenty runs make both orders happen.
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        on_update(al.AgentToolResult.from_text("half way"))  # not awaited: waits in a task of its own
        await anyio.sleep(10)
        return al.AgentToolResult.from_text("done")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    for _ in range(20):
        model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "t", {})]), "never"])
        context = al.AgentContext(tools=[tool])
        config = al.AgentLoopConfig(model=MODEL)
        with anyio.fail_after(5):
            prompt = [al.UserMessage(content="go")]
            async with al.agent_loop(prompt, context, config, None, model, max_buffer_size=0) as events:
                async for event in events:
                    if event.type == "tool_execution_start":
                        await anyio.sleep(0.001)  # the update is now waiting for this consumer
                        break


async def test_rendezvous_buffer_is_pull_based(anyio_backend: object) -> None:
    produced: list[str] = []
    model = ScriptedModel(["a", "b"])
    context = al.AgentContext()

    def steering() -> list[al.AgentMessage]:
        produced.append("poll")
        return []

    config = al.AgentLoopConfig(model=MODEL, get_steering_messages=steering)
    with anyio.fail_after(2):
        stream = al.agent_loop([al.UserMessage(content="go")], context, config, None, model, max_buffer_size=0)
        async with stream as events:
            first = await events.__anext__()
            await anyio.sleep(0.02)
            # with a zero buffer the run waits for the consumer: no poll happened past agent_start
            assert first.type == "agent_start"
            assert produced == []
            rest = [e async for e in events]
    assert rest[-1].type == "agent_end"


async def test_a_stream_can_be_entered_once(anyio_backend: object) -> None:
    stream = loop(ScriptedModel(["hi", "again"]))
    async with stream as events:
        await events.result()
    with pytest.raises(RuntimeError, match="only once"):
        async with stream:
            pass


def test_bad_arguments_raise_at_call_time() -> None:
    context = al.AgentContext()
    config = al.AgentLoopConfig(model=MODEL)
    with pytest.raises(TypeError, match="prompts must be a sequence"):
        al.agent_loop("hi", context, config)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"prompts\[0\]"):
        al.agent_loop([{"role": "user"}], context, config)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"context must be an agentloop\.AgentContext"):
        al.agent_loop([], {}, config)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be"):
        al.agent_loop([], context, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="signal must be"):
        al.agent_loop([], context, config, "abort")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_buffer_size"):
        al.agent_loop([], context, config, max_buffer_size=-1)
    with pytest.raises(al.InvalidContextError, match="Cannot continue: no messages in context"):
        al.agent_loop_continue(context, config)
    assistant = al.AgentContext(messages=[al.AssistantMessage()])
    with pytest.raises(al.InvalidContextError, match="Cannot continue from message role: assistant"):
        al.agent_loop_continue(assistant, config)


async def test_agent_loop_continue_streams_only_new_messages(anyio_backend: object) -> None:
    context = al.AgentContext(messages=[al.UserMessage(content="hello")])
    with anyio.fail_after(2):
        async with al.agent_loop_continue(context, al.AgentLoopConfig(model=MODEL), None, ScriptedModel(["hi"])) as ev:
            seen = [e async for e in ev]
    check_events(seen)
    assert [m.role for m in agent_end(seen).messages] == ["assistant"]
    assert not any(isinstance(e, al.MessageStart) and e.message.role == "user" for e in seen)


@pytest.mark.parametrize("buffer", [0, 1, 3])
async def test_updates_reported_without_waiting_arrive_in_the_order_reported(
    anyio_backend: object, buffer: int
) -> None:
    # A full buffer makes every update wait; however the scheduler picks the waiting senders (trio
    # shuffles them), the consumer sees the updates in the order the tool reported them.
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        for i in range(30):
            on_update(al.AgentToolResult.from_text(str(i)))  # not awaited
            if i % 7 == 0:
                await anyio.lowlevel.checkpoint()
        return al.AgentToolResult.from_text("done")

    tool = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=execute)
    context = al.AgentContext(tools=[tool])
    config = al.AgentLoopConfig(model=MODEL)
    with anyio.fail_after(5):
        for _ in range(5):  # trio picks a different order each time
            model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "t", {})]), "ok"])
            seen: list[str] = []
            async with al.agent_loop(
                [al.UserMessage(content="go")], context, config, None, model, max_buffer_size=buffer
            ) as events:
                async for event in events:
                    await anyio.lowlevel.checkpoint()
                    if isinstance(event, al.ToolExecutionUpdate):
                        seen.append(text(event.partial_result.content[0]))
            assert seen == [str(i) for i in range(30)]
