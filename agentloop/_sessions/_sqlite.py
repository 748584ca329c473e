"""The SQLite session backend: one database, WAL journal, one transaction per write.

Tables: `sessions` (metadata, settings as JSON text), `messages` (one row per message, the
codec's JSON text), `compactions` (one row per compaction entry, in order, written in one
transaction) and `leases` (the writer of a session: a random token, its host and process,
and in `acquired` when it was taken or last renewed, in epoch milliseconds).

A lease is stale, and is taken over, when its process is gone (same host: no such pid, a zombie,
or a pid reused by a process started later), or, for a writer on another host (whose process
cannot be checked), when it was not renewed for `lease_timeout` seconds. A writer renews its
leases with every write and, while idle, from a heartbeat thread every quarter of that time.
`break_lock` removes a lease at once. Every write checks, in its transaction, that the lease is
still the writer's own. The connection is shared by the store's worker threads under a lock
(`check_same_thread=False`).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .._wire._json_text import decode_json, encode_json
from ._backend import Backend, Writer
from ._model import (
    JSONDict,
    Meta,
    SessionCorruptError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
)

__all__ = (
    "SCHEMA_VERSION",
    "SQLiteBackend",
)

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created INTEGER NOT NULL,
    updated INTEGER NOT NULL,
    title TEXT,
    parent_id TEXT,
    fork_index INTEGER,
    settings TEXT NOT NULL,
    message_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS compactions (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT,
    acquired INTEGER NOT NULL
);
"""
_META_COLUMNS = "id, created, updated, title, parent_id, fork_index, settings, message_count"


def _process_start(pid: int) -> str | None:
    """The start time of a process (Linux: /proc), to tell a pid reused by a later process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields and fields[0] == b"Z":  # a zombie: dead, not yet reaped
        return "zombie"
    return fields[19].decode() if len(fields) > 19 else None


def _alive(pid: int, start: str | None) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    except OSError:  # pragma: no cover - e.g. Windows without such a pid
        return False
    now = _process_start(pid)
    if now == "zombie":
        return False
    return start is None or now is None or now == start


_HELD_TOKENS: set[str] = set()
"""The tokens of the leases this process's writers hold (in any store): a lease of this process
whose token is not here was left by a release that failed (a full disk), and is taken over."""
_HELD_LOCK = threading.Lock()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _open(path: Path, synchronous: str, timeout: float) -> sqlite3.Connection:
    """A connection to the session database at `path`, its schema made or checked."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise SessionError(f"{path}: session database schema version {version}, expected {SCHEMA_VERSION}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except BaseException:
        conn.close()
        raise
    return conn


class SQLiteBackend(Backend):
    def __init__(self, path: Path, *, synchronous: str, timeout: float, lease_timeout: float) -> None:
        self._lock = threading.Lock()
        self._lease_timeout = lease_timeout
        self._held: dict[str, str] = {}  # session id -> token of the leases this backend holds
        self._stop_heartbeat = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._pid_start = _process_start(self._pid)
        try:
            self._conn: sqlite3.Connection | None = _open(path, synchronous, timeout)
        except sqlite3.Error as exc:  # not a database, a truncated one, a directory, no access...
            raise SessionCorruptError(f"{path}: cannot be used as a session database ({exc})") from exc

    def _transaction(self, immediate: bool) -> _Transaction:
        conn = self._conn
        if conn is None:
            raise SessionError("the session store is closed")
        return _Transaction(self._lock, conn, immediate)

    def create(self, meta: Meta, messages: builtins.list[str]) -> None:
        with self._transaction(True) as conn:
            try:
                conn.execute(
                    f"INSERT INTO sessions ({_META_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        meta.id,
                        meta.created,
                        meta.updated,
                        meta.title,
                        meta.parent_id,
                        meta.fork_index,
                        encode_json(meta.settings),
                        len(messages),
                    ),
                )
            except sqlite3.IntegrityError:
                raise SessionError(f"a session with id {meta.id!r} already exists") from None
            for table in ("messages", "compactions"):  # leftovers of a deleted id
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (meta.id,))
            conn.executemany(
                "INSERT INTO messages (session_id, idx, data) VALUES (?, ?, ?)",
                [(meta.id, i, text) for i, text in enumerate(messages)],
            )
            conn.executemany(
                "INSERT INTO compactions (session_id, seq, data) VALUES (?, ?, ?)",
                [(meta.id, i, encode_json(entry)) for i, entry in enumerate(meta.compactions)],
            )

    def list(self) -> tuple[builtins.list[Meta], builtins.list[SessionCorruptError]]:
        with self._transaction(False) as conn:
            rows = conn.execute(f"SELECT {_META_COLUMNS} FROM sessions").fetchall()
        metas = []
        errors = []
        for row in rows:
            try:
                metas.append(_meta(row))
            except SessionCorruptError as exc:
                errors.append(exc)
        return metas, errors

    def _meta(self, conn: sqlite3.Connection, session_id: str) -> Meta:
        row = conn.execute(f"SELECT {_META_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r} in the database")
        return _meta(row)

    def _compactions(self, conn: sqlite3.Connection, meta: Meta) -> None:
        rows = conn.execute("SELECT data FROM compactions WHERE session_id = ? ORDER BY seq", (meta.id,)).fetchall()
        try:
            meta.compactions = [decode_json(row[0], constants=True) for row in rows]
        except ValueError:
            raise SessionCorruptError(f"session {meta.id!r}: unreadable compaction") from None

    def _messages(self, conn: sqlite3.Connection, meta: Meta) -> builtins.list[Any]:
        self._compactions(conn, meta)
        rows = conn.execute("SELECT idx, data FROM messages WHERE session_id = ? ORDER BY idx", (meta.id,)).fetchall()
        if len(rows) != meta.message_count or any(row[0] != i for i, row in enumerate(rows)):
            raise SessionCorruptError(
                f"session {meta.id!r}: {len(rows)} message rows for a message count of {meta.message_count}"
            )
        return [row[1] for row in rows]

    def load(self, session_id: str) -> tuple[Meta, builtins.list[Any]]:
        with self._transaction(False) as conn:
            meta = self._meta(conn, session_id)
            return meta, self._messages(conn, meta)

    def _check_lease(self, conn: sqlite3.Connection, session_id: str) -> None:
        row = conn.execute(
            "SELECT host, pid, pid_start, acquired, token FROM leases WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return
        host, pid, pid_start, renewed, token = row
        if host == self._host:
            if not _alive(pid, pid_start):
                return
            if pid == self._pid and pid_start == self._pid_start:
                with _HELD_LOCK:
                    if token not in _HELD_TOKENS:
                        return  # left by a release of this process that failed
            where = "this process" if pid == self._pid else f"process {pid} on this host"
            raise SessionLockedError(
                f"session {session_id!r} is open for writing by another Session ({where}); close that one first"
            )
        age = (_now_ms() - renewed) / 1000
        if age > self._lease_timeout:
            return  # its writer stopped renewing it: gone, or cut off
        raise SessionLockedError(
            f"session {session_id!r} is open for writing by another Session (process {pid} on {host}, lease "
            f"renewed {max(age, 0):.0f} s ago); close that one first. A lease expires {self._lease_timeout:g} s "
            "after its last renewal; if that writer is gone for good, store.break_lock(session_id) removes it now"
        )

    def acquire(self, session_id: str) -> tuple[Writer, Meta, builtins.list[Any]]:
        token = uuid.uuid4().hex
        with self._transaction(True) as conn:
            meta = self._meta(conn, session_id)
            self._check_lease(conn, session_id)
            conn.execute(
                "INSERT OR REPLACE INTO leases (session_id, token, host, pid, pid_start, acquired) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, token, self._host, self._pid, self._pid_start, _now_ms()),
            )
            messages = self._messages(conn, meta)
        with _HELD_LOCK:
            _HELD_TOKENS.add(token)
        with self._lock:
            self._held[session_id] = token
            if self._heartbeat is None:
                self._heartbeat = threading.Thread(
                    target=self._renew_leases, name="agentloop-sqlite-lease-heartbeat", daemon=True
                )
                self._heartbeat.start()
        return _SQLiteWriter(self, session_id, token), meta, messages

    def _renew_leases(self) -> None:
        """The heartbeat: renew the leases this backend holds, until the backend closes."""
        while not self._stop_heartbeat.wait(self._lease_timeout / 4):
            try:
                with self._transaction(True) as conn:
                    now = _now_ms()
                    for session_id, token in list(self._held.items()):
                        conn.execute(
                            "UPDATE leases SET acquired = ? WHERE session_id = ? AND token = ?",
                            (now, session_id, token),
                        )
            except SessionError:  # closed meanwhile, or the disk failed: the next beat tries again
                continue

    def _released(self, session_id: str, token: str) -> None:
        with _HELD_LOCK:
            _HELD_TOKENS.discard(token)
        with self._lock:
            if self._held.get(session_id) == token:
                del self._held[session_id]

    def break_lock(self, session_id: str) -> None:
        with self._transaction(True) as conn:
            self._meta(conn, session_id)
            conn.execute("DELETE FROM leases WHERE session_id = ?", (session_id,))

    def delete(self, session_id: str) -> None:
        with self._transaction(True) as conn:
            self._meta(conn, session_id)
            self._check_lease(conn, session_id)
            tables = (("messages", "session_id"), ("compactions", "session_id"), ("leases", "session_id"))
            for table, column in (*tables, ("sessions", "id")):
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))

    def close(self) -> None:
        self._stop_heartbeat.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _Transaction:
    """One transaction on the shared connection, under the backend's lock.

    It commits when its block succeeds and rolls back otherwise. A database error (a full disk,
    a file-size limit, an I/O error), in the block or at the commit, rolls the transaction back
    and becomes a `SessionError`: the database holds what it held before, the connection is
    ready for the next transaction, and the caller's view stays what was committed.
    """

    __slots__ = ("_conn", "_immediate", "_lock")

    def __init__(self, lock: threading.Lock, conn: sqlite3.Connection, immediate: bool) -> None:
        self._lock = lock
        self._conn = conn
        self._immediate = immediate

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            if self._conn.in_transaction:  # a rollback that failed earlier left one open
                self._conn.execute("ROLLBACK")
            self._conn.execute("BEGIN IMMEDIATE" if self._immediate else "BEGIN")
        except sqlite3.Error as exc:
            self._lock.release()
            raise self._error(exc) from exc
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc_type is None:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as commit_error:
                    self._rollback()
                    raise self._error(commit_error) from commit_error
                return
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc) from exc
        finally:
            self._lock.release()

    def _rollback(self) -> None:
        if self._conn.in_transaction:  # SQLite rolls back by itself after some errors
            with contextlib.suppress(sqlite3.Error):  # the next transaction tries again first
                self._conn.execute("ROLLBACK")

    def _error(self, exc: sqlite3.Error) -> SessionError:
        if self._immediate:
            return SessionError(f"could not write to the session database ({exc}); nothing of this write was kept")
        return SessionError(f"could not read the session database ({exc})")


def _meta(row: tuple[Any, ...]) -> Meta:
    session_id, created, updated, title, parent_id, fork_index, settings, count = row
    try:
        settings_json = decode_json(settings, constants=True)
    except ValueError:
        raise SessionCorruptError(f"session {session_id!r}: unreadable settings") from None
    return Meta(
        id=session_id,
        created=created,
        updated=updated,
        title=title,
        parent_id=parent_id,
        fork_index=fork_index,
        settings=settings_json,
        message_count=count,
    )


class _SQLiteWriter(Writer):
    def __init__(self, backend: SQLiteBackend, session_id: str, token: str) -> None:
        self._backend = backend
        self._session_id = session_id
        self._token = token
        self._released = False

    def _owned(self, conn: sqlite3.Connection) -> None:
        if self._released:
            raise SessionError(f"session {self._session_id!r} is closed")
        row = conn.execute("SELECT token FROM leases WHERE session_id = ?", (self._session_id,)).fetchone()
        if row is None or row[0] != self._token:
            raise SessionLockedError(
                f"session {self._session_id!r} lost its write lease (the session was deleted, its lock was "
                "broken, or another writer took it over); nothing was written"
            )
        conn.execute(
            "UPDATE leases SET acquired = ? WHERE session_id = ? AND token = ?",
            (_now_ms(), self._session_id, self._token),
        )

    def append(self, start: int, messages: builtins.list[str], time: int) -> None:
        with self._backend._transaction(True) as conn:
            self._owned(conn)
            conn.executemany(
                "INSERT INTO messages (session_id, idx, data) VALUES (?, ?, ?)",
                [(self._session_id, start + i, text) for i, text in enumerate(messages)],
            )
            conn.execute(
                "UPDATE sessions SET message_count = ?, updated = ? WHERE id = ?",
                (start + len(messages), time, self._session_id),
            )

    def compact(self, entry: JSONDict, time: int) -> None:
        with self._backend._transaction(True) as conn:
            self._owned(conn)
            conn.execute(
                "INSERT INTO compactions (session_id, seq, data) "
                "SELECT ?, COALESCE(MAX(seq) + 1, 0), ? FROM compactions WHERE session_id = ?",
                (self._session_id, encode_json(entry), self._session_id),
            )
            conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time, self._session_id))

    def replace(self, messages: builtins.list[str], time: int) -> None:
        with self._backend._transaction(True) as conn:
            self._owned(conn)
            for table in ("messages", "compactions"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (self._session_id,))
            conn.executemany(
                "INSERT INTO messages (session_id, idx, data) VALUES (?, ?, ?)",
                [(self._session_id, i, text) for i, text in enumerate(messages)],
            )
            conn.execute(
                "UPDATE sessions SET message_count = ?, updated = ? WHERE id = ?",
                (len(messages), time, self._session_id),
            )

    def update(self, changes: JSONDict, time: int) -> None:
        with self._backend._transaction(True) as conn:
            self._owned(conn)
            if "title" in changes:
                conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (changes["title"], self._session_id))
            if "settings" in changes:
                conn.execute(
                    "UPDATE sessions SET settings = ? WHERE id = ?",
                    (encode_json(changes["settings"]), self._session_id),
                )
            conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time, self._session_id))

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._backend._released(self._session_id, self._token)
        if self._backend._conn is None:
            return
        with self._backend._transaction(True) as conn:
            conn.execute("DELETE FROM leases WHERE session_id = ? AND token = ?", (self._session_id, self._token))
