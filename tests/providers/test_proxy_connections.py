"""`stream_proxy` and TCP connections: a shared client's connections are reused, and without
`client=` one client per `stream_proxy` (per event loop) serves every call, closed by `aclose()`.

Connections are counted on a real loopback server (hypercorn): each ASGI request records the
client's address, and one address is one TCP connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from agentloop.providers._proxy._client import stream_proxy
from agentloop.providers._proxy._server import proxy_app
from agentloop.testing import Response, ScriptedModel, ScriptedText

from ..support import free_port, served
from .test_proxy import TOKEN, collect, final

REQUESTS = 20


class ConnectionCounter:
    """An ASGI middleware that records the peer address of every HTTP request."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.peers: list[object] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.peers.append(tuple(scope["client"]))
        await self.app(scope, receive, send)

    @property
    def connections(self) -> int:
        return len(set(self.peers))


def answers(n: int) -> ScriptedModel:
    return ScriptedModel([Response(content=[ScriptedText(["Hel", "lo"])]) for _ in range(n)])


async def plain_sse(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A trivial streaming app: the baseline of what httpx itself reuses."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def test_plain_httpx_streams_20_responses_over_one_connection(anyio_backend: object) -> None:
    counter = ConnectionCounter(plain_sse)
    with anyio.fail_after(20):
        async with served(counter) as url, httpx.AsyncClient() as client:
            for _ in range(REQUESTS):
                async with client.stream("POST", url) as response:
                    async for _chunk in response.aiter_bytes():
                        pass
    assert (len(counter.peers), counter.connections) == (REQUESTS, 1)


async def test_a_shared_client_keeps_one_connection_for_20_requests(anyio_backend: object) -> None:
    counter = ConnectionCounter(proxy_app(answers(REQUESTS), token=TOKEN))
    with anyio.fail_after(20):
        async with served(counter) as url, httpx.AsyncClient() as client:
            fn = stream_proxy(url, TOKEN, client=client)
            texts = [final(await collect(fn)).text for _ in range(REQUESTS)]
            assert not client.is_closed  # a given client is used as is, never closed
    assert texts == ["Hello"] * REQUESTS
    assert (len(counter.peers), counter.connections) == (REQUESTS, 1)


async def test_a_consumer_that_stops_at_done_still_returns_the_connection(anyio_backend: object) -> None:
    counter = ConnectionCounter(proxy_app(answers(REQUESTS), token=TOKEN))
    with anyio.fail_after(20):
        async with served(counter) as url, httpx.AsyncClient() as client:
            fn = stream_proxy(url, TOKEN, client=client)
            for _ in range(REQUESTS):
                async with fn(*_call()) as events:
                    async for event in events:
                        if event.type == "done":
                            break  # leaves without asking for the end of the stream
    assert counter.connections == 1


@pytest.fixture
def made_clients(monkeypatch: pytest.MonkeyPatch) -> list[httpx.AsyncClient]:
    """Every `httpx.AsyncClient` made while the test runs."""
    made: list[httpx.AsyncClient] = []
    original = httpx.AsyncClient.__init__

    def counting_init(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counting_init)
    return made


async def test_a_function_held_open_shares_one_own_client_between_its_calls(
    anyio_backend: object, made_clients: list[httpx.AsyncClient]
) -> None:
    counter = ConnectionCounter(proxy_app(answers(REQUESTS + 5), token=TOKEN))
    with anyio.fail_after(20):
        async with served(counter) as url:
            async with stream_proxy(url, TOKEN) as fn:
                texts = [final(await collect(fn)).text for _ in range(REQUESTS)]
                async with anyio.create_task_group() as tg:  # concurrent calls share it too
                    for _ in range(5):
                        tg.start_soon(collect, fn)
                assert len(made_clients) == 1 and not made_clients[0].is_closed
            assert made_clients[0].is_closed  # closed when the `async with` ends
    assert texts == ["Hello"] * REQUESTS
    assert counter.peers[:REQUESTS] == [counter.peers[0]] * REQUESTS


async def test_overlapping_calls_share_the_own_client_and_the_last_one_closes_it(
    anyio_backend: object, made_clients: list[httpx.AsyncClient]
) -> None:
    counter = ConnectionCounter(proxy_app(answers(6), token=TOKEN))
    with anyio.fail_after(20):
        async with served(counter) as url:
            fn = stream_proxy(url, TOKEN)
            async with fn(*_call()) as first, fn(*_call()) as second:
                assert (await anext(second)).type == "start"  # `second` is streaming
                assert [e.type async for e in first][-1] == "done"
                assert len(made_clients) == 1 and not made_clients[0].is_closed  # `second` holds it
                assert [e.type async for e in second][-1] == "done"
            assert made_clients[0].is_closed
            for _ in range(4):  # calls one after another: each opens and closes its own
                assert final(await collect(fn)).text == "Hello"
    assert len(made_clients) == 5 and all(client.is_closed for client in made_clients)
    assert len(counter.peers) == 6


async def test_a_failed_or_aborted_call_lets_go_of_the_own_client(
    anyio_backend: object, made_clients: list[httpx.AsyncClient]
) -> None:
    with anyio.fail_after(20):
        refused = await collect(stream_proxy(f"http://127.0.0.1:{free_port()}", TOKEN, timeout=2))
        async with served(proxy_app(answers(1), token=TOKEN)) as url, stream_proxy(url, TOKEN)(*_call()):
            pass  # entered and left without iterating: no request at all
    assert final(refused).error_message.startswith("Proxy request failed: ")  # type: ignore[union-attr]
    assert len(made_clients) == 1 and made_clients[0].is_closed


def test_the_own_client_belongs_to_one_event_loop_and_each_run_gets_its_own() -> None:
    """The same function used by two `anyio.run`s (asyncio then trio): each run has its own
    client, and nothing warns (warnings are errors here)."""
    counter = ConnectionCounter(proxy_app(answers(4), token=TOKEN))
    texts: list[str] = []
    port = free_port()
    fn = stream_proxy(f"http://127.0.0.1:{port}", TOKEN)

    async def main() -> None:
        async with served(counter, port=port), fn:
            with anyio.fail_after(20):
                texts.append(final(await collect(fn)).text)
                texts.append(final(await collect(fn)).text)

    anyio.run(main, backend="asyncio")
    anyio.run(main, backend="trio")
    assert texts == ["Hello"] * 4
    assert len(counter.peers) == 4 and counter.connections == 2


def _call() -> tuple[Any, Any, Any]:
    from .test_proxy import CONTEXT, MODEL, opts

    return MODEL, CONTEXT, opts()
