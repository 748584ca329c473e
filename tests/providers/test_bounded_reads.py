"""Every read from a provider is bounded: a server on a real loopback socket sends a 100 MB line,
a 100 MB error body, a body that never ends, or keep-alive pings for ever, and each response ends
with one clear `error` event after the client read no more than its limit (measured as the bytes
the server managed to send, and as the peak of traced memory), never after the whole body.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

import anyio
import anyio.abc
import pytest

from agentloop import AssistantMessage, AssistantMessageEvent, Model
from agentloop.providers import HTTPOptions, stream_anthropic, stream_openai_completions

from .helpers import chat_chunk, collect, context, options

MB = 1024 * 1024
HUGE = 100 * MB
SLACK = 16 * MB  # what the loopback socket buffers may hold beyond what the client read
BLOCK = b"x" * (64 * 1024)

Body = Callable[[], AsyncGenerator[bytes, None]]


class LoopbackServer:
    """One HTTP/1.1 answer per connection, its body from `body()`, sent chunked; counts the bytes
    the client took (written before it closed the connection)."""

    def __init__(self, status: int, content_type: str, body: Body) -> None:
        self.status = status
        self.content_type = content_type
        self.body = body
        self.sent = 0

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive()
            head, _, rest = request.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            while len(rest) < length:
                rest += await stream.receive()
            await stream.send(
                f"HTTP/1.1 {self.status} X\r\ncontent-type: {self.content_type}\r\n"
                "transfer-encoding: chunked\r\nconnection: close\r\n\r\n".encode()
            )
            try:
                async with aclosing(self.body()) as pieces:
                    async for piece in pieces:
                        await stream.send(b"%x\r\n%b\r\n" % (len(piece), piece))
                        self.sent += len(piece)
                await stream.send(b"0\r\n\r\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the client stopped reading: what we measure


async def serve_and_stream(
    server: LoopbackServer, stream_fn: Callable[..., Any], api: str, http: HTTPOptions
) -> tuple[list[AssistantMessageEvent], AssistantMessage, int]:
    """Stream one response from `server`; the events, the final message and the peak of traced
    memory (bytes) while it streamed."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    model = Model(
        id="m", api=api, provider="test", base_url=f"http://127.0.0.1:{port}" + ("/v1" if "openai" in api else "")
    )
    tracemalloc.start()
    try:
        with anyio.fail_after(30):
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, server.handle)
                tracemalloc.reset_peak()
                events, final = await collect(stream_fn(model, context(), options(), http=http))
                peak = tracemalloc.get_traced_memory()[1]
                tg.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
    return events, final, peak


async def endless(
    piece: bytes, limit: int = HUGE, delay: float = 0.0, first: bytes = b""
) -> AsyncGenerator[bytes, None]:
    """`first`, then `piece` again and again (`limit` bytes in all, every `delay` seconds)."""
    if first:
        yield first
    sent = 0
    while sent < limit:
        if delay:
            await anyio.sleep(delay)
        yield piece
        sent += len(piece)


HTTP = HTTPOptions(max_retries=0, max_event_size=MB, max_body_size=4 * MB)


@pytest.mark.parametrize("start", [b"data: ", b"event: ", b": "])
async def test_a_100_mb_line_ends_the_stream_at_max_event_size(anyio_backend: object, start: bytes) -> None:
    server = LoopbackServer(200, "text/event-stream", lambda: endless(BLOCK, first=start))
    events, final, peak = await serve_and_stream(server, stream_anthropic, "anthropic-messages", HTTP)
    assert [e.type for e in events] == ["start", "error"]
    assert final.error_message == (
        f"The server sent an event stream line or event larger than max_event_size ({MB} bytes)"
    )
    assert server.sent < MB + SLACK
    assert peak < 8 * MB


async def test_an_event_of_many_short_lines_ends_at_max_event_size(anyio_backend: object) -> None:
    server = LoopbackServer(200, "text/event-stream", lambda: endless(b"data: " + b"y" * 1000 + b"\n"))
    _, final, peak = await serve_and_stream(server, stream_openai_completions, "openai-completions", HTTP)
    assert final.error_message is not None and "max_event_size (1048576 bytes)" in final.error_message
    assert server.sent < MB + SLACK and peak < 8 * MB


async def test_a_100_mb_error_body_is_read_only_up_to_its_cut(anyio_backend: object) -> None:
    start = b'{"error": {"message": "overloaded", "padding": "'
    server = LoopbackServer(500, "application/json", lambda: endless(BLOCK, first=start))
    # The default limits: an error body never counts against them, it is cut at 64 KiB.
    events, final, peak = await serve_and_stream(
        server, stream_openai_completions, "openai-completions", HTTPOptions(max_retries=0)
    )
    assert [e.type for e in events] == ["error"]
    assert final.error_message is not None and final.error_message.startswith('HTTP 500: {"error": {"message"')
    assert len(final.error_message) < 600
    assert server.sent < SLACK and peak < 8 * MB


async def test_a_100_mb_body_that_is_not_an_event_stream_is_read_only_up_to_its_cut(anyio_backend: object) -> None:
    server = LoopbackServer(200, "text/html", lambda: endless(BLOCK))
    _, final, peak = await serve_and_stream(
        server, stream_openai_completions, "openai-completions", HTTPOptions(max_retries=0)
    )
    assert final.error_message is not None and "Expected an event stream (text/event-stream)" in final.error_message
    assert server.sent < SLACK and peak < 8 * MB


async def test_a_body_that_never_ends_stops_at_max_body_size(anyio_backend: object) -> None:
    delta = ("data: " + json.dumps(chat_chunk({"content": "z" * 16000})) + "\n\n").encode()
    server = LoopbackServer(200, "text/event-stream", lambda: endless(delta * 4, limit=10**12))
    events, final, _ = await serve_and_stream(server, stream_openai_completions, "openai-completions", HTTP)
    assert events[-1].type == "error"
    assert final.error_message == f"The response body is larger than max_body_size ({4 * MB} bytes)"
    assert final.text.startswith("zzz")  # what came before the limit is kept
    assert server.sent < 4 * MB + SLACK


@pytest.mark.parametrize(
    ("api", "ping"),
    [("openai-completions", b": ping\n\n"), ("anthropic-messages", b'event: ping\ndata: {"type": "ping"}\n\n')],
)
async def test_keep_alive_pings_for_ever_end_at_the_event_timeout(anyio_backend: object, api: str, ping: bytes) -> None:
    """A server that pings every 50 ms but sends no event: idle_timeout never fires (bytes keep
    coming); event_timeout does."""
    server = LoopbackServer(200, "text/event-stream", lambda: endless(ping, limit=10**12, delay=0.05))
    stream_fn = stream_anthropic if api == "anthropic-messages" else stream_openai_completions
    http = HTTPOptions(max_retries=0, idle_timeout=5, event_timeout=0.5)
    events, final, _ = await serve_and_stream(server, stream_fn, api, http)
    assert [e.type for e in events] == ["start", "error"]
    assert final.error_message == (
        "The server sent no event for 0.5 s (event_timeout; keep-alive comments and pings do not count): "
        "the response is stuck"
    )
    assert server.sent > 0


async def test_events_that_move_the_message_keep_resetting_the_event_timeout(anyio_backend: object) -> None:
    async def body() -> AsyncGenerator[bytes, None]:
        for _ in range(15):  # 15 x 0.1 s: longer than the event timeout in all, far shorter between two
            await anyio.sleep(0.1)
            yield ("data: " + json.dumps(chat_chunk({"content": "a"})) + "\n\n").encode()
        yield ("data: " + json.dumps(chat_chunk(finish="stop")) + "\n\ndata: [DONE]\n\n").encode()

    server = LoopbackServer(200, "text/event-stream", body)
    http = HTTPOptions(max_retries=0, event_timeout=1.0)
    events, final, _ = await serve_and_stream(server, stream_openai_completions, "openai-completions", http)
    assert (events[-1].type, final.text) == ("done", "a" * 15)


def test_the_default_limits_are_far_above_what_a_provider_sends() -> None:
    http = HTTPOptions()
    assert (http.max_event_size, http.max_body_size) == (64 * MB, 256 * MB)
    assert (http.idle_timeout, http.event_timeout, http.total_timeout) == (600.0, 1800.0, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_event_size", 0), ("max_body_size", True), ("max_body_size", 1.5), ("event_timeout", -1)],
)
def test_bad_limits_are_refused_by_name(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        HTTPOptions(**{field: value})  # type: ignore[arg-type]
