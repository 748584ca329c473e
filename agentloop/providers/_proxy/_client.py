"""`stream_proxy`: a stream function that runs the model on a pi proxy server.

The server holds the provider keys and streams the bandwidth-saving events (no `partial`); the
client rebuilds the full events with an `AssistantMessageBuilder`. Port of pi-agent-core's
`streamProxy` (proxy.ts), with the reference's hangs fixed: a last line without a newline is
read, and a response that ends without `done`/`error` ends with an `error` event.

Connections are reused: a response read to its end gives its connection back to the client's
pool (the rest of the body after `done` is read, within a bound, before closing), and without
`client=` the calls of one function share a client of their own (see `stream_proxy`).
"""

from __future__ import annotations

import codecs
import contextlib
import inspect
import re
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.lowlevel
import httpx

from ..._types._constants import CLEANUP_TIMEOUT
from ..._types._events import AssistantMessageEvent, ErrorEvent
from ..._types._messages import Context, Model
from ..._types._stream_fn import StreamOptions
from ..._wire._json_text import decode_json
from .._auth import redact
from .._errors import MAX_ERROR_BODY
from ._wire import PROXY_PATH, ProxyProtocolError, WireDecoder, encode_request

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "ABORTED_TEXT",
    "AuthToken",
    "CLOSED_EARLY_TEXT",
    "ProxyStreamFn",
    "stream_proxy",
)

AuthToken: TypeAlias = str | Callable[[], str | Awaitable[str]]
"""The proxy's bearer token, or a (plain or async) function called for a fresh one per request."""

ABORTED_TEXT = "Request aborted by user"
CLOSED_EARLY_TEXT = "Connection closed by proxy server before the response completed"
_DRAIN_READS = 64
_REST_TIMEOUT = 1.0  # the longest wait for the end of a body after its terminal event
_MAX_REST = 64 * 1024  # the most bytes read after the terminal event to keep the connection
_NEWLINE = re.compile(r"\r\n|\r|\n")


class ProxyStreamFn(Protocol):
    """What `stream_proxy` returns: a `StreamFn` whose value is an async context manager of the
    events, and itself an async context manager that keeps its own client (and connections) open
    across calls while the `async with` lasts."""

    def __call__(
        self, model: Model, context: Context, options: StreamOptions, /
    ) -> AbstractAsyncContextManager[AsyncIterator[AssistantMessageEvent]]: ...

    async def __aenter__(self) -> ProxyStreamFn: ...

    async def __aexit__(self, *exc_info: object) -> None: ...


_Failure = tuple[Literal["error", "aborted"], str]


def stream_proxy(
    proxy_url: str,
    auth_token: AuthToken,
    *,
    client: httpx.AsyncClient | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = 30.0,
    read_timeout: float | None = None,
    max_line_size: int = 16 * 1024 * 1024,
) -> ProxyStreamFn:
    """A stream function that sends each model request to a pi proxy server.

    It posts `{model, context, options}` to `{proxy_url}/api/stream` with
    `Authorization: Bearer <auth_token>` and turns the server's event lines back into
    `AssistantMessageEvent`s. The API key of `StreamOptions` is never sent: the server has its own.

    Like every stream function it never raises once called: an HTTP error ("Proxy error: ..."),
    a broken connection, malformed data or a response that ends early is one terminal `error`
    event, and an abort of `options.signal` ends the request at once with stop reason `aborted`
    (content received so far kept).

    Args:
        proxy_url: The server's base URL, for example `https://genai.example.com`.
        auth_token: The bearer token, or a plain or async function that returns one (called for
            every request, for tokens that expire).
        client: An `httpx.AsyncClient` to send with, used as is (its timeouts and pool apply;
            it is never closed here). By default the function makes a client of its own and
            shares it between its calls: it lives while a call is streaming or while the
            function is held open by `async with stream_proxy(...) as fn:` (one per event loop),
            and is closed when the last of those ends. Hold the function open to keep
            connections across calls made one after another (the turns of an agent run); calls
            that overlap share connections either way, and nothing is left open to leak.
        headers: Extra request headers (`Authorization`, `Content-Type` and `Accept` are the
            client's own and cannot be replaced).
        timeout: Seconds to connect, send and wait for a pooled connection (own client only).
        read_timeout: Seconds to wait for the next bytes of the response; None waits as long as
            the model thinks (own client only).
        max_line_size: The longest event line accepted, in characters.

    Example:
        ```python
        async with stream_proxy("https://genai.example.com", token) as proxy:
            agent = Agent(model=model, stream_fn=proxy)
            await agent.prompt("Hello")
        ```
    """
    if not isinstance(proxy_url, str) or not proxy_url.startswith(("http://", "https://")):
        raise ValueError(f"proxy_url must be an http:// or https:// URL, got {proxy_url!r}")
    if isinstance(auth_token, str):
        if not auth_token:
            raise ValueError("auth_token must be a non-empty string or a function that returns one")
    elif not callable(auth_token):
        raise TypeError(f"auth_token must be a str or a function that returns one, got {type(auth_token).__name__}")
    if headers is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise TypeError("headers must map str names to str values")
    for name, value in (("timeout", timeout), ("read_timeout", read_timeout)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    if isinstance(max_line_size, bool) or not isinstance(max_line_size, int) or max_line_size < 1:
        raise ValueError(f"max_line_size must be a positive int, got {max_line_size!r}")
    own = ("authorization", "content-type", "accept")
    return _ProxyStreamFn(
        proxy_url.rstrip("/") + PROXY_PATH,
        auth_token,
        client,
        {k: v for k, v in (headers or {}).items() if k.lower() not in own},
        timeout,
        read_timeout,
        max_line_size,
    )


_ssl_context: Any = None


def _shared_ssl_context() -> Any:
    """The SSL context of our own clients, made once: loading the CA bundle is the slow part."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = httpx.create_ssl_context()
    return _ssl_context


class _OwnClient:
    """The client a `stream_proxy` function made in one event loop, and how many hold it."""

    __slots__ = ("client", "holders")

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.holders = 0


class _ProxyStreamFn:
    """The stream function `stream_proxy` returns (its repr never shows the token).

    Without a given client it shares one of its own, counted: each streaming call and each
    `async with` of the function holds it, and the last to let go closes it. It is kept per event
    loop (an `anyio.lowlevel.RunVar`), since a client's connections belong to the loop that
    opened them.
    """

    __slots__ = ("_client", "_headers", "_max_line", "_own", "_read_timeout", "_timeout", "_token", "url")

    def __init__(
        self,
        url: str,
        token: AuthToken,
        client: httpx.AsyncClient | None,
        headers: dict[str, str],
        timeout: float | None,
        read_timeout: float | None,
        max_line: int,
    ) -> None:
        self.url = url
        self._token = token
        self._client = client
        self._headers = headers
        self._timeout = timeout
        self._read_timeout = read_timeout
        self._max_line = max_line
        self._own: anyio.lowlevel.RunVar[_OwnClient | None] = anyio.lowlevel.RunVar("stream_proxy client", default=None)

    def _hold(self) -> httpx.AsyncClient:
        """This event loop's own client, made if nobody holds one; pair with `_let_go`."""
        own = self._own.get()
        if own is None:
            timeout = httpx.Timeout(self._timeout, read=self._read_timeout)
            own = _OwnClient(httpx.AsyncClient(timeout=timeout, verify=_shared_ssl_context()))
            self._own.set(own)
        own.holders += 1
        return own.client

    async def _let_go(self) -> None:
        """Release a hold of `_hold`; the last one closes the client (shielded, bounded)."""
        own = self._own.get()
        assert own is not None and own.holders > 0
        own.holders -= 1
        if own.holders == 0:
            self._own.set(None)
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True), contextlib.suppress(Exception):
                await own.client.aclose()  # nothing to report about a client we are done with

    async def __aenter__(self) -> _ProxyStreamFn:
        if self._client is None:
            self._hold()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._client is None:
            await self._let_go()

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> _ProxyCall:
        # Wrong argument types are a caller's bug: they raise here, before any stream exists.
        for name, value, kind in (
            ("model", model, Model),
            ("context", context, Context),
            ("options", options, StreamOptions),
        ):
            if not isinstance(value, kind):
                raise TypeError(f"{name} must be an agentloop.{kind.__name__}, got {type(value).__name__}")
        return _ProxyCall(self, model, context, options)

    def __repr__(self) -> str:
        return f"stream_proxy({self.url!r})"


class _ProxyCall:
    """One request: an async context manager whose value is the event iterator.

    The context manager owns the HTTP response, so it is closed in the task that used it however
    the iteration ends; a response whose terminal event arrived is read to its end first, which
    gives its connection back to the pool.
    """

    __slots__ = (
        "_chunks",
        "_complete",
        "_context",
        "_events",
        "_fn",
        "_holds_client",
        "_model",
        "_options",
        "_response",
        "_token",
    )

    def __init__(self, fn: _ProxyStreamFn, model: Model, context: Context, options: StreamOptions) -> None:
        self._fn = fn
        self._model = model
        self._context = context
        self._options = options
        self._events: AsyncGenerator[AssistantMessageEvent, None] | None = None
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None
        self._complete = False  # the terminal event arrived: the connection may be reused
        self._holds_client = False  # this call holds the function's own client
        self._token: str | None = None  # the token sent: never shown in an error message

    async def __aenter__(self) -> AsyncIterator[AssistantMessageEvent]:
        events = self._events = self._run()
        return events

    async def __aexit__(self, *exc_info: object) -> None:
        events, self._events = self._events, None
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            if events is not None:
                await events.aclose()
        await self._cleanup()

    async def _cleanup(self) -> None:
        """Close the response (shielded: it runs after cancellations too).

        After the terminal event the rest of the body (normally only the end of the chunked
        encoding) is read first, briefly and within a size bound, so that httpx can give the
        connection back to the pool instead of closing it.
        """
        chunks, response = self._chunks, self._response
        self._chunks = self._response = None
        if response is not None:
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                if self._complete and chunks is not None:
                    await _read_rest(chunks)
                await _close_response(response, chunks)
        if self._holds_client:
            self._holds_client = False
            await self._fn._let_go()

    async def _run(self) -> AsyncGenerator[AssistantMessageEvent, None]:
        # No cancel scope or context manager is held across a `yield` here (STYLE 3.4): each wait
        # on the network gets its own abort scope, and the response belongs to `_ProxyCall`.
        signal = self._options.signal
        decoder = WireDecoder(self._model)
        if signal.aborted:
            yield decoder.error("aborted", ABORTED_TEXT)
            return
        failure = await self._open()
        if failure is not None:
            await self._cleanup()
            yield decoder.error(failure[0], redact(failure[1], self._token))
            return
        assert self._chunks is not None
        reader = _LineReader(self._chunks, self._fn._max_line)
        event: AssistantMessageEvent | None = None
        while True:
            if signal.aborted:
                await self._cleanup()
                yield decoder.error("aborted", ABORTED_TEXT)
                return
            line, failure = await self._read_line(reader)
            if failure is None and line is None:
                failure = ("error", CLOSED_EARLY_TEXT)  # the reference (before 1.6) hung here
            if failure is None:
                assert line is not None
                try:
                    event = decoder.feed_line(line)
                except ProxyProtocolError as exc:
                    failure = ("error", str(exc))
            if failure is not None:
                await self._cleanup()
                yield decoder.error(failure[0], redact(failure[1], self._token))
                return
            if event is None:
                continue
            if event.type in ("done", "error"):
                self._complete = True
                await self._cleanup()
                yield self._redacted(event)
                return
            yield event

    def _redacted(self, event: AssistantMessageEvent) -> AssistantMessageEvent:
        """A terminal error event without the token in its message (a server may echo it)."""
        if isinstance(event, ErrorEvent) and event.error.error_message:
            message = redact(event.error.error_message, self._token)  # also where JSON escapes spell it
            if message != event.error.error_message:
                return ErrorEvent(event.reason, replace(event.error, error_message=message))
        return event

    async def _open(self) -> _Failure | None:
        """Send the request; on a 2xx answer keep its body stream, else describe the failure."""
        fn = self._fn
        signal = self._options.signal
        stage = "Could not get the proxy auth token"
        try:
            with signal.cancel_scope() as scope:
                token: object = fn._token
                if callable(token):
                    token = token()
                    if inspect.isawaitable(token):
                        token = await token
                    if not isinstance(token, str) or not token:
                        got = "''" if token == "" else f"a {type(token).__name__}"  # never the value: a secret
                        return ("error", f"{stage}: auth_token() returned {got}, expected a non-empty str")
                self._token = str(token)
                stage = "Could not encode the proxy request"
                body = encode_request(self._model, self._context, self._options)
                stage = "Proxy request failed"
                client = fn._client
                if client is None:
                    client = fn._hold()
                    self._holds_client = True
                headers = {
                    **fn._headers,
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "Accept": "text/event-stream",
                }
                request = client.build_request("POST", fn.url, content=body, headers=headers)
                response = self._response = await client.send(request, stream=True)
                if not 200 <= response.status_code < 300:
                    return ("error", await _error_text(response))
                self._chunks = response.aiter_bytes()
        except Exception as exc:
            if signal.aborted:
                return ("aborted", ABORTED_TEXT)
            return ("error", f"{stage}: {str(exc) or type(exc).__name__}")
        if scope.cancelled_caught:
            return ("aborted", ABORTED_TEXT)
        return None

    async def _read_line(self, reader: _LineReader) -> tuple[str | None, _Failure | None]:
        """The next line (None at the end of the body), or why there is none."""
        signal = self._options.signal
        try:
            with signal.cancel_scope() as scope:
                line = await reader.readline()
        except ProxyProtocolError as exc:
            return None, ("error", str(exc))
        except Exception as exc:
            if signal.aborted:
                return None, ("aborted", ABORTED_TEXT)
            return None, ("error", f"Proxy stream failed: {str(exc) or type(exc).__name__}")
        if scope.cancelled_caught:
            return None, ("aborted", ABORTED_TEXT)
        return line, None


async def _read_rest(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a body (at most `_MAX_REST` bytes, for at most `_REST_TIMEOUT`)."""
    size = 0
    with anyio.move_on_after(_REST_TIMEOUT), contextlib.suppress(Exception):
        async for chunk in chunks:
            size += len(chunk)
            if size > _MAX_REST:
                return


async def _close_response(response: httpx.Response, chunks: AsyncIterator[bytes] | None) -> None:
    """Close a response whose body may be half read, without abandoning httpx's generators.

    `aiter_bytes()` is a chain of async generators down to the socket. Closing only the outer one
    leaves the inner ones suspended, and trio warns (ResourceWarning) when they are collected. So
    the connection is closed first, and the chain is read once more: the read fails at once and
    the error unwinds (and so finishes) every generator of the chain.
    """
    with contextlib.suppress(Exception):  # a broken connection may fail to close; it is closed anyway
        await response.aclose()
    if chunks is None:
        return
    for _ in range(_DRAIN_READS):
        try:
            await chunks.__anext__()
        except StopAsyncIteration:
            return
        except Exception:  # the expected end: reading a closed connection fails
            return
    await chunks.aclose()  # type: ignore[attr-defined]  # a transport that ignores the close


async def _error_text(response: httpx.Response) -> str:
    """The reference's text for a non-2xx answer: the JSON body's `error`, else status and reason."""
    body = bytearray()
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            body += chunk
            if len(body) > MAX_ERROR_BODY:
                break
    except Exception:  # a broken error body: the status line still says what happened
        body.clear()
    finally:
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            await _close_response(response, chunks)
    try:
        data = decode_json(bytes(body), constants=True)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str) and error:
            return f"Proxy error: {error}"
    return f"Proxy error: {response.status_code} {response.reason_phrase}".rstrip()


class _LineReader:
    """Lines of a byte stream: `\\n`, `\\r\\n` or `\\r` ends a line, and a last line without one counts."""

    __slots__ = ("_chunks", "_decoder", "_eof", "_limit", "_lines", "_pending", "_pending_size")

    def __init__(self, chunks: AsyncIterator[bytes], limit: int) -> None:
        self._chunks = chunks
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lines: deque[str] = deque()
        self._pending: list[str] = []  # the unfinished last line, in pieces (no quadratic joins)
        self._pending_size = 0
        self._limit = limit
        self._eof = False

    async def readline(self) -> str | None:
        while not self._lines:
            if self._eof:
                return None
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._eof = True
                tail = "".join(self._pending) + self._decoder.decode(b"", final=True)
                self._pending = []
                if tail:
                    self._lines.append(tail)  # the reference dropped this line
                continue
            self._add(self._decoder.decode(chunk))
        return self._lines.popleft()

    def _add(self, text: str) -> None:
        parts = _NEWLINE.split(text)
        if len(parts) > 1:
            parts[0] = "".join(self._pending) + parts[0]
            self._lines.extend(parts[:-1])
            self._pending, self._pending_size = [], 0
        last = parts[-1]
        if last:
            self._pending.append(last)
            self._pending_size += len(last)
            if self._pending_size > self._limit:
                raise ProxyProtocolError(f"The proxy server sent a line longer than {self._limit} characters")
