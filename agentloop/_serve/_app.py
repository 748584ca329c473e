"""`AgentSSEApp`: a plain ASGI app that runs an `Agent` per session and streams its events as SSE.

Routes (JSON bodies and answers; errors are `{"error": "..."}` with a 4xx status):

    POST   /sessions                    create a session ({"title"} optional)       201 {"id", "lastEventId"}
    GET    /sessions                    the sessions                                200 {"sessions": [...]}
    GET    /sessions/{id}               transcript and state                        200
    DELETE /sessions/{id}               delete (409 while a run is going)           204
    GET    /sessions/{id}/events        Server-Sent Events (resumable)              200 text/event-stream
    POST   /sessions/{id}/prompt        {"text"} | {"message"} | {"messages"}       202 (409 while running)
    POST   /sessions/{id}/continue      resume from the transcript                  202 (409 while running)
    POST   /sessions/{id}/steer         queue a message for the next turn           202
    POST   /sessions/{id}/follow-up     queue a message for when the agent stops    202
    POST   /sessions/{id}/abort         abort the run                               200 {"aborted"}
    POST   /sessions/{id}/ticket        a ticket for one event stream               200 {"ticket", "expiresIn"}
    GET    /sessions/{id}/approvals     the tool calls waiting for approval         200 {"approvals": [...]}
    POST   /sessions/{id}/approve       {"toolCallId", "approved", "reason",        200 {"approved", "running"}
                                        "arguments"} (409 if not pending, 422 if the arguments are invalid)

A tool call waits for approval when the agent says so (`Agent(needs_approval=...)`); a client
learns of it from its `tool_execution_start` event and `GET .../approvals`. The calls of a
session taken up from the store after a restart wait again: answer them, then `continue`.

Every event of a session is one SSE message: `id:` is `<epoch>-<n>`, the event's number `n` in
the session's event log (1, 2, 3, ... across runs) after an epoch that is new each time the app
takes the session up (so an id from before a restart is never taken for a new one); `data:` is
the event envelope's JSON form (run id, seq within the run, turn, timestamp, event), the event
in the compact wire form by default (`CompactEncoder`: a `message_update` carries its stream
event, not the whole message so far, so an answer costs bytes linear in its length; a client
rebuilds the message with `CompactDecoder`, or the JavaScript of `examples/sse_chat.html`, from
the `message_start`; `compact=False` sends the full form of `to_json`). A client
that reconnects with `Last-Event-ID` (browsers do it on their own; `?lastEventId=` works too)
gets the events after that one, then the live ones; without it, every event of the epoch. Every
gap comes with an `event: reset` message (`{"lastEventId", "oldestEventId", "asked"}`) before
the oldest event still kept: when the id asked for is no longer kept (the log keeps the last
`replay_limit` events) or is of another epoch, when the log dropped events before a client
without an id connected, and when a connected client reads slower than the log turns over.
After a reset, reload the state from `GET /sessions/{id}`. A run failure the Agent did not turn
into events comes as `event: error`.

Access: with `token`, every request needs `Authorization: Bearer <token>`; 401 otherwise. A
browser's EventSource cannot set headers, so a page first asks `POST /sessions/{id}/ticket` (with
the header) for a ticket and opens `GET /sessions/{id}/events?ticket=<ticket>`: a ticket is good
for one event stream of that session, within `ticket_seconds`, so what an access log records of
the URL is worth nothing afterwards (`?token=` is still accepted, but lands in access logs). One
token gives every session to whoever holds it; to decide per session, pass `authorize`: it is
called as `authorize(scope, session_id)` (plain or async; `session_id` is None for `GET /sessions`
and `POST /sessions`) after the token check, and a false answer is a 403. A request from a
browser page of another origin (its `Origin` header names another host than the request's
`Host`) is refused with 403 unless `allowed_origins` lists it, so a page elsewhere cannot create
sessions or abort runs. Requests for a `Host` the app does not serve get 400 (DNS rebinding):
with `allowed_hosts`, the names it lists; without it and without a token, loopback names only
(`localhost`, `*.localhost`, `127.0.0.1`, `[::1]`, any port).

Limits: at most `max_sessions` sessions are held in memory (a new one past that evicts the least
recently used idle one when a store keeps it, and is a 503 otherwise), a session without a run,
an event stream or a request for `idle_timeout` seconds is evicted (with a store it is resumed on
its next use; without one it is gone), a session takes at most `max_clients` event streams (429
past that), and an event stream is sent in writes of at most `send_bytes` (one event larger than
that is sent whole), so a client that does not read holds back one write, not the replay log.

Runs are tasks of the app's own task group, which lives as long as the ASGI lifespan (or
`async with app.running():` when the server has no lifespan). Shutting down aborts the runs,
ends the event streams and releases the sessions. With a `store`, each session is recorded in
it and sessions of the store are resumed on first use. Runs on asyncio and trio.
"""

from __future__ import annotations

import inspect
import re
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from .._asgi import Receive, Scope, Send, header
from .._core._agent import Agent
from .._core._util import single_exception
from .._sessions import SessionStore, check_session_id
from .._types._stream_fn import MaybeAwaitable
from . import _actions, _registry, _stream
from ._live import LiveSession
from ._requests import (
    Disconnected,
    HTTPError,
    check_access,
    query_value,
    read_json,
    send_json_answer,
)

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("AgentSSEApp",)

_ROUTE = re.compile(r"^/sessions(?:/([^/]+)(?:/([a-z_-]+))?)?/?$")
_JSON = b"application/json"


class AgentSSEApp:
    """An ASGI 3 app serving agents over HTTP: POSTs drive them, Server-Sent Events report them.

    Args:
        agent_factory: `(session_id) -> Agent` (plain or async), called once per session the
            app serves (new, or resumed from `store`).
        store: Record every session in this store; its sessions are resumed on first use.
        replay_limit: How many events of a session are kept for `Last-Event-ID` resume.
        replay_bytes: How many bytes of events a session keeps for resume, at most (the newest
            event is kept whatever its size).
        token: When set, the bearer token every request must carry.
        allowed_origins: Browser origins (`https://chat.example.com`) allowed besides the app's
            own; `["*"]` allows any.
        allowed_hosts: When set, the `Host` names (`chat.example.com`, `localhost:8000`) the app
            answers; others get 400. This stops DNS rebinding (a page whose name was pointed at
            this server) from reaching an app without a token.
        keepalive: Seconds of silence after which an event stream gets a comment line.
        max_body_size: The largest request body accepted (413 above).
        shutdown_timeout: Seconds runs get to finish their abort at shutdown.
        authorize: `(scope, session_id) -> bool` (plain or async), called for every request after
            the token check: False answers 403 (see the module docstring).
        max_sessions: Sessions held in memory at most (default 100).
        max_clients: Event streams of one session at most (default 16).
        idle_timeout: Seconds without a run, an event stream or a request before eviction (1800).
        send_bytes: The largest write of an event stream (default 64 KiB).
        ticket_seconds: How long an event-stream ticket is good for (default 60).
        compact: Send events in the compact wire form (the default; see the module docstring);
            False sends every `message_update` with the whole message so far, as `to_json` does.

    Example:
        ```python
        app = AgentSSEApp(lambda session_id: Agent(model=model, tools=[add], stream_fn=stream))
        ```

        Any ASGI server runs it, e.g. `hypercorn module:app`.
    """

    def __init__(
        self,
        agent_factory: Callable[[str], MaybeAwaitable[Agent]],
        *,
        store: SessionStore | None = None,
        replay_limit: int = 4096,
        replay_bytes: int = 16 << 20,
        keepalive: float = 15.0,
        max_body_size: int = 1 << 20,
        shutdown_timeout: float = 5.0,
        token: str | None = None,
        allowed_origins: Sequence[str] = (),
        allowed_hosts: Sequence[str] | None = None,
        authorize: Callable[[Scope, str | None], MaybeAwaitable[bool]] | None = None,
        max_sessions: int = 100,
        max_clients: int = 16,
        idle_timeout: float = 1800.0,
        send_bytes: int = 64 << 10,
        ticket_seconds: float = 60.0,
        compact: bool = True,
    ) -> None:
        if not callable(agent_factory):
            raise TypeError(f"agent_factory must be callable, got {agent_factory!r}")
        if store is not None and not isinstance(store, SessionStore):
            raise TypeError(f"store must be a SessionStore or None, got {type(store).__name__}")
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty string or None")
        for name, names in (("allowed_origins", allowed_origins), ("allowed_hosts", allowed_hosts or ())):
            if isinstance(names, str) or not all(isinstance(o, str) for o in names):
                raise TypeError(f"{name} must be a list of strings, got {names!r}")
        if authorize is not None and not callable(authorize):
            raise TypeError(f"authorize must be callable or None, got {authorize!r}")
        sizes = (
            ("replay_limit", replay_limit),
            ("replay_bytes", replay_bytes),
            ("max_body_size", max_body_size),
            ("max_sessions", max_sessions),
            ("max_clients", max_clients),
            ("send_bytes", send_bytes),
        )
        for name, value in sizes:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name, seconds in (
            ("keepalive", keepalive),
            ("idle_timeout", idle_timeout),
            ("ticket_seconds", ticket_seconds),
        ):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {seconds!r}")
        self.agent_factory = agent_factory
        self.store = store
        self.replay_limit = replay_limit
        self.replay_bytes = replay_bytes
        self._token = None if token is None else token.encode()
        self._allowed_origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)
        self._allowed_hosts = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        self.keepalive = float(keepalive)
        self.max_body_size = max_body_size
        self.shutdown_timeout = shutdown_timeout
        self.compact = bool(compact)
        self.authorize = authorize
        self.max_sessions = max_sessions
        self.max_clients = max_clients
        self.idle_timeout = float(idle_timeout)
        self.send_bytes = send_bytes
        self.ticket_seconds = float(ticket_seconds)
        self._tickets: dict[str, tuple[str, float]] = {}  # ticket -> (session id, expiry)
        self._sessions: dict[str, LiveSession] = {}
        self._placing = 0  # sessions being created or loaded, counted against max_sessions
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closing: anyio.Event | None = None
        self._stopping = False
        self._load_lock: anyio.Lock | None = None

    # --- lifetime --------------------------------------------------------------------------
    @asynccontextmanager
    async def running(self) -> AsyncIterator[AgentSSEApp]:
        """Run the app's task group (what the ASGI lifespan does); runs need it."""
        if self._task_group is not None:
            raise RuntimeError("the app is already running")
        self._closing = anyio.Event()
        self._load_lock = anyio.Lock()
        self._stopping = False
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                tg.start_soon(self._evict_idle)
                try:
                    yield self
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._shut_down()
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the caller's own exception comes out unwrapped
            exc = single_exception(group)
            if exc is group:
                raise
            raise exc from None
        finally:
            self._task_group = None
            lives, self._sessions = list(self._sessions.values()), {}
            with anyio.CancelScope(shield=True):
                for live in lives:
                    await live.close()

    async def _evict_idle(self) -> None:
        """Close the sessions idle for `idle_timeout` seconds, checking a few times per timeout."""
        while True:
            await anyio.sleep(min(self.idle_timeout / 4, 60.0))
            now = anyio.current_time()
            for live in list(self._sessions.values()):
                if live.idle and now - live.last_used >= self.idle_timeout:
                    await self._evict(live)
            self._tickets = {t: (sid, at) for t, (sid, at) in self._tickets.items() if at > now}

    async def _evict(self, live: LiveSession) -> None:
        if self._sessions.get(live.id) is live:
            del self._sessions[live.id]
        with anyio.CancelScope(shield=True):
            await live.close()

    async def _shut_down(self) -> None:
        assert self._closing is not None
        self._stopping = True  # no new runs
        lives = list(self._sessions.values())
        for live in lives:
            live.agent.abort()
        with anyio.move_on_after(self.shutdown_timeout):
            for live in lives:
                await live.agent.wait_for_idle()
        self._closing.set()  # the event streams end once they have sent what is left
        for live in lives:
            live.notify()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        started = False
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": str(exc) or type(exc).__name__})
            return
        await send({"type": "lifespan.shutdown.complete"})

    # --- ASGI ------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            raise RuntimeError(f"AgentSSEApp serves HTTP, not {kind!r}")
        try:
            await self._route(scope, receive, send)
        except HTTPError as exc:
            await send_json_answer(send, exc.status, {"error": exc.message}, exc.headers)
        except Disconnected:
            pass

    async def _authorized(self, scope: Scope, session_id: str | None) -> None:
        """403 when the `authorize` hook says no."""
        if self.authorize is None:
            return
        allowed = self.authorize(scope, session_id)
        if inspect.isawaitable(allowed):
            allowed = await allowed
        if allowed is not True:
            raise HTTPError(403, "this request is not authorized (see authorize)")

    def _spend_ticket(self, scope: Scope, session_id: str) -> None:
        """With a token and no Authorization header: the `?ticket=` of this session, spent; else 401."""
        if self._token is None or header(scope, b"authorization") is not None:
            return
        ticket = query_value(scope, "ticket")
        if ticket is None:
            return  # `?token=`, checked with the headers
        found = self._tickets.pop(ticket, None)
        if found is None or found[0] != session_id or found[1] < anyio.current_time():
            raise HTTPError(401, "the ticket is unknown, used, expired or of another session: ask for a new one")

    async def _ticket(self, live: LiveSession, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = (live.id, anyio.current_time() + self.ticket_seconds)
        return 200, {"ticket": ticket, "expiresIn": self.ticket_seconds}

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _ROUTE.match(scope["path"])
        method = scope["method"]
        events = match is not None and match.group(2) == "events" and method == "GET"
        check_access(scope, self._token, self._allowed_hosts, self._allowed_origins, events)
        if match is None:
            raise HTTPError(404, f"no route for {scope['path']!r}: see the AgentSSEApp routes")
        session_id, action = match.groups()
        await self._authorized(scope, session_id)
        if session_id is None:
            if method == "POST":
                await _registry.create(self, scope, receive, send)
            elif method == "GET":
                await send_json_answer(send, 200, {"sessions": await _registry.listed(self)})
            else:
                raise HTTPError(405, f"{method} is not allowed on /sessions", [(b"allow", b"GET, POST")])
            return
        try:
            check_session_id(session_id)
        except ValueError as exc:
            raise HTTPError(404, str(exc)) from None
        if action is None:
            if method == "GET":
                await send_json_answer(send, 200, (await _registry.live(self, session_id)).state())
            elif method == "DELETE":
                await _registry.delete(self, session_id)
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})
            else:
                raise HTTPError(405, f"{method} is not allowed on a session", [(b"allow", b"GET, DELETE")])
            return
        if action == "events":
            if method != "GET":
                raise HTTPError(405, "the event stream is read with GET", [(b"allow", b"GET")])
            self._spend_ticket(scope, session_id)
            await _stream.events(self, await _registry.live(self, session_id), scope, receive, send)
            return
        if action == "approvals":
            if method != "GET":
                raise HTTPError(405, "the approvals are read with GET", [(b"allow", b"GET")])
            status, answer = await _actions.approvals(self, await _registry.live(self, session_id))
            await send_json_answer(send, status, answer)
            return
        handler = _actions.ACTIONS.get(action)
        if handler is None and action != "ticket":
            raise HTTPError(
                404,
                f"no action {action!r}: prompt, continue, steer, follow-up, abort, approve, approvals, ticket "
                "or events",
            )
        if method != "POST":
            raise HTTPError(405, f"{action} is a POST", [(b"allow", b"POST")])
        body = await read_json(scope, receive, self.max_body_size)
        live = await _registry.live(self, session_id)
        status, answer = await (self._ticket(live, body) if handler is None else handler(self, live, body))
        await send_json_answer(send, status, answer)

    # --- sessions ----------------------------------------------------------------------------
    async def _make_agent(self, session_id: str) -> Agent:
        agent = self.agent_factory(session_id)
        if inspect.isawaitable(agent):
            agent = await agent
        if not isinstance(agent, Agent):
            raise TypeError(f"agent_factory must return an agentloop.Agent, got {type(agent).__name__}")
        return agent

    def _check_running(self) -> None:
        if self._task_group is None or self._stopping:
            raise HTTPError(503, "the app is not running: serve it with an ASGI server that runs the lifespan protocol")
