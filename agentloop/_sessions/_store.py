"""The stores: `SessionStore` (create, list, load, fork, delete, open), its SQLite and JSONL
forms, and `open_agent`."""

from __future__ import annotations

import builtins
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
import anyio.to_thread

from .._core._agent import Agent
from .._core._loop import check_messages
from .._types._messages import AgentMessage, now_ms
from ._backend import Backend, check_session_id, decode_message, encode_message, new_session_id
from ._model import Meta, SessionCorruptError, SessionData, SessionError, SessionInfo, SessionSettings, check_title
from ._session import Session

__all__ = ("JSONLSessionStore", "SQLiteSessionStore", "SessionStore", "open_agent")

_log = logging.getLogger("agentloop.sessions")


# --- the store -------------------------------------------------------------------------------


class SessionStore:
    """Where sessions are kept. Use `SQLiteSessionStore` or `JSONLSessionStore`.

    Every method is async and runs its disk work in a worker thread. `open(id)` gives the
    session's one writer (a `Session`); the other operations read snapshots and may run while a
    writer appends. Close the store with `aclose()` (or `async with store:`); that releases the
    locks of the sessions still open through it.
    """

    def __init__(self, backend_factory: Callable[[], Backend]) -> None:
        self._factory = backend_factory
        self._backend: Backend | None = None
        self._init_lock = threading.Lock()
        self._sessions: set[Session] = set()
        self._closed = False

    def _get_backend(self) -> Backend:  # runs in a worker thread: opening may touch the disk
        with self._init_lock:
            if self._closed:
                raise SessionError("the session store is closed")
            if self._backend is None:
                self._backend = self._factory()
            return self._backend

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._closed:
            raise SessionError("the session store is closed")
        return await anyio.to_thread.run_sync(fn, *args)

    async def create(
        self,
        *,
        agent: Agent | None = None,
        settings: SessionSettings | None = None,
        messages: Sequence[AgentMessage] | None = None,
        title: str | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """Create a session and return its info.

        With `agent`, the session starts with the agent's settings and transcript; `settings`
        and `messages` give them explicitly instead. `session_id` defaults to a new random id.
        """
        if agent is not None:
            if settings is None:
                settings = SessionSettings.of(agent)
            if messages is None:
                messages = builtins.list(agent.state.messages)
        settings = settings if settings is not None else SessionSettings()
        if not isinstance(settings, SessionSettings):
            raise TypeError(f"settings must be a SessionSettings, got {type(settings).__name__}")
        messages = check_messages(messages if messages is not None else (), "messages")
        check_title(title)
        session_id = check_session_id(session_id) if session_id is not None else new_session_id()
        now = now_ms()
        meta = Meta(
            id=session_id,
            created=now,
            updated=now,
            title=title,
            settings=settings.to_json(),
            message_count=len(messages),
        )

        def work() -> SessionInfo:
            self._get_backend().create(meta, [encode_message(m) for m in messages])
            return meta.info()

        info: SessionInfo = await self._run(work)
        return info

    async def list(self, *, errors: builtins.list[SessionCorruptError] | None = None) -> builtins.list[SessionInfo]:
        """Every session, most recently updated first.

        A session that cannot be read (a corrupt file or row, or a stray file in a JSONL folder)
        is left out and logged (logger `agentloop.sessions`, warning); pass a list as `errors`
        to receive a `SessionCorruptError` for each, naming it.
        """

        def work() -> tuple[builtins.list[SessionInfo], builtins.list[SessionCorruptError]]:
            metas, bad = self._get_backend().list()
            infos = []
            for meta in metas:
                try:
                    infos.append(meta.info())
                except SessionCorruptError as exc:
                    bad.append(exc)
            infos.sort(key=lambda i: (-i.updated, i.id))
            return infos, bad

        infos, bad = await self._run(work)
        for exc in bad:
            _log.warning("a session cannot be read, left out of the list: %s", exc)
        if errors is not None:
            errors.extend(bad)
        return infos  # type: ignore[no-any-return]

    async def info(self, session_id: str) -> SessionInfo:
        """The info of one session; `SessionNotFoundError` if there is none."""
        return (await self.load(session_id)).info

    async def load(self, session_id: str) -> SessionData:
        """A session's info and transcript (a snapshot; a torn last record is left out)."""
        check_session_id(session_id)

        def work() -> SessionData:
            meta, raw = self._get_backend().load(session_id)
            messages = tuple(decode_message(m, f"session {session_id!r} message {i}") for i, m in enumerate(raw))
            return SessionData(meta.info(), messages, meta.compaction_states(len(messages)))

        data: SessionData = await self._run(work)
        return data

    async def fork(self, session_id: str, at: int | None = None, *, title: str | None = None) -> SessionInfo:
        """A new session with the first `at` messages of this one (all of them by default).

        The fork records its parent (`parent_id`, `fork_index`) and keeps the parent's settings,
        the compactions whose messages it holds, and, unless `title` is given, its title.
        """
        data = await self.load(session_id)
        count = len(data.messages)
        if at is None:
            at = count
        if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= count:
            raise ValueError(f"fork index must be an int from 0 to {count} (the message count), got {at!r}")
        check_title(title)
        now = now_ms()
        meta = Meta(
            id=new_session_id(),
            created=now,
            updated=now,
            title=title if title is not None else data.info.title,
            parent_id=session_id,
            fork_index=at,
            settings=data.info.settings.to_json(),
            message_count=at,
            compactions=[c.to_json() for c in data.compactions if c.first_kept_index < at and c.fresh_from_index <= at],
        )
        messages = data.messages[:at]

        def work() -> SessionInfo:
            self._get_backend().create(meta, [encode_message(m) for m in messages])
            return meta.info()

        info: SessionInfo = await self._run(work)
        return info

    async def delete(self, session_id: str) -> None:
        """Delete a session; `SessionLockedError` while it is open for writing."""
        check_session_id(session_id)
        await self._run(lambda: self._get_backend().delete(session_id))

    async def break_lock(self, session_id: str) -> None:
        """Remove the session's write lock, for a writer known to be gone for good.

        A SQLite lease of a process on this host is taken over as soon as the process is gone,
        and one of another host (a container restarted under a new name) once it was not
        renewed for `lease_timeout`; this removes it at once. A writer still alive loses the
        session: its next write raises `SessionLockedError` and writes nothing. JSONL locks are
        `flock`s that die with their process: there is nothing to break.
        """
        check_session_id(session_id)
        await self._run(lambda: self._get_backend().break_lock(session_id))

    def open(self, session_id: str) -> _Opening:
        """Open a session for writing: `async with store.open(id) as session:` (or `await`).

        Raises `SessionLockedError` when another writer has it open, `SessionNotFoundError` when
        there is no such session. A torn last record (a crash in the middle of a write) is
        dropped from the file here.
        """
        check_session_id(session_id)
        return _Opening(self, session_id)

    async def _open(self, session_id: str) -> Session:
        def work() -> Session:
            writer, meta, raw = self._get_backend().acquire(session_id)
            try:
                messages = [decode_message(m, f"session {session_id!r} message {i}") for i, m in enumerate(raw)]
                return Session(writer, meta, messages, self._sessions.discard)
            except BaseException:
                writer.release()
                raise

        session: Session = await self._run(work)
        self._sessions.add(session)
        return session

    async def aclose(self) -> None:
        """Release the open sessions' locks and close the store (idempotent)."""
        if self._closed:
            return
        sessions = builtins.list(self._sessions)
        for session in sessions:
            await session.aclose()

        def work() -> None:
            with self._init_lock:
                self._closed = True
                backend, self._backend = self._backend, None
            if backend is not None:
                backend.close()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(work)

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class SQLiteSessionStore(SessionStore):
    """Sessions in one SQLite database (stdlib `sqlite3`, WAL journal).

    Args:
        path: The database file (made if missing).
        synchronous: SQLite's `synchronous` setting: `FULL` (default) makes every committed
            message survive a power loss; `NORMAL` survives a process crash.
        timeout: Seconds to wait for another connection's write transaction.
        lease_timeout: Seconds after which the lease of a writer on another host that stopped
            renewing it is taken over (hosts' clocks must agree to well within it).

    A writer's lock is a lease row naming its host and process. A lease left by a process that
    died on this host is taken over at once; a writer's leases are renewed by its writes and a
    heartbeat thread, so one of another host is taken over `lease_timeout` after its writer
    died. `break_lock(id)` removes a lease at once. Keep the database on a local disk.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        timeout: float = 30.0,
        lease_timeout: float = 60.0,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL', got {synchronous!r}")
        if isinstance(lease_timeout, bool) or not isinstance(lease_timeout, (int, float)) or not lease_timeout > 0:
            raise ValueError(f"lease_timeout must be a positive number of seconds, got {lease_timeout!r}")
        self.path = Path(path)

        def factory() -> Backend:
            from ._sqlite import SQLiteBackend

            return SQLiteBackend(self.path, synchronous=synchronous, timeout=timeout, lease_timeout=lease_timeout)

        super().__init__(factory)

    def __repr__(self) -> str:
        return f"SQLiteSessionStore({str(self.path)!r})"


class JSONLSessionStore(SessionStore):
    """Sessions as JSONL files in a directory: one append-only `<id>.jsonl` file per session.

    Every record is one JSON line written with one `write` and made durable with `fsync` (pass
    `fsync=False` to skip that, for tests or throwaway sessions). A torn last line, from a crash
    in the middle of a write, is ignored when reading and removed when the session is next
    opened for writing. A writer holds an exclusive `flock` on the file. Keep the directory on a
    local disk.
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory)

        def factory() -> Backend:
            from ._jsonl import JSONLBackend

            return JSONLBackend(self.directory, fsync=fsync)

        super().__init__(factory)

    def __repr__(self) -> str:
        return f"JSONLSessionStore({str(self.directory)!r})"


class _Opening:
    """What `store.open()` returns: await it, or use it as an async context manager."""

    __slots__ = ("_session", "_session_id", "_store")

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._session: Session | None = None

    def __await__(self) -> Generator[Any, None, Session]:
        return self._store._open(self._session_id).__await__()

    async def __aenter__(self) -> Session:
        if self._session is not None:
            raise RuntimeError("a store.open() context can be entered only once")
        self._session = await self._store._open(self._session_id)
        return self._session

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._session is not None
        await self._session.aclose()


_AGENT_SETTINGS = ("system_prompt", "model", "thinking_level")


@asynccontextmanager
async def open_agent(
    store: SessionStore, session_id: str | None = None, *, title: str | None = None, **agent_options: Any
) -> AsyncIterator[Agent]:
    """An `Agent` recording into a session: a new one, or a stored one resumed.

    Example:
        ```python
        async with open_agent(store, session_id, tools=[add], stream_fn=model) as agent:
            await agent.prompt("And now?")
        ```

    `agent_options` are `Agent(...)` arguments. With `session_id`, the session's transcript,
    system prompt, thinking level and model are restored, except for the settings given here
    (they win), and tool calls a crash left unanswered get error results; without it, a new
    session is created from the agent (`title` names it). Leaving the block aborts a run still
    going (its aborted message is stored), then releases the session's lock.
    """
    if not isinstance(store, SessionStore):
        raise TypeError(f"store must be a SessionStore, got {type(store).__name__}")
    agent = Agent(**agent_options)
    if session_id is None:
        info = await store.create(agent=agent, title=title)
        session_id = info.id
        fresh = True
    else:
        fresh = False
    async with store.open(session_id) as session:
        if fresh:
            await session.attach(agent)
        else:
            await session.resume(agent)
            given = {name: agent_options[name] for name in _AGENT_SETTINGS if name in agent_options}
            for name, value in given.items():
                setattr(agent.state, name, value)
            if title is not None:
                await session.set_title(title)
        try:
            yield agent
        finally:
            if agent.signal is not None:
                agent.abort()
                with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                    await agent.wait_for_idle()
