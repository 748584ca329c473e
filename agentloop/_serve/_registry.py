"""The sessions an `AgentSSEApp` holds: made, listed, taken up from the store, deleted, and the
room `max_sessions` leaves for them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from .._asgi import Receive, Scope, Send
from .._sessions import SessionLockedError, SessionNotFoundError
from ._live import LiveSession
from ._requests import HTTPError, read_json, send_json_answer

if TYPE_CHECKING:
    from ._app import AgentSSEApp

__all__ = ("create", "delete", "listed", "live", "load", "place")


@asynccontextmanager
async def place(app: AgentSSEApp) -> AsyncIterator[None]:
    """A place for one more session, held for the block (which adds it to `_sessions`).

    Checked and taken with no wait in between, so concurrent creations cannot all pass the
    check: past `max_sessions` (counting the places taken), the least recently used idle
    session that a store keeps is evicted to make room; 503 when there is none."""
    if len(app._sessions) + app._placing >= app.max_sessions:
        idle = [live for live in app._sessions.values() if live.idle]
        if app.store is None or not idle:
            raise HTTPError(503, f"the app holds {app.max_sessions} sessions already (see max_sessions)")
        victim = min(idle, key=lambda live: live.last_used)
        del app._sessions[victim.id]
    else:
        victim = None
    app._placing += 1
    try:
        if victim is not None:
            with anyio.CancelScope(shield=True):
                await victim.close()
        yield
    finally:
        app._placing -= 1


async def create(app: AgentSSEApp, scope: Scope, receive: Receive, send: Send) -> None:
    app._check_running()
    body = await read_json(scope, receive, app.max_body_size)
    title = body.get("title")
    if title is not None and not isinstance(title, str):
        raise HTTPError(400, "'title' must be a string")
    async with place(app):
        session_id = uuid.uuid4().hex
        agent = await app._make_agent(session_id)
        session = None
        if app.store is not None:
            await app.store.create(agent=agent, title=title, session_id=session_id)
            session = await app.store.open(session_id)
            await session.attach(agent)
        live = app._sessions[session_id] = LiveSession(
            session_id, agent, session, app.replay_limit, app.replay_bytes, app.compact
        )
        live.last_used = anyio.current_time()
    await send_json_answer(send, 201, {"id": session_id, "lastEventId": live.last_event_id})


async def listed(app: AgentSSEApp) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if app.store is not None:
        for info in await app.store.list():
            out[info.id] = {"id": info.id, "title": info.title, "messageCount": info.message_count}
    for live in app._sessions.values():
        entry = out.setdefault(live.id, {"id": live.id, "title": None})
        entry["messageCount"] = len(live.agent.state.messages)
    for entry in out.values():
        found = app._sessions.get(entry["id"])
        entry["isStreaming"] = found is not None and found.busy
    return list(out.values())


async def live(app: AgentSSEApp, session_id: str) -> LiveSession:
    live = app._sessions.get(session_id)
    if live is None:
        live = await load(app, session_id)
    live.last_used = anyio.current_time()
    return live


async def load(app: AgentSSEApp, session_id: str) -> LiveSession:
    live = app._sessions.get(session_id)
    if live is not None:
        return live
    if app.store is None or app._load_lock is None:
        raise HTTPError(404, f"no session {session_id!r}")
    app._check_running()
    async with app._load_lock:
        live = app._sessions.get(session_id)
        if live is not None:
            return live
        try:
            session = await app.store.open(session_id)
        except SessionNotFoundError:
            raise HTTPError(404, f"no session {session_id!r}") from None
        except SessionLockedError as exc:
            raise HTTPError(409, str(exc)) from None
        try:
            async with place(app):  # once the session is known to exist
                agent = await app._make_agent(session_id)
                await session.resume(agent, restore_settings=False)
                live = app._sessions[session_id] = LiveSession(
                    session_id, agent, session, app.replay_limit, app.replay_bytes, app.compact
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await session.aclose()
            raise
        return live


async def delete(app: AgentSSEApp, session_id: str) -> None:
    live = app._sessions.get(session_id)
    if live is None and app.store is None:
        raise HTTPError(404, f"no session {session_id!r}")
    if live is not None:
        if live.busy:
            raise HTTPError(409, "a run is going: abort it and wait for agent_end before deleting")
        del app._sessions[session_id]
        live.deleted = True
        live.notify()
        await live.close()
    if app.store is not None:
        try:
            await app.store.delete(session_id)
        except SessionNotFoundError:
            if live is None:
                raise HTTPError(404, f"no session {session_id!r}") from None
        except SessionLockedError as exc:
            raise HTTPError(409, str(exc)) from None
