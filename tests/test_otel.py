"""agentloop.otel: the span tree of a run, its GenAI attributes, errors, content and keys."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentloop as al
from agentloop.otel import Tracing, instrument
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events

MODEL = al.Model(id="m1", api="faux", provider="faux")
KEY = "sk-secret-key-0123456789"


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


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
    ids = {s.context.span_id for s in spans}  # type: ignore[union-attr]
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.name, s.start_time)):
            error = (span.attributes or {}).get("error.type")
            lines.append("  " * depth + span.name + (f" !{error}" if error else ""))
            walk(span.context.span_id, depth + 1)  # type: ignore[union-attr]

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
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter], form: str, execution: str
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
    assert [attrs(t)["agentloop.turn.index"] for t in sorted(by_name(spans, "turn"), key=lambda s: s.start_time)] == [
        1,
        2,
        3,
    ]
    chats = sorted(by_name(spans, "chat m1"), key=lambda s: s.start_time)
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
    assert len({s.context.trace_id for s in spans}) == 1  # type: ignore[union-attr]
    for turn in by_name(spans, "turn"):
        assert run.start_time <= turn.start_time <= turn.end_time <= run.end_time  # type: ignore[operator]
    if execution == "parallel":  # the two calls of the first batch overlapped
        assert tool_spans["c2"].start_time < tool_spans["c1"].end_time  # type: ignore[operator]
    else:
        assert tool_spans["c1"].end_time <= tool_spans["c2"].start_time  # type: ignore[operator]


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
        al.AgentLoopConfig(model=MODEL, observe=lambda e: e.type == "message_update" and signal.abort()),
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


@pytest.mark.parametrize("shape", ["async context manager", "awaitable", "not an iterator"])
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

    fn = {"async context manager": managed, "awaitable": awaited, "not an iterator": wrong}[shape]
    config, stream_fn = instrument(al.AgentLoopConfig(model=MODEL), fn, tracer_provider=provider)
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
    assert events[-1].messages[-1].text == "hello"  # type: ignore[attr-defined]
    assert tree(memory.get_finished_spans()) == ["invoke_agent", "  turn", "    chat m1"]


def all_text(spans: tuple[ReadableSpan, ...]) -> str:
    """Every attribute value, status description and event of every span, as one string."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        parts.append(str(span.status.description))
        for event in span.events:
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
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
    first_chat = min(by_name(spans, "chat m1"), key=lambda s: s.start_time)
    assert attrs(first_chat)["gen_ai.input.messages"] == (
        '[{"role": "user", "parts": [{"type": "text", "content": "What is up?"}]}]'
    )
    assert attrs(first_chat)["gen_ai.system_instructions"] == '[{"type": "text", "content": "Be brief."}]'
    assert '"type": "tool_call", "id": "c1", "name": "alpha"' in attrs(first_chat)["gen_ai.output.messages"]
    (tool,) = by_name(spans, "execute_tool alpha")
    assert attrs(tool)["gen_ai.tool.call.arguments"] == '{"q": "c1"}'
    assert attrs(tool)["gen_ai.tool.call.result"] == '"alpha ok"'
    assert "the key is ***" in text


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
    assert len({s.context.trace_id for s in spans}) == 3  # type: ignore[union-attr]
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


async def test_an_agent_is_traced_through_its_listener_wrapped_tools_and_stream_function(
    anyio_backend: object, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = exporter
    tracing = Tracing(tracer_provider=provider, agent_name="bot")
    model = ScriptedModel([calls(("c1", "alpha"), ("c2", "slow")), "done", calls(("c3", "alpha")), "again"])
    tools = [spanning_tool(provider, "alpha"), spanning_tool(provider, "slow", 5, timeout=0.05)]
    agent = al.Agent(model=MODEL, tools=tracing.wrap_tools(tools), stream_fn=tracing.wrap_stream_fn(model))
    agent.subscribe(tracing.listener)
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
    assert len({s.context.trace_id for s in spans}) == 2  # type: ignore[union-attr]
    assert agent.state.messages[-1].text == "again"  # type: ignore[union-attr]


def test_bad_arguments_say_what_was_expected() -> None:
    with pytest.raises(TypeError, match=r"config must be an agentloop\.AgentLoopConfig, got dict"):
        instrument({}, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="record_content must be a bool, got str"):
        Tracing(record_content="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry TracerProvider"):
        Tracing(tracer_provider=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stream_fn must be callable"):
        Tracing().wrap_stream_fn(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tools must be AgentTool instances, got str"):
        Tracing().wrap_tools(["calc"])  # type: ignore[list-item]


def test_import_agentloop_does_not_import_opentelemetry() -> None:
    code = "import sys, agentloop; print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
