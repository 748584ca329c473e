"""Sessions: an Agent's transcript and settings, kept durably in SQLite or in JSONL files.

A `SessionStore` keeps sessions (create, list, load, fork, delete). `store.open(id)` gives the
one writer of a session, a `Session`: it holds the session's lock (a second writer, in this
process or another, gets `SessionLockedError`), appends messages, and records an `Agent`:

    async with store.open(session_id) as session:
        agent = await session.resume(Agent(tools=[add], stream_fn=model))
        await agent.continue_()

An attached agent's messages are written one by one when their `message_end` is processed,
before any other listener sees the event, so a crash loses at most the message being streamed.
Every backend operation runs in a worker thread (`anyio.to_thread`): the event loop never blocks
on the disk. The two backends live in `_sessions_sqlite.py` and `_sessions_jsonl.py` and are
imported when a store is made, so `import agentloop` loads neither `sqlite3` nor `fcntl`.
"""

from __future__ import annotations

import abc
import builtins
import dataclasses
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from ._abort import AbortSignal
from ._agent import Agent
from ._codec import from_json, to_json
from ._errors import AgentBusyError, AgentLoopError
from ._events import AgentEvent, AgentStart, MessageEnd
from ._json_fallback import encode_lenient
from ._loop import check_messages
from ._types import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    Model,
    ModelCost,
    TextContent,
    ThinkingLevel,
    ToolResultMessage,
    UserMessage,
    now_ms,
)

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = (
    "Backend",
    "INTERRUPTED_TOOL_TEXT",
    "JSONDict",
    "JSONLSessionStore",
    "Meta",
    "SQLiteSessionStore",
    "Session",
    "SessionCorruptError",
    "SessionData",
    "SessionError",
    "SessionInfo",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionSettings",
    "SessionStore",
    "Writer",
    "check_session_id",
    "missing_tool_results",
    "open_agent",
)

JSONDict: TypeAlias = dict[str, Any]

_log = logging.getLogger("agentloop.sessions")

INTERRUPTED_TOOL_TEXT = (
    "Tool call was interrupted: the agent stopped before the tool finished, so its effects are unknown. "
    "Call the tool again if it is still needed."
)
"""The error result `Session.resume` records for a tool call left without a result by a crash."""

_ID_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")
_THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage)


# --- errors ----------------------------------------------------------------------------------


class SessionError(AgentLoopError):
    """Base class of the session errors (a session store's own failures)."""


class SessionNotFoundError(SessionError, LookupError):
    """No session has this id (never created, or deleted)."""


class SessionLockedError(SessionError):
    """The session is open for writing by another `Session` (in this process or another)."""


class SessionCorruptError(SessionError):
    """A stored record cannot be read (not a torn last record, which is ignored)."""


# --- values ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """What an Agent needs besides its transcript to resume a session.

    `model` keeps the model's description without its `headers` (they may hold credentials);
    `tool_names` says which tools the session used (tools are code: the resuming program passes
    them to the Agent).
    """

    system_prompt: str = ""
    model: Model | None = None
    thinking_level: ThinkingLevel = "off"
    tool_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.system_prompt, str):
            raise TypeError(f"system_prompt must be a str, got {type(self.system_prompt).__name__}")
        if self.model is not None and not isinstance(self.model, Model):
            raise TypeError(f"model must be an agentloop.Model or None, got {type(self.model).__name__}")
        if self.thinking_level not in _THINKING_LEVELS:
            raise ValueError(f"thinking_level must be one of {_THINKING_LEVELS}, got {self.thinking_level!r}")
        if isinstance(self.tool_names, str) or not all(isinstance(n, str) for n in self.tool_names):
            raise TypeError(f"tool_names must be a sequence of str, got {self.tool_names!r}")
        object.__setattr__(self, "tool_names", tuple(self.tool_names))
        if self.model is not None and self.model.headers is not None:
            object.__setattr__(self, "model", dataclasses.replace(self.model, headers=None))

    @classmethod
    def of(cls, agent: Agent) -> SessionSettings:
        """The settings of `agent` now."""
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        state = agent.state
        return cls(
            system_prompt=state.system_prompt,
            model=state.model,
            thinking_level=state.thinking_level,
            tool_names=tuple(t.name for t in state.tools),
        )

    def to_json(self) -> JSONDict:
        """The JSON form (camelCase, as stored)."""
        return {
            "systemPrompt": self.system_prompt,
            "model": None if self.model is None else _model_to_json(self.model),
            "thinkingLevel": self.thinking_level,
            "toolNames": list(self.tool_names),
        }

    @classmethod
    def from_json(cls, data: Any) -> SessionSettings:
        """The settings of a JSON form made by `to_json`; ValueError when it is not one."""
        if not isinstance(data, Mapping):
            raise ValueError(f"session settings must be an object, got {type(data).__name__}")
        try:
            model = data.get("model")
            return cls(
                system_prompt=data.get("systemPrompt", ""),
                model=None if model is None else _model_from_json(model),
                thinking_level=data.get("thinkingLevel", "off"),
                tool_names=tuple(data.get("toolNames", ())),
            )
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"bad session settings: {exc}") from None


def _model_to_json(model: Model) -> JSONDict:
    out: JSONDict = {
        "id": model.id,
        "name": model.name,
        "api": model.api,
        "provider": model.provider,
        "baseUrl": model.base_url,
        "reasoning": model.reasoning,
        "input": list(model.input),
        "cost": {
            "input": model.cost.input,
            "output": model.cost.output,
            "cacheRead": model.cost.cache_read,
            "cacheWrite": model.cost.cache_write,
        },
        "contextWindow": model.context_window,
        "maxTokens": model.max_tokens,
    }
    if model.compat is not None:
        out["compat"] = dict(model.compat)
    return out


def _model_from_json(data: Mapping[str, Any]) -> Model:
    cost = data.get("cost") or {}
    compat = data.get("compat")
    return Model(
        id=data["id"],
        name=data.get("name", ""),
        api=data.get("api", ""),
        provider=data.get("provider", ""),
        base_url=data.get("baseUrl", ""),
        reasoning=bool(data.get("reasoning", False)),
        input=tuple(data.get("input", ("text",))),
        cost=ModelCost(
            input=cost.get("input", 0.0),
            output=cost.get("output", 0.0),
            cache_read=cost.get("cacheRead", 0.0),
            cache_write=cost.get("cacheWrite", 0.0),
        ),
        context_window=data.get("contextWindow", 0),
        max_tokens=data.get("maxTokens", 0),
        compat=compat,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """What a store knows about a session besides its messages. Times are epoch milliseconds."""

    id: str
    created: int
    updated: int
    """When a message or a setting was last written."""
    title: str | None = None
    parent_id: str | None = None
    """The session this one was forked from."""
    fork_index: int | None = None
    """How many of the parent's messages the fork started with."""
    message_count: int = 0
    settings: SessionSettings = field(default_factory=SessionSettings)


@dataclass(frozen=True, slots=True)
class SessionData:
    """A session as `load()` returns it: its info and its transcript."""

    info: SessionInfo
    messages: tuple[AgentMessage, ...]


# --- the backend contract (sync: every call runs in a worker thread) ---------------------------


@dataclass(slots=True, kw_only=True)
class Meta:
    """A session's metadata as a backend keeps it (settings in their JSON form)."""

    id: str
    created: int
    updated: int
    title: str | None = None
    parent_id: str | None = None
    fork_index: int | None = None
    settings: JSONDict = field(default_factory=dict)
    message_count: int = 0

    def info(self) -> SessionInfo:
        try:
            settings = SessionSettings.from_json(self.settings)
        except ValueError as exc:
            raise SessionCorruptError(f"session {self.id!r}: {exc}") from None
        return SessionInfo(
            id=self.id,
            created=self.created,
            updated=self.updated,
            title=self.title,
            parent_id=self.parent_id,
            fork_index=self.fork_index,
            message_count=self.message_count,
            settings=settings,
        )


class Backend(abc.ABC):
    """A store's storage: plain blocking methods, each called in a worker thread."""

    @abc.abstractmethod
    def create(self, meta: Meta, messages: builtins.list[str]) -> None:
        """Store a new session (messages as JSON text); SessionError if the id is taken."""

    @abc.abstractmethod
    def list(self) -> tuple[builtins.list[Meta], builtins.list[SessionCorruptError]]:
        """Every readable session's metadata, and an error for each one that cannot be read."""

    @abc.abstractmethod
    def load(self, session_id: str) -> tuple[Meta, builtins.list[Any]]:
        """The metadata and the messages' JSON forms (dicts or JSON text)."""

    @abc.abstractmethod
    def acquire(self, session_id: str) -> tuple[Writer, Meta, builtins.list[Any]]:
        """Take the session's write lock; SessionLockedError when another writer holds it."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> None:
        """Remove a session; SessionLockedError while a writer holds it."""

    @abc.abstractmethod
    def break_lock(self, session_id: str) -> None:
        """Remove the session's write lock whoever holds it; SessionNotFoundError without one."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the backend holds."""


class Writer(abc.ABC):
    """The holder of one session's write lock."""

    @abc.abstractmethod
    def append(self, start: int, messages: list[str], time: int) -> None:
        """Store `messages` (JSON text) at indices `start`, `start + 1`, ..."""

    @abc.abstractmethod
    def replace(self, messages: list[str], time: int) -> None:
        """Replace the whole transcript, atomically."""

    @abc.abstractmethod
    def update(self, changes: JSONDict, time: int) -> None:
        """Change `title` and/or `settings` (keys of `changes`)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lock up (idempotent)."""


def encode_message(message: AgentMessage) -> str:
    """A message's JSON text as stored: the codec's form, one line.

    Values JSON cannot hold (in tool `details` or custom-message data) are stored in a JSON form
    of their own (`encode_lenient`: anything without one as its `str()`), so an odd detail never
    stops a run from being recorded.
    """
    return encode_lenient(to_json(message))


def decode_message(data: Any, where: str) -> AgentMessage:
    """A stored message back (data is its JSON form, or JSON text); SessionCorruptError if not one."""
    try:
        if isinstance(data, (str, bytes)):
            data = json.loads(data)
        message = from_json(data)
    except ValueError as exc:
        raise SessionCorruptError(f"{where}: {exc}") from None
    if not isinstance(message, _MESSAGE_TYPES):
        raise SessionCorruptError(f"{where}: not a message")
    return message


def check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not _ID_RE.match(session_id):
        raise ValueError(
            f"session id must be 1-128 letters, digits or '._-' (not starting with '.'), got {session_id!r}"
        )
    return session_id


def new_session_id() -> str:
    return uuid.uuid4().hex


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
        _check_title(title)
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
            return SessionData(meta.info(), messages)

        data: SessionData = await self._run(work)
        return data

    async def fork(self, session_id: str, at: int | None = None, *, title: str | None = None) -> SessionInfo:
        """A new session with the first `at` messages of this one (all of them by default).

        The fork records its parent (`parent_id`, `fork_index`) and keeps the parent's settings
        and, unless `title` is given, its title.
        """
        data = await self.load(session_id)
        count = len(data.messages)
        if at is None:
            at = count
        if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= count:
            raise ValueError(f"fork index must be an int from 0 to {count} (the message count), got {at!r}")
        _check_title(title)
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
                return Session(self, writer, meta, messages)
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
            from ._sessions_sqlite import SQLiteBackend

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
            from ._sessions_jsonl import JSONLBackend

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


# --- the writer ------------------------------------------------------------------------------


class Session:
    """A session open for writing: the holder of its lock. Made by `store.open(id)`.

    `attach(agent)` records an agent from now on; `resume(agent)` first loads the session into
    the agent. Close it with `aclose()` (or `async with`): that detaches the agent and releases
    the lock. Writes run in a worker thread and are not interrupted by cancellation once
    started, so `messages` always matches what is stored.
    """

    def __init__(self, store: SessionStore, writer: Writer, meta: Meta, messages: builtins.list[AgentMessage]) -> None:
        self._store = store
        self._writer = writer
        self._meta = meta
        self._messages = messages
        self._write_lock = threading.Lock()
        self._closed = False
        self._agent: Agent | None = None
        self._listener = self._on_event
        self._stored_settings: JSONDict = meta.settings

    # --- what it holds -----------------------------------------------------------------------
    @property
    def id(self) -> str:
        """The session id."""
        return self._meta.id

    @property
    def info(self) -> SessionInfo:
        """The session's info now."""
        meta = self._meta
        meta.message_count = len(self._messages)
        return meta.info()

    @property
    def messages(self) -> tuple[AgentMessage, ...]:
        """The stored transcript."""
        return tuple(self._messages)

    @property
    def closed(self) -> bool:
        """Whether `aclose()` was called."""
        return self._closed

    @property
    def agent(self) -> Agent | None:
        """The attached agent, if any."""
        return self._agent

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._messages)} messages"
        return f"Session({self.id!r}, {state})"

    # --- writes ------------------------------------------------------------------------------
    async def _write(self, fn: Callable[[], None]) -> None:
        if self._closed:
            raise SessionError(f"session {self.id!r} is closed")

        def work() -> None:
            with self._write_lock:
                if self._closed:
                    raise SessionError(f"session {self.id!r} is closed")
                fn()

        await anyio.to_thread.run_sync(work)

    async def append(self, messages: Sequence[AgentMessage]) -> None:
        """Append messages to the transcript (one durable record each)."""
        messages = check_messages(messages, "messages")
        if not messages:
            return

        def fn() -> None:
            encoded = [encode_message(m) for m in messages]
            now = now_ms()
            self._writer.append(len(self._messages), encoded, now)
            self._messages.extend(messages)
            self._meta.updated = now

        await self._write(fn)

    async def replace(self, messages: Sequence[AgentMessage]) -> None:
        """Replace the whole transcript at once (after a compaction, or an agent's reset)."""
        messages = check_messages(messages, "messages")

        def fn() -> None:
            encoded = [encode_message(m) for m in messages]
            now = now_ms()
            self._writer.replace(encoded, now)
            self._messages[:] = messages
            self._meta.updated = now

        await self._write(fn)

    async def set_title(self, title: str | None) -> None:
        """Change the session's title."""
        _check_title(title)
        await self._update({"title": title})

    async def set_settings(self, settings: SessionSettings) -> None:
        """Change the stored settings (an attached agent's are recorded at each run's start)."""
        if not isinstance(settings, SessionSettings):
            raise TypeError(f"settings must be a SessionSettings, got {type(settings).__name__}")
        await self._update({"settings": settings.to_json()})

    async def _update(self, changes: JSONDict) -> None:
        def fn() -> None:
            now = now_ms()
            self._writer.update(changes, now)
            if "title" in changes:
                self._meta.title = changes["title"]
            if "settings" in changes:
                self._meta.settings = self._stored_settings = changes["settings"]
            self._meta.updated = now

        await self._write(fn)

    # --- agents ------------------------------------------------------------------------------
    async def attach(self, agent: Agent) -> None:
        """Record `agent` from now on: each message is written at its `message_end`.

        The session's listener runs before every other listener of the agent, so they see a
        message only once it is stored. The session's transcript must be a prefix of the
        agent's (the rest is written now); to load a stored transcript into an agent, use
        `resume()`. One agent at a time; `detach()` or `aclose()` ends the recording.
        """
        self._check_attachable(agent)
        have, theirs = self._messages, agent.state.messages
        if len(have) > len(theirs) or any(a is not b and a != b for a, b in zip(have, theirs, strict=False)):
            raise ValueError(
                f"session {self.id!r} has messages the agent does not ({len(have)} stored, "
                f"{len(theirs)} in the agent): use session.resume(agent) to load them into the agent"
            )
        await self._sync(agent)
        self._subscribe(agent)

    async def resume(self, agent: Agent, *, restore_settings: bool = True) -> Agent:
        """Load the session into `agent`, attach it, and return it (ready for `continue_()`).

        The agent's transcript becomes the session's. A tool call that a crash left without a
        result gets an error result (`INTERRUPTED_TOOL_TEXT`), stored first, so the transcript
        is one a model accepts. With `restore_settings` (the default), the system prompt, the
        thinking level and the model (when one is stored) are set from the session; the tools
        stay the agent's own (`info.settings.tool_names` says which ones the session used).
        Then: `continue_()` when the last message is a prompt or a tool result, else `prompt()`.
        """
        self._check_attachable(agent)
        missing = missing_tool_results(self._messages)
        if missing:
            await self.append(missing)
        if restore_settings:
            settings = self.info.settings
            agent.state.system_prompt = settings.system_prompt
            agent.state.thinking_level = settings.thinking_level
            if settings.model is not None:
                agent.state.model = settings.model
        agent.state.messages = self._messages
        await self._sync_settings(agent)
        self._subscribe(agent)
        return agent

    def detach(self) -> None:
        """Stop recording the attached agent (no-op when none is attached)."""
        agent, self._agent = self._agent, None
        if agent is not None:
            self._unsubscribe()

    def _check_attachable(self, agent: Agent) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"agent must be an agentloop.Agent, got {type(agent).__name__}")
        if self._closed:
            raise SessionError(f"session {self.id!r} is closed")
        if self._agent is not None:
            raise SessionError(f"session {self.id!r} already records an agent: detach() it first")
        if agent.signal is not None:
            raise AgentBusyError("Agent is already processing. Attach a session while it is idle.")

    def _subscribe(self, agent: Agent) -> None:
        self._agent = agent
        self._unsubscribe = agent.subscribe(self._listener, first=True)

    async def _on_event(self, event: AgentEvent, signal: AbortSignal) -> None:
        agent = self._agent
        if agent is None:  # pragma: no cover - detached while an event was in flight
            return
        kind = type(event)
        if kind is MessageEnd:
            theirs = agent.state.messages
            have = self._messages
            n = len(have)
            if len(theirs) == n + 1 and (n == 0 or theirs[n - 1] is have[n - 1]):
                await self.append([theirs[n]])  # the usual case: the message just ended
            else:
                await self._sync(agent)
        elif kind is AgentStart:
            await self._sync(agent)

    async def _sync(self, agent: Agent) -> None:
        """Make the stored transcript and settings the agent's."""
        await self._sync_settings(agent)
        have, theirs = self._messages, builtins.list(agent.state.messages)
        same = 0
        for a, b in zip(have, theirs, strict=False):
            if a is not b and a != b:
                break
            same += 1
        if same == len(have):
            if len(theirs) > same:
                await self.append(theirs[same:])
        else:
            await self.replace(theirs)  # the agent's transcript was replaced (reset, compaction)

    async def _sync_settings(self, agent: Agent) -> None:
        settings = SessionSettings.of(agent).to_json()
        if settings != self._stored_settings:
            await self._update({"settings": settings})

    # --- closing -----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Detach the agent and release the lock (idempotent)."""
        if self._closed:
            return
        self.detach()

        def work() -> None:
            with self._write_lock:
                self._closed = True
                self._writer.release()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(work)
        self._store._sessions.discard(self)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def missing_tool_results(messages: Sequence[AgentMessage]) -> builtins.list[ToolResultMessage]:
    """Error results for the tool calls of the last assistant message that have none.

    A crash between a tool call and its result leaves such calls; a model rejects a transcript
    with unanswered calls, so `Session.resume` records these results (`INTERRUPTED_TOOL_TEXT`).
    Error and aborted responses need no results.
    """
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                return []
            answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolResultMessage)}
            return [
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=(TextContent(INTERRUPTED_TOOL_TEXT),),
                    details={"interrupted": True},
                    is_error=True,
                )
                for call in message.tool_calls
                if call.id not in answered
            ]
    return []


def _check_title(title: object) -> None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__}")


_AGENT_SETTINGS = ("system_prompt", "model", "thinking_level")


@asynccontextmanager
async def open_agent(
    store: SessionStore, session_id: str | None = None, *, title: str | None = None, **agent_options: Any
) -> AsyncIterator[Agent]:
    """An `Agent` recording into a session: a new one, or a stored one resumed.

    Example:
        async with open_agent(store, session_id, tools=[add], stream_fn=model) as agent:
            await agent.prompt("And now?")

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
