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
on the disk. The two backends (`_sqlite.py`, `_jsonl.py`) are imported when a store is made, so
`import agentloop` loads neither `sqlite3` nor `fcntl`.

The package: `_model.py` (errors, settings, info, `Meta`), `_backend.py` (the contract a backend
fulfils, and the stored JSON text of messages), `_store.py` (the stores and `open_agent`),
`_session.py` (the writer), `_sqlite.py` and `_jsonl.py` (the backends).
"""

from __future__ import annotations

from ._backend import Backend, Writer, check_session_id
from ._model import (
    JSONDict,
    Meta,
    SessionCorruptError,
    SessionData,
    SessionError,
    SessionInfo,
    SessionLockedError,
    SessionNotFoundError,
    SessionSettings,
)
from ._session import INTERRUPTED_TOOL_TEXT, Session, missing_tool_results
from ._store import JSONLSessionStore, SessionStore, SQLiteSessionStore, open_agent

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
