"""Sessions: an Agent's transcript and settings, kept durably in SQLite or in JSONL files.

A `SessionStore` keeps sessions (create, list, load, fork, delete); `SQLiteSessionStore` and
`JSONLSessionStore` are its two backends. `store.open(id)` gives the one writer of a session, a
`Session`, which records an `Agent`'s messages as the run goes; `open_agent` does both for one
agent:

    from agentloop.sessions import SQLiteSessionStore, open_agent

    store = SQLiteSessionStore("sessions.db")
    async with open_agent(store, session_id, tools=[add]) as agent:
        await agent.prompt("What is 2 + 3?")

`SessionError` is the base of the errors a store raises: `SessionNotFoundError`,
`SessionLockedError` (another writer holds the session), `SessionCorruptError`.
"""

from ._sessions import JSONLSessionStore as JSONLSessionStore
from ._sessions import Session as Session
from ._sessions import SessionCorruptError as SessionCorruptError
from ._sessions import SessionData as SessionData
from ._sessions import SessionError as SessionError
from ._sessions import SessionInfo as SessionInfo
from ._sessions import SessionLockedError as SessionLockedError
from ._sessions import SessionNotFoundError as SessionNotFoundError
from ._sessions import SessionSettings as SessionSettings
from ._sessions import SessionStore as SessionStore
from ._sessions import SQLiteSessionStore as SQLiteSessionStore
from ._sessions import open_agent as open_agent

__all__ = (
    "JSONLSessionStore",
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
    "open_agent",
)
