"""The HTTP driver (`_http.py`) through the Chat Completions stream: framing, errors, retries,
timeouts, abort, cancellation and key redaction, all with httpx.MockTransport."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from agentloop import AbortSignal, AssistantMessage, AssistantMessageEvent, ErrorEvent, StreamOptions
from agentloop.providers import HTTPOptions, stream_openai_completions

from .helpers import (
    FAST,
    SSE_HEADERS,
    Server,
    chat_chunk,
    chunks,
    collect,
    context,
    model,
    ok,
    options,
    split,
    sse_data,
    types,
)

CHAT = model("openai-completions")
HELLO = sse_data(
    chat_chunk({"role": "assistant", "content": ""}),
    chat_chunk({"content": "Hel"}),
    chat_chunk({"content": "lo"}),
    chat_chunk(finish="stop"),
    {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
)


async def run(
    server: Server, *, http: HTTPOptions = FAST, opts: StreamOptions | None = None
) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    opts = opts or options()
    async with server.client() as client:
        with anyio.fail_after(10):
            return await collect(stream_openai_completions(CHAT, context(), opts, http=http, client=client))


async def test_a_plain_stream() -> None:
    server = Server(ok(HELLO))
    events, final = await run(server)
    assert types(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert final.text == "Hello"
    assert final.stop_reason == "stop"
    assert final.usage.input == 5 and final.usage.output == 2 and final.usage.total_tokens == 7
    assert final.response_id == "chatcmpl-1"
    request = server.requests[0]
    assert request.url == "http://mock/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-type"] == "application/json"
    assert server.bodies[0]["stream"] is True
    assert server.bodies[0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("size", [1, 3, 7, 64])
async def test_split_chunks(size: int) -> None:
    _, final = await run(Server(ok(split(HELLO, size))))
    assert final.text == "Hello" and final.stop_reason == "stop"


async def test_crlf_and_cr_line_endings_and_keepalive_comments() -> None:
    body = HELLO.decode().replace("\n", "\r\n")
    body = ": OPENROUTER PROCESSING\r\n\r\n" + body.replace("data: [DONE]", ": ping - 2025\r\n\r\ndata: [DONE]")
    _, final = await run(Server(ok(split(body.encode(), 5))))
    assert final.text == "Hello"
    _, final = await run(Server(ok(HELLO.decode().replace("\n", "\r").encode())))
    assert final.text == "Hello"


async def test_data_without_space_and_multiline_data() -> None:
    body = (
        b'data:{"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
        b'data: {"choices":\ndata: [{"index":0,"delta":{"content":"b"}}]}\n\n'
        b"data:[DONE]\n\n"
    )
    _, final = await run(Server(ok(body)))
    assert final.text == "ab"


@pytest.mark.parametrize("ending", [b"\n", b"", b"\r", b"\r\n"], ids=["newline", "nothing", "cr", "crlf"])
@pytest.mark.parametrize("size", [1, 2, 4096])
async def test_a_final_event_without_its_blank_line_is_dispatched_as_the_sdks_do(ending: bytes, size: int) -> None:
    # The OpenAI and Anthropic SDK decoders (and pi-ai) dispatch the event pending at the end of the
    # body; httpx-sse's EventSource dropped it, which turned a complete stream into an error.
    body = HELLO[: -len(b"\n\n")] + ending
    if ending.startswith(b"\r"):
        body = body.replace(b"\n", b"\r\n" if ending == b"\r\n" else b"\r")
    _, final = await run(Server(ok(split(body, size))))
    assert final.stop_reason == "stop"
    assert final.text == "Hello"


async def test_a_last_line_without_its_end_that_is_not_the_end_marker_is_still_incomplete() -> None:
    body = sse_data(chat_chunk({"content": "Hel"}), done=False)[: -len(b"\n\n")]
    _, final = await run(Server(ok(body)))
    assert final.stop_reason == "error"
    assert final.text == "Hel"
    assert "ended before its finish_reason" in (final.error_message or "")


async def test_a_stream_with_its_finish_reason_but_no_done_marker_is_complete() -> None:
    # As the OpenAI SDK and pi-ai read Chat Completions: the body's end is the end.
    body = sse_data(chat_chunk({"content": "Hi"}), chat_chunk(finish="length"), done=False)
    events, final = await run(Server(ok(body)))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert (final.stop_reason, final.text) == ("length", "Hi")


async def test_truncated_stream_is_an_error_with_the_partial_content() -> None:
    body = sse_data(chat_chunk({"content": "Hel"}), chat_chunk({"content": "lo wor"}), done=False)
    events, final = await run(Server(ok(body)))
    # pi-ai's order: the open blocks end, then the error (it used to be the error alone).
    assert types(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]
    assert final.stop_reason == "error"
    assert final.text == "Hello wor"
    assert "ended before its finish_reason" in (final.error_message or "")


async def test_empty_200_body_is_an_error() -> None:
    events, final = await run(Server(ok(b"")))
    assert types(events) == ["start", "error"]
    assert final.stop_reason == "error"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            400,
            {"error": {"message": "Invalid 'messages'", "type": "invalid_request_error"}},
            "HTTP 400: Invalid 'messages' (invalid_request_error)",
        ),
        (
            401,
            {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
            "HTTP 401: invalid x-api-key (authentication_error)",
        ),
        (404, {"detail": "Not Found"}, "HTTP 404: Not Found"),
        (422, "plain words", "HTTP 422: plain words"),
    ],
)
async def test_http_errors_carry_the_provider_message(status: int, body: object, expected: str) -> None:
    response = httpx.Response(status, json=body) if not isinstance(body, str) else httpx.Response(status, text=body)
    server = Server(response)
    events, final = await run(server)
    assert types(events) == ["error"]  # no `start`: the request failed before streaming
    assert final.error_message == expected
    assert len(server.requests) == 1  # 4xx other than 408/409/429 are not retried


async def test_an_sse_formatted_error_body_with_http_500() -> None:
    body = b'data: {"error": {"message": "litellm.APIError: boom", "type": "api_error"}}\n\ndata: [DONE]\n\n'
    server = Server(*[httpx.Response(500, headers=SSE_HEADERS, content=body) for _ in range(3)])
    _, final = await run(server)
    assert final.error_message == "HTTP 500: litellm.APIError: boom (api_error) (after 2 retries)"
    assert len(server.requests) == 3


async def test_a_200_that_is_not_an_event_stream() -> None:
    server = Server(httpx.Response(200, json={"error": {"message": "streaming not supported"}}))
    events, final = await run(server)
    assert types(events) == ["error"]
    assert "Expected an event stream" in (final.error_message or "")
    assert "streaming not supported" in (final.error_message or "")


async def test_malformed_json_data_is_an_error() -> None:
    body = sse_data(chat_chunk({"content": "ok"}), "{not json", done=True)
    _, final = await run(Server(ok(body)))
    assert final.stop_reason == "error"
    assert "Malformed stream data" in (final.error_message or "")
    assert final.text == "ok"


async def test_retry_429_honours_retry_after_then_succeeds() -> None:
    server = Server(
        httpx.Response(429, headers={"retry-after-ms": "30"}, json={"error": {"message": "slow down"}}),
        httpx.Response(503, headers={"retry-after": "0"}, json={"error": {"message": "busy"}}),
        ok(HELLO),
    )
    started = time.monotonic()
    events, final = await run(server)
    assert time.monotonic() - started >= 0.03
    assert final.text == "Hello" and final.stop_reason == "stop"
    assert types(events)[0] == "start" and len(server.requests) == 3


async def test_retries_give_up_after_max_retries() -> None:
    server = Server(
        *[
            httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            for _ in range(5)
        ]
    )
    _, final = await run(server, http=HTTPOptions(max_retries=3, backoff=0.001))
    assert len(server.requests) == 4
    assert final.error_message == "HTTP 529: Overloaded (overloaded_error) (after 3 retries)"


async def test_no_retry_when_max_retries_is_zero_or_the_server_says_so() -> None:
    server = Server(httpx.Response(500, json={"error": {"message": "boom"}}))
    _, final = await run(server, http=HTTPOptions(max_retries=0))
    assert len(server.requests) == 1 and final.error_message == "HTTP 500: boom"
    server = Server(httpx.Response(500, headers={"x-should-retry": "false"}, json={"error": {"message": "no"}}))
    await run(server)
    assert len(server.requests) == 1
    server = Server(
        httpx.Response(400, headers={"x-should-retry": "true"}, json={"error": {"message": "again"}}), ok(HELLO)
    )
    _, final = await run(server)
    assert final.text == "Hello"


async def test_retry_after_above_max_retry_delay_fails_at_once() -> None:
    server = Server(
        httpx.Response(429, headers={"retry-after": "120"}, json={"error": {"message": "Rate limit reached"}})
    )
    started = time.monotonic()
    _, final = await run(server, opts=options(max_retry_delay=5))
    assert time.monotonic() - started < 5  # no 120 s wait
    assert len(server.requests) == 1
    assert final.error_message == (
        "HTTP 429: Rate limit reached (the server asked to retry after 120 s, more than max_retry_delay=5 s)"
    )


async def test_retry_after_as_an_http_date() -> None:
    from email.utils import formatdate

    server = Server(
        httpx.Response(429, headers={"retry-after": formatdate(time.time() + 3600, usegmt=True)}), ok(HELLO)
    )
    _, final = await run(server, opts=options(max_retry_delay=60))
    assert "more than max_retry_delay" in (final.error_message or "")


async def test_connection_errors_are_retried() -> None:
    calls = 0

    def refuse(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise httpx.ConnectError("connection refused", request=request)
        return ok(HELLO)

    _, final = await run(Server(refuse, refuse, refuse))
    assert final.text == "Hello" and calls == 3

    def always(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    _, final = await run(Server(always, always, always))
    assert final.error_message == "Could not connect to the server: connection refused (after 2 retries)"


async def test_a_retryable_error_chunk_before_any_content_is_retried() -> None:
    error = sse_data(
        chat_chunk({"role": "assistant", "content": None}),
        {"error": {"code": 500, "message": "peg-native format", "type": "server_error"}},
        done=False,
    )
    server = Server(ok(error), ok(HELLO))
    events, final = await run(server)
    assert final.text == "Hello"
    assert types(events).count("start") == 1


async def test_an_error_chunk_after_content_ends_the_stream_with_the_content() -> None:
    body = sse_data(
        chat_chunk({"content": "partial"}),
        {"error": {"code": 500, "message": "boom", "type": "server_error"}},
        done=False,
    )
    server = Server(ok(body), ok(HELLO))
    events, final = await run(server)
    assert len(server.requests) == 1
    assert final.stop_reason == "error" and final.text == "partial"
    assert final.error_message == "boom (server_error)"
    assert "text_end" not in types(events)  # pending blocks are not closed on error (pi-ai)


async def test_a_disconnect_mid_stream_keeps_the_partial_content() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield sse_data(chat_chunk({"content": "This str"}), done=False)
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    _, final = await run(Server(httpx.Response(200, headers=SSE_HEADERS, content=body())))
    assert final.stop_reason == "error" and final.text == "This str"
    assert "connection closed before the response was complete" in (final.error_message or "")


async def test_an_idle_stream_times_out() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield sse_data(chat_chunk({"content": "x"}), done=False)
        await anyio.sleep(10)
        yield b""

    async def slow(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE_HEADERS, content=body())

    _, final = await run(Server(slow), http=HTTPOptions(total_timeout=0.3))
    assert final.stop_reason == "error" and final.text == "x"
    assert final.error_message == "The request timed out after 0.3 s (total_timeout)"


def held_open(first: bytes, closed: anyio.Event) -> httpx.Response:
    """A 200 event stream that sends `first`, then holds the connection open for 30 s; `closed`
    is set once the body is closed."""

    async def body() -> AsyncIterator[bytes]:
        try:
            yield first
            await anyio.sleep(30)
            yield b""
        finally:
            closed.set()

    return httpx.Response(200, headers=SSE_HEADERS, content=body())


async def test_abort_mid_stream_ends_with_aborted_and_the_partial_content() -> None:
    signal = AbortSignal()
    closed = anyio.Event()
    server = Server(held_open(sse_data(chat_chunk({"content": "Hello"}), done=False), closed))
    async with server.client() as client:
        with anyio.fail_after(5):
            stream = stream_openai_completions(CHAT, context(), options(signal=signal), client=client)
            seen = []
            async with stream:
                async for event in stream:
                    seen.append(event)
                    if event.type == "text_delta":
                        signal.abort()
            assert closed.is_set()
    assert types(seen) == ["start", "text_start", "text_delta", "error"]
    end = seen[-1]
    assert isinstance(end, ErrorEvent)
    assert end.reason == "aborted"
    assert end.error.stop_reason == "aborted"
    assert end.error.text == "Hello"
    assert end.error.error_message == "Request was aborted"


async def test_abort_while_waiting_for_the_retry() -> None:
    signal = AbortSignal()

    def busy(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"retry-after": "5"}, json={"error": {"message": "busy"}})

    server = Server(busy, busy)
    async with server.client() as client, anyio.create_task_group() as tg:
        tg.start_soon(_abort_later, signal, 0.2)
        with anyio.fail_after(3):
            _, final = await collect(stream_openai_completions(CHAT, context(), options(signal=signal), client=client))
    assert final.stop_reason == "aborted" and len(server.requests) == 1


async def _abort_later(signal: AbortSignal, delay: float) -> None:
    await anyio.sleep(delay)
    signal.abort()


async def test_an_already_aborted_signal_makes_no_request() -> None:
    signal = AbortSignal()
    signal.abort()
    server = Server(ok(HELLO))
    events, final = await run(server, opts=options(signal=signal))
    assert types(events) == ["error"] and final.stop_reason == "aborted"
    assert server.requests == []


async def test_an_outer_cancellation_propagates_and_closes_the_response() -> None:
    closed = anyio.Event()
    server = Server(held_open(sse_data(chat_chunk({"content": "Hi"}), done=False), closed))
    seen = []
    async with server.client() as client:
        with anyio.move_on_after(0.3) as scope:
            async with stream_openai_completions(CHAT, context(), options(), client=client) as stream:
                async for event in stream:
                    seen.append(event.type)
        assert scope.cancelled_caught
        assert closed.is_set()
    assert seen == ["start", "text_start", "text_delta"]


async def test_breaking_out_early_closes_the_response() -> None:
    closed = anyio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            for part in split(HELLO, 10):
                yield part
        finally:
            closed.set()

    server = Server(httpx.Response(200, headers=SSE_HEADERS, content=body()))
    async with server.client() as client:
        async with stream_openai_completions(CHAT, context(), options(), client=client) as stream:
            async for event in stream:
                if event.type == "text_delta":
                    break
        assert closed.is_set()


async def test_result_returns_the_final_message() -> None:
    server = Server(ok(HELLO))
    async with server.client() as client:
        final = await stream_openai_completions(CHAT, context(), options(), client=client).result()
    assert final.text == "Hello"


async def test_own_client_is_used_and_closed_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentloop.providers import _http

    made: list[httpx.AsyncClient] = []
    server = Server(ok(HELLO))

    def factory(http: HTTPOptions) -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.MockTransport(server))
        made.append(client)
        return client

    monkeypatch.setattr(_http, "_client", factory)
    _, final = await collect(stream_openai_completions(CHAT, context(), options()))
    assert final.text == "Hello"
    assert made and made[0].is_closed


async def test_unreachable_server_without_a_client() -> None:
    # A real connection to a closed loopback port: refused at once, retried, then reported.
    lonely = model("openai-completions", base_url="http://127.0.0.1:9/v1")
    with anyio.fail_after(10):
        _, final = await collect(stream_openai_completions(lonely, context(), options(), http=FAST))
    assert final.stop_reason == "error"
    assert (final.error_message or "").startswith("Could not connect to the server")


async def test_a_bad_base_url_is_an_error_event() -> None:
    broken = model("openai-completions", base_url="not a url at all")
    _, final = await collect(stream_openai_completions(broken, context(), options(), http=FAST))
    assert final.stop_reason == "error"


CANARY = "sk-canary-0123456789abcdef"


async def test_the_api_key_never_shows_in_events_errors_logs_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {CANARY}. You can find your API key at https://example"

    def deny(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {CANARY}"
        return httpx.Response(401, json={"error": {"message": echo, "type": "invalid_request_error"}})

    def busy(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"message": f"busy for {CANARY}"}})

    opts = options(api_key=CANARY)
    assert CANARY not in repr(opts)
    for server in (Server(deny), Server(busy, busy, busy)):
        async with server.client() as client:
            stream = stream_openai_completions(CHAT, context(), opts, http=FAST, client=client)
            assert CANARY not in repr(stream)
            events, final = await collect(stream)
        assert CANARY not in repr(events)
        assert CANARY not in (final.error_message or "")
        assert "***" in (final.error_message or "")
    assert CANARY not in caplog.text
    assert "retry 1 of test-model" in caplog.text


async def test_a_missing_key_for_a_known_provider_is_an_error_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai = model("openai-completions", provider="openai")
    events, final = await collect(stream_openai_completions(openai, context(), options(api_key=None)))
    assert types(events) == ["error"]
    assert final.error_message == (
        "No API key for provider 'openai': set OPENAI_API_KEY, or pass api_key (AgentLoopConfig.api_key / get_api_key)."
    )


async def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = Server(ok(HELLO))
    openai = model("openai-completions", provider="openai")
    async with server.client() as client:
        await collect(stream_openai_completions(openai, context(), options(api_key=None), client=client))
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_local_providers_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server(ok(HELLO))
    async with server.client() as client:
        await collect(stream_openai_completions(CHAT, context(), options(api_key=None), client=client))
    assert "authorization" not in server.requests[0].headers


def test_bad_arguments_raise_at_call_time() -> None:
    with pytest.raises(TypeError, match=r"model must be an agentloop\.Model"):
        stream_openai_completions("gpt", context(), options())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="http must be"):
        stream_openai_completions(CHAT, context(), options(), http={"max_retries": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_retries"):
        HTTPOptions(max_retries=-1)
    with pytest.raises(ValueError, match="idle_timeout"):
        HTTPOptions(idle_timeout=-1)


async def test_chunks_helper_delays() -> None:
    got = [part async for part in chunks([b"a", b"b"], delay=0.001)]
    assert got == [b"a", b"b"]


async def test_a_failure_while_reading_an_error_body_is_an_error_event() -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b'{"error": '
        raise httpx.RemoteProtocolError("peer closed connection")

    server = Server(httpx.Response(500, content=broken()))
    events, final = await run(server)
    assert types(events) == ["error"]
    assert (final.error_message or "").startswith("The connection closed before the response was complete")


async def test_a_parser_bug_is_an_error_event(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentloop.providers import _openai_completions

    def explode(self: object, event: str, data: str) -> list[object]:
        raise KeyError("surprise")

    monkeypatch.setattr(_openai_completions.CompletionsParser, "feed", explode)
    _, final = await run(Server(ok(HELLO)))
    assert final.error_message == "Unexpected data from the provider: KeyError: 'surprise'"

    def finish(self: object) -> list[object]:
        raise ValueError("bad end")

    monkeypatch.undo()
    monkeypatch.setattr(_openai_completions.CompletionsParser, "finish", finish)
    _, final = await run(Server(ok(HELLO)))
    assert final.error_message == "ValueError: bad end"
