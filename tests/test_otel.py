"""agentloop.otel: the span tree of a run, its GenAI attributes, errors, content and keys."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import StatusCode

import agentloop as al
from agentloop.otel import Tracing, instrument
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events
from tests.spans import exporter as exporter  # the fixture
from tests.support import WaitsAfterDone, last_assistant, loaded_by_import

MODEL = al.Model(id="m1", api="faux", provider="faux")
KEY = "sk-secret-key-0123456789"


def spanning_tool(provider: TracerProvider, name: str, seconds: float = 0.0, **options: Any) -> al.AgentTool:
    """A tool that opens a span of its own (it must nest under its execute_tool span)."""
    tracer = provider.get_tracer("tool")

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:
        with tracer.start_as_current_span(f"inside {tool_call_id}"):
            await anyio.sleep(seconds)
        return f"{name} ok"

    return al.AgentTool(
        name=name,
        description=f"Tool {name}",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        **options,
    )


def failing_tool(name: str, exc: BaseException) -> al.AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:
        raise exc

    return al.AgentTool(name=name, description=name, parameters={"type": "object", "properties": {}}, execute=execute)


def calls(*pairs: tuple[str, str], usage: al.Usage | None = None) -> Response:
    return Response(
        content=[ScriptedToolCall(call_id, tool, {"q": call_id}) for call_id, tool in pairs],
        usage=usage or al.Usage(input=10, output=3),
    )


async def consume(
    form: str, config: al.AgentLoopConfig, stream_fn: Any, tools: list[al.AgentTool], **kw: Any
) -> list[al.AgentEvent]:
    """Run in one of the three ways a run is consumed; return its events."""
    context = al.AgentContext(system_prompt="Be brief.", tools=tools)
    prompts = [al.UserMessage(content="What is up?")]
    events: list[al.AgentEvent] = []
    with anyio.fail_after(10):
        if form == "run_agent_loop":
            await al.run_agent_loop(prompts, context, config, events.append, kw.get("signal"), stream_fn)
        elif form == "async with":
            async with al.agent_loop(prompts, context, config, kw.get("signal"), stream_fn=stream_fn) as stream:
                async for event in stream:
                    events.append(event)
        else:
            async with aclosing(
                al.agent_loop(prompts, context, config, kw.get("signal"), stream_fn=stream_fn).__aiter__()
            ) as bare:
                async for event in bare:
                    events.append(event)
    return events


def tree(spans: tuple[ReadableSpan, ...]) -> list[str]:
    """The spans as indented lines (siblings by name, then start), with error types."""
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.name, s.start_time)):
            error = (span.attributes or {}).get("error.type")
            lines.append("  " * depth + span.name + (f" !{error}" if error else ""))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


FORMS = ["run_agent_loop", "async with", "bare"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_a_run_is_a_tree_of_invoke_agent_turns_chats_and_tool_calls(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], form: str, execution: al.ToolExecution
) -> None:
    provider, memory = exporter
    model = ScriptedModel(
        [
            calls(("c1", "alpha"), ("c2", "beta")),
            calls(("c3", "alpha")),
            Response(content=["All good."], usage=al.Usage(input=20, output=4, cache_read=5)),
        ]
    )
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL, tool_execution=execution, session_id="conv-1"),
        model,
        tracer_provider=provider,
        agent_name="helper",
    )
    tools = [spanning_tool(provider, "alpha", 0.02), spanning_tool(provider, "beta")]
    events = await consume(form, config, stream_fn, tools)
    check_events(events)
    spans = memory.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent helper",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c1",
        "    execute_tool beta",
        "      inside c2",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c3",
        "  turn",
        "    chat m1",
    ]
    (run,) = by_name(spans, "invoke_agent helper")
    assert run.kind is trace.SpanKind.INTERNAL
    assert attrs(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "m1",
        "gen_ai.agent.name": "helper",
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.usage.input_tokens": 10 + 10 + 25,
        "gen_ai.usage.output_tokens": 3 + 3 + 4,
    }
    assert run.status.status_code is StatusCode.UNSET
    assert [
        attrs(t)["agentloop.turn.index"] for t in sorted(by_name(spans, "turn"), key=lambda s: s.start_time or 0)
    ] == [
        1,
        2,
        3,
    ]
    chats = sorted(by_name(spans, "chat m1"), key=lambda s: s.start_time or 0)
    assert chats[0].kind is trace.SpanKind.CLIENT
    assert attrs(chats[0]) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "m1",
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.response.model": "m1",
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 3,
    }
    assert attrs(chats[2])["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(chats[2])["gen_ai.usage.input_tokens"] == 25
    assert attrs(chats[2])["gen_ai.usage.cache_read.input_tokens"] == 5
    tool_spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool")}
    assert attrs(tool_spans["c2"]) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "beta",
        "gen_ai.tool.call.id": "c2",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Tool beta",
    }
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    # one trace; every chat span lies within its turn, every turn within the run
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    for turn in by_name(spans, "turn"):
        assert run.start_time <= turn.start_time <= turn.end_time <= run.end_time  # type: ignore[operator]
    if execution == "parallel":  # the two calls of the first batch overlapped
        assert tool_spans["c2"].start_time < tool_spans["c1"].end_time  # type: ignore[operator]
    else:
        assert tool_spans["c1"].end_time <= tool_spans["c2"].start_time  # type: ignore[operator]


async def test_a_plain_def_tool_in_a_worker_thread_nests_its_spans_too(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    tracer = provider.get_tracer("tool")

    @al.tool
    def lookup(key: str) -> str:
        """Look a key up (blocking)."""
        with tracer.start_as_current_span(f"db lookup {key}"):
            return key.upper()

    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "lookup", {"key": "x"})]), "X"])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    await consume("bare", config, stream_fn, [lookup])
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent",
        "  turn",
        "    chat m1",
        "    execute_tool lookup",
        "      db lookup x",
        "  turn",
        "    chat m1",
    ]


async def test_a_run_nests_under_the_callers_current_span_and_the_users_hooks_still_run(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    seen: list[str] = []
    wrapped: list[str] = []
    tracer = provider.get_tracer("app")

    async def wrap(invocation: al.ToolInvocation, proceed: Any) -> object:
        with tracer.start_as_current_span("user wrap"):
            wrapped.append(invocation.tool_call.id)
            return await proceed()

    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL, observe=lambda e: seen.append(e.type), wrap_tool_call=wrap),
        ScriptedModel([calls(("c1", "alpha")), "done"]),
        tracer_provider=provider,
    )
    with tracer.start_as_current_span("request"):
        await consume("async with", config, stream_fn, [spanning_tool(provider, "alpha")])
    assert tree(memory.get_finished_spans()) == [
        "request",
        "  invoke_agent",
        "    turn",
        "      chat m1",
        "      execute_tool alpha",
        "        user wrap",
        "          inside c1",
        "    turn",
        "      chat m1",
    ]
    assert wrapped == ["c1"]
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"


@pytest.mark.parametrize("form", FORMS)
async def test_a_failing_tool_and_a_model_error_are_error_spans(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], form: str
) -> None:
    provider, memory = exporter
    model = ScriptedModel([calls(("c1", "broken")), Response(stop_reason="error", error_message="overloaded")])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    await consume(form, config, stream_fn, [failing_tool("broken", ValueError("bad input"))])
    spans = memory.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent !model_error",
        "  turn",
        "    chat m1",
        "    execute_tool broken !ValueError",
        "  turn !model_error",
        "    chat m1 !model_error",
    ]
    (tool,) = by_name(spans, "execute_tool broken")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "bad input"
    failed = [s for s in by_name(spans, "chat m1") if s.status.status_code is StatusCode.ERROR]
    assert [(attrs(s)["gen_ai.response.finish_reasons"], s.status.description) for s in failed] == [
        (("error",), "overloaded")
    ]


async def test_a_tool_timeout_and_an_error_result_are_error_spans(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter

    async def refuse(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        return al.AgentToolResult(content=(al.TextContent("no such file"),), is_error=True)

    tools = [
        spanning_tool(provider, "slow", 5, timeout=0.05),
        al.AgentTool(name="refuse", description="r", parameters={"type": "object", "properties": {}}, execute=refuse),
    ]
    model = ScriptedModel([calls(("c1", "slow"), ("c2", "refuse")), "done"])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    await consume("async with", config, stream_fn, tools)
    spans = memory.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent",
        "  turn",
        "    chat m1",
        "    execute_tool refuse !tool_error",
        "    execute_tool slow !timeout",
        "      inside c1",
        "  turn",
        "    chat m1",
    ]


@pytest.mark.parametrize("form", FORMS)
async def test_an_abort_during_the_model_stream_ends_the_chat_turn_and_run_as_aborted(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], form: str
) -> None:
    provider, memory = exporter
    signal = al.AbortSignal()
    model = ScriptedModel([Response(content=[ScriptedText(["a", "b", "c", "d"])], chunk_delay=0.05)])
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL, observe=lambda e: signal.abort() if e.type == "message_update" else None),
        model,
        tracer_provider=provider,
    )
    await consume(form, config, stream_fn, [], signal=signal)
    assert tree(memory.get_finished_spans()) == ["invoke_agent !aborted", "  turn !aborted", "    chat m1 !aborted"]


async def test_an_abort_during_a_tool_ends_its_span_as_aborted(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    signal = al.AbortSignal()

    async def abort_then_sleep(tool_call_id: str, params: Any, s: al.AbortSignal, on_update: Any) -> str:
        signal.abort()
        await anyio.sleep(5)
        return "not reached"

    tool = al.AgentTool(name="slow", description="s", parameters={"type": "object"}, execute=abort_then_sleep)
    model = ScriptedModel([calls(("c1", "slow")), Response(stop_reason="aborted")])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL, tool_abort_grace=0), model, tracer_provider=provider)
    await consume("run_agent_loop", config, stream_fn, [tool], signal=signal)
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent !aborted",
        "  turn",
        "    chat m1",
        "    execute_tool slow !aborted",
        "  turn !aborted",
        "    chat m1 !aborted",
    ]


@pytest.mark.parametrize("form", FORMS)
async def test_a_stream_function_that_raises_ends_every_span_with_its_type(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], form: str
) -> None:
    provider, memory = exporter
    model = ScriptedModel([Response(raise_on_call=RuntimeError("boom"))])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    with pytest.raises(RuntimeError, match="boom"):
        await consume(form, config, stream_fn, [])
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent !RuntimeError",
        "  turn !RuntimeError",
        "    chat m1 !RuntimeError",
    ]


async def test_leaving_the_run_during_a_tool_ends_every_span_as_cancelled(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    model = ScriptedModel([calls(("c1", "slow"))])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    context = al.AgentContext(tools=[spanning_tool(provider, "slow", 5)])
    with anyio.fail_after(5):
        async with al.agent_loop([al.UserMessage(content="go")], context, config, stream_fn=stream_fn) as events:
            async for event in events:
                if event.type == "tool_execution_start":
                    break
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent !cancelled",
        "  turn !cancelled",
        "    chat m1",
        "    execute_tool slow !cancelled",
        "      inside c1",
    ]


class EngineStop(Exception):
    """A durable engine's control-flow exception: propagates instead of becoming a tool result."""


async def test_a_propagated_tool_exception_ends_every_span_with_its_type(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    model = ScriptedModel([calls(("c1", "stop"))])
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL, propagate=(EngineStop,)), model, tracer_provider=provider
    )
    with pytest.raises(EngineStop):
        await consume("run_agent_loop", config, stream_fn, [failing_tool("stop", EngineStop("suspend"))])
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent !EngineStop",
        "  turn !EngineStop",
        "    chat m1",
        "    execute_tool stop !EngineStop",
    ]


@pytest.mark.parametrize("shape", ["async context manager", "awaitable", "not an iterator", "not events"])
async def test_every_shape_a_stream_function_may_return_is_traced(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], shape: str
) -> None:
    provider, memory = exporter
    scripted = ScriptedModel(["hello"])

    @asynccontextmanager
    async def managed(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        yield scripted(model, context, options)

    async def awaited(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        return scripted(model, context, options)

    def wrong(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        return 42

    async def not_events(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        yield "not an event"

    fn = {"async context manager": managed, "awaitable": awaited, "not an iterator": wrong, "not events": not_events}
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), fn[shape], tracer_provider=provider)
    if shape == "not events":  # the loop's own error, as without tracing; it tears the open stream down
        with pytest.raises(TypeError, match="stream function yielded an unknown event"):
            await consume("async with", config, stream_fn, [])
        assert tree(memory.get_finished_spans()) == [
            "invoke_agent !cancelled",
            "  turn !cancelled",
            "    chat m1 !cancelled",
        ]
        return
    if shape == "not an iterator":
        with pytest.raises(TypeError, match="a stream function must return an async iterator"):
            await consume("async with", config, stream_fn, [])
        assert tree(memory.get_finished_spans()) == [
            "invoke_agent !TypeError",
            "  turn !TypeError",
            "    chat m1 !TypeError",
        ]
        return
    events = await consume("async with", config, stream_fn, [])
    assert last_assistant(events).text == "hello"
    assert tree(memory.get_finished_spans()) == ["invoke_agent", "  turn", "    chat m1"]


@pytest.mark.parametrize("form", FORMS)
async def test_a_stream_that_waits_after_its_terminal_event_is_closed_there(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], form: str
) -> None:
    # The traced stream ends at the terminal event and the model's stream is closed there:
    # reading it past its terminal event would wait forever.
    provider, memory = exporter
    stream = WaitsAfterDone()

    def waits(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        return stream

    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), waits, tracer_provider=provider)
    with anyio.fail_after(5):
        events = await consume(form, config, stream_fn, [])
    assert last_assistant(events).text == "hi"
    assert stream.closed
    assert tree(memory.get_finished_spans()) == ["invoke_agent", "  turn", "    chat m1"]


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_a_run_started_inside_a_tool_nests_under_it_and_the_outer_run_goes_on(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], execution: al.ToolExecution
) -> None:
    provider, memory = exporter
    tracing = Tracing(tracer_provider=provider)
    inner_model = ScriptedModel(["inner answer"])

    async def delegate(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:
        config, stream_fn = tracing.instrument(al.AgentLoopConfig(model=al.Model(id="m2", api="faux")), inner_model)
        events: list[al.AgentEvent] = []
        await al.run_agent_loop(
            [al.UserMessage(content="sub")], al.AgentContext(), config, events.append, None, stream_fn
        )
        return "delegated"

    tool = al.AgentTool(name="delegate", description="d", parameters={"type": "object"}, execute=delegate)
    outer = ScriptedModel([calls(("c1", "delegate")), "outer answer"])
    config, stream_fn = tracing.instrument(al.AgentLoopConfig(model=MODEL, tool_execution=execution), outer)
    await consume("async with", config, stream_fn, [tool])
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent",
        "  turn",
        "    chat m1",
        "    execute_tool delegate",
        "      invoke_agent",
        "        turn",
        "          chat m2",
        "  turn",
        "    chat m1",
    ]


async def test_a_bare_run_closed_between_steps_is_ended_as_cancelled_when_the_next_run_starts(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    model = ScriptedModel([calls(("c1", "alpha")), "first", "second"])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    context = al.AgentContext(tools=[spanning_tool(provider, "alpha")])
    async with aclosing(
        al.agent_loop([al.UserMessage(content="go")], context, config, stream_fn=stream_fn).__aiter__()
    ) as bare:
        async for event in bare:
            if event.type == "turn_end":
                break
    left = time.time_ns()
    assert "invoke_agent" not in [s.name for s in memory.get_finished_spans()]
    await consume("bare", config, stream_fn, [])
    spans = memory.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent !cancelled",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c1",
        "invoke_agent",
        "  turn",
        "    chat m1",
    ]
    stale = [s for s in spans if (s.attributes or {}).get("error.type") == "cancelled"]
    assert all(s.end_time is not None and s.end_time <= left for s in stale)  # ended where it stopped


def all_text(spans: tuple[ReadableSpan, ...]) -> str:
    """Every attribute value, status description and event of every span, as one string."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name)
        parts.extend(f"{k}={v!s}" for k, v in (span.attributes or {}).items())
        parts.append(str(span.status.description))
        for event in span.events:
            parts.extend(f"{k}={v!s}" for k, v in (event.attributes or {}).items())
    return "\n".join(parts)


@pytest.mark.parametrize("record_content", [False, True])
async def test_content_is_recorded_only_when_asked_and_the_key_never(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], record_content: bool
) -> None:
    provider, memory = exporter
    model = ScriptedModel(
        [
            calls(("c1", "alpha")),
            Response(content=[f"the key is {KEY}"]),
            Response(stop_reason="error", error_message=f"401: invalid key {KEY}"),
        ]
    )
    config, stream_fn = instrument(
        al.AgentLoopConfig(
            model=MODEL,
            api_key=KEY,
            headers={"Authorization": f"Bearer {KEY}"},
            get_follow_up_messages=list,
        ),
        model,
        tracer_provider=provider,
        record_content=record_content,
    )
    await consume("async with", config, stream_fn, [spanning_tool(provider, "alpha")])
    # a second run continues the conversation into the model error
    config2, stream_fn2 = instrument(al.AgentLoopConfig(model=MODEL, api_key=KEY), model, tracer_provider=provider)
    await consume("run_agent_loop", config2, stream_fn2, [])
    spans = memory.get_finished_spans()
    text = all_text(spans)
    assert KEY not in text
    assert "401: invalid key ***" in text  # the error is kept, the key masked
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    recorded = {k for s in spans for k in (s.attributes or {}) if k in content_keys}
    if not record_content:
        assert recorded == set()
        assert "What is up?" not in text and "Be brief." not in text
        return
    assert recorded == content_keys
    first_chat = min(by_name(spans, "chat m1"), key=lambda s: s.start_time or 0)
    assert attrs(first_chat)["gen_ai.input.messages"] == (
        '[{"role": "user", "parts": [{"type": "text", "content": "What is up?"}]}]'
    )
    assert attrs(first_chat)["gen_ai.system_instructions"] == '[{"type": "text", "content": "Be brief."}]'
    assert '"type": "tool_call", "id": "c1", "name": "alpha"' in attrs(first_chat)["gen_ai.output.messages"]
    (tool,) = by_name(spans, "execute_tool alpha")
    assert attrs(tool)["gen_ai.tool.call.arguments"] == '{"q": "c1"}'
    assert attrs(tool)["gen_ai.tool.call.result"] == '"alpha ok"'
    assert "the key is ***" in text


@pytest.mark.parametrize(
    ("base_url", "server"),
    [
        ("http://user:s3cret@127.0.0.1:8080/v1", {"server.address": "127.0.0.1", "server.port": 8080}),
        ("https://api.example.com/v1", {"server.address": "api.example.com"}),
        ("http://[::1]:9000", {"server.address": "::1", "server.port": 9000}),
        ("http://host:notaport/v1", {}),
    ],
)
async def test_the_chat_span_names_the_server_and_never_the_urls_credentials(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], base_url: str, server: dict[str, Any]
) -> None:
    provider, memory = exporter
    model = al.Model(id="m1", api="faux", provider="faux", base_url=base_url)
    config, stream_fn = instrument(al.AgentLoopConfig(model=model), ScriptedModel(["hi"]), tracer_provider=provider)
    await consume("run_agent_loop", config, stream_fn, [])
    (chat,) = by_name(memory.get_finished_spans(), "chat m1")
    assert {k: v for k, v in attrs(chat).items() if k.startswith("server.")} == server
    assert "s3cret" not in all_text(memory.get_finished_spans())


async def test_a_real_provider_stream_is_traced_with_its_response_id_usage_and_masked_error(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    """OpenAI Chat Completions over a mocked HTTP server: the provider's own parsing, end to end."""
    import httpx

    from agentloop.providers import stream_openai_completions

    from .providers.helpers import FAST, Server, chat_chunk, ok, sse_data

    provider, memory = exporter
    body = sse_data(
        chat_chunk({"role": "assistant", "content": "Hi"}, id="chatcmpl-42"),
        chat_chunk(finish="stop", id="chatcmpl-42"),
        {
            "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}},
        },
    )
    leak = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    server = Server(ok(body), httpx.Response(401, json=leak))
    model = al.Model(id="gpt-x", api="openai-completions", provider="openai", base_url="http://mock/v1")
    async with server.client() as client:

        def stream_fn(m: al.Model, c: al.Context, o: al.StreamOptions) -> Any:
            return stream_openai_completions(m, c, o, http=FAST, client=client)

        config, traced = instrument(
            al.AgentLoopConfig(model=model, api_key=KEY), stream_fn, tracer_provider=provider, record_content=True
        )
        await consume("async with", config, traced, [])
        await consume("bare", config, traced, [])
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key was used...
    spans = memory.get_finished_spans()
    assert KEY not in all_text(spans)  # ...and recorded nowhere
    ok_chat, failed_chat = sorted(by_name(spans, "chat gpt-x"), key=lambda s: s.start_time or 0)
    assert {k: v for k, v in attrs(ok_chat).items() if k.startswith(("gen_ai.response", "gen_ai.usage", "server"))} == {
        "gen_ai.response.id": "chatcmpl-42",
        "gen_ai.response.model": "gpt-x",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 60,
        "server.address": "mock",
    }
    assert attrs(failed_chat)["error.type"] == "model_error"
    assert (
        failed_chat.status.description is not None
        and "Incorrect API key provided: ***" in failed_chat.status.description
    )


async def test_concurrent_runs_of_one_instrumented_config_make_separate_traces(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter

    def stream_fn(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        return (
            ScriptedModel([calls(("c1", "alpha")), "done"])(model, context, options)
            if len(context.messages) == 1
            else ScriptedModel(["done"])(model, context, options)
        )

    config, traced = instrument(al.AgentLoopConfig(model=MODEL), stream_fn, tracer_provider=provider)
    tool = spanning_tool(provider, "alpha", 0.02)
    async with anyio.create_task_group() as tg:
        for form in FORMS:
            tg.start_soon(consume, form, config, traced, [tool])
    spans = memory.get_finished_spans()
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 3
    assert (
        tree(spans)
        == [
            "invoke_agent",
            "  turn",
            "    chat m1",
            "    execute_tool alpha",
            "      inside c1",
            "  turn",
            "    chat m1",
        ]
        * 3
    )


async def test_a_tracer_that_records_nothing_passes_the_model_stream_through(anyio_backend: object) -> None:
    model = ScriptedModel(["hi"])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=trace.NoOpTracerProvider())
    source = stream_fn(
        MODEL, al.Context(messages=(al.UserMessage(content="x"),)), al.StreamOptions(signal=al.AbortSignal())
    )
    assert type(source).__name__ == "async_generator" and source.ag_code.co_name == "_play"  # type: ignore[union-attr]
    await source.aclose()  # type: ignore[union-attr]
    events = await consume("async with", config, stream_fn, [])
    assert events[-1].type == "agent_end"


async def test_an_instrumented_agent_traces_every_prompt_and_keeps_its_own_hooks(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    tracing = Tracing(tracer_provider=provider, agent_name="bot")
    model = ScriptedModel([calls(("c1", "alpha"), ("c2", "slow")), "done", calls(("c3", "alpha")), "again"])
    tools = [spanning_tool(provider, "alpha"), spanning_tool(provider, "slow", 5, timeout=0.05)]
    seen: list[str] = []
    wrapped: list[str] = []

    async def wrap(invocation: al.ToolInvocation, proceed: Any) -> object:
        wrapped.append(invocation.tool_call.id)
        return await proceed()

    agent = al.Agent(
        model=MODEL, tools=tools, stream_fn=model, observe=lambda e: seen.append(e.type), wrap_tool_call=wrap
    )
    assert tracing.instrument_agent(agent) is agent
    with anyio.fail_after(10):
        await agent.prompt("go")
        await agent.prompt("more")
    spans = memory.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent bot",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c1",
        "    execute_tool slow !timeout",
        "      inside c2",
        "  turn",
        "    chat m1",
        "invoke_agent bot",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c3",
        "  turn",
        "    chat m1",
    ]
    assert sorted(wrapped) == ["c1", "c2", "c3"]
    assert seen.count("agent_start") == seen.count("agent_end") == 2
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 2
    assert agent.state.messages[-1].text == "again"  # type: ignore[union-attr]


async def test_an_agent_is_instrumented_through_its_options_and_stays_traced_when_they_change(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    seen: list[str] = []
    model = ScriptedModel([calls(("c1", "alpha")), "done", calls(("c2", "alpha")), "not reached"])
    agent = al.Agent(
        model=MODEL, tools=[spanning_tool(provider, "alpha")], stream_fn=model, observe=lambda e: seen.append(e.type)
    )
    before = agent.options
    Tracing(tracer_provider=provider).instrument_agent(agent)
    traced = agent.options
    assert traced.observe is not before.observe and traced.wrap_tool_call is not None
    assert traced.replace(observe=before.observe, wrap_tool_call=None) == before, "the other options are kept"
    with anyio.fail_after(10):
        await agent.prompt("go")
        agent.options = agent.options.replace(max_turns=1)
        await agent.prompt("again")
    assert tree(memory.get_finished_spans()) == [
        "invoke_agent",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c1",
        "  turn",
        "    chat m1",
        "invoke_agent",
        "  turn",
        "    chat m1",
        "    execute_tool alpha",
        "      inside c2",
    ]
    assert seen.count("agent_start") == seen.count("agent_end") == 2


class DropRuns(Sampler):
    """Samples every root span but a run's (ParentBased: children follow their parent)."""

    def should_sample(self, parent_context: Any, trace_id: int, name: str, *args: Any, **kw: Any) -> SamplingResult:
        decision = Decision.DROP if name.startswith("invoke_agent") else Decision.RECORD_AND_SAMPLE
        return SamplingResult(decision)

    def get_description(self) -> str:
        return "DropRuns"


async def test_a_sampled_out_run_records_nothing_below_it_and_its_tools_follow_it(anyio_backend: object) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(DropRuns()))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    model = ScriptedModel([calls(("c1", "alpha")), "done"])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider)
    events = await consume("bare", config, stream_fn, [spanning_tool(provider, "alpha")])
    assert events[-1].type == "agent_end"
    with provider.get_tracer("t").start_as_current_span("a root"):  # roots are sampled
        pass
    assert tree(memory.get_finished_spans()) == ["a root"]  # the tool's span followed its run
    provider.shutdown()


async def test_an_agent_whose_stream_function_raises_ends_its_spans_and_the_next_prompt_is_a_new_trace(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    model = ScriptedModel([Response(raise_on_call=RuntimeError("boom")), "fine"])
    agent = Tracing(tracer_provider=provider).instrument_agent(al.Agent(model=MODEL, stream_fn=model))
    with anyio.fail_after(10):
        await agent.prompt("one")
        assert agent.state.error_message is not None and "boom" in agent.state.error_message
        await agent.prompt("two")
    spans = memory.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent !RuntimeError",
        "  turn !RuntimeError",
        "    chat m1 !RuntimeError",
        "invoke_agent",
        "  turn",
        "    chat m1",
    ]
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 2


def test_bad_arguments_say_what_was_expected() -> None:
    with pytest.raises(TypeError, match=r"config must be an agentloop\.AgentLoopConfig, got dict"):
        instrument({}, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="record_content must be a bool, got str"):
        Tracing(record_content="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry TracerProvider"):
        Tracing(tracer_provider=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stream_fn must be callable"):
        Tracing().wrap_stream_fn(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"agent must be an agentloop\.Agent, got AgentLoopConfig"):
        Tracing().instrument_agent(al.AgentLoopConfig(model=MODEL))  # type: ignore[arg-type]


def test_otel_exports_what_it_defines() -> None:
    import agentloop.otel

    defined = {
        name
        for name, value in vars(agentloop.otel).items()
        if not name.startswith("_") and str(getattr(value, "__module__", "")).startswith("agentloop.otel")
    }
    assert set(agentloop.otel.__all__) == defined == {"Tracing", "instrument"}


def test_the_cost_benchmark_runs_and_prints_every_variant() -> None:
    script = Path(__file__).parents[1] / "benchmarks" / "otel_cost.py"
    result = subprocess.run(
        [sys.executable, str(script), "--quick", "--backend", "asyncio"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "| off | api-noop | sampled-out | in-memory |" in result.stdout
    assert [line.split("|")[1].strip() for line in result.stdout.splitlines() if line.startswith("| W")] == [
        "W1 (deltas/s)",
        "W2 (turns/s)",
    ]


def test_without_opentelemetry_the_import_error_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "try:\n    import agentloop.otel\nexcept ImportError as exc:\n    print(exc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    from agentloop.cli._install import install_command

    assert out.strip() == f"agentloop.otel needs the OpenTelemetry API, the 'otel' extra: {install_command('otel')}"
    assert "[otel]" in install_command("otel")


def test_import_agentloop_does_not_import_opentelemetry() -> None:
    assert loaded_by_import("agentloop", ("opentelemetry",)) == []  # any of its modules loads it


# --- the response's model, GenAI metrics, tool definitions (issue 31) ---------------------------


def answered_by(model_name: str, usage: al.Usage) -> Any:
    """A stream function whose answer names the model that answered (pi's `responseModel`)."""

    async def stream(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        message = al.AssistantMessage(
            content=(al.TextContent("hi"),),
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=usage,
            extra={"responseModel": model_name},
        )
        yield al.StartEvent(al.AssistantMessage(api=model.api, provider=model.provider, model=model.id))
        yield al.DoneEvent(reason="stop", message=message)

    return stream


async def run_once(config: al.AgentLoopConfig, stream_fn: Any, tools: list[al.AgentTool] = []) -> None:  # noqa: B006
    context = al.AgentContext(system_prompt="be brief", tools=tools)
    async with al.agent_loop([al.UserMessage(content="hi")], context, config, stream_fn=stream_fn) as events:
        async for _ in events:
            pass


async def test_the_chat_span_names_the_model_that_answered(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exporter
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL),
        answered_by("m1-2026-01", al.Usage(input=5, output=2)),
        tracer_provider=provider,
    )
    await run_once(config, stream_fn)
    chat = next(span for span in memory.get_finished_spans() if span.name == "chat m1")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.request.model"] == "m1"
    assert chat.attributes["gen_ai.response.model"] == "m1-2026-01"


def histograms(reader: Any) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_genai_client_metrics_go_to_the_meter_provider(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    provider, _ = exporter
    model = ScriptedModel([Response(content=[ScriptedText("a")], usage=al.Usage(input=7, output=3))])
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL), model, tracer_provider=provider, meter_provider=meters
    )
    await run_once(config, stream_fn)
    failing = ScriptedModel([Response(stop_reason="error", error_message="boom")])
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), failing, meter_provider=meters)
    await run_once(config, stream_fn)
    found = histograms(reader)
    tokens = {point.attributes["gen_ai.token.type"]: point for point in found["gen_ai.client.token.usage"]}
    assert tokens["input"].sum == 7 and tokens["output"].sum == 3
    assert tokens["input"].attributes["gen_ai.request.model"] == "m1"
    assert tokens["input"].attributes["gen_ai.provider.name"] == "faux"
    assert tokens["input"].attributes["gen_ai.operation.name"] == "chat"
    assert tokens["input"].explicit_bounds[:3] == (1, 4, 16)
    durations = found["gen_ai.client.operation.duration"]
    assert sorted(p.attributes.get("error.type", "") for p in durations) == ["", "model_error"]
    assert all(p.count == 1 and p.sum >= 0 for p in durations)
    meters.shutdown()


async def test_metrics_count_runs_sampled_out_of_tracing() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    tracer_provider = TracerProvider(sampler=ALWAYS_OFF)
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL), ScriptedModel(["a"]), tracer_provider=tracer_provider, meter_provider=meters
    )
    await run_once(config, stream_fn)
    assert len(histograms(reader)["gen_ai.client.operation.duration"]) == 1
    meters.shutdown()


async def test_tool_definitions_are_recorded_with_content(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    import json

    provider, memory = exporter
    tool = spanning_tool(provider, "lookup")
    for record in (False, True):
        config, stream_fn = instrument(
            al.AgentLoopConfig(model=MODEL), ScriptedModel(["a"]), tracer_provider=provider, record_content=record
        )
        await run_once(config, stream_fn, [tool])
    chats = [span for span in memory.get_finished_spans() if span.name == "chat m1"]
    assert chats[0].attributes is not None and "gen_ai.tool.definitions" not in chats[0].attributes
    assert chats[1].attributes is not None
    definitions = json.loads(str(chats[1].attributes["gen_ai.tool.definitions"]))
    assert definitions == [
        {"type": "function", "name": "lookup", "description": "Tool lookup", "parameters": tool.parameters}
    ]


def test_a_meter_provider_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="meter_provider must be an OpenTelemetry MeterProvider"):
        Tracing(meter_provider=object())  # type: ignore[arg-type]


async def test_a_model_call_that_failed_without_usage_records_no_token_counts(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The GenAI conventions: a count that is not available is not reported (a 0 would read as a
    real call). A failed call that did report its usage still counts it."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    provider, memory = exporter
    failing = ScriptedModel([Response(stop_reason="error", error_message="connection refused")])
    config, stream_fn = instrument(
        al.AgentLoopConfig(model=MODEL), failing, tracer_provider=provider, meter_provider=meters
    )
    await run_once(config, stream_fn)
    found = histograms(reader)
    assert "gen_ai.client.token.usage" not in found
    assert [p.attributes.get("error.type") for p in found["gen_ai.client.operation.duration"]] == ["model_error"]
    for span in memory.get_finished_spans():
        assert not any(key.startswith("gen_ai.usage.") for key in attrs(span)), span.name

    counted = ScriptedModel(
        [Response(stop_reason="error", error_message="cut", usage=al.Usage(input=9, output=2, total_tokens=11))]
    )
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), counted, meter_provider=meters)
    await run_once(config, stream_fn)
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in histograms(reader)["gen_ai.client.token.usage"]}
    assert tokens == {"input": 9, "output": 2}
    meters.shutdown()
