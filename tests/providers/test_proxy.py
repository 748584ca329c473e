"""The pi proxy protocol: `stream_proxy` (client) against `proxy_app` (ASGI server), and each alone.

httpx 0.28's `ASGITransport` buffers the whole response before returning it, so it cannot show
streaming, abort mid-stream or a client disconnect. `StreamingASGITransport` below is a small
in-test ASGI driver that streams the body as the app sends it and reports `http.disconnect` to the
app when the client closes the response; those tests use it. Everything else goes through
`httpx.ASGITransport` or, for hand-written wire bytes, `httpx.MockTransport`.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import socket
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest

from agentloop import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    AssistantMessageBuilder,
    AssistantMessageEvent,
    Context,
    Cost,
    DoneEvent,
    ErrorEvent,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agentloop.providers._proxy._client import ABORTED_TEXT, CLOSED_EARLY_TEXT, stream_proxy
from agentloop.providers._proxy._server import proxy_app
from agentloop.providers._proxy._wire import ProxyTool
from agentloop.testing import (
    Response,
    ScriptedModel,
    ScriptedText,
    ScriptedThinking,
    ScriptedToolCall,
    check_events,
)

from .conftest import serve_asgi

TOKEN = "s3cret-proxy-token"
URL = "http://proxy.test"
MODEL = Model(
    id="scripted-1",
    name="Scripted One",
    api="scripted",
    provider="test",
    base_url="https://api.openai.com/v1",  # a base URL proxy_app allows by default
    reasoning=True,
    input=("text", "image"),
    cost=ModelCost(input=1.0, output=2.0, cache_read=0.5, cache_write=1.5),
    context_window=8192,
    max_tokens=1024,
    headers={"x-model": "1"},
    compat={"supportsStore": False},
)
CONTEXT = Context(system_prompt="Be brief.", messages=(UserMessage(content="hi", timestamp=1),))
USAGE = Usage(input=10, output=5, cache_read=2, cache_write=1, total_tokens=18, cost=Cost(0.1, 0.2, 0.01, 0.02, 0.33))
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ZERO_USAGE_JSON = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def opts(signal: AbortSignal | None = None, **kwargs: Any) -> StreamOptions:
    return StreamOptions(signal=signal or AbortSignal(), **kwargs)


async def collect(
    fn: Any, model: Model = MODEL, context: Context = CONTEXT, options: StreamOptions | None = None
) -> list[AssistantMessageEvent]:
    async with fn(model, context, options or opts()) as events:
        return [event async for event in events]


async def run_direct(fn: Any, model: Model = MODEL, context: Context = CONTEXT) -> list[AssistantMessageEvent]:
    async with aclosing(fn(model, context, opts())) as events:
        return [event async for event in events]


def asgi_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app))


def final(events: Sequence[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, (DoneEvent, ErrorEvent))
    assert sum(e.type in ("done", "error") for e in events) == 1
    return last.message if isinstance(last, DoneEvent) else last.error


def no_time(message: Any) -> Any:
    return replace(message, timestamp=0)


def norm(event: AssistantMessageEvent, *, tool_partial: bool = True) -> tuple[Any, ...]:
    """An event as comparable data (timestamps dropped)."""
    if isinstance(event, DoneEvent):
        return ("done", event.reason, no_time(event.message))
    if isinstance(event, ErrorEvent):
        return ("error", event.reason, no_time(event.error))
    fields = tuple(getattr(event, f.name) for f in dataclasses.fields(event) if f.repr)  # the public fields
    partial = no_time(event.partial) if tool_partial or event.type != "toolcall_delta" else None
    return (event.type, fields, partial)


def wire(*events: dict[str, Any], end: bytes = b"\n\n") -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + end for e in events)


def raw_server(body: bytes | Sequence[bytes], status: int = 200, headers: dict[str, str] | None = None) -> Any:
    """A transport answering every request with these body chunks, streamed as they are."""

    async def chunks() -> AsyncIterator[bytes]:
        for chunk in [body] if isinstance(body, bytes) else body:
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, content=chunks())

    return httpx.MockTransport(handler)


async def via_raw(body: bytes | Sequence[bytes], status: int = 200, **kwargs: Any) -> list[AssistantMessageEvent]:
    async with httpx.AsyncClient(transport=raw_server(body, status, **kwargs)) as client:
        return await collect(stream_proxy(URL, TOKEN, client=client))


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Runs an ASGI app per request in a task group and streams its body as it is sent.

    Closing the response tells the app `http.disconnect` (and a later `send` raises OSError, as
    servers do for a gone client). The transport waits for every app call to return on exit.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self._tg: Any = None

    async def __aenter__(self) -> StreamingASGITransport:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._tg.__aexit__(*exc_info)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        send_body, receive_body = anyio.create_memory_object_stream[bytes](16)
        started = anyio.Event()
        disconnected = anyio.Event()
        head: dict[str, Any] = {}
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                head["status"], head["headers"] = message["status"], message.get("headers", [])
                started.set()
                return
            if disconnected.is_set():
                raise OSError("client disconnected")
            try:
                if message.get("body"):
                    await send_body.send(message["body"])
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise OSError("client disconnected") from None
            if not message.get("more_body", False):
                send_body.close()

        async def run() -> None:
            with send_body:
                try:
                    await self.app(
                        {
                            "type": "http",
                            "method": request.method,
                            "path": request.url.path,
                            "root_path": "",
                            "headers": [(k.lower(), v) for k, v in request.headers.raw],
                            "query_string": b"",
                        },
                        receive,
                        send,
                    )
                finally:
                    started.set()

        self._tg.start_soon(run)
        try:
            await started.wait()
        except BaseException:
            disconnected.set()
            receive_body.close()
            raise
        if "status" not in head:
            receive_body.close()
            raise RuntimeError("the app returned without a response")
        return httpx.Response(head["status"], headers=head["headers"], stream=_Body(receive_body, disconnected))


class _Body(httpx.AsyncByteStream):
    def __init__(self, receive: Any, disconnected: anyio.Event) -> None:
        self._receive = receive
        self._disconnected = disconnected

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._receive:
            yield chunk

    async def aclose(self) -> None:
        self._disconnected.set()
        self._receive.close()


class Watched:
    """A server-side stream function: start, a text block with "Hel", then waits forever."""

    def __init__(self) -> None:
        self.closed = anyio.Event()
        self.signal: AbortSignal | None = None

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        self.signal = options.signal
        return self._run(model)

    async def _run(self, model: Model) -> AsyncIterator[AssistantMessageEvent]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        try:
            yield b.start()
            yield b.text_start()
            yield b.text_delta("Hel")
            await anyio.sleep_forever()
        finally:
            self.closed.set()


# --- client and server together: event fidelity -----------------------------------------------

SCENARIOS = {
    "text": Response(content=[ScriptedText(["Hel", "lo", " world"])]),
    "thinking": Response(content=[ScriptedThinking(["Let me ", "think"]), ScriptedText("Answer")]),
    "tool_calls": Response(
        content=[
            ScriptedText("Calling."),
            ScriptedToolCall("c1", "get_weather", args_chunks=['{"city":', '"Par', 'is", "days"', ": 3}"]),
            ScriptedToolCall("c2", "noop", {}),
        ]
    ),
    "usage": Response(content=["ok"], usage=USAGE),
    "length": Response(content=["cut"], stop_reason="length"),
    "error": Response(content=["part"], stop_reason="error", error_message="upstream exploded", usage=USAGE),
    "aborted": Response(content=[ScriptedText(["a", "b"])], stop_reason="aborted"),
    "fail_before_start": Response(fail_before_start=True, stop_reason="error", error_message="no API key"),
    "empty": Response(content=[]),
    "unicode": Response(content=[ScriptedText(["héllo ", "\u2028 line", " 😀", " lone \ud83d"])]),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_client_events_equal_the_stream_functions_events(anyio_backend: object, name: str) -> None:
    with anyio.fail_after(10):
        expected = await run_direct(ScriptedModel([SCENARIOS[name]]))
        served = ScriptedModel([SCENARIOS[name]])
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            got = await collect(stream_proxy(URL, TOKEN, client=client))
    # The scripted model parses tool arguments only when complete; the client parses partial JSON.
    assert [norm(e, tool_partial=False) for e in got] == [norm(e, tool_partial=False) for e in expected]
    assert len(served.calls) == 1


async def test_tool_call_arguments_are_parsed_while_they_stream(anyio_backend: object) -> None:
    served = ScriptedModel([SCENARIOS["tool_calls"]])
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            events = await collect(stream_proxy(URL, TOKEN, client=client))
    deltas = [e for e in events if e.type == "toolcall_delta" and e.content_index == 1]
    assert [e.delta for e in deltas] == ['{"city":', '"Par', 'is", "days"', ": 3}"]
    assert [e.partial.content[1].arguments for e in deltas] == [  # type: ignore[union-attr]
        {},
        {"city": "Par"},
        {"city": "Paris"},
        {"city": "Paris", "days": 3},
    ]
    message = final(events)
    assert message.stop_reason == "toolUse"
    assert message.tool_calls == (
        ToolCall("c1", "get_weather", {"city": "Paris", "days": 3}),
        ToolCall("c2", "noop", {}),
    )


async def test_usage_error_and_aborted_terminals(anyio_backend: object) -> None:
    served = ScriptedModel([SCENARIOS["usage"], SCENARIOS["error"], SCENARIOS["aborted"]])
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            fn = stream_proxy(URL, TOKEN, client=client)
            done, failed, aborted = [final(await collect(fn)) for _ in range(3)]
    assert done.usage == USAGE and done.stop_reason == "stop"
    assert (failed.stop_reason, failed.error_message, failed.text, failed.usage) == (
        "error",
        "upstream exploded",
        "part",
        USAGE,
    )
    assert (aborted.stop_reason, aborted.error_message, aborted.text) == ("aborted", "Request was aborted", "ab")


async def test_signatures_redaction_response_id_and_final_content_survive(anyio_backend: object) -> None:
    async def fn(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.start()
        yield b.thinking_start()
        yield b.thinking_delta("secret")
        yield b.thinking_end(signature="enc-123", redacted=True)
        yield b.text_start()
        yield b.text_delta("Hel")
        yield b.text_delta("lo")
        yield b.text_end(signature='{"v":1,"id":"msg_1"}')
        b.response_id = "resp_42"
        # The provider knows the final blocks better than its deltas: the client must end up equal.
        b.set_content((*b.content[:1], TextContent("Hello, corrected", text_signature='{"v":1,"id":"msg_1"}')))
        yield b.done("stop")

    with anyio.fail_after(10):
        expected = await run_direct(fn)
        async with asgi_client(proxy_app(fn, token=TOKEN)) as client:
            got = await collect(stream_proxy(URL, TOKEN, client=client))
    assert [norm(e) for e in got] == [norm(e) for e in expected]
    message = final(got)
    assert message.content[0] == ThinkingContent("secret", thinking_signature="enc-123", redacted=True)
    assert message.text == "Hello, corrected" and message.response_id == "resp_42"


async def test_the_server_receives_the_clients_request_exactly(anyio_backend: object) -> None:
    seen: list[tuple[Model, Context, StreamOptions]] = []

    async def fn(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        seen.append((model, context, options))
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.done()

    tool = echo_tool()
    context = Context(
        system_prompt="Be brief.",
        messages=(
            UserMessage(content=(TextContent("look"),), timestamp=5),
            AssistantMessage(
                content=(ThinkingContent("t", thinking_signature="s"), ToolCall("c1", "echo", {"x": [1, {"y": None}]})),
                api="scripted",
                provider="test",
                model="scripted-1",
                usage=USAGE,
                stop_reason="toolUse",
                response_id="r1",
                timestamp=6,
            ),
            ToolResultMessage(
                tool_call_id="c1", tool_name="echo", content=(TextContent("done"),), details={"k": 1}, timestamp=7
            ),
        ),
        tools=(tool,),
    )
    options = opts(
        api_key="sk-client-side",
        reasoning="high",
        session_id="sess-1",
        temperature=0.25,
        max_tokens=512,
        thinking_budgets={"high": 9000},
        headers={"x-trace": "abc"},
        metadata={"user_id": "u1"},
        max_retry_delay=1.5,
    )
    with anyio.fail_after(10):
        app = proxy_app(
            fn,
            token=TOKEN,
            get_api_key=lambda provider: f"server-key-for-{provider}",
            key_base_urls={"test": [MODEL.base_url]},
        )
        async with asgi_client(app) as client:
            events = await collect(stream_proxy(URL, TOKEN, client=client), MODEL, context, options)
    assert final(events).stop_reason == "stop"
    [(model, got, got_options)] = seen
    assert model == MODEL
    assert got.system_prompt == "Be brief." and got.messages == context.messages
    assert got.tools == (ProxyTool("echo", "Echo the text.", ECHO_SCHEMA),)
    assert got_options.api_key == "server-key-for-test"
    assert (got_options.reasoning, got_options.session_id, got_options.temperature, got_options.max_tokens) == (
        "high",
        "sess-1",
        0.25,
        512,
    )
    assert got_options.thinking_budgets == {"high": 9000} and got_options.headers == {"x-trace": "abc"}
    assert got_options.metadata == {"user_id": "u1"} and got_options.max_retry_delay == 1.5


async def test_request_shape_is_the_references_and_carries_no_api_key(anyio_backend: object) -> None:
    captured: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        await request.aread()
        captured.append(request)
        return httpx.Response(200, content=wire({"type": "done", "reason": "stop", "usage": ZERO_USAGE_JSON}))

    tool = echo_tool()
    options = opts(api_key="sk-never-send-me", reasoning="off", temperature=0.5, max_tokens=64)
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            fn = stream_proxy(
                URL + "/base/",
                TOKEN,
                client=client,
                headers={"X-Extra": "1", "Authorization": "Bearer other", "authorization": "Bearer x"},
            )
            await collect(fn, MODEL, Context(messages=CONTEXT.messages, tools=(tool,)), options)
    [request] = captured
    assert request.method == "POST" and str(request.url) == URL + "/base/api/stream"
    assert request.headers.get_list("authorization") == [f"Bearer {TOKEN}"]
    assert request.headers["content-type"] == "application/json" and request.headers["x-extra"] == "1"
    assert b"sk-never-send-me" not in request.content
    assert all("sk-never-send-me" not in value for value in request.headers.values())
    body = json.loads(request.content)
    assert set(body) == {"model", "context", "options"}
    assert body["model"] == {
        "id": "scripted-1",
        "name": "Scripted One",
        "api": "scripted",
        "provider": "test",
        "baseUrl": "https://api.openai.com/v1",
        "reasoning": True,
        "input": ["text", "image"],
        "cost": {"input": 1.0, "output": 2.0, "cacheRead": 0.5, "cacheWrite": 1.5},
        "contextWindow": 8192,
        "maxTokens": 1024,
        "headers": {"x-model": "1"},
        "compat": {"supportsStore": False},
    }
    assert body["context"] == {
        "messages": [{"role": "user", "content": "hi", "timestamp": 1}],
        "tools": [{"name": "echo", "description": "Echo the text.", "parameters": ECHO_SCHEMA}],
    }
    assert body["options"] == {"temperature": 0.5, "maxTokens": 64}  # reasoning "off" is pi-ai's absent level


async def test_auth_token_may_be_a_function_called_per_request(anyio_backend: object) -> None:
    tokens = iter(["wrong", TOKEN])

    async def token() -> str:
        return next(tokens)

    served = ScriptedModel(["ok"])
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            fn = stream_proxy(URL, token, client=client)
            first, second = final(await collect(fn)), final(await collect(fn))
            broken = final(await collect(stream_proxy(URL, lambda: "", client=client)))
            raising = final(await collect(stream_proxy(URL, lambda: 1 / 0, client=client)))  # type: ignore[arg-type,return-value]
    assert (first.stop_reason, first.error_message) == ("error", "Proxy error: Unauthorized")
    assert second.text == "ok"
    assert broken.error_message == (
        "Could not get the proxy auth token: auth_token() returned '', expected a non-empty str"
    )
    assert raising.error_message == "Could not get the proxy auth token: division by zero"


# --- the end-to-end agent run -----------------------------------------------------------------


def echo_tool() -> AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        return AgentToolResult.from_text(f"echo {params['text']}")

    return AgentTool(name="echo", description="Echo the text.", parameters=ECHO_SCHEMA, execute=execute)


def agent_script() -> list[Response]:
    return [
        Response(
            content=[
                ScriptedThinking(["I should ", "echo."]),
                ScriptedToolCall("call_1", "echo", args_chunks=['{"te', 'xt": "pi', 'ng"}']),
            ],
            usage=USAGE,
        ),
        Response(content=[ScriptedText(["The echo ", "said ping."])], usage=USAGE),
    ]


async def test_agent_run_through_the_proxy_equals_the_direct_run(anyio_backend: object) -> None:
    with anyio.fail_after(10):
        direct = Agent(
            model=MODEL, system_prompt="Be brief.", tools=[echo_tool()], stream_fn=ScriptedModel(agent_script())
        )
        await direct.prompt("say ping")

        served = ScriptedModel(agent_script())
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            agent = Agent(
                model=MODEL,
                system_prompt="Be brief.",
                tools=[echo_tool()],
                stream_fn=stream_proxy(URL, TOKEN, client=client),
            )
            events: list[AgentEvent] = []
            agent.subscribe(lambda event, signal: events.append(event))
            await agent.prompt("say ping")

    check_events(events)
    got = agent.state.messages
    assert [m.role for m in got] == ["user", "assistant", "toolResult", "assistant"]
    assert [no_time(m) for m in got] == [no_time(m) for m in direct.state.messages]
    assert got[1].content[1] == ToolCall("call_1", "echo", {"text": "ping"})  # type: ignore[union-attr]
    assert got[-1].text == "The echo said ping." and got[-1].usage == USAGE  # type: ignore[union-attr]
    # The server's model saw the client's transcript exactly (timestamps included).
    assert len(served.calls) == 2
    assert tuple(served.calls[1].messages) == tuple(got[:3])
    assert served.calls[1].system_prompt == "Be brief."
    assert [t.name for t in served.calls[1].tools] == ["echo"]


# --- the server alone -------------------------------------------------------------------------


def body(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "model": {"id": "m1", "api": "scripted", "provider": "test"},
        "context": {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]},
        "options": {},
    }
    data.update(overrides)
    return data


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "headers",
    [{}, auth("wrong"), auth(TOKEN + "x"), {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}],
    ids=["missing", "wrong", "longer", "basic", "no-scheme"],
)
async def test_bad_token_is_401_and_runs_nothing(anyio_backend: object, headers: dict[str, str]) -> None:
    served = ScriptedModel(["never"])
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            response = await client.post(URL + "/api/stream", json=body(), headers=headers)
    assert response.status_code == 401
    assert response.json() == {"error": "Unauthorized"}
    assert response.headers["www-authenticate"] == "Bearer"
    assert served.calls == []


async def test_token_is_compared_in_constant_time(anyio_backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(ScriptedModel(["ok"]), token=TOKEN)) as client:
            ok = await client.post(URL + "/api/stream", json=body(), headers={"authorization": f"bearer {TOKEN}"})
            bad = await client.post(URL + "/api/stream", json=body())
    assert (ok.status_code, bad.status_code) == (200, 401)
    assert calls == [(TOKEN.encode(), TOKEN.encode()), (b"", TOKEN.encode())]


async def test_a_bad_token_through_the_client_is_one_error_event(anyio_backend: object) -> None:
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(ScriptedModel(["ok"]), token=TOKEN)) as client:
            events = await collect(stream_proxy(URL, "not-the-token", client=client))
    assert [e.type for e in events] == ["error"]
    assert final(events).error_message == "Proxy error: Unauthorized"


BAD_BODIES: list[tuple[str, Any, str]] = [
    ("not-json", b"{nope", "the body is not valid JSON"),
    ("not-utf8", b"\xff\xfe{", "the body is not valid JSON"),
    ("array", [1], "the body must be a JSON object, got an array"),
    ("no-model", {"context": {"messages": []}}, "model is missing"),
    ("no-context", {"model": {"id": "m"}}, "context is missing"),
    ("model-not-object", body(model="gpt"), "model must be an object, got a string"),
    ("model-no-id", body(model={"api": "x"}), "model.id must be a non-empty string"),
    ("model-int-id", body(model={"id": 5}), "model.id must be a string, got an integer"),
    ("model-empty-id", body(model={"id": ""}), "model.id must be a non-empty string"),
    ("model-bad-input", body(model={"id": "m", "input": ["audio"]}), "model.input must list"),
    ("model-bad-cost", body(model={"id": "m", "cost": {"input": "free"}}), "model.cost.input must be a number"),
    ("model-bad-window", body(model={"id": "m", "contextWindow": 1.5}), "model.contextWindow must be an integer"),
    ("no-messages", body(context={}), "context.messages is missing"),
    ("messages-null", body(context={"messages": None}), "context.messages must be an array"),
    ("messages-object", body(context={"messages": {}}), "context.messages must be an array"),
    ("bad-role", body(context={"messages": [{"role": ""}]}), "context.messages[0]: message has no valid role"),
    (
        "custom-role",
        body(context={"messages": [{"role": "note", "text": "x"}]}),
        "context.messages[0]: expected a user, assistant or toolResult message, got role 'note'",
    ),
    (
        "system-content",
        body(context={"messages": [{"role": "system", "content": 5}]}),
        "context.messages[0].content must be a string or an array of text blocks, got an integer",
    ),
    (
        "system-tool",
        body(context={"messages": [{"role": "system", "content": "", "toolsAdded": [{"description": "x"}]}]}),
        "context.messages[0].toolsAdded[0].name",
    ),
    (
        "system-removed",
        body(context={"messages": [{"role": "system", "content": "", "toolsRemoved": ["echo"]}]}),
        "context.messages[0].toolsRemoved[0] must be an object with a name",
    ),
    (
        "system-section",
        body(context={"messages": [{"role": "system", "content": "", "sections": {"a": 1}}]}),
        "context.messages[0].sections.a must be a string or null, got an integer",
    ),
    (
        "bad-block",
        body(context={"messages": [{"role": "user", "content": [{"type": "video"}]}]}),
        "context.messages[0]: cannot decode 'user': content[0]: unknown content block type 'video'",
    ),
    ("tool-no-name", body(context={"messages": [], "tools": [{"description": "x"}]}), "context.tools[0].name"),
    ("tool-not-object", body(context={"messages": [], "tools": ["echo"]}), "context.tools[0] must be an object"),
    ("options-array", body(options=[]), "options must be an object, got an array"),
    ("temperature", body(options={"temperature": "hot"}), "options.temperature must be a number, got a string"),
    ("max-tokens-bool", body(options={"maxTokens": True}), "options.maxTokens must be an integer, got a boolean"),
    ("max-tokens-zero", body(options={"maxTokens": 0}), "options.maxTokens must be a positive integer"),
    ("reasoning", body(options={"reasoning": "extreme"}), "options.reasoning must be one of"),
    ("headers", body(options={"headers": {"a": 1}}), "options.headers must map names to strings"),
    ("budgets", body(options={"thinkingBudgets": {"low": "many"}}), "options.thinkingBudgets must map"),
    ("retry", body(options={"maxRetryDelayMs": -1}), "options.maxRetryDelayMs must be >= 0"),
]


@pytest.mark.parametrize(("payload", "fragment"), [(p, f) for _, p, f in BAD_BODIES], ids=[i for i, _, _ in BAD_BODIES])
async def test_bad_bodies_are_400_with_a_json_error(anyio_backend: object, payload: Any, fragment: str) -> None:
    served = ScriptedModel(["never"])
    content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            response = await client.post(URL + "/api/stream", content=content, headers=auth())
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith("Invalid request: ") and fragment in error
    assert served.calls == []


def tool_json(name: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": {"type": "object"}}


async def served_context(context: dict[str, Any]) -> Context:
    served = ScriptedModel(["ok"])
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN)) as client:
            response = await client.post(URL + "/api/stream", json=body(context=context), headers=auth())
    assert response.status_code == 200, response.text
    [got] = served.calls
    return got


async def test_a_1x_request_folds_its_system_messages_into_the_prompt_and_tools(anyio_backend: object) -> None:
    user = {"role": "user", "content": "hi", "timestamp": 1}
    got = await served_context(
        {
            "messages": [
                {
                    "role": "system",
                    "content": "Be brief.",
                    "toolsAdded": [tool_json("a"), tool_json("b")],
                    "timestamp": 0,
                },
                user,
                {
                    "role": "system",
                    "content": [{"type": "text", "text": "Use b"}, {"type": "image", "data": "x", "mimeType": "p"}],
                    "sections": {"style": "Plain words.", "gone": None},
                    "toolsRemoved": [{"name": "a"}],
                    "toolsAdded": [tool_json("c"), tool_json("b", "new b")],
                    "timestamp": 2,
                },
                {"role": "system", "content": "", "sections": {"date": "Today.", "style": "Short words."}},
            ]
        }
    )
    assert got.system_prompt == "Be brief.\n\nUse b\n\nShort words.\n\nToday."
    assert [(t.name, t.description) for t in got.tools] == [("b", "new b"), ("c", "")]
    assert got.messages == (UserMessage(content="hi", timestamp=1),)


async def test_top_level_prompt_and_tools_come_before_the_system_messages(anyio_backend: object) -> None:
    # As pi-ai's normalizeContext puts them: a leading system message made of the top-level fields.
    got = await served_context(
        {
            "systemPrompt": "First.",
            "tools": [tool_json("a", "old a")],
            "messages": [
                {"role": "system", "content": "Second.", "toolsAdded": [tool_json("a", "new a"), tool_json("b")]},
                {"role": "user", "content": "hi", "timestamp": 1},
            ],
        }
    )
    assert got.system_prompt == "First.\n\nSecond."
    assert [(t.name, t.description) for t in got.tools] == [("a", "new a"), ("b", "")]


async def test_a_0_73_request_and_a_1x_request_give_the_same_context(anyio_backend: object) -> None:
    user = {"role": "user", "content": "hi", "timestamp": 1}
    old = await served_context({"systemPrompt": "Be brief.", "messages": [user], "tools": [tool_json("echo")]})
    new = await served_context(
        {
            "messages": [
                {"role": "system", "content": "Be brief.", "toolsAdded": [tool_json("echo")], "timestamp": 0},
                user,
            ]
        }
    )
    assert old == new
    assert old.system_prompt == "Be brief." and [t.name for t in old.tools] == ["echo"]


async def test_a_400_reaches_the_client_as_proxy_error(anyio_backend: object) -> None:
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(ScriptedModel(["ok"]), token=TOKEN)) as client:
            events = await collect(
                stream_proxy(URL, TOKEN, client=client),
                options=opts(reasoning="extreme"),
            )
    assert [e.type for e in events] == ["error"]
    assert final(events).error_message == (
        "Proxy error: Invalid request: options.reasoning must be one of minimal, low, medium, high, xhigh, max, "
        "got 'extreme'"
    )


async def test_other_routes_methods_and_sizes(anyio_backend: object) -> None:
    app = proxy_app(ScriptedModel(["ok"]), token=TOKEN, max_body_size=200)
    with anyio.fail_after(10):
        async with asgi_client(app) as client:
            missing = await client.post(URL + "/api/other", json=body(), headers=auth())
            get = await client.get(URL + "/api/stream", headers=auth())
            big = await client.post(
                URL + "/api/stream", json=body(options={"metadata": {"x": "y" * 500}}), headers=auth()
            )
    assert (missing.status_code, missing.json()) == (404, {"error": "Not found: the proxy serves POST /api/stream"})
    assert (get.status_code, get.headers["allow"]) == (405, "POST")
    assert (big.status_code, big.json()) == (413, {"error": "Request body too large (the limit is 200 bytes)"})


async def test_resolve_model_pins_or_refuses_models(anyio_backend: object) -> None:
    served = ScriptedModel(["ok"])
    pinned = replace(MODEL, base_url="https://trusted.test")

    def resolve(model: Model) -> Model:
        if model.id != MODEL.id:
            raise ValueError(f"model {model.id!r} is not served here")
        return pinned

    with anyio.fail_after(10):
        app = proxy_app(served, token=TOKEN, resolve_model=resolve, allowed_base_urls=["https://trusted.test"])
        async with asgi_client(app) as client:
            fn = stream_proxy(URL, TOKEN, client=client)
            ok = await collect(fn, replace(MODEL, base_url="https://evil.test"))
            refused = await collect(fn, replace(MODEL, id="other"))
    assert final(ok).text == "ok"
    assert final(refused).error_message == "Proxy error: Invalid request: model 'other' is not served here"
    assert len(served.calls) == 1


@pytest.mark.parametrize(
    "base_url",
    [
        "https://evil.test/v1",
        "https://api.openai.com.evil.test/v1",
        "https://api.openai.com@evil.test/v1",
        "http://api.openai.com/v1",  # the right host in clear text
        "https://api.openai.com:8443/v1",
        "http://127.0.0.1:8080/v1",  # the server's own network
        "file:///etc/passwd",
        "not a url",
    ],
)
async def test_a_client_chosen_base_url_never_gets_the_servers_key(
    anyio_backend: object, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's key (from get_api_key or the environment) goes only to hosts it allows."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-env-key")
    looked_up: list[str] = []
    served = ScriptedModel(["never"])

    def get_api_key(provider: str) -> str:
        looked_up.append(provider)
        return "sk-server-key"

    model = replace(MODEL, provider="openai", api="openai-completions", base_url=base_url)
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(served, token=TOKEN, get_api_key=get_api_key)) as client:
            response = await client.post(
                URL + "/api/stream",
                json=body(model={"id": "gpt", "api": "openai-completions", "provider": "openai", "baseUrl": base_url}),
                headers=auth(),
            )
            events = await collect(stream_proxy(URL, TOKEN, client=client), model)
    assert response.status_code == 400
    error = response.json()["error"]
    assert f"model.base_url {base_url!r} is not allowed" in error
    assert "https://api.openai.com:443" in error and "https://api.anthropic.com:443" in error
    assert final(events).error_message == f"Proxy error: {error}"
    assert served.calls == [] and looked_up == []


async def test_allowed_base_urls_choose_where_requests_go(anyio_backend: object) -> None:
    seen: list[tuple[str, str | None]] = []

    async def fn(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        seen.append((model.base_url, options.api_key))
        yield AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id).done()

    def key(provider: str) -> str:
        return "sk-server-key"

    local = "http://127.0.0.1:8080/v1"
    bound = {"test": ["https://api.openai.com", "https://api.anthropic.com", local]}  # where the key may go
    with anyio.fail_after(10):
        async with asgi_client(proxy_app(fn, token=TOKEN, get_api_key=key, key_base_urls=bound)) as client:
            proxied = stream_proxy(URL, TOKEN, client=client)
            for url in ("", "https://api.openai.com/v1", "https://API.anthropic.com/", "https://api.openai.com:443/x"):
                assert final(await collect(proxied, replace(MODEL, base_url=url))).stop_reason == "stop"
        app = proxy_app(fn, token=TOKEN, get_api_key=key, allowed_base_urls=[local + "/"], key_base_urls=bound)
        async with asgi_client(app) as client:
            proxied = stream_proxy(URL, TOKEN, client=client)
            assert (
                final(await collect(proxied, replace(MODEL, base_url="http://127.0.0.1:8080/v1"))).stop_reason == "stop"
            )
            refused = final(await collect(proxied, replace(MODEL, base_url="https://api.openai.com/v1")))
            assert refused.error_message is not None and "only to http://127.0.0.1:8080" in refused.error_message
        async with asgi_client(proxy_app(fn, token=TOKEN, allowed_base_urls=["*"])) as client:
            anywhere = await collect(stream_proxy(URL, TOKEN, client=client), replace(MODEL, base_url="https://x.test"))
            assert final(anywhere).stop_reason == "stop"
    assert [url for url, _ in seen] == [
        "",
        "https://api.openai.com/v1",
        "https://API.anthropic.com/",
        "https://api.openai.com:443/x",
        local,
        "https://x.test",
    ]
    assert [k for _, k in seen] == ["sk-server-key"] * 5 + [None]


async def test_a_stream_function_that_raises_or_breaks_the_protocol_still_ends_with_error(
    anyio_backend: object,
) -> None:
    async def unterminated(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.start()

    async def inconsistent(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.start()
        yield TextDeltaEvent(0, "x", b.snapshot())

    served = ScriptedModel(
        [
            Response(raise_on_call=RuntimeError("no route to upstream")),
            Response(content=[ScriptedText(["a", "b", "c"])], raise_on_call=RuntimeError("mid-stream"), raise_after=3),
        ]
    )
    with anyio.fail_after(10):
        results = []
        for fn in (served, served, unterminated, inconsistent):
            async with asgi_client(proxy_app(fn, token=TOKEN)) as client:
                results.append(await collect(stream_proxy(URL, TOKEN, client=client)))
    on_call, mid, early, broken = (final(r) for r in results)
    assert (on_call.stop_reason, on_call.error_message) == ("error", "no route to upstream")
    assert (mid.stop_reason, mid.error_message, mid.text) == ("error", "mid-stream", "a")
    assert early.error_message == "The model stream ended without a done or error event"
    assert broken.error_message == (
        "The model stream broke the event protocol: Received text_delta for non-text content"
    )


async def test_lifespan_and_websocket_scopes(anyio_backend: object) -> None:
    app = proxy_app(ScriptedModel([]), token=TOKEN)
    incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(incoming)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(5):
        await app({"type": "lifespan"}, receive, send)
        assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]
        sent.clear()
        incoming = iter([{"type": "websocket.connect"}])
        await app({"type": "websocket", "path": "/api/stream"}, receive, send)
        assert sent == [{"type": "websocket.close", "code": 1008}]
        with pytest.raises(ValueError, match="does not handle ASGI scope type 'mystery'"):
            await app({"type": "mystery"}, receive, send)


# --- streaming: abort, disconnect, keepalive (the in-test streaming driver) --------------------


async def test_abort_mid_stream_ends_at_once_and_stops_the_server(anyio_backend: object) -> None:
    watched = Watched()
    signal = AbortSignal()
    seen: list[AssistantMessageEvent] = []
    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=StreamingASGITransport(proxy_app(watched, token=TOKEN))) as client:
            async with stream_proxy(URL, TOKEN, client=client)(MODEL, CONTEXT, opts(signal)) as events:
                async for event in events:
                    seen.append(event)
                    if event.type == "text_delta":
                        signal.abort()
            await watched.closed.wait()
    assert [e.type for e in seen] == ["start", "text_start", "text_delta", "error"]
    message = final(seen)
    assert (message.stop_reason, message.error_message, message.text) == ("aborted", ABORTED_TEXT, "Hel")
    assert watched.signal is not None and watched.signal.aborted


async def test_abort_while_waiting_for_the_next_line(anyio_backend: object) -> None:
    watched = Watched()
    signal = AbortSignal()
    with anyio.fail_after(5):
        async with (
            httpx.AsyncClient(transport=StreamingASGITransport(proxy_app(watched, token=TOKEN))) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_abort_later, signal)  # the client is parked on a read by then
            got = await collect(stream_proxy(URL, TOKEN, client=client), options=opts(signal))
            await watched.closed.wait()
    assert [e.type for e in got] == ["start", "text_start", "text_delta", "error"]
    assert (final(got).stop_reason, final(got).error_message, final(got).text) == ("aborted", ABORTED_TEXT, "Hel")


async def test_abort_while_waiting_for_the_response_headers(anyio_backend: object) -> None:
    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the body
        await receive()  # then nothing until the client goes away

    signal = AbortSignal()
    with anyio.fail_after(5):
        async with (
            httpx.AsyncClient(transport=StreamingASGITransport(slow_app)) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(_abort_later, signal)
            got = await collect(stream_proxy(URL, TOKEN, client=client), options=opts(signal))
    assert [e.type for e in got] == ["error"]
    assert (final(got).stop_reason, final(got).error_message) == ("aborted", ABORTED_TEXT)


async def _abort_later(signal: AbortSignal) -> None:
    await anyio.sleep(0.05)
    signal.abort()


async def test_an_already_aborted_signal_sends_nothing(anyio_backend: object) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be sent")

    signal = AbortSignal()
    signal.abort()
    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            events = await collect(stream_proxy(URL, TOKEN, client=client), options=opts(signal))
    assert [e.type for e in events] == ["error"]
    assert (final(events).stop_reason, final(events).error_message) == ("aborted", ABORTED_TEXT)


async def test_client_leaving_early_stops_the_server_side_stream_function(anyio_backend: object) -> None:
    watched = Watched()
    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=StreamingASGITransport(proxy_app(watched, token=TOKEN))) as client:
            async with stream_proxy(URL, TOKEN, client=client)(MODEL, CONTEXT, opts()) as events:
                async for event in events:
                    if event.type == "text_delta":
                        break
            await watched.closed.wait()
    assert watched.signal is not None and watched.signal.aborted


async def test_server_stops_when_send_fails_after_a_disconnect(anyio_backend: object) -> None:
    """A hand-driven ASGI call: the server's `send` raises OSError (as uvicorn does) and
    `receive` never reports the disconnect: the app must still stop the stream function and return."""

    async def endless(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.start()
        yield b.text_start()
        try:
            while True:
                yield b.text_delta("x")
                await anyio.sleep(0.001)
        finally:
            closed.set()

    closed = anyio.Event()
    app = proxy_app(endless, token=TOKEN, keepalive=None)
    messages = iter([{"type": "http.request", "body": json.dumps(body()).encode(), "more_body": False}])
    bodies: list[bytes] = []

    async def receive() -> dict[str, Any]:
        try:
            return next(messages)
        except StopIteration:
            await anyio.sleep_forever()
            raise

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if len(bodies) == 5:
                raise OSError("client disconnected")
            bodies.append(message["body"])

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/stream",
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode())],
    }
    with anyio.fail_after(5):
        await app(scope, receive, send)
        await closed.wait()
    assert bodies[0].startswith(b'data: {"type":"start"}\n\n')  # with the events ready by then


async def test_an_outer_timeout_stays_a_cancellation_and_stops_the_server(anyio_backend: object) -> None:
    watched = Watched()
    seen: list[str] = []
    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=StreamingASGITransport(proxy_app(watched, token=TOKEN))) as client:
            with anyio.move_on_after(0.2) as outer:
                async with stream_proxy(URL, TOKEN, client=client)(MODEL, CONTEXT, opts()) as events:
                    async for event in events:
                        seen.append(event.type)
            await watched.closed.wait()
    assert outer.cancelled_caught
    assert seen == ["start", "text_start", "text_delta"]  # no aborted event: a timeout is not an abort


async def test_keepalive_pings_during_silence_are_ignored_by_the_client(anyio_backend: object) -> None:
    async def slow(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.start()
        await anyio.sleep(0.3)
        yield b.text_start()
        yield b.text_delta("late")
        yield b.text_end()
        yield b.done()

    chunks: list[bytes] = []

    class Recording(StreamingASGITransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await super().handle_async_request(request)
            stream = response.stream

            class Tap(httpx.AsyncByteStream):
                async def __aiter__(self) -> AsyncIterator[bytes]:
                    async for chunk in stream:  # type: ignore[union-attr]
                        chunks.append(chunk)
                        yield chunk

                async def aclose(self) -> None:
                    await stream.aclose()  # type: ignore[union-attr]

            return httpx.Response(response.status_code, headers=response.headers, stream=Tap())

    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=Recording(proxy_app(slow, token=TOKEN, keepalive=0.05))) as client:
            events = await collect(stream_proxy(URL, TOKEN, client=client))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final(events).text == "late"
    assert chunks.count(b": ping\n\n") >= 2


# --- the client against hand-written wire bytes (the reference's hangs) ------------------------

START = {"type": "start"}
TEXT_START = {"type": "text_start", "contentIndex": 0}
HI = {"type": "text_delta", "contentIndex": 0, "delta": "Hi"}
TEXT_END = {"type": "text_end", "contentIndex": 0}
DONE = {"type": "done", "reason": "stop", "usage": ZERO_USAGE_JSON}


async def test_a_last_line_without_newline_is_read(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        events = await via_raw(wire(START, TEXT_START, HI, TEXT_END) + wire(DONE, end=b""))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final(events).text == "Hi"


async def test_lines_split_anywhere_with_any_line_ending(anyio_backend: object) -> None:
    data = wire(START, TEXT_START, end=b"\r\n\r\n") + wire(HI, end=b"\r\r") + wire(TEXT_END, DONE, end=b"\n")
    data = data.replace(b"Hi", "h\u00e9 \u2028 \U0001f600".encode())
    with anyio.fail_after(5):
        events = await via_raw([data[i : i + 1] for i in range(len(data))])  # one byte per chunk
    assert final(events).text == "h\u00e9 \u2028 \U0001f600"
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]


async def test_a_stream_closed_early_ends_with_an_error_event(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        partial = await via_raw(wire(START, TEXT_START, HI))
        empty = await via_raw(b"")
    assert [e.type for e in partial] == ["start", "text_start", "text_delta", "error"]
    assert (final(partial).stop_reason, final(partial).error_message) == ("error", CLOSED_EARLY_TEXT)
    assert final(partial).text == "Hi"
    assert [e.type for e in empty] == ["error"] and final(empty).error_message == CLOSED_EARLY_TEXT


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"data: {not json}\n\n", "The proxy server sent malformed JSON: "),
        (b"data: [1, 2]\n\n", "Malformed proxy event: expected a JSON object, got an array"),
        (
            wire({"type": "thinking_delta", "contentIndex": 0, "delta": "x"}),
            "Received thinking_delta for non-thinking content",
        ),
        (wire({"type": "text_delta", "contentIndex": 1, "delta": "x"}), "Received text_delta for non-text content"),
        (wire({"type": "text_delta", "contentIndex": 0}), "Malformed proxy event text_delta: delta must be a string"),
        (
            wire({"type": "text_start", "contentIndex": 3}),
            "Received text_start for content index 3; the next block is 1",
        ),
        (wire({"type": "toolcall_end", "contentIndex": 0}), "Received toolcall_end for non-toolCall content"),
        (wire({"type": "done", "reason": "finished", "usage": ZERO_USAGE_JSON}), "unknown reason 'finished'"),
        (wire({"type": "done", "reason": "stop", "usage": 3}), "usage must be an object"),
    ],
    ids=["json", "array", "kind", "index", "delta", "order", "toolcall_end", "reason", "usage"],
)
async def test_malformed_data_is_one_error_event(anyio_backend: object, line: bytes, message: str) -> None:
    with anyio.fail_after(5):
        events = await via_raw(wire(START, TEXT_START, HI) + line + wire(TEXT_END, DONE))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]
    error = final(events)
    assert error.stop_reason == "error" and error.error_message is not None and message in error.error_message
    assert error.text == "Hi"


async def test_lines_the_protocol_does_not_use_are_ignored(anyio_backend: object) -> None:
    data = (
        b": keep-alive comment\n\nevent: message\nid: 7\nretry: 100\ndata: \n\ndata:\n"
        + wire(START, {"type": "mystery_event", "contentIndex": 0})
        + b'data:{"type":"text_start","contentIndex":0}\n'  # no space after the colon
        + wire(HI, TEXT_END, DONE)
        + wire({"type": "text_delta", "contentIndex": 0, "delta": "after the end"})
    )
    with anyio.fail_after(5):
        events = await via_raw(data)
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final(events).text == "Hi"


async def test_tool_calls_without_the_final_tool_call_on_the_wire(anyio_backend: object) -> None:
    """A server that sends `toolcall_end` without `toolCall` (pi-agent-core before 1.6)."""
    data = wire(
        START,
        {"type": "toolcall_start", "contentIndex": 0, "id": "c1", "toolName": "f"},
        {"type": "toolcall_delta", "contentIndex": 0, "delta": '{"a": [1, '},
        {"type": "toolcall_delta", "contentIndex": 0, "delta": "2]}"},
        {"type": "toolcall_end", "contentIndex": 0},
        {"type": "toolcall_start", "contentIndex": 1, "id": "c2", "toolName": "g"},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": '{"b": tru'},
        {"type": "toolcall_end", "contentIndex": 1},
        {"type": "done", "reason": "toolUse", "usage": ZERO_USAGE_JSON},
    )
    with anyio.fail_after(5):
        events = await via_raw(data)
    message = final(events)
    assert message.content[0] == ToolCall("c1", "f", {"a": [1, 2]})
    second = message.content[1]
    assert isinstance(second, ToolCall) and second.arguments == {}
    assert second.arguments_error is not None and second.arguments_error.startswith("the arguments are not valid JSON")


@pytest.mark.parametrize(
    ("status", "content", "message"),
    [
        (502, b"<html>bad gateway</html>", "Proxy error: 502 Bad Gateway"),
        (500, b'{"error": "kaboom"}', "Proxy error: kaboom"),
        (429, b'{"error": {"message": "slow down"}}', "Proxy error: slow down"),
        (403, b'{"detail": "nope"}', "Proxy error: 403 Forbidden"),
    ],
)
async def test_non_2xx_answers(anyio_backend: object, status: int, content: bytes, message: str) -> None:
    with anyio.fail_after(5):
        events = await via_raw(content, status)
    assert [e.type for e in events] == ["error"]
    assert (final(events).stop_reason, final(events).error_message) == ("error", message)


async def test_connection_and_read_failures_are_error_events(anyio_backend: object) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async def broken() -> AsyncIterator[bytes]:
        yield wire(START, TEXT_START, HI)
        raise httpx.ReadError("connection reset")

    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
            refused = await collect(stream_proxy(URL, TOKEN, client=client))
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=broken()))
        async with httpx.AsyncClient(transport=transport) as client:
            reset = await collect(stream_proxy(URL, TOKEN, client=client))
    assert final(refused).error_message == "Proxy request failed: connection refused"
    assert [e.type for e in reset] == ["start", "text_start", "text_delta", "error"]
    assert final(reset).error_message == "Proxy stream failed: connection reset" and final(reset).text == "Hi"


async def test_a_line_over_the_limit_is_an_error(anyio_backend: object) -> None:
    data = [wire(START), b"data: " + b"x" * 50, b"y" * 100]
    with anyio.fail_after(5):
        async with httpx.AsyncClient(transport=raw_server(data)) as client:
            events = await collect(stream_proxy(URL, TOKEN, client=client, max_line_size=100))
    assert [e.type for e in events] == ["start", "error"]
    assert final(events).error_message == "The proxy server sent a line longer than 100 characters"


async def test_own_client_is_made_and_closed_per_request(anyio_backend: object) -> None:
    """Without `client=`, a request to a closed port fails as an event (and leaves nothing open)."""
    with anyio.fail_after(10):
        events = await collect(stream_proxy("http://127.0.0.1:9", TOKEN, timeout=2))
    assert [e.type for e in events] == ["error"]
    assert final(events).error_message.startswith("Proxy request failed: ")  # type: ignore[union-attr]


# --- arguments ----------------------------------------------------------------------------------


def test_factories_check_their_arguments_and_hide_the_token() -> None:
    fn = stream_proxy(URL + "/", TOKEN)
    assert repr(fn) == "stream_proxy('http://proxy.test/api/stream')" and TOKEN not in repr(fn)
    bad: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: stream_proxy("proxy.test", TOKEN), ValueError, "proxy_url must be an http"),
        (lambda: stream_proxy(URL, ""), ValueError, "auth_token must be a non-empty string"),
        (lambda: stream_proxy(URL, 42), TypeError, "auth_token must be a str"),  # type: ignore[arg-type]
        (lambda: stream_proxy(URL, TOKEN, timeout=0), ValueError, "timeout must be a positive number"),
        (lambda: stream_proxy(URL, TOKEN, headers={"a": 1}), TypeError, "headers must map"),  # type: ignore[dict-item]
        (lambda: stream_proxy(URL, TOKEN, max_line_size=0), ValueError, "max_line_size"),
        (lambda: proxy_app(42, token=TOKEN), TypeError, "stream_fn must be callable"),  # type: ignore[arg-type]
        (lambda: proxy_app(ScriptedModel([]), token=""), ValueError, "token must be a non-empty string"),
        (lambda: proxy_app(ScriptedModel([]), token=TOKEN, path="api"), ValueError, "path must start"),
        (lambda: proxy_app(ScriptedModel([]), token=TOKEN, keepalive=0), ValueError, "keepalive"),
        (lambda: proxy_app(ScriptedModel([]), token=TOKEN, get_api_key="k"), TypeError, "get_api_key"),  # type: ignore[arg-type]
        (lambda: proxy_app(ScriptedModel([]), token=TOKEN, max_body_size=0), ValueError, "max_body_size"),
        (lambda: proxy_app(ScriptedModel([]), token=TOKEN, allowed_base_urls="*"), TypeError, "allowed_base_urls"),
        (
            lambda: proxy_app(ScriptedModel([]), token=TOKEN, allowed_base_urls=["api.openai.com"]),
            ValueError,
            "allowed_base_urls holds 'api.openai.com': expected http:// or https:// URLs, or '\\*'",
        ),
    ]
    bad += [
        (lambda: fn(MODEL, CONTEXT, None), TypeError, "options must be an agentloop.StreamOptions, got NoneType"),  # type: ignore[arg-type]
        (lambda: fn({"id": "m"}, CONTEXT, opts()), TypeError, "model must be an agentloop.Model, got dict"),  # type: ignore[arg-type]
        (lambda: fn(MODEL, [], opts()), TypeError, "context must be an agentloop.Context, got list"),  # type: ignore[arg-type]
    ]
    for make, kind, fragment in bad:
        with pytest.raises(kind, match=fragment):
            make()
    assert TOKEN not in repr(proxy_app(ScriptedModel([]), token=TOKEN))


# --- a real ASGI server on loopback (hypercorn runs on asyncio and trio) -------------------------


def free_port() -> int:
    """A loopback port free at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


served = serve_asgi
"""Serve an app with hypercorn on a loopback port (a free one by default); yields the base URL."""


async def test_real_server_full_run(anyio_backend: object) -> None:
    with anyio.fail_after(10):
        expected = await run_direct(ScriptedModel([SCENARIOS["tool_calls"]]))
        async with served(proxy_app(ScriptedModel([SCENARIOS["tool_calls"]]), token=TOKEN)) as url:
            got = await collect(stream_proxy(url, TOKEN))
            denied = await collect(stream_proxy(url, "wrong"))
    assert [norm(e, tool_partial=False) for e in got] == [norm(e, tool_partial=False) for e in expected]
    assert final(denied).error_message == "Proxy error: Unauthorized"


async def test_real_server_abort_and_early_exit_stop_the_server_side_stream(anyio_backend: object) -> None:
    aborted_watch, left_watch = Watched(), Watched()
    signal = AbortSignal()
    seen: list[str] = []
    with anyio.fail_after(10):
        async with served(proxy_app(aborted_watch, token=TOKEN)) as url:
            async with stream_proxy(url, TOKEN)(MODEL, CONTEXT, opts(signal)) as events:
                async for event in events:
                    seen.append(event.type)
                    if event.type == "text_delta":
                        signal.abort()
            await aborted_watch.closed.wait()
            last = event
        async with served(proxy_app(left_watch, token=TOKEN)) as url:
            async with stream_proxy(url, TOKEN)(MODEL, CONTEXT, opts()) as events:
                async for event in events:
                    if event.type == "text_delta":
                        break
            await left_watch.closed.wait()
    assert seen == ["start", "text_start", "text_delta", "error"]
    assert isinstance(last, ErrorEvent) and last.error.stop_reason == "aborted" and last.error.text == "Hel"
    assert aborted_watch.signal is not None and aborted_watch.signal.aborted
    assert left_watch.signal is not None and left_watch.signal.aborted


async def test_real_server_agent_run(anyio_backend: object) -> None:
    with anyio.fail_after(10):
        direct = Agent(model=MODEL, tools=[echo_tool()], stream_fn=ScriptedModel(agent_script()))
        await direct.prompt("say ping")
        async with served(proxy_app(ScriptedModel(agent_script()), token=TOKEN)) as url:
            agent = Agent(model=MODEL, tools=[echo_tool()], stream_fn=stream_proxy(url, TOKEN))
            await agent.prompt("say ping")
    assert [no_time(m) for m in agent.state.messages] == [no_time(m) for m in direct.state.messages]
