"""Stores at their edges: a lease a failed release left, an append torn on disk, storage
failures as `SessionError`, session ids with a final newline."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop._sessions import _jsonl, check_session_id
from agentloop.sessions import JSONLSessionStore, SessionError, SQLiteSessionStore

from .helpers import append_texts, stored_texts, users
from .test_write_failures import _FailingCommit


async def test_a_lease_left_by_a_failed_release_is_taken_over_by_its_process(
    anyio_backend: object, tmp_path: Path
) -> None:
    with anyio.fail_after(20):
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            info = await store.create(messages=users("one"))
            session = await store.open(info.id)
            backend: Any = store._backend
            failing = _FailingCommit(backend._conn)
            backend._conn = failing
            failing.fail_next_commit = True  # "database or disk is full" at the release
            with pytest.raises(SessionError):
                await session.aclose()
            backend._conn = failing.conn  # space is back
            await append_texts(store, info.id, "two")
            assert await stored_texts(store, info.id) == ["one", "two"]


async def test_a_torn_append_is_dropped_whole_and_logged(
    anyio_backend: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create(messages=users("zero"))
            await append_texts(store, info.id, "one", "two")
            path = tmp_path / f"{info.id}.jsonl"
            whole = path.read_bytes()
            second = whole.rindex(b"\n", 0, len(whole) - 1) + 1  # where the append's second line starts
            for cut in (second + 10, second):  # inside its second line, and right before it
                path.write_bytes(whole[:cut])
                caplog.clear()
                with caplog.at_level(logging.WARNING, logger="agentloop.sessions"):
                    assert await stored_texts(store, info.id) == ["zero"]
                assert "dropped a torn tail" in caplog.text
            await append_texts(store, info.id, "three")  # the next writer cuts the tail away
            assert await stored_texts(store, info.id) == ["zero", "three"]


async def test_jsonl_create_and_fork_on_a_full_disk_raise_session_error(
    anyio_backend: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create(messages=users("one"))

            def full(fd: int, data: bytes) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(_jsonl, "_write_all", full)
            with pytest.raises(SessionError, match="No space left"):
                await store.create(messages=users("two"))
            with pytest.raises(SessionError, match="No space left"):
                await store.fork(info.id)
            monkeypatch.undo()
            assert [i.id for i in await store.list()] == [info.id]
            assert not [p async for p in anyio.Path(tmp_path).iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "content", [b"this is not a database at all, just text" * 100, b"SQLite format 3\x00" + b"\x01" * 50]
)
async def test_sqlite_on_a_file_that_is_not_a_database_raises_session_error(
    anyio_backend: object, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(content)
    with anyio.fail_after(20), pytest.raises(SessionError, match="session database"):
        async with SQLiteSessionStore(path) as store:
            await store.list()


def test_a_session_id_with_a_final_newline_is_refused() -> None:
    assert check_session_id("abc") == "abc"
    for bad in ("abc\n", "abc\r", "\nabc", ".abc", "", "a" * 129):
        with pytest.raises(ValueError, match="session id must be"):
            check_session_id(bad)
