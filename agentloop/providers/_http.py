"""The only module that uses httpx: requests, retries, timeouts, reading the streamed events
(server-sent events by `_sse`, or another framing a `StreamFormat` names).

`run_stream` drives one model response: it builds the request (a build that waits, for
credentials say, is awaited under the abort and the total timeout), sends it (retrying rate
limits, overload and server errors with exponential backoff and jitter, honouring `Retry-After`,
while nothing has streamed yet; an `auth` of the request signs each attempt), reads an error
body before anything else on a non-2xx answer, feeds each event to the protocol's `SSEParser`,
and makes sure exactly one terminal event ends the stream, whatever happens: HTTP errors,
malformed data, a connection closed before the end marker, a timeout, or an abort of
`options.signal`. An outer cancellation is not caught.
"""

from __future__ import annotations

import email.utils
import functools
import inspect
import logging
import math
import random
import ssl
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx
from httpx_sse import ServerSentEvent, SSEError

from .._types._abort import AbortCut, AbortSignal
from .._types._builder import AssistantMessageBuilder
from .._types._constants import ABORTED_TEXT, CLEANUP_TIMEOUT
from .._types._events import AssistantMessageEvent
from .._types._messages import Context, Model, Usage
from .._types._stream_fn import StreamOptions
from .._wire._json_text import decode_json
from ._auth import redact
from ._errors import MAX_ERROR_BODY, ProviderError
from ._parse import SSEParser, error_text
from ._request import Request, json_text
from ._sse import aiter_sse, body_chunks, unwind
from ._stream import AssistantMessageEventStream, check_arguments

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ("SSE", "AsyncClient", "HTTPOptions", "StreamFormat", "run_stream")

AsyncClient: TypeAlias = httpx.AsyncClient
"""The client type a stream function accepts as `client=` (httpx's)."""

log = logging.getLogger("agentloop.providers")

T = TypeVar("T")

_RETRY_STATUSES = frozenset({408, 409, 429})
_DEFAULT_MAX_RETRY_DELAY = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPOptions:
    """How provider requests are made. Pass as `http=` to a stream function.

    Attributes:
        max_retries: Retries of a request that failed before any content streamed (connection
            errors, HTTP 408/409/429/5xx, overload and rate-limit errors reported mid-stream).
        backoff: The first retry delay in seconds when the server gives no `Retry-After`; it
            doubles on each retry (up to `max_backoff`) and is reduced by up to 25 % of jitter.
        max_backoff: The longest computed backoff, in seconds.
        connect_timeout: Seconds to establish a connection.
        idle_timeout: The longest wait for the next bytes of a response (an idle stream fails).
        event_timeout: The longest wait for the response's next event (a block start, a delta, a
            block end, the end): keep-alive comments (`: ping`) and events that carry nothing
            (Anthropic's `ping`) do not count, so a server that only sends those still fails
            after this long (None: no limit). It is longer than `idle_timeout` because a
            server that keeps the connection alive may be waiting for a model that reasons for
            minutes without showing it.
        total_timeout: The longest a whole response may take, retries included (None: no limit).
        max_event_size: The most bytes of one server-sent event, its lines included (so also
            of one line); a server that sends more fails the response.
        max_body_size: The most bytes of one response body (after content decoding); a body
            that grows past it fails the response. Error bodies and bodies that are not an
            event stream are read only up to their first 64 KiB.

    The size limits are far above what a provider sends (the largest events, a Responses
    `response.completed` that repeats every generated image, stay within a few MiB; a whole
    answer of 128k tokens is some tens of MiB): they bound what a broken or hostile server can
    make this process hold.
    """

    max_retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    connect_timeout: float = 10.0
    idle_timeout: float = 600.0
    event_timeout: float | None = 1800.0
    total_timeout: float | None = None
    max_event_size: int = 64 * 1024 * 1024
    max_body_size: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_retries", "max_event_size", "max_body_size"):
            value = getattr(self, name)
            least = 0 if name == "max_retries" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
        for name in ("backoff", "max_backoff", "connect_timeout", "idle_timeout", "event_timeout", "total_timeout"):
            value = getattr(self, name)
            if value is None and name in ("event_timeout", "total_timeout"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")


def _http_error_text(status: int, headers: httpx.Headers, message: str) -> str:
    return f"HTTP {status}: {message}"


@dataclass(frozen=True, slots=True)
class StreamFormat:
    """How a protocol's streamed answer is read.

    Attributes:
        media_type: The content type of a streamed answer (also sent as `accept`); an answer of
            another type is an error.
        read: The events of the body (`event` names the kind, `data` carries it), within
            `max_event_size` and `max_body_size`; ProviderError when a limit is passed or the
            framing is broken.
        error_text: The error text of a non-2xx answer, from its status, its headers and the
            message read from its body (the key already redacted).
    """

    media_type: str
    read: Callable[..., AsyncGenerator[ServerSentEvent, None]]
    error_text: Callable[[int, httpx.Headers, str], str] = _http_error_text


SSE = StreamFormat("text/event-stream", aiter_sse)
"""Server-sent events, the format of every protocol but Bedrock's."""

_ssl_context: ssl.SSLContext | None = None


def _client(http: HTTPOptions) -> httpx.AsyncClient:
    """A client for one response. The SSL context (the slow part) is made once and shared."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = httpx.create_ssl_context()
    return httpx.AsyncClient(verify=_ssl_context, timeout=_timeout(http), follow_redirects=False)


def _timeout(http: HTTPOptions) -> httpx.Timeout:
    return httpx.Timeout(http.idle_timeout, connect=http.connect_timeout)


class _Interrupted(Exception):
    """An abort of the signal or the total timeout interrupted a wait."""


class _Stalled(Exception):
    """The event timeout passed without a new event of the message."""


class _Guard:
    """Runs each wait on the outside world in an abort cut bounded by the total deadline (and by
    `until`, the event deadline, when given); a cut never spans a `yield` of the generator."""

    def __init__(self, signal: AbortSignal, deadline: float) -> None:
        self.signal = signal
        self.deadline = deadline

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any, until: float = math.inf) -> T:
        if not self.signal.aborted and anyio.current_time() < min(self.deadline, until):
            with AbortCut(self.signal, deadline=min(self.deadline, until)):
                return await fn(*args)
        if self.signal.aborted or anyio.current_time() >= self.deadline:
            raise _Interrupted
        raise _Stalled


@dataclass(frozen=True, slots=True)
class _Retry:
    reason: str
    delay: float | None = None
    """The server's `Retry-After`; None for the exponential backoff."""


async def _close(resource: Any) -> None:
    """Close a response or a client, even in a cancelled scope, in bounded time."""
    with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
        try:
            await resource.aclose()
        except Exception as exc:  # a failure to close is not the response's failure
            log.debug("closing %r failed: %s", resource, _describe(exc))


def run_stream(
    model: Model,
    context: Context,
    options: StreamOptions,
    build: Callable[[Model, Context, StreamOptions], Request | Awaitable[Request]],
    parser_factory: Callable[[Model, AssistantMessageBuilder], SSEParser],
    *,
    http: HTTPOptions | None = None,
    client: httpx.AsyncClient | None = None,
    stream_format: StreamFormat = SSE,
) -> AssistantMessageEventStream:
    """The events of one response (see the module docstring), for a provider's stream function.

    `build` makes the request lazily, so that its failures (no API key, say) also become the
    terminal `error` event; an `async` build (one that waits for credentials) is awaited under
    the abort and the total timeout. Bad arguments raise TypeError at once.
    """
    check_arguments(model, context, options)
    if http is None:
        http = HTTPOptions()
    elif not isinstance(http, HTTPOptions):
        raise TypeError(f"http must be an agentloop.providers.HTTPOptions, got {type(http).__name__}")
    if client is not None and not isinstance(client, httpx.AsyncClient):
        raise TypeError(f"client must be an httpx.AsyncClient, got {type(client).__name__}")
    return AssistantMessageEventStream(
        _run(model, context, options, build, parser_factory, http, client, stream_format)
    )


async def _run(
    model: Model,
    context: Context,
    options: StreamOptions,
    build: Callable[[Model, Context, StreamOptions], Request | Awaitable[Request]],
    parser_factory: Callable[[Model, AssistantMessageBuilder], SSEParser],
    http: HTTPOptions,
    client: httpx.AsyncClient | None,
    stream_format: StreamFormat,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
    signal = options.signal
    if signal.aborted:
        yield builder.error("aborted", ABORTED_TEXT)
        return
    secret: str | None = options.api_key
    max_delay = options.max_retry_delay if options.max_retry_delay is not None else _DEFAULT_MAX_RETRY_DELAY
    deadline = anyio.current_time() + http.total_timeout if http.total_timeout is not None else float("inf")
    guard = _Guard(signal, deadline)
    own = client is None
    active = _client(http) if client is None else client
    state = _State()
    ended = False  # the terminal event was sent
    try:
        # the contract: a failure to build (no API key, say) is reported, not raised
        if inspect.iscoroutinefunction(build):
            request = await guard.run(build, model, context, options)
        else:
            request = build(model, context, options)
        assert isinstance(request, Request)
        secret = request.secret
        attempt = 0
        while True:
            retry: _Retry | None = None
            attempt_steps = _attempt(model, request, parser_factory, builder, guard, active, http, state, stream_format)
            async with aclosing(attempt_steps) as steps:
                async for step in steps:
                    if isinstance(step, _Retry):
                        retry = step
                        break
                    if step.type == "done" or step.type == "error":
                        ended = True
                    yield step
            if retry is None:
                return
            if attempt >= http.max_retries:
                text = retry.reason if attempt == 0 else f"{retry.reason} (after {attempt} retries)"
                yield builder.error("error", redact(text, secret))
                return
            delay = retry.delay
            if delay is None:
                delay = _backoff(http, attempt)
            elif delay > max_delay:
                text = (
                    f"{retry.reason} (the server asked to retry after {delay:g} s, "
                    f"more than max_retry_delay={max_delay:g} s)"
                )
                yield builder.error("error", redact(text, secret))
                return
            attempt += 1
            log.info("retry %d of %s in %.2f s: %s", attempt, model.id, delay, redact(retry.reason, secret))
            builder.usage = Usage()
            await guard.run(anyio.sleep, delay)
    except _Interrupted:
        if signal.aborted:
            yield builder.error("aborted", ABORTED_TEXT)
        else:
            yield builder.error("error", f"The request timed out after {http.total_timeout:g} s (total_timeout)")
    except Exception as exc:  # anything unforeseen still ends the stream with one event
        if ended:
            log.debug("error after the end of %s: %s", model.id, redact(_describe(exc), secret))
        else:
            text = _transport_error(exc) if isinstance(exc, httpx.HTTPError) else _describe(exc)
            yield builder.error("error", redact(text, secret))
    finally:
        if own:
            await _close(active)


class _State:
    """What survives between attempts: whether `start` was sent."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False


def _backoff(http: HTTPOptions, attempt: int) -> float:
    return float(min(http.backoff * 2**attempt, http.max_backoff)) * (1 - 0.25 * random.random())


async def _attempt(
    model: Model,
    request: Request,
    parser_factory: Callable[[Model, AssistantMessageBuilder], SSEParser],
    builder: AssistantMessageBuilder,
    guard: _Guard,
    client: httpx.AsyncClient,
    http: HTTPOptions,
    state: _State,
    stream_format: StreamFormat,
) -> AsyncGenerator[AssistantMessageEvent | _Retry, None]:
    """One try: its events, or a `_Retry` when it failed in a way worth retrying."""
    secret = request.secret
    headers = {"accept": stream_format.media_type, **request.headers}
    try:
        body = json_text(request.body, compact=True).encode("utf-8")
        if not any(name.lower() == "content-type" for name in headers):
            headers["content-type"] = "application/json"
        http_request = client.build_request("POST", request.url, content=body, headers=headers, timeout=_timeout(http))
        # an auth of the request signs each attempt; without one, the client's own applies
        auth = {} if request.auth is None else {"auth": request.auth}
        response = await guard.run(functools.partial(client.send, http_request, stream=True, **auth))
    except httpx.TransportError as exc:
        yield _Retry(_transport_error(exc))
        return
    except (httpx.HTTPError, httpx.InvalidURL, ValueError, TypeError) as exc:  # a bad URL or body
        yield builder.error("error", redact(f"Could not send the request to {request.url}: {_describe(exc)}", secret))
        return
    chain: AsyncGenerator[Any, None] | None = None
    try:
        status = response.status_code
        if not 200 <= status < 300:
            chain = body_chunks(response)
            body = await _read_start(chain, guard)
            text = stream_format.error_text(
                status, response.headers, _error_message(body, response.reason_phrase, secret)
            )
            should = response.headers.get("x-should-retry")
            if should == "true" or (should != "false" and (status in _RETRY_STATUSES or status >= 500)):
                yield _Retry(text, _retry_after(response.headers))
                return
            yield builder.error("error", redact(text, secret))
            return
        content_type = response.headers.get("content-type", "")
        if stream_format.media_type not in content_type:
            chain = body_chunks(response)
            body = await _read_start(chain, guard)
            text = (
                f"Expected an event stream ({stream_format.media_type}) from {request.url}, got "
                f"{content_type.partition(';')[0] or 'no content type'!r}: {_error_message(body, 'empty body', secret)}"
            )
            yield builder.error("error", redact(text, secret))
            return
        if not state.started:
            state.started = True
            yield builder.start()
        parser = parser_factory(model, builder)
        parser.secret = secret
        chain = stream_format.read(response, max_event_size=http.max_event_size, max_body_size=http.max_body_size)
        wait = http.event_timeout if http.event_timeout is not None else math.inf
        stall = anyio.current_time() + wait  # when the message must have moved on
        while not parser.finished:
            try:
                sse = await guard.run(chain.__anext__, until=stall)
            except StopAsyncIteration:
                break
            except (httpx.HTTPError, SSEError, _Stalled) as exc:
                text = _transport_error(exc) if not isinstance(exc, _Stalled) else _stalled(wait)
                if not parser.has_content:
                    yield _Retry(text)
                    return
                yield builder.error("error", redact(text, secret))
                return
            except ProviderError as exc:  # a size limit: no retry would read less
                yield builder.error("error", redact(str(exc), secret))
                return
            if not sse.data:
                # A bare `data:` line makes an event with empty data: it carries nothing, and none of
                # the protocols sends one.
                continue
            try:
                events = parser.feed(sse.event, sse.data)
            except ProviderError as exc:
                text = redact(str(exc), secret)  # parsers redact the key before they cut
                if exc.retryable and not parser.has_content:
                    yield _Retry(text)
                    return
                yield builder.error("error", text)
                return
            except Exception as exc:  # malformed data of a shape we did not expect
                yield builder.error("error", redact(f"Unexpected data from the provider: {_describe(exc)}", secret))
                return
            for event in events:
                stall = anyio.current_time() + wait
                yield event
        if not parser.finished and not parser.complete_at_eof:
            yield builder.error(
                "error",
                f"The stream ended before its {parser.end_marker}: the connection closed early and the "
                "response is incomplete.",
            )
            return
        try:
            final = list(parser.finish())
        except Exception as exc:  # a parser bug must still end the stream with one event
            final = [builder.error("error", redact(_describe(exc), secret))]
        for event in final:
            yield event
    finally:
        await _release(response, chain)


async def _read_start(chain: AsyncGenerator[bytes, None], guard: _Guard) -> bytes:
    """The first `MAX_ERROR_BODY` bytes of a body (all of a shorter one): an error body, or one
    that is not an event stream, is shown cut short, so no more of it is read."""
    body = bytearray()
    while len(body) < MAX_ERROR_BODY:
        try:
            body += await guard.run(chain.__anext__)
        except StopAsyncIteration:
            break
    return bytes(body[:MAX_ERROR_BODY])


def _stalled(wait: float) -> str:
    return (
        f"The server sent no event for {wait:g} s (event_timeout; keep-alive comments and pings "
        "do not count): the response is stuck"
    )


async def _release(response: httpx.Response, chain: AsyncGenerator[Any, None] | None) -> None:
    """Finish the body's reading generators (see `unwind`), then close the response."""
    try:
        if chain is not None:
            await unwind(chain)
    finally:
        await _close(response)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ProviderError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _transport_error(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        if isinstance(exc, httpx.ConnectTimeout):
            return f"Could not connect to the server in time: {exc}"
        return f"The server sent nothing for too long (idle timeout): {str(exc) or type(exc).__name__}"
    if isinstance(exc, httpx.ConnectError):
        return f"Could not connect to the server: {exc}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"The connection closed before the response was complete: {exc}"
    if isinstance(exc, SSEError):
        return f"Malformed event stream: {exc}"
    return f"HTTP transport error: {_describe(exc)}"


def _error_message(body: bytes, fallback: str, secret: str | None) -> str:
    """The provider's own words from an error body (JSON, an SSE error event, or text).

    The key is redacted before anything is cut, so no part of it survives a cut.
    """
    text = redact(body.decode("utf-8", "replace"), secret).strip()
    if not text:
        return fallback or "no details"
    candidates = [text]
    candidates += [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    for candidate in candidates:
        try:
            data = decode_json(candidate, constants=True)
        except ValueError:
            continue
        message = error_text(data, secret)
        if message:
            return message
    return text if len(text) <= 500 else text[:500] + "..."


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
