"""`proxy_app`: the server side of the pi proxy protocol, as a plain ASGI application.

It checks the bearer token, validates the request, runs a stream function with the server's own
API keys and streams the bandwidth-saving events as `data: {json}\\n\\n` lines. Serve it with any
ASGI server (uvicorn, hypercorn, ...); it runs on asyncio and trio.

The server decides where its requests and its keys go, and refuses (400, before anything runs
and before any request goes out) a request that would go elsewhere:

* A request goes only to the hosts of `allowed_base_urls`, so a client holding the proxy token
  cannot point the server's network position at a host of its own.
* A provider's key goes only to the hosts bound to that provider: the endpoints of its
  registered models (`register_model`, the built-in catalogue; OpenAI's and Anthropic's as
  `$OPENAI_BASE_URL` and `$ANTHROPIC_BASE_URL` make them), plus those the operator binds with
  `key_base_urls`. The client chooses the provider (which key), the API and the base URL (where
  it goes) separately; no choice of them sends the OpenAI key to a local server that needs none,
  or the Anthropic key to OpenAI's endpoint. A request whose provider has no key at all (a
  local server) is not concerned.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..._asgi import SSE_HEADERS, ASGIApp, BodyTooLarge, Receive, Scope, Send, header, read_body, send_json
from ..._types._abort import AbortSignal
from ..._types._messages import Context, Model
from ..._types._stream_fn import MaybeAwaitable, StreamFn, StreamOptions, opened_stream
from .._anthropic import ANTHROPIC_BASE_URL, anthropic_base_url
from .._auth import env_api_key, redact
from .._openai_completions import OPENAI_BASE_URL, openai_base_url
from .._registry import get_models
from ._wire import PROXY_PATH, ProxyProtocolError, WireEncoder, decode_request, dumps_bytes

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ("proxy_app",)

_PROVIDER_BASE_URLS: tuple[str, ...] = (OPENAI_BASE_URL, ANTHROPIC_BASE_URL)
"""The built-in providers' own base URLs: where `proxy_app` sends requests unless told otherwise."""

_DESTINATIONS: dict[str, Callable[[Model], str]] = {
    "openai-completions": openai_base_url,
    "openai-responses": openai_base_url,
    "anthropic-messages": anthropic_base_url,
}
"""Where the built-in stream function of each API sends a model's request, and its key."""

_QUEUED_EVENTS = 256  # events queued ahead of a client that reads slower than the model writes
_PING = b": ping\n\n"
_FAIR_SHARE = 48
"""The server gives the scheduler a turn at least every this many events it streams: an upstream
that never waits (a cache, a replay, a fast local model) cannot hold the event loop."""


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
    key_base_urls: Mapping[str, Iterable[str]] | None = None,
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
        max_body_size: The largest request body accepted, in bytes. A request holds about three
            times its body at its peak (the body while it is decoded; then the decoded context
            and the provider's own request body, as JSON text and as bytes) and about twice its
            body while the answer streams: with the default 32 MiB, count some 100 MiB for each
            concurrent request of the largest size (an ASGI server may buffer the body once more).
        allowed_base_urls: Where the server sends requests, and with them its API keys: a model
            (after `resolve_model`) whose `base_url` has another scheme, host or port is refused
            with 400 naming the allowed ones, before any key is looked up. An empty `base_url`
            (the provider's default) is always allowed. The default is the built-in providers'
            own URLs (OpenAI's and Anthropic's); add your local or compatible servers, or pass
            `["*"]` to allow any host (only for a server that holds no keys a client must not
            steer).
        key_base_urls: `{provider: [base URL, ...]}`: hosts the key of `provider` may be sent to
            besides the endpoints of the provider's registered models (see the module
            docstring). A request whose provider has a key (from `get_api_key` or the
            provider's environment variable) and that would go to another scheme, host or port
            is refused with 400 naming the bound ones. Where the request goes is what the
            built-in stream function of `model.api` uses (its `base_url`, or the API's default
            endpoint); for another API it is `model.base_url`, and an empty one leaves the
            choice to `stream_fn` (the operator's code).
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
    bound = _bound_origins(key_base_urls)
    return _ProxyApp(
        stream_fn, token.encode(), path, get_api_key, resolve_model, keepalive, max_body_size, allowed, bound
    )


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
    hosts = ", ".join(sorted(_show(origin) for origin in allowed)) or "none"
    raise ValueError(
        f"model.base_url {model.base_url!r} is not allowed: this proxy sends requests only to {hosts} "
        "(leave base_url empty for the provider's default)"
    )


def _bound_origins(mapping: Mapping[str, Iterable[str]] | None) -> dict[str, frozenset[_Origin]]:
    """The origins of `key_base_urls`, by provider; TypeError or ValueError naming a bad entry."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise TypeError(f"key_base_urls must map provider names to lists of URLs, got {type(mapping).__name__}")
    bound: dict[str, frozenset[_Origin]] = {}
    for provider, urls in mapping.items():
        if not isinstance(provider, str) or isinstance(urls, str) or not isinstance(urls, Iterable):
            raise TypeError(f"key_base_urls must map provider names to lists of URLs, got {provider!r}: {urls!r}")
        origins = set()
        for url in urls:
            origin = _origin(url) if isinstance(url, str) else None
            if origin is None:
                raise ValueError(f"key_base_urls[{provider!r}] holds {url!r}: expected http:// or https:// URLs")
            origins.add(origin)
        bound[provider] = frozenset(origins)
    return bound


def _destination(model: Model) -> str | None:
    """Where the request of `model` goes; None when `stream_fn` chooses (another API, no base URL)."""
    where = _DESTINATIONS.get(model.api)
    if where is not None:
        return where(model)
    return model.base_url or None


def _key_origins(provider: str, bound: Mapping[str, frozenset[_Origin]]) -> set[_Origin]:
    """The origins the key of `provider` may go to: the operator's, and its registered models'."""
    origins = set(bound.get(provider, ()))
    for registered in get_models(provider):
        destination = _destination(registered)
        origin = _origin(destination) if destination else None
        if origin is not None:
            origins.add(origin)
    return origins


def _check_key(model: Model, key: str | None, bound: Mapping[str, frozenset[_Origin]]) -> None:
    """Refuse (ValueError) a request that would send the key of `model.provider` to a host not
    bound to that provider."""
    destination = _destination(model)
    if not key or destination is None:
        return
    origins = _key_origins(model.provider, bound)
    origin = _origin(destination)
    if origin in origins:
        return
    where = _show(origin) if origin is not None else repr(destination)
    hosts = ", ".join(sorted(_show(o) for o in origins)) or "no host"
    raise ValueError(
        f"the key of provider {model.provider!r} is sent only to {hosts}, and this request (api {model.api!r}, "
        f"base_url {model.base_url!r}) would send it to {where}: name the provider whose key that server takes, "
        "or bind the host to the provider with key_base_urls"
    )


def _show(origin: _Origin) -> str:
    scheme, host, port = origin
    return f"{scheme}://{host}:{port}"


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class _ProxyApp:
    __slots__ = (
        "_allowed",
        "_bound",
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
        bound: dict[str, frozenset[_Origin]],
    ) -> None:
        self._allowed = allowed
        self._bound = bound
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
        request = await self._read(scope, receive, send)
        if request is None:
            return
        model, context, options = request
        try:
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
        try:
            _check_key(model, api_key or env_api_key(model.provider), self._bound)
        except ValueError as exc:
            await _reply(send, 400, f"Invalid request: {exc}")
            return
        signal = AbortSignal()
        stream_options = StreamOptions(signal=signal, api_key=api_key or None, **options)
        await self._stream(receive, send, model, context, stream_options)

    async def _read(self, scope: Scope, receive: Receive, send: Send) -> tuple[Model, Context, dict[str, Any]] | None:
        """The decoded request, or None once it was answered (413, 400) or the client left.

        The body's bytes live only while they are decoded, not while the answer streams: a request
        then holds its decoded context (about its body's size for text and images) and the
        provider's own request body, which it builds from it.
        """
        try:
            body = await read_body(scope, receive, self._max_body)
        except BodyTooLarge:
            await _reply(send, 413, f"Request body too large (the limit is {self._max_body} bytes)")
            return None
        if body is None:
            return None  # the client left before sending the body
        try:
            return decode_request(body)
        except ValueError as exc:
            await _reply(send, 400, f"Invalid request: {exc}")
            return None

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
                    if sent % _FAIR_SHARE == 0:
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
