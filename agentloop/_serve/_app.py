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

Access: with `token`, every request needs `Authorization: Bearer <token>` (the event stream may
pass it as `?token=`, since a browser's EventSource cannot set headers); 401 otherwise. A request
from a browser page of another origin (its `Origin` header names another host than the request's
`Host`) is refused with 403 unless `allowed_origins` lists it, so a page elsewhere cannot create
sessions or abort runs. With `allowed_hosts`, requests for other `Host` names get 400 (DNS
rebinding).

Runs are tasks of the app's own task group, which lives as long as the ASGI lifespan (or
`async with app.running():` when the server has no lifespan). Shutting down aborts the runs,
ends the event streams and releases the sessions. With a `store`, each session is recorded in
it and sessions of the store are resumed on first use. Runs on asyncio and trio.
"""

from __future__ import annotations

import hmac
import inspect
import json
import re
import sys
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc

from .._core._agent import Agent
from .._core._util import single_exception
from .._sessions import Session, SessionLockedError, SessionNotFoundError, SessionStore, check_session_id
from .._types._abort import AbortSignal
from .._types._constants import AGENT_MESSAGE_TYPES
from .._types._messages import AgentMessage, UserMessage
from .._types._stream_fn import MaybeAwaitable
from .._wire._asgi import SSE_HEADERS, BodyTooLarge, Receive, Scope, Send, header, read_body, send_json
from .._wire._codec import encode_json, from_json, to_json
from .._wire._compact import CompactEncoder
from .._wire._envelope import EventEnvelope, dumps_envelope, enveloping
from .._wire._json_fallback import encode_lenient

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ("AgentSSEApp",)

_ROUTE = re.compile(r"^/sessions(?:/([^/]+)(?:/([a-z_-]+))?)?/?$")
_JSON = b"application/json"


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


class _Disconnected(Exception):
    pass


class _Live:
    """A session the app serves: its agent, its event log, who waits on it."""

    def __init__(
        self,
        session_id: str,
        agent: Agent,
        session: Session | None,
        replay_limit: int,
        replay_bytes: int,
        compact: bool = True,
    ) -> None:
        self.id = session_id
        self.agent = agent
        self.session = session
        self.epoch = uuid.uuid4().hex[:12]
        self.log: deque[tuple[int, bytes]] = deque()
        self.log_bytes = 0
        self.replay_limit = replay_limit
        self.replay_bytes = replay_bytes
        self.next_id = 1
        self._changed: anyio.Event | None = None  # made when an event stream waits for news
        self.busy = False
        self.deleted = False
        self.encoder = CompactEncoder() if compact else None  # one per log: it follows the stream
        self.listener = enveloping(self._on_envelope)
        agent.subscribe(self.listener)

    def _on_envelope(self, envelope: EventEnvelope, signal: AbortSignal) -> None:
        self.publish(None, dumps_envelope(envelope, compact=self.encoder))

    def publish(self, event: str | None, data: str) -> None:
        number = self.next_id
        self.next_id += 1
        head = f"id: {self.event_id(number)}\n"
        if event is not None:
            head += f"event: {event}\n"
        frame = f"{head}data: {data}\n\n".encode()
        log = self.log
        log.append((number, frame))
        self.log_bytes += len(frame)
        while len(log) > 1 and (len(log) > self.replay_limit or self.log_bytes > self.replay_bytes):
            self.log_bytes -= len(log.popleft()[1])  # the newest event is always kept
        self.notify()

    def notify(self) -> None:
        """Wake the event streams waiting for news of this session."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def changes(self) -> anyio.Event:
        """An event set at the next `notify` (take it before reading the log, so no news is missed).

        It is made only when a stream asks: the events of a fast run are published many to one
        wake-up of the streams, and most of them find nobody waiting."""
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def event_id(self, number: int) -> str:
        """The SSE id of event `number` of this epoch."""
        return f"{self.epoch}-{number}"

    def number_of(self, event_id: str) -> int | None:
        """The number of an id of this epoch; None for an id of another (or a bare number)."""
        epoch, _, number = event_id.rpartition("-")
        return int(number) if epoch == self.epoch else None

    @property
    def last_id(self) -> int:
        return self.next_id - 1

    @property
    def last_event_id(self) -> str:
        return self.event_id(self.last_id)

    def reset(self, asked: str | None) -> bytes:
        """The `event: reset` message that announces a gap after `asked` (None: from the start)."""
        data = {"lastEventId": self.last_event_id, "oldestEventId": self.event_id(self.first_id), "asked": asked}
        return f"event: reset\ndata: {encode_json(data)}\n\n".encode()

    @property
    def first_id(self) -> int:
        return self.log[0][0] if self.log else self.next_id

    def after(self, last: int) -> list[tuple[int, bytes]]:
        start = max(0, last - self.first_id + 1)
        return [self.log[i] for i in range(start, len(self.log))]

    def state(self) -> dict[str, Any]:
        state = self.agent.state
        return {
            "id": self.id,
            "isStreaming": self.busy,
            "lastEventId": self.last_event_id,
            "errorMessage": state.error_message,
            "messages": [to_json(m) for m in state.messages],
        }


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
        compact: Send events in the compact wire form (the default; see the module docstring);
            False sends every `message_update` with the whole message so far, as `to_json` does.

    Example (any ASGI server, e.g. `hypercorn module:app`):
        app = AgentSSEApp(lambda session_id: Agent(model=model, tools=[add], stream_fn=stream))
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
        sizes = (("replay_limit", replay_limit), ("replay_bytes", replay_bytes), ("max_body_size", max_body_size))
        for name, value in sizes:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(keepalive, (int, float)) or not keepalive > 0:
            raise ValueError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
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
        self._sessions: dict[str, _Live] = {}
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
                    await _close_live(live)

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
        except _HTTPError as exc:
            await _send_json(send, exc.status, {"error": exc.message}, exc.headers)
        except _Disconnected:
            pass

    def _check_access(self, scope: Scope) -> None:
        """401 without the token (when one is set), 403 for a page of an origin not allowed."""
        headers = {bytes(name).lower(): bytes(value) for name, value in scope.get("headers") or []}
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if self._allowed_hosts is not None and host not in self._allowed_hosts:
            raise _HTTPError(400, f"this app does not serve the host {host!r} (see allowed_hosts)")
        if self._token is not None:
            scheme, _, credentials = headers.get(b"authorization", b"").strip().partition(b" ")
            if not credentials and scope.get("path", "").endswith("/events"):
                # latin-1 both ways: the token's bytes, whatever they are, come back unchanged.
                query = parse_qs((scope.get("query_string") or b"").decode("latin-1"), encoding="latin-1")
                credentials = query.get("token", [""])[-1].encode("latin-1")
                scheme = b"bearer"
            # Compared in constant time whatever was sent (also when nothing was).
            if not hmac.compare_digest(credentials.strip(), self._token) or scheme.lower() != b"bearer":
                raise _HTTPError(
                    401, "Unauthorized: send Authorization: Bearer <token>", [(b"www-authenticate", b"Bearer")]
                )
        origin = headers.get(b"origin")
        if origin is None or "*" in self._allowed_origins:
            return
        text = origin.decode("latin-1").rstrip("/").lower()
        if text in self._allowed_origins:
            return
        if host and urlsplit(text).netloc == host:
            return  # the app's own page
        raise _HTTPError(403, f"requests from the origin {text!r} are not allowed (see allowed_origins)")

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._check_access(scope)
        match = _ROUTE.match(scope["path"])
        if match is None:
            raise _HTTPError(404, f"no route for {scope['path']!r}: see the AgentSSEApp routes")
        session_id, action = match.groups()
        method = scope["method"]
        if session_id is None:
            if method == "POST":
                await self._create(scope, receive, send)
            elif method == "GET":
                await _send_json(send, 200, {"sessions": await self._list()})
            else:
                raise _HTTPError(405, f"{method} is not allowed on /sessions", [(b"allow", b"GET, POST")])
            return
        try:
            check_session_id(session_id)
        except ValueError as exc:
            raise _HTTPError(404, str(exc)) from None
        if action is None:
            if method == "GET":
                await _send_json(send, 200, (await self._live(session_id)).state())
            elif method == "DELETE":
                await self._delete(session_id)
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})
            else:
                raise _HTTPError(405, f"{method} is not allowed on a session", [(b"allow", b"GET, DELETE")])
            return
        if action == "events":
            if method != "GET":
                raise _HTTPError(405, "the event stream is read with GET", [(b"allow", b"GET")])
            await self._events(await self._live(session_id), scope, receive, send)
            return
        handler = {
            "prompt": self._prompt,
            "continue": self._continue,
            "steer": self._steer,
            "follow-up": self._follow_up,
            "follow_up": self._follow_up,
            "abort": self._abort,
        }.get(action)
        if handler is None:
            raise _HTTPError(404, f"no action {action!r}: prompt, continue, steer, follow-up, abort or events")
        if method != "POST":
            raise _HTTPError(405, f"{action} is a POST", [(b"allow", b"POST")])
        body = await self._read_json(scope, receive)
        status, answer = await handler(await self._live(session_id), body)
        await _send_json(send, status, answer)

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
            raise _HTTPError(
                503, "the app is not running: serve it with an ASGI server that runs the lifespan protocol"
            )

    async def _create(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._check_running()
        body = await self._read_json(scope, receive)
        title = body.get("title")
        if title is not None and not isinstance(title, str):
            raise _HTTPError(400, "'title' must be a string")
        session_id = uuid.uuid4().hex
        agent = await self._make_agent(session_id)
        session = None
        if self.store is not None:
            await self.store.create(agent=agent, title=title, session_id=session_id)
            session = await self.store.open(session_id)
            await session.attach(agent)
        live = self._sessions[session_id] = _Live(
            session_id, agent, session, self.replay_limit, self.replay_bytes, self.compact
        )
        await _send_json(send, 201, {"id": session_id, "lastEventId": live.last_event_id})

    async def _list(self) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if self.store is not None:
            for info in await self.store.list():
                out[info.id] = {"id": info.id, "title": info.title, "messageCount": info.message_count}
        for live in self._sessions.values():
            entry = out.setdefault(live.id, {"id": live.id, "title": None})
            entry["messageCount"] = len(live.agent.state.messages)
        for entry in out.values():
            found = self._sessions.get(entry["id"])
            entry["isStreaming"] = found is not None and found.busy
        return list(out.values())

    async def _live(self, session_id: str) -> _Live:
        live = self._sessions.get(session_id)
        if live is not None:
            return live
        if self.store is None or self._load_lock is None:
            raise _HTTPError(404, f"no session {session_id!r}")
        self._check_running()
        async with self._load_lock:
            live = self._sessions.get(session_id)
            if live is not None:
                return live
            try:
                session = await self.store.open(session_id)
            except SessionNotFoundError:
                raise _HTTPError(404, f"no session {session_id!r}") from None
            except SessionLockedError as exc:
                raise _HTTPError(409, str(exc)) from None
            try:
                agent = await self._make_agent(session_id)
                await session.resume(agent, restore_settings=False)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await session.aclose()
                raise
            live = self._sessions[session_id] = _Live(
                session_id, agent, session, self.replay_limit, self.replay_bytes, self.compact
            )
            return live

    async def _delete(self, session_id: str) -> None:
        live = self._sessions.get(session_id)
        if live is None and self.store is None:
            raise _HTTPError(404, f"no session {session_id!r}")
        if live is not None:
            if live.busy:
                raise _HTTPError(409, "a run is going: abort it and wait for agent_end before deleting")
            del self._sessions[session_id]
            live.deleted = True
            live.notify()
            await _close_live(live)
        if self.store is not None:
            try:
                await self.store.delete(session_id)
            except SessionNotFoundError:
                if live is None:
                    raise _HTTPError(404, f"no session {session_id!r}") from None
            except SessionLockedError as exc:
                raise _HTTPError(409, str(exc)) from None

    # --- actions -----------------------------------------------------------------------------
    def _start(self, live: _Live, run: Callable[[], Awaitable[None]]) -> None:
        self._check_running()
        if live.busy:
            raise _HTTPError(409, "the agent is running: steer, follow-up or abort it, or wait for agent_end")
        assert self._task_group is not None
        live.busy = True
        self._task_group.start_soon(self._drive, live, run)

    async def _drive(self, live: _Live, run: Callable[[], Awaitable[None]]) -> None:
        try:
            await run()
        except Exception as exc:  # what the Agent could not turn into events (a storage failure, ...)
            live.publish("error", encode_json({"error": str(exc) or type(exc).__name__}))
        finally:
            live.busy = False
            live.notify()

    async def _prompt(self, live: _Live, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = _messages_of(body)
        self._start(live, lambda: live.agent.prompt(messages))
        return 202, {"accepted": True, "lastEventId": live.last_event_id}

    async def _continue(self, live: _Live, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        agent = live.agent
        transcript = agent.state.messages
        if not live.busy:
            if not transcript:
                raise _HTTPError(409, "nothing to continue: the session has no messages; send a prompt")
            if transcript[-1].role == "assistant" and not agent.has_queued_messages():
                raise _HTTPError(409, "cannot continue after the assistant's answer: send a prompt")
        self._start(live, agent.continue_)
        return 202, {"accepted": True, "lastEventId": live.last_event_id}

    async def _steer(self, live: _Live, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        for message in _messages_of(body):
            live.agent.steer(message)
        return 202, {"queued": True, "running": live.busy}

    async def _follow_up(self, live: _Live, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        for message in _messages_of(body):
            live.agent.follow_up(message)
        return 202, {"queued": True, "running": live.busy}

    async def _abort(self, live: _Live, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        running = live.agent.signal is not None
        live.agent.abort()
        return 200, {"aborted": running}

    # --- the event stream --------------------------------------------------------------------
    async def _events(self, live: _Live, scope: Scope, receive: Receive, send: Send) -> None:
        asked = _last_event_id(scope)
        last = 0 if asked is None else live.number_of(asked)
        closing = self._closing
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
                frames = live.after(last)
                if frames:
                    last = frames[-1][0]
                    asked = live.event_id(last)
                    await send(
                        {"type": "http.response.body", "body": b"".join(f for _, f in frames), "more_body": True}
                    )
                    continue
                if live.deleted or (closing is not None and closing.is_set()):
                    break  # after the last events were sent
                with anyio.move_on_after(self.keepalive) as timeout:
                    await changed.wait()
                if timeout.cancelled_caught:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            tg.cancel_scope.cancel()
        if not disconnected:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    # --- requests ----------------------------------------------------------------------------
    async def _read_json(self, scope: Scope, receive: Receive) -> dict[str, Any]:
        try:
            body = await read_body(scope, receive, self.max_body_size)
        except BodyTooLarge:
            raise _HTTPError(413, f"the body is over {self.max_body_size} bytes") from None
        if body is None:
            raise _Disconnected
        if not body.strip():
            return {}
        content_type = (header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
        if content_type != _JSON:
            raise _HTTPError(415, "send the body as JSON (content-type: application/json)")
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise _HTTPError(400, f"the body is not JSON: {exc}") from None
        except RecursionError:
            raise _HTTPError(400, "the body nests too deeply") from None
        if not isinstance(data, dict):
            raise _HTTPError(400, f"the body must be a JSON object, got {type(data).__name__}")
        return data


async def _close_live(live: _Live) -> None:
    live.deleted = True
    live.notify()
    if live.session is not None:
        await live.session.aclose()


def _messages_of(body: dict[str, Any]) -> list[AgentMessage]:
    given = [key for key in ("text", "message", "messages") if key in body]
    if len(given) != 1:
        raise _HTTPError(400, "send one of 'text' (a string), 'message' (a message) or 'messages' (a list)")
    key = given[0]
    value = body[key]
    if key == "text":
        if not isinstance(value, str):
            raise _HTTPError(400, f"'text' must be a string, got {type(value).__name__}")
        return [UserMessage(content=value)]
    items = [value] if key == "message" else value
    if not isinstance(items, list) or not items:
        raise _HTTPError(400, "'messages' must be a non-empty list of messages")
    messages = []
    for i, item in enumerate(items):
        try:
            message = from_json(item)
        except (ValueError, TypeError) as exc:
            raise _HTTPError(400, f"{key} {i}: {exc}") from None
        except RecursionError:
            raise _HTTPError(400, f"{key} {i}: the message nests too deeply") from None
        if not isinstance(message, AGENT_MESSAGE_TYPES):
            raise _HTTPError(400, f"{key} {i}: not a message (it needs a 'role')")
        messages.append(message)
    return messages


_EVENT_ID = re.compile(r"^(?:[0-9a-f]+-)?[0-9]+$")


def _last_event_id(scope: Scope) -> str | None:
    """The id the client saw last (`Last-Event-ID`, else `?lastEventId=`); 400 when not an id."""
    sent = header(scope, b"last-event-id")
    raw = None if sent is None else sent.decode("latin-1")
    if raw is None:
        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        if "lastEventId" in query:
            raw = query["lastEventId"][-1]
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    if not _EVENT_ID.match(raw):
        raise _HTTPError(400, f"Last-Event-ID must be an event id this app sent ('<epoch>-<number>'), got {raw!r}")
    return raw


async def _send_json(send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send_json(send, status, encode_lenient(data).encode(), headers)  # messages may hold odd tool details
