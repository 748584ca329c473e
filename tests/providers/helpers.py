"""Canned server-sent-event bodies and a mock HTTP client for the provider tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, ClassVar

import anyio
import httpx

from agentloop import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    ErrorEvent,
    ImageContent,
    Model,
    StreamOptions,
    UserMessage,
)
from agentloop.providers import AssistantMessageEventStream, HTTPOptions

SSE_HEADERS = {"content-type": "text/event-stream"}
FAST = HTTPOptions(backoff=0.001, max_backoff=0.01)

IMAGE = ImageContent(data="aGVsbG8=", mime_type="image/png")
"""A (not really) PNG image block."""


class Weather:
    """A weather tool: the one aimock's fixtures call (`aimock-fixtures.json`), and the request tests' tool."""

    name = "get_weather"
    description = "Get the weather"
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"],
    }


def chat_chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice], **extra}


def sse_data(*items: Any, done: bool = True) -> bytes:
    """`data:` events (dicts are JSON-encoded); `[DONE]` at the end unless done=False."""
    lines = [f"data: {item if isinstance(item, str) else json.dumps(item)}\n\n" for item in items]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def sse_events(*items: dict[str, Any]) -> bytes:
    """Named events (`event: <type>`), as Anthropic and Responses send them."""
    return "".join(f"event: {item['type']}\ndata: {json.dumps(item)}\n\n" for item in items).encode()


def split(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


async def chunks(parts: Iterable[bytes], delay: float = 0.0) -> AsyncIterator[bytes]:
    for part in parts:
        if delay:
            await anyio.sleep(delay)
        yield part


class Server:
    """A scripted HTTP server: each request gets the next response; requests are recorded."""

    def __init__(self, *responses: httpx.Response | Callable[[httpx.Request], Any]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.bodies.append(json.loads(await request.aread()))
        if not self.responses:
            return httpx.Response(500, json={"error": {"message": "no more scripted responses"}})
        response = self.responses.pop(0)
        if callable(response) and not isinstance(response, httpx.Response):
            response = response(request)
            if not isinstance(response, httpx.Response):
                response = await response
        return response

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def ok(body: bytes | Sequence[bytes] | AsyncIterator[bytes], headers: dict[str, str] | None = None) -> httpx.Response:
    content: Any = body
    if isinstance(body, list):
        content = chunks(body)
    return httpx.Response(200, headers={**SSE_HEADERS, **(headers or {})}, content=content)


def options(**kwargs: Any) -> StreamOptions:
    kwargs.setdefault("signal", AbortSignal())
    kwargs.setdefault("api_key", "sk-test")
    return StreamOptions(**kwargs)


def context(text: str = "hello", **kwargs: Any) -> Context:
    return Context(messages=[UserMessage(content=text)], **kwargs)


def model(api: str, **kwargs: Any) -> Model:
    kwargs.setdefault("id", "test-model")
    kwargs.setdefault("provider", "test")
    kwargs.setdefault("base_url", "http://mock/v1" if api != "anthropic-messages" else "http://mock")
    return Model(api=api, **kwargs)


async def collect(stream: AssistantMessageEventStream) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    """All events of a stream and its final message; asserts the terminal-event contract."""
    events: list[AssistantMessageEvent] = []
    async with stream:
        async for event in stream:
            events.append(event)
    assert events, "a stream always ends with a terminal event"
    assert [e.type for e in events].count("done") + [e.type for e in events].count("error") == 1
    last = events[-1]
    assert last.type in ("done", "error")
    final = last.message if last.type == "done" else last.error
    return events, final


async def stream_body(
    stream_fn: Callable[..., AssistantMessageEventStream],
    body: bytes | Sequence[bytes],
    model: Model,
    ctx: Context | None = None,
    **opts: Any,
) -> tuple[list[Any], AssistantMessage]:
    """What `stream_fn` emits for `model` and `ctx` (by default `context()`) when the server
    answers `body`; `opts` are the stream options."""
    async with Server(ok(body)).client() as client:
        with anyio.fail_after(10):
            return await collect(stream_fn(model, ctx or context(), options(**opts), http=FAST, client=client))


def types(events: Sequence[AssistantMessageEvent]) -> list[str]:
    return [e.type for e in events]


async def aborted_at_first_text(stream: AssistantMessageEventStream, signal: AbortSignal) -> AssistantMessage:
    """Read `stream`, aborting `signal` at its first text delta: the stream must end with an
    `aborted` error event; returns that event's partial message."""
    events: list[AssistantMessageEvent] = []
    async with stream:
        async for event in stream:
            events.append(event)
            if event.type == "text_delta":
                signal.abort()
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.reason == "aborted", types(events)
    return last.error


def streamed(kind: str, deltas: int) -> list[str]:
    """The event types of one content block streamed alone: `streamed("text", 2)` is
    `["text_start", "text_delta", "text_delta", "text_end"]`."""
    return [f"{kind}_start", *[f"{kind}_delta"] * deltas, f"{kind}_end"]


def ended_together(*blocks: tuple[str, int]) -> list[str]:
    """The event types of a stream whose blocks, each (kind, deltas) streamed in turn, all end
    when the stream does, in content order: `ended_together(("thinking", 1), ("text", 1))` is
    `["start", "thinking_start", "thinking_delta", "text_start", "text_delta", "thinking_end",
    "text_end", "done"]`."""
    opened = [kind for name, deltas in blocks for kind in (f"{name}_start", *[f"{name}_delta"] * deltas)]
    return ["start", *opened, *[f"{name}_end" for name, _ in blocks], "done"]


def receive_once(body: bytes, disconnected: anyio.Event) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI `receive`: the whole request `body` at the first call; after it, the client's
    disconnect once `disconnected` is set."""
    request = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if request:
            return request.pop()
        await disconnected.wait()
        return {"type": "http.disconnect"}

    return receive
