"""`proxy_app`'s cost per streamed event: no trip through the scheduler per event, and still a turn
for the other tasks every few events when neither the upstream nor the client ever waits; and its
memory per request: about three times the body at the peak, never the body kept while it streams."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from agentloop import AssistantMessageBuilder, AssistantMessageEvent, Context, Model, StreamOptions
from agentloop.providers import stream_simple
from agentloop.providers._proxy._server import proxy_app
from agentloop.providers._proxy._wire import encode_request

from .helpers import receive_once
from .test_proxy import CONTEXT, MODEL, TOKEN, opts

DELTAS = 2000


def never_waits(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
    async def run() -> AsyncIterator[AssistantMessageEvent]:
        b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield b.start()
        yield b.text_start()
        for _ in range(DELTAS):
            yield b.text_delta("abc ")
        yield b.text_end()
        yield b.done()

    return run()


async def test_the_server_yields_every_few_events_not_every_event(anyio_backend: object) -> None:
    app = proxy_app(never_waits, token=TOKEN, keepalive=None)
    body = encode_request(MODEL, CONTEXT, opts())
    chunks: list[bytes] = []
    finished = anyio.Event()
    receive = receive_once(body, finished)
    turns = 0

    async def send(message: MutableMapping[str, Any]) -> None:  # a client that always keeps up: never waits
        if message["type"] == "http.response.body":
            chunks.append(message["body"])
            if not message.get("more_body"):
                finished.set()

    async def other_task() -> None:
        nonlocal turns
        while not finished.is_set():
            turns += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_task)
            await app(SCOPE, receive, send)
    assert b"".join(chunks).count(b'"type":"text_delta"') == DELTAS
    assert DELTAS // 64 <= turns <= DELTAS // 8  # a turn every few events: not starved, not per event


SCOPE: dict[str, Any] = {
    "type": "http",
    "method": "POST",
    "path": "/api/stream",
    "root_path": "",
    "query_string": b"",
    "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")],
}


def receiving(finished: anyio.Event) -> Any:
    return receive_once(encode_request(MODEL, CONTEXT, opts()), finished)


async def test_events_ready_together_go_out_in_one_body_chunk(anyio_backend: object) -> None:
    chunks: list[bytes] = []
    finished = anyio.Event()

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message["body"])
            if not message.get("more_body"):
                finished.set()

    with anyio.fail_after(20):
        await proxy_app(never_waits, token=TOKEN, keepalive=None)(SCOPE, receiving(finished), send)
    assert b"".join(chunks).count(b'"type":"text_delta"') == DELTAS
    assert len(chunks) <= DELTAS // 8  # a write per batch of events, not one per event
    assert all(chunk.endswith(b"\n\n") for chunk in chunks[:-1])  # whole events in every chunk


async def test_an_event_is_sent_before_the_model_makes_the_next(anyio_backend: object) -> None:
    produced: list[int] = []
    sent: list[int] = []  # how many events the model had made when each chunk went out
    finished = anyio.Event()

    def waits(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        async def run() -> AsyncIterator[AssistantMessageEvent]:
            b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
            events: list[AssistantMessageEvent] = [b.start(), b.text_start()]
            events += [b.text_delta("x") for _ in range(5)]
            for event in [*events, b.text_end()]:
                produced.append(1)
                yield event
                await anyio.sleep(0.01)  # a model that takes its time: each event must go out now
            yield b.done()

        return run()

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if message["body"]:
                sent.append(len(produced))
            if not message.get("more_body"):
                finished.set()

    with anyio.fail_after(20):
        await proxy_app(waits, token=TOKEN, keepalive=None)(SCOPE, receiving(finished), send)
    assert sent[:8] == [1, 2, 3, 4, 5, 6, 7, 8]


async def test_a_client_that_reads_slowly_holds_the_model_back(anyio_backend: object) -> None:
    produced = 0
    finished, stuck = anyio.Event(), anyio.Event()

    def counts(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        async def run() -> AsyncIterator[AssistantMessageEvent]:
            nonlocal produced
            b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
            for event in (b.start(), b.text_start()):
                yield event
            for _ in range(DELTAS):
                produced += 1
                yield b.text_delta("x")
            yield b.text_end()
            yield b.done()

        return run()

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            stuck.set()
            await anyio.sleep_forever()  # a client that stopped reading: the write never ends

    app = proxy_app(counts, token=TOKEN, keepalive=None)

    async def serve() -> None:
        await app(dict(SCOPE), receiving(finished), send)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            await stuck.wait()
            for _ in range(50):
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
    assert produced < 600  # what the first chunk held and the queue's few hundred, not the whole answer


async def test_a_request_holds_about_three_times_its_body_at_the_peak(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An 8 MiB text message through the real provider: the body while it is decoded, then the
    decoded context and the provider's own request body (its JSON text, then its bytes); the
    request's bytes are gone by then (the transport's copy of it counts too)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sent: list[int] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(len(request.content))
        done = b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=done)

    message = {"role": "user", "content": "x" * (8 * 1024 * 1024), "timestamp": 1}
    model = {"id": "gpt-4o", "api": "openai-completions", "provider": "openai"}
    body = json.dumps({"model": model, "context": {"messages": [message]}, "options": {}}).encode()
    del message
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as out:
        app = proxy_app(lambda m, c, o: stream_simple(m, c, o, client=out), token=TOKEN, keepalive=None)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app)) as client:
            tracemalloc.start()
            try:
                start = tracemalloc.get_traced_memory()[0]
                with anyio.fail_after(30):
                    response = await client.post(
                        "http://proxy.test/api/stream", content=body, headers={"authorization": f"Bearer {TOKEN}"}
                    )
                peak = tracemalloc.get_traced_memory()[1] - start
            finally:
                tracemalloc.stop()
    assert response.status_code == 200 and '"type":"done"' in response.text
    assert sent and sent[0] > len(body) - 1024  # the text went upstream whole
    assert peak < 3.5 * len(body), peak / len(body)
