"""`proxy_app`'s cost per streamed event: no trip through the scheduler per event, and still a turn
for the other tasks every few events when neither the upstream nor the client ever waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import anyio
import anyio.lowlevel

from agentloop import AssistantMessageBuilder, AssistantMessageEvent, Context, Model, StreamOptions
from agentloop.providers._proxy_server import proxy_app
from agentloop.providers._proxy_wire import encode_request

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
    delivered = False
    chunks: list[bytes] = []
    finished = anyio.Event()
    turns = 0

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

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

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/stream",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")],
    }
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_task)
            await app(scope, receive, send)
    assert b"".join(chunks).count(b'"type":"text_delta"') == DELTAS
    assert DELTAS // 64 <= turns <= DELTAS // 8  # a turn every few events: not starved, not per event
