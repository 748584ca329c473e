"""SQLite write leases of writers on other hosts expire unless renewed, and can be broken.

A writer killed under another hostname (a container restarted with a new name) cannot be checked
for liveness; its lease used to block `open()` and `delete()` forever. Now a live writer renews
its leases (every write, and a heartbeat), a lease not renewed for `lease_timeout` is taken
over, and `store.break_lock(id)` removes one at once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.sessions import JSONLSessionStore, SessionLockedError, SessionNotFoundError, SQLiteSessionStore


def put_foreign_lease(store: Any, session_id: str, age: float) -> None:
    """A lease as a writer on another host leaves it, last renewed `age` seconds ago."""
    backend: Any = store._backend
    renewed = int((time.time() - age) * 1000)
    backend._conn.execute(
        "INSERT OR REPLACE INTO leases (session_id, token, host, pid, pid_start, acquired) VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, "foreign", "gone-container-7", 1, None, renewed),
    )


async def test_a_foreign_lease_blocks_until_it_expires(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with SQLiteSessionStore(tmp_path / "s.db", lease_timeout=60) as store:
            first = await store.create(messages=[al.UserMessage(content="one")])
            second = await store.create()
            put_foreign_lease(store, first.id, age=1)
            with pytest.raises(SessionLockedError, match="gone-container-7") as caught:
                await store.open(first.id)
            assert "break_lock" in str(caught.value) and "60 s" in str(caught.value)
            with pytest.raises(SessionLockedError):
                await store.delete(first.id)
            put_foreign_lease(store, first.id, age=61)  # the writer stopped renewing a minute ago
            async with store.open(first.id) as session:
                await session.append([al.UserMessage(content="two")])
            put_foreign_lease(store, second.id, age=61)
            await store.delete(second.id)
            assert [info.id for info in await store.list()] == [first.id]


async def test_break_lock_removes_a_lease_at_once(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            info = await store.create()
            put_foreign_lease(store, info.id, age=0)
            await store.break_lock(info.id)
            session = await store.open(info.id)
            await store.break_lock(info.id)  # a live writer's lease too: its next write says so
            with pytest.raises(SessionLockedError, match="lost its write lease"):
                await session.append([al.UserMessage(content="x")])
            await session.aclose()
            with pytest.raises(SessionNotFoundError):
                await store.break_lock("no-such-session")
            with pytest.raises(ValueError, match="session id"):
                await store.break_lock("../x")


async def test_a_live_writer_renews_its_lease_while_idle(anyio_backend: object, tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with anyio.fail_after(20):
        async with SQLiteSessionStore(path, lease_timeout=0.5) as store:
            info = await store.create()
            async with store.open(info.id) as session:
                await anyio.sleep(1.2)  # idle for more than twice the lease time
                async with SQLiteSessionStore(path, lease_timeout=0.5) as other:
                    await other.list()
                    backend: Any = other._backend
                    backend._host = "another-host"  # as a writer elsewhere sees this lease
                    with pytest.raises(SessionLockedError, match="open for writing"):
                        await other.open(info.id)
                await session.append([al.UserMessage(content="still mine")])
            assert len((await store.load(info.id)).messages) == 1


async def test_jsonl_break_lock_is_a_no_op(anyio_backend: object, tmp_path: Path) -> None:
    """A JSONL writer's lock is a flock: the kernel drops it when the process dies."""
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create()
            await store.break_lock(info.id)
            async with store.open(info.id):
                pass
            with pytest.raises(SessionNotFoundError):
                await store.break_lock("missing")


def test_lease_timeout_is_checked() -> None:
    for bad in (0, -1, "60", True):
        with pytest.raises(ValueError, match="lease_timeout"):
            SQLiteSessionStore("x.db", lease_timeout=bad)  # type: ignore[arg-type]
