"""Bad input at the public boundaries (what tests/test_*.py do not already cover).

- Wrong types and values give a TypeError or ValueError that names the argument: the sink of
  `run_agent_loop`, `AgentTool(...)`, `@tool(...)`, the JSON codec (fuzzed: `from_json` and
  `loads` raise nothing but ValueError for any JSON value or text).
- Hooks that return nonsense or raise (`transform_context`, `get_steering_messages`,
  `prepare_next_turn`, `should_stop_after_turn`, `get_api_key`, `on_update`): `agent_loop` raises
  an error that names the hook; the `Agent` turns it into an error message and stays usable.
- Custom messages the converter lets through reach a provider or the proxy: a clear error event
  naming the message, never an AttributeError from deep inside a conversion.
- Lone surrogates (`\\ud800`) and 10 MB strings in prompts, tool arguments and tool results go
  through the loop, the codec, every provider and the proxy, in bounded time.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
from agentloop.providers import (
    proxy_app,
    stream_anthropic,
    stream_openai_completions,
    stream_openai_responses,
    stream_proxy,
)
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events
from agentloop.wire import dumps, from_json, loads

from ..support import as_assistant, last_assistant, text
from . import _wire
from ._profile import examples, settings_for

MODEL = al.Model(id="m", api="faux", provider="faux")
HUGE = 10 * 1024 * 1024
LONE = "\ud800"


def user(text: str = "go") -> al.UserMessage:
    return al.UserMessage(content=text)


async def _noop_execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
    return al.AgentToolResult.from_text("ok")


# --- wrong types and values -------------------------------------------------------------------------


async def test_run_agent_loop_checks_its_sink(anyio_backend: object) -> None:
    context, config = al.AgentContext(), al.AgentLoopConfig(model=MODEL)
    with pytest.raises(TypeError, match=r"emit must be callable, got 5"):
        await al.run_agent_loop([user()], context, config, 5)  # type: ignore[arg-type]
    with anyio.fail_after(5), pytest.raises(TypeError, match="emit must return None or an awaitable, got int"):
        await al.run_agent_loop([user()], context, config, lambda event: 5, None, ScriptedModel(["x"]))  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="stream_fn must be callable"):
        await al.run_agent_loop([user()], context, config, lambda event: None, None, "model")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"signal must be an agentloop\.AbortSignal"):
        await al.run_agent_loop_continue(al.AgentContext(messages=[user()]), config, lambda e: None, "stop")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"context must be an agentloop\.AgentContext"):
        al.agent_loop_continue({"messages": []}, config)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"name": ""}, ValueError, "tool name must be"),
        ({"name": "has space"}, ValueError, "tool name must be"),
        ({"name": "x" * 129}, ValueError, "tool name must be"),
        ({"name": 7}, ValueError, "tool name must be"),
        ({"name": "ünïcode"}, ValueError, "tool name must be"),
        ({"description": None}, TypeError, "tool description must be a str"),
        ({"parameters": "object"}, TypeError, "tool parameters must be a JSON schema dict or a pydantic model"),
        ({"parameters": int}, TypeError, "tool parameters must be a JSON schema dict or a pydantic model"),
        ({"execute": "run"}, TypeError, "tool execute must be callable"),
        ({"execute": None}, TypeError, "needs an execute function"),
        ({"execution_mode": "exclusive"}, ValueError, "execution_mode must be"),
    ],
)
def test_agent_tool_names_the_bad_argument(kwargs: dict[str, Any], error: type[Exception], pattern: str) -> None:
    arguments: dict[str, Any] = {
        "name": "t",
        "description": "",
        "parameters": {"type": "object"},
        "execute": _noop_execute,
    }
    arguments.update(kwargs)
    with pytest.raises(error, match=pattern):
        al.AgentTool(**arguments)


def test_an_invalid_schema_is_named_when_first_used() -> None:
    tool = al.AgentTool(name="t", description="", parameters={"type": "objekt"}, execute=_noop_execute)
    with pytest.raises(ValueError, match='tool "t" has an invalid JSON schema'):
        tool.validate({})


def test_tool_decorator_names_the_bad_argument() -> None:
    async def fn(a: int) -> str:
        return str(a)

    with pytest.raises(ValueError, match="tool name must be"):
        al.tool(name="bad name")(fn)
    with pytest.raises(ValueError, match="execution_mode must be"):
        al.tool(execution_mode="later")(fn)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="@tool needs a function"):
        al.tool(42)  # type: ignore[call-overload]


@settings_for(examples(300, 5000))
@given(value=_wire.junk)
def test_codec_decoding_raises_only_value_errors(value: Any) -> None:
    for candidate in (value, {"type": value}, {"role": value}, {"role": "assistant", "content": value}):
        try:
            decoded = from_json(candidate)
        except ValueError:
            continue
        assert decoded is not None


@settings_for(examples(300, 5000))
@given(
    event=st.sampled_from(
        [
            {"type": "agent_end", "messages": [{"role": "user", "content": "x"}]},
            {"type": "turn_end", "message": {"role": "assistant"}, "toolResults": []},
            {"type": "message_update", "message": {"role": "assistant"}, "assistantMessageEvent": {"type": "start"}},
            {
                "type": "tool_execution_end",
                "toolCallId": "c",
                "toolName": "t",
                "result": {"content": []},
                "isError": False,
            },
            {"type": "text_delta", "contentIndex": 0, "delta": "x", "partial": {"role": "assistant"}},
            {"type": "toolCall", "id": "c", "name": "t", "arguments": {}},
            {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [{"type": "text", "text": "x"}]},
        ]
    ),
    key=st.text(min_size=1, max_size=20),
    replacement=_wire.junk,
    data=st.data(),
)
def test_codec_decoding_of_damaged_values_raises_only_value_errors(
    event: dict[str, Any], key: str, replacement: Any, data: st.DataObject
) -> None:
    """A valid JSON form with one field removed or replaced by junk, at any depth."""
    damaged = json.loads(json.dumps(event))
    node: Any = damaged
    while isinstance(node, dict) and node and data.draw(st.booleans()):
        child = node[data.draw(st.sampled_from(sorted(node)))]
        if not isinstance(child, (dict, list)) or not child:
            break
        node = child if isinstance(child, dict) else child[0]
    if isinstance(node, dict) and node:
        field = data.draw(st.sampled_from(sorted(node)))
        if data.draw(st.booleans()):
            del node[field]
        else:
            node[field] = replacement
    with contextlib.suppress(ValueError):
        loads(json.dumps(damaged))


@pytest.mark.parametrize("text", ["", "{", "[1, 2", "nan", b"\xff\xfe", '{"type": 5}', '"just a string"', "[]", "null"])
def test_loads_of_text_that_is_not_an_agentloop_value_is_a_value_error(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        loads(text)


# --- hooks that raise or return nonsense ------------------------------------------------------------

HOOKS: list[tuple[str, Callable[..., Any], type[Exception], str]] = [
    ("transform_context", lambda messages, signal: None, TypeError, r"transform_context\(\) must be a sequence"),
    ("transform_context", lambda messages, signal: [*messages, "x"], TypeError, r"transform_context\(\)\[1\]"),
    ("get_steering_messages", lambda: "steer", TypeError, r"get_steering_messages\(\) must be a sequence"),
    ("get_follow_up_messages", lambda: [{"role": "user"}], TypeError, r"get_follow_up_messages\(\)\[0\]"),
    ("prepare_next_turn", lambda turn: "next", TypeError, "prepare_next_turn must return a NextTurn or None, got str"),
    ("should_stop_after_turn", lambda turn: 1 / 0, ZeroDivisionError, "division by zero"),
    ("get_api_key", lambda provider: dict[str, str]()["missing"], KeyError, "missing"),
    (
        "convert_to_llm",
        lambda messages: (_ for _ in ()).throw(LookupError("no converter")),
        LookupError,
        "no converter",
    ),
]


@pytest.mark.parametrize(("hook", "fn", "error", "pattern"), HOOKS, ids=[f"{h}-{i}" for i, (h, *_) in enumerate(HOOKS)])
async def test_a_bad_hook_ends_agent_loop_with_an_error_naming_it(
    anyio_backend: object, hook: str, fn: Callable[..., Any], error: type[Exception], pattern: str
) -> None:
    bad_hook: dict[str, Any] = {hook: fn}
    config = al.AgentLoopConfig(model=MODEL, **bad_hook)
    events: list[al.AgentEvent] = []
    with anyio.fail_after(5), pytest.raises(error, match=pattern):
        async with al.agent_loop([user()], al.AgentContext(), config, None, ScriptedModel(["a", "b"])) as stream:
            async for event in stream:
                events.append(event)
    assert events and isinstance(events[0], al.AgentStart)


AGENT_HOOKS = [
    h for h in HOOKS if h[0] not in ("get_steering_messages", "get_follow_up_messages")
]  # the Agent owns its queues


@pytest.mark.parametrize(
    ("hook", "fn", "error", "pattern"), AGENT_HOOKS, ids=[f"{h}-{i}" for i, (h, *_) in enumerate(AGENT_HOOKS)]
)
async def test_a_bad_hook_becomes_an_error_message_of_the_agent(
    anyio_backend: object, hook: str, fn: Callable[..., Any], error: type[Exception], pattern: str
) -> None:
    bad_hook: dict[str, Any] = {hook: fn}
    agent = al.Agent(model=MODEL, stream_fn=ScriptedModel(["a", "b", "c"]), **bad_hook)
    with anyio.fail_after(5):
        await agent.prompt("go")  # does not raise
    assert agent.state.error_message is not None and error.__name__ in repr(error(agent.state.error_message))
    assert as_assistant(agent.state.messages[-1]).stop_reason == "error"
    assert not agent.state.is_streaming
    agent.options = agent.options.replace(**{hook: None if hook != "convert_to_llm" else al.default_convert_to_llm})
    with anyio.fail_after(5):
        await agent.prompt("again")
    assert agent.state.error_message is None, "the agent is usable again"


async def test_progress_updates_of_the_wrong_shape_fail_the_call_and_only_it(anyio_backend: object) -> None:
    async def reports_junk(
        tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any
    ) -> al.AgentToolResult:
        on_update("50%")
        return al.AgentToolResult.from_text("never")

    tools = [
        al.AgentTool(name="junk", description="", parameters={"type": "object"}, execute=reports_junk),
        al.AgentTool(name="fine", description="", parameters={"type": "object"}, execute=_noop_execute),
    ]
    calls = Response(content=[ScriptedToolCall("c1", "junk", {}), ScriptedToolCall("c2", "fine", {})])
    events: list[al.AgentEvent] = []
    with anyio.fail_after(5):
        await al.run_agent_loop(
            [user()], al.AgentContext(tools=tools), al.AgentLoopConfig(model=MODEL), events.append, None,
            ScriptedModel([calls, "done"]),
        )  # fmt: skip
    check_events(events)
    results = {e.tool_call_id: e for e in events if isinstance(e, al.ToolExecutionEnd)}
    assert results["c1"].is_error and "on_update expects an AgentToolResult, got str" in text(
        results["c1"].result.content[0]
    )
    assert not results["c2"].is_error


# --- custom messages the converter does not know ---------------------------------------------------

MEMO = al.CustomMessage(role="memo", data={"text": "remember this"})
PROVIDER_STREAMS = {
    "openai-completions": stream_openai_completions,
    "openai-responses": stream_openai_responses,
    "anthropic-messages": stream_anthropic,
}


@pytest.mark.parametrize("api", sorted(PROVIDER_STREAMS))
async def test_a_custom_message_left_in_by_the_converter_is_a_clear_provider_error(
    anyio_backend: object, api: str
) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    model = al.Model(id="m", api=api, provider="x", base_url="http://mock/v1")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        stream_fn = PROVIDER_STREAMS[api]
        events: list[al.AgentEvent] = []
        config = al.AgentLoopConfig(model=model, convert_to_llm=lambda messages: list(messages))  # type: ignore[arg-type]  # keeps the memo
        with anyio.fail_after(5):
            await al.run_agent_loop(
                [MEMO, user()], al.AgentContext(), config, events.append, None,
                lambda m, c, o: stream_fn(m, c, o, client=client),
            )  # fmt: skip
    check_events(events)
    last = last_assistant(events)
    assert last.stop_reason == "error" and sent == []
    assert last.error_message is not None
    assert last.error_message.startswith("context.messages[0] is a CustomMessage (role 'memo')")
    assert "convert_to_llm" in last.error_message


async def test_a_custom_message_sent_through_the_proxy_is_refused_by_name(anyio_backend: object) -> None:
    served = ScriptedModel(["never"])
    app = proxy_app(served, token="t0ken")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        fn = stream_proxy("http://proxy.test", "t0ken", client=client)
        with anyio.fail_after(5):
            async with fn(MODEL, al.Context(messages=(MEMO,)), al.StreamOptions(signal=al.AbortSignal())) as events:  # type: ignore[arg-type]
                got = [event async for event in events]
    assert got[-1].type == "error" and served.calls == []
    assert "context.messages[0]: expected a user, assistant or toolResult message, got role 'memo'" in (
        got[-1].error.error_message or ""
    )


# --- lone surrogates and 10 MB strings --------------------------------------------------------------


def _big(tag: str) -> str:
    return tag + LONE + "x" * HUGE + "\udfff" + tag


async def test_surrogates_and_huge_strings_go_through_the_loop_and_the_codec(anyio_backend: object) -> None:
    received: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
        received.append(params["text"])
        return al.AgentToolResult.from_text(_big("result"))

    tool = al.AgentTool(
        name="echo",
        description=_big("desc")[:100],
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        execute=execute,
    )
    arguments = {"text": _big("args")}
    model = ScriptedModel(
        [Response(content=[_big("answer"), ScriptedToolCall("c1", "echo", arguments)]), Response(content=[LONE])]
    )
    events: list[al.AgentEvent] = []
    started = time.perf_counter()
    with anyio.fail_after(30):
        async with al.agent_loop(
            [user(_big("prompt"))], al.AgentContext(tools=[tool]), al.AgentLoopConfig(model=MODEL), None, model
        ) as stream:
            events += [event async for event in stream]
    check_events(events)
    assert received == [arguments["text"]]
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    text = dumps(end)
    assert len(text) > 4 * HUGE
    assert loads(text) == end, "the codec round-trips lone surrogates and 10 MB strings"
    assert time.perf_counter() - started < 20


def _ok_body(api: str) -> bytes:
    if api == "openai-completions":
        return b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    if api == "openai-responses":
        return b'data: {"type":"response.completed","response":{"status":"completed"}}\n\n'
    return b'data: {"type":"message_stop"}\n\n'


@pytest.mark.parametrize("api", sorted(PROVIDER_STREAMS))
async def test_surrogates_and_huge_strings_reach_a_provider_as_valid_json(anyio_backend: object, api: str) -> None:
    """Everything the transcript may hold (a model's tool arguments included) is sent as valid UTF-8
    JSON: lone surrogates are dropped, NaN and infinities become null (a poisoned conversation
    would fail every later request)."""
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_ok_body(api))

    call = al.ToolCall("c1", "echo", {"text": _big("args"), "nan": float("nan"), "inf": float("inf"), LONE: [LONE]})
    answer = al.AssistantMessage(
        content=(al.TextContent(_big("answer")), al.ThinkingContent(LONE), call), api=api, provider="x", model="m"
    )
    result = al.ToolResultMessage(tool_call_id="c1", tool_name="echo", content=(al.TextContent(_big("result")),))
    context = al.Context(system_prompt=_big("system"), messages=(user(_big("prompt")), answer, result, user(LONE)))
    model = al.Model(id="m", api=api, provider="x", base_url="http://mock/v1")
    started = time.perf_counter()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        with anyio.fail_after(30):
            stream = PROVIDER_STREAMS[api](model, context, al.StreamOptions(signal=al.AbortSignal()), client=client)
            events = [event async for event in stream]
    assert events[-1].type == "done", getattr(events[-1], "error", None)
    body = bodies[0].decode("utf-8")  # valid UTF-8: no lone surrogate left
    assert len(body) > 4 * HUGE
    json.loads(body, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert time.perf_counter() - started < 20


async def test_surrogates_and_huge_strings_go_through_the_proxy(anyio_backend: object) -> None:
    served = ScriptedModel(["ok"])
    app = proxy_app(served, token="t0ken")
    prompt = _big("prompt")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        fn = stream_proxy("http://proxy.test", "t0ken", client=client)
        with anyio.fail_after(30):
            async with fn(
                MODEL, al.Context(messages=(user(prompt),)), al.StreamOptions(signal=al.AbortSignal())
            ) as events:
                got = [event async for event in events]
    assert got[-1].type == "done"
    assert served.calls[0].messages[0].content == prompt, "the server sees the prompt exactly"


async def test_a_huge_answer_streams_in_bounded_time(anyio_backend: object) -> None:
    chunks = ["y" * 1024] * (HUGE // 1024)
    model = ScriptedModel([Response(content=[ScriptedText(chunks)])])
    started = time.perf_counter()
    with anyio.fail_after(30):
        messages = await al.run_agent_loop(
            [user()], al.AgentContext(), al.AgentLoopConfig(model=MODEL), lambda e: None, None, model
        )
    assert len(as_assistant(messages[-1]).text) == HUGE
    assert time.perf_counter() - started < 20


async def test_a_huge_tool_argument_validates_in_bounded_time(anyio_backend: object) -> None:
    tool = al.AgentTool(
        name="t",
        description="",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "string", "pattern": "^x"}, "n": {"type": "integer"}},
        },
        execute=_noop_execute,
    )
    started = time.process_time()  # the work done, not how busy the machine is
    assert tool.validate({"a": "x" * HUGE, "n": "5"}) == {"a": "x" * HUGE, "n": 5}
    with pytest.raises(ValueError, match="Validation failed"):
        tool.validate({"a": LONE * 1000 + "y" * HUGE})
    assert time.process_time() - started < 10


# --- AbortSignal ------------------------------------------------------------------------------------


def test_abort_signal_checks_its_callbacks() -> None:
    with pytest.raises(TypeError, match="on_abort expects a callable, got 5"):
        al.AbortSignal().on_abort(5)  # type: ignore[arg-type]


async def test_an_abort_callback_that_raises_does_not_stop_the_abort(anyio_backend: object) -> None:
    """Every callback runs (the loop's own among them), then the first failure is raised."""

    async def stalls(model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        b = al.AssistantMessageBuilder(api=model.api)
        yield b.start()
        await anyio.sleep_forever()  # a model that thinks: only the loop's abort scope ends it

    def broken() -> None:
        raise RuntimeError("an application's callback broke")

    signal = al.AbortSignal()
    signal.on_abort(broken)
    messages: list[al.AgentMessage] = []

    async def run() -> None:
        messages.extend(
            await al.run_agent_loop(
                [user()], al.AgentContext(), al.AgentLoopConfig(model=MODEL), lambda e: None, signal, stalls
            )
        )

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.sleep(0.02)
            with pytest.raises(RuntimeError, match="callback broke"):
                signal.abort()
    assert as_assistant(messages[-1]).stop_reason == "aborted"
