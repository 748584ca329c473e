"""The ASGI 3 plumbing that `AgentSSEApp` and `proxy_app` share.

Both apps are plain ASGI callables (no framework), so the few pieces every such app needs live
here once: the type aliases, the headers of an event-stream response, reading a request body
under a size limit, and a small answer with a JSON body. It sits below both (`_serve` and
`providers._proxy`), so neither server reaches into the other's layer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "SSE_HEADERS",
    "ASGIApp",
    "BodyTooLarge",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "header",
    "read_body",
    "send_json",
)

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]
"""An ASGI 3 application."""

SSE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx would otherwise hold the events back in its buffer
]
"""The response headers of a Server-Sent Events stream."""


class BodyTooLarge(Exception):
    """Raised by `read_body` when a request body (announced or sent) is over its limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is over {limit} bytes")
        self.limit = limit


def header(scope: Scope, name: bytes) -> bytes | None:
    """The value of the request header `name` (lower case), the last one when sent twice; None when absent."""
    found = None
    for key, value in scope.get("headers") or ():
        if bytes(key).lower() == name:
            found = bytes(value)
    return found


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when the client disconnected before sending it.

    Raises `BodyTooLarge` when its `content-length` announces more than `limit` bytes (before
    reading anything) or when more than `limit` bytes arrive.
    """
    length = header(scope, b"content-length")
    if length is not None and length.strip().isdigit() and int(length) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message.get("type")
        if kind == "http.disconnect":
            return None
        if kind != "http.request":
            continue
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_json(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send a whole response whose body is the JSON text `body`, with `headers` added."""
    start_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*start_headers, *(headers or ())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
