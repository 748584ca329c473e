"""An `AgentSSEApp` session's event stream: the replay after `Last-Event-ID`, the gaps, then
the live events, in writes of at most `send_bytes`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from .._asgi import SSE_HEADERS, Receive, Scope, Send
from ._live import LiveSession
from ._requests import HTTPError, last_event_id

if TYPE_CHECKING:
    from ._app import AgentSSEApp

__all__ = ("events",)


async def events(app: AgentSSEApp, live: LiveSession, scope: Scope, receive: Receive, send: Send) -> None:
    asked = last_event_id(scope)
    last = 0 if asked is None else live.number_of(asked)
    if live.clients >= app.max_clients:
        raise HTTPError(429, f"this session has {app.max_clients} event streams open already (see max_clients)")
    live.clients += 1
    try:
        await _stream(app, live, asked, last, receive, send)
    finally:
        live.clients -= 1
        live.last_used = anyio.current_time()


async def _stream(
    app: AgentSSEApp, live: LiveSession, asked: str | None, last: int | None, receive: Receive, send: Send
) -> None:
    closing = app._closing
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    first = b"retry: 1000\n\n"
    disconnected = False
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal disconnected
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected = True
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await send({"type": "http.response.body", "body": first, "more_body": True})
        while True:
            changed = live.changes()
            if last is None or not live.first_id - 1 <= last <= live.last_id:
                # A gap: an id of another epoch, or events the log no longer keeps (dropped
                # before the client came, or while it was reading slower than they came).
                # Taken before the send: if the log turns over during it, the next round
                # sees that gap too.
                gap = live.reset(asked)
                last, asked = live.first_id - 1, None
                await send({"type": "http.response.body", "body": gap, "more_body": True})
                continue
            frames = live.after(last, app.send_bytes)
            if frames:
                last = frames[-1][0]
                asked = live.event_id(last)
                await send({"type": "http.response.body", "body": b"".join(f for _, f in frames), "more_body": True})
                continue
            if live.deleted or (closing is not None and closing.is_set()):
                break  # after the last events were sent
            with anyio.move_on_after(app.keepalive) as timeout:
                await changed.wait()
            if timeout.cancelled_caught:
                await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
        tg.cancel_scope.cancel()
    if not disconnected:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
