"""`proxy_app`: the server side of the pi proxy protocol, as a plain ASGI application.

It checks the bearer token, validates the request, runs a stream function with the server's own
API keys and streams the bandwidth-saving events as `data: {json}\\n\\n` lines. Serve it with any
ASGI server (uvicorn, hypercorn, ...); it runs on asyncio and trio.

The server decides where its keys go: a request whose model names a base URL the server did not
allow is refused before anything runs, so a client holding the proxy token cannot point the
server's provider key (or its network position) at a host of its own.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..._types._abort import AbortSignal
from ..._types._messages import Context, Model
from ..._types._stream_fn import MaybeAwaitable, StreamFn, StreamOptions, opened_stream
from ..._wire._asgi import SSE_HEADERS, ASGIApp, BodyTooLarge, Receive, Scope, Send, header, read_body, send_json
from .._anthropic import ANTHROPIC_BASE_URL
from .._common import env_api_key, redact
from .._openai_completions import OPENAI_BASE_URL
from ._wire import PROXY_PATH, ProxyProtocolError, WireEncoder, decode_request, dumps_bytes

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ("proxy_app",)

_PROVIDER_BASE_URLS: tuple[str, ...] = (OPENAI_BASE_URL, ANTHROPIC_BASE_URL)
"""The built-in providers' own base URLs: where `proxy_app` sends requests unless told otherwise."""

_EVENTS_PER_TURN = 32  # events queued between two turns given to the scheduler
_QUEUED_EVENTS = 256  # events queued ahead of a client that reads slower than the model writes
_PING = b": ping\n\n"


def proxy_app(
    stream_fn: StreamFn,
    *,
    token: str,
    path: str = PROXY_PATH,
    get_api_key: Callable[[str], MaybeAwaitable[str | None]] | None = None,
    resolve_model: Callable[[Model], MaybeAwaitable[Model]] | None = None,
    keepalive: float | None = 15.0,
    max_body_size: int = 32 * 1024 * 1024,
    allowed_base_urls: Iterable[str] = _PROVIDER_BASE_URLS,
) -> ASGIApp:
    """An ASGI app that serves `POST {path}` of the pi proxy protocol with `stream_fn`.

    Answers: 401 without `Authorization: Bearer <token>` (compared in constant time), 400 with
    `{"error": ...}` for a body that is not `{model, context, options}`, 404/405 for other
    paths and methods, 413 for a body over `max_body_size`; otherwise 200 and one
    `data: <event>` line per event, ending with the terminal `done` or `error` event. A stream
    function that raises or stops without a terminal event still ends the response with an
    `error` event. When the client disconnects, the request's signal is aborted and the stream
    function is cancelled at once.

    Args:
        stream_fn: Runs the model (for example the provider dispatcher).
        token: The bearer token clients must send.
        path: The route (default `/api/stream`).
        get_api_key: `(provider) -> key | None` for the request's `StreamOptions.api_key` (by
            default None: providers use their environment variables). Clients never send keys.
        resolve_model: `(model) -> model` maps the model a client sent to the one to run; raise
            ValueError to refuse it (400). The default runs the client's model as sent (headers
            included), within `allowed_base_urls`.
        keepalive: Seconds of silence after which a `: ping` comment line is sent (keeps proxies
            and load balancers from closing a long thinking pause); None disables it.
        max_body_size: The largest request body accepted, in bytes.
        allowed_base_urls: Where the server sends requests, and with them its API keys: a model
            (after `resolve_model`) whose `base_url` has another scheme, host or port is refused
            with 400 naming the allowed ones, before any key is looked up. An empty `base_url`
            (the provider's default) is always allowed. The default is the built-in providers'
            own URLs (OpenAI's and Anthropic's); add your local or compatible servers, or pass
            `["*"]` to allow any host (only for a server that holds no keys a client must not
            steer).
    """
    if not callable(stream_fn):
        raise TypeError(f"stream_fn must be callable, got {stream_fn!r}")
    if not isinstance(token, str) or not token:
        raise ValueError("token must be a non-empty string")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    for name, hook in (("get_api_key", get_api_key), ("resolve_model", resolve_model)):
        if hook is not None and not callable(hook):
            raise TypeError(f"{name} must be callable or None, got {hook!r}")
    if keepalive is not None and (
        isinstance(keepalive, bool) or not isinstance(keepalive, (int, float)) or not keepalive > 0
    ):
        raise ValueError(f"keepalive must be a positive number of seconds or None, got {keepalive!r}")
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise ValueError(f"max_body_size must be a positive int, got {max_body_size!r}")
    allowed = _allowed_origins(allowed_base_urls)
    return _ProxyApp(stream_fn, token.encode(), path, get_api_key, resolve_model, keepalive, max_body_size, allowed)


_Origin: TypeAlias = "tuple[str, str, int]"


def _origin(url: str) -> _Origin | None:
    """The scheme, host and port a base URL sends requests to (as httpx reads it), or None."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    scheme = parsed.scheme
    if scheme not in ("http", "https") or not parsed.host:
        return None
    return scheme, parsed.host, parsed.port or (443 if scheme == "https" else 80)


def _allowed_origins(urls: Iterable[str]) -> frozenset[_Origin] | None:
    """The origins of `allowed_base_urls` (None: any host); ValueError naming a bad entry."""
    if isinstance(urls, str):
        raise TypeError(f"allowed_base_urls must be a list of URLs, got the string {urls!r}")
    origins: set[_Origin] = set()
    for url in urls:
        if url == "*":
            return None
        origin = _origin(url) if isinstance(url, str) else None
        if origin is None:
            raise ValueError(f"allowed_base_urls holds {url!r}: expected http:// or https:// URLs, or '*'")
        origins.add(origin)
    return frozenset(origins)


def _check_base_url(model: Model, allowed: frozenset[_Origin] | None) -> None:
    """Refuse (ValueError) a model whose base URL the server does not send requests to."""
    if allowed is None or not model.base_url or _origin(model.base_url) in allowed:
        return
    hosts = ", ".join(sorted(f"{scheme}://{host}:{port}" for scheme, host, port in allowed)) or "none"
    raise ValueError(
        f"model.base_url {model.base_url!r} is not allowed: this proxy sends requests only to {hosts} "
        "(leave base_url empty for the provider's default)"
    )


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class _ProxyApp:
    __slots__ = (
        "_allowed",
        "_get_api_key",
        "_keepalive",
        "_max_body",
        "_path",
        "_resolve_model",
        "_stream_fn",
        "_token",
    )

    def __init__(
        self,
        stream_fn: StreamFn,
        token: bytes,
        path: str,
        get_api_key: Callable[[str], MaybeAwaitable[str | None]] | None,
        resolve_model: Callable[[Model], MaybeAwaitable[Model]] | None,
        keepalive: float | None,
        max_body: int,
        allowed: frozenset[_Origin] | None,
    ) -> None:
        self._allowed = allowed
        self._stream_fn = stream_fn
        self._token = token
        self._path = path
        self._get_api_key = get_api_key
        self._resolve_model = resolve_model
        self._keepalive = keepalive
        self._max_body = max_body

    def __repr__(self) -> str:
        return f"proxy_app({self._stream_fn!r}, path={self._path!r})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await _lifespan(receive, send)
        elif kind == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
        else:
            raise ValueError(f"proxy_app does not handle ASGI scope type {kind!r}")

    def _authorized(self, scope: Scope) -> bool:
        scheme, _, credentials = (header(scope, b"authorization") or b"").strip().partition(b" ")
        # Compared in constant time whatever was sent (also when nothing was).
        same = hmac.compare_digest(credentials.strip(), self._token)
        return same and scheme.lower() == b"bearer"

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = scope.get("path", "")
        root = scope.get("root_path", "")
        if route != self._path and not (root and route == root + self._path):
            await _reply(send, 404, f"Not found: the proxy serves POST {self._path}")
            return
        if scope.get("method") != "POST":
            await _reply(send, 405, f"Method not allowed: use POST {self._path}", [(b"allow", b"POST")])
            return
        if not self._authorized(scope):
            await _reply(send, 401, "Unauthorized", [(b"www-authenticate", b"Bearer")])
            return
        try:
            body = await read_body(scope, receive, self._max_body)
        except BodyTooLarge:
            await _reply(send, 413, f"Request body too large (the limit is {self._max_body} bytes)")
            return
        if body is None:
            return  # the client left before sending the body
        try:
            model, context, options = decode_request(body)
            if self._resolve_model is not None:
                model = await _call(self._resolve_model, model)
                if not isinstance(model, Model):
                    raise TypeError(f"resolve_model must return an agentloop.Model, got {type(model).__name__}")
            _check_base_url(model, self._allowed)
        except ValueError as exc:
            await _reply(send, 400, f"Invalid request: {exc}")
            return
        api_key = None
        if self._get_api_key is not None:
            api_key = await _call(self._get_api_key, model.provider)
        signal = AbortSignal()
        stream_options = StreamOptions(signal=signal, api_key=api_key or None, **options)
        await self._stream(receive, send, model, context, stream_options)

    async def _stream(
        self, receive: Receive, send: Send, model: Model, context: Context, options: StreamOptions
    ) -> None:
        """Stream the answer: the pump runs the model and queues each event's line; the writer
        sends the lines, all those queued by then in one body chunk, until the pump is done."""
        signal = options.signal
        queued, lines = anyio.create_memory_object_stream[bytes](_QUEUED_EVENTS)
        with queued, lines:
            async with anyio.create_task_group() as tg:

                def gone() -> None:
                    # The client went away: nobody reads the rest, so stop the model now.
                    signal.abort()
                    tg.cancel_scope.cancel()

                sender = _Sender(send, gone)
                if not await sender.start():
                    return
                tg.start_soon(_watch_disconnect, receive, gone)
                if self._keepalive is not None:
                    tg.start_soon(_keepalive, sender, self._keepalive)
                tg.start_soon(self._pump, queued, model, context, options)
                await _write(lines, sender)
                tg.cancel_scope.cancel()

    async def _pump(
        self, queued: MemoryObjectSendStream[bytes], model: Model, context: Context, options: StreamOptions
    ) -> None:
        """Run the stream function and queue its events; always end with one terminal event.

        The server's API key never reaches the client: error texts are sent with it redacted.
        """
        with queued:  # closed at the end: the writer then ends the body
            await self._run(queued, model, context, options)

    async def _run(
        self, queued: MemoryObjectSendStream[bytes], model: Model, context: Context, options: StreamOptions
    ) -> None:
        signal = options.signal
        encoder = WireEncoder(model)
        secret = options.api_key or env_api_key(model.provider)
        try:
            async with opened_stream(self._stream_fn(model, context, options)) as events:
                sent = 0
                async for event in events:
                    sent += 1
                    if sent % _EVENTS_PER_TURN == 0:
                        # An upstream that never waits (a cache, a replay, a fast local model) would
                        # otherwise hold the loop for a whole answer, and the writer would send
                        # nothing before its end.
                        await anyio.lowlevel.checkpoint()
                    wire = encoder.encode(event)
                    if wire["type"] == "error" and isinstance(wire.get("errorMessage"), str):
                        wire["errorMessage"] = redact(wire["errorMessage"], secret)
                    await _queue(queued, wire)
                    if wire["type"] in ("done", "error"):
                        return
        except ProxyProtocolError as exc:
            text = f"The model stream broke the event protocol: {exc}"
            await _queue(queued, encoder.failure("error", redact(text, secret)))
            return
        except Exception as exc:  # the stream function broke its contract (it must not raise)
            text = str(exc) or type(exc).__name__
            await _queue(queued, encoder.failure("aborted" if signal.aborted else "error", redact(text, secret)))
            return
        await _queue(queued, encoder.failure("error", "The model stream ended without a done or error event"))


async def _queue(queued: MemoryObjectSendStream[bytes], wire: dict[str, Any]) -> None:
    """Queue an event's line for the writer: at once, unless the client is `_QUEUED_EVENTS`
    events behind (then wait for it)."""
    line = b"data: " + dumps_bytes(wire) + b"\n\n"
    try:
        queued.send_nowait(line)
    except anyio.WouldBlock:
        await queued.send(line)


async def _write(lines: MemoryObjectReceiveStream[bytes], sender: _Sender) -> None:
    """Send the queued lines as they come, all those already queued in one body chunk (one write
    for many events when the model is fast), then the end of the body once the queue is closed."""
    async for line in lines:
        ready = [line]
        with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream):
            while True:
                ready.append(lines.receive_nowait())
        await sender.lines(b"".join(ready))
    await sender.finish()


class _Sender:
    """Sends the response body; the writer and the keepalive pinger share it."""

    __slots__ = ("_closed", "_gone", "_lock", "_send", "last")

    def __init__(self, send: Send, gone: Callable[[], None]) -> None:
        self._send = send
        self._gone = gone
        # Taken without a trip through the scheduler when free (the usual case: the pinger holds
        # it only while it sends a ping); `_pump` gives the scheduler its turns itself.
        self._lock = anyio.Lock(fast_acquire=True)
        self._closed = False
        self.last = anyio.current_time()

    @property
    def closed(self) -> bool:
        return self._closed

    async def start(self) -> bool:
        try:
            await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        except OSError:
            return False
        return True

    async def _body(self, data: bytes, more: bool) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = not more
            try:
                await self._send({"type": "http.response.body", "body": data, "more_body": more})
            except OSError:  # some servers raise when the client is gone
                self._gone()
                await anyio.lowlevel.checkpoint()
            self.last = anyio.current_time()

    async def lines(self, data: bytes) -> None:
        await self._body(data, True)

    async def ping(self) -> None:
        await self._body(_PING, True)

    async def finish(self) -> None:
        await self._body(b"", False)


async def _keepalive(sender: _Sender, interval: float) -> None:
    while not sender.closed:
        wait = sender.last + interval - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)
        else:
            await sender.ping()


async def _watch_disconnect(receive: Receive, gone: Callable[[], None]) -> None:
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            gone()
            return


async def _reply(send: Send, status: int, error: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    with contextlib.suppress(OSError):  # the client is gone
        await send_json(send, status, dumps_bytes({"error": error}), headers)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        kind = message.get("type")
        if kind == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif kind == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
