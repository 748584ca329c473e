"""A write that fails (disk full, file-size limit, a failed fsync or commit) loses only itself.

The store reports it as a `SessionError`, the file or database is back to what it held before
that write, and the next write and every later load see exactly the messages committed so far.
A real partial write comes from a child process under `RLIMIT_FSIZE` (with `SIGXFSZ` ignored,
the write past the limit writes what fits and then fails with `EFBIG`), on both stores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.sessions import JSONLSessionStore, SessionError, SQLiteSessionStore, open_agent
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall
from agentloop.wire import to_json

from .helpers import MODEL, TOOLS, append_texts, make_store, stored_texts, texts, users

ROOT = Path(__file__).parents[2]

_CHILD = r"""
import resource, signal, sys
from pathlib import Path

import anyio

import agentloop as al
from agentloop.sessions import SessionError
from tests.sessions.helpers import make_store

kind, root, backend = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


def largest_file() -> int:
    return max(p.stat().st_size for p in root.rglob("*") if p.is_file())


async def main() -> None:
    async with make_store(kind, root) as store:
        info = await store.create(messages=[al.UserMessage(content="one")])
        async with store.open(info.id) as session:
            await session.append([al.UserMessage(content="two")])
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (largest_file() + 4096, hard))
            try:
                await session.append([al.UserMessage(content="x" * 2_000_000)])
            except SessionError as exc:
                print("failed:", exc)
            else:
                print("no failure")
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            await session.append([al.UserMessage(content="three")])
            await session.append([al.UserMessage(content="four")])
            print("held:", ",".join(str(m.content) for m in session.messages))
    print("id:", info.id)


anyio.run(main, backend=backend)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_write_past_the_file_size_limit_is_undone(kind: str, backend: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(tmp_path), backend],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert "failed" in lines, done.stdout
    assert "could not write" in lines["failed"]
    assert lines["held"] == "one,two,three,four"

    async def reload() -> list[str]:
        async with make_store(kind, tmp_path) as store:
            data = await store.load(lines["id"])
            return [str(m.content) for m in data.messages]  # type: ignore[union-attr]

    assert anyio.run(reload) == ["one", "two", "three", "four"]


class _FailingFsync:
    """`os.fsync` that fails the calls numbered in `failing` (counted from 1) with EIO."""

    def __init__(self, *failing: int) -> None:
        self.failing = set(failing)
        self.calls = 0
        self.real = os.fsync

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls in self.failing:
            raise OSError(5, "Input/output error")
        self.real(fd)


async def test_jsonl_a_failed_fsync_leaves_the_file_as_it_was(
    anyio_backend: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create(messages=users("one"))
            path = tmp_path / f"{info.id}.jsonl"
            async with store.open(info.id) as session:
                before = path.read_bytes()
                fsync = _FailingFsync(1)
                monkeypatch.setattr(os, "fsync", fsync)
                with pytest.raises(SessionError, match="could not write") as caught:
                    await session.append(users("two", "three"))
                assert isinstance(caught.value.__cause__, OSError)
                assert path.read_bytes() == before
                assert texts(session.messages) == ["one"]
                for text in ("two", "three"):
                    await session.append(users(text))
            assert await stored_texts(store, info.id) == ["one", "two", "three"]
            await append_texts(store, info.id, "four")  # and it opens for writing again
            assert len((await store.load(info.id)).messages) == 4


async def test_jsonl_a_failed_title_update_leaves_the_file_as_it_was(
    anyio_backend: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create(title="old")
            path = tmp_path / f"{info.id}.jsonl"
            async with store.open(info.id) as session:
                before = path.read_bytes()
                monkeypatch.setattr(os, "fsync", _FailingFsync(1))
                with pytest.raises(SessionError, match="could not write"):
                    await session.set_title("new")
                assert path.read_bytes() == before
                assert session.info.title == "old"
                await session.set_title("newer")
            assert (await store.load(info.id)).info.title == "newer"


class _FailingCommit:
    """A stand-in for the SQLite connection whose next `COMMIT` fails as a full disk makes it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.fail_next_commit = False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.fail_next_commit:
            import sqlite3

            self.fail_next_commit = False
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


async def test_sqlite_a_failed_commit_is_rolled_back(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            info = await store.create(messages=users("one"))
            async with store.open(info.id) as session:
                backend: Any = store._backend
                failing = _FailingCommit(backend._conn)
                backend._conn = failing
                failing.fail_next_commit = True
                with pytest.raises(SessionError, match="could not write") as caught:
                    await session.append(users("two"))
                assert "disk is full" in str(caught.value)
                assert texts(session.messages) == ["one"]
                assert not failing.conn.in_transaction
                await session.append(users("two again"))
                backend._conn = failing.conn
            assert await stored_texts(store, info.id) == ["one", "two again"]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_an_attached_agent_recovers_from_a_failed_write(
    anyio_backend: object, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message whose write failed is written at the next run's start, once, at its index."""
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            model = ScriptedModel(
                [Response(content=[ScriptedToolCall("c1", "echo", {"text": "hi"})]), "first done", "second done"]
            )
            async with open_agent(store, model=MODEL, tools=TOOLS, stream_fn=model) as agent:
                session_id = (await store.list())[0].id
                if kind == "jsonl":
                    monkeypatch.setattr(os, "fsync", _FailingFsync(2))  # the assistant message's write
                else:
                    backend: Any = store._backend
                    failing = _FailingCommit(backend._conn)
                    backend._conn = failing
                    seen = 0

                    def fail_second(event: al.AgentEvent, signal: object) -> None:
                        nonlocal seen
                        if isinstance(event, al.MessageStart):
                            seen += 1
                            failing.fail_next_commit = seen == 2

                    agent.subscribe(fail_second, first=True)
                await agent.prompt("echo")
                assert agent.state.error_message is not None
                assert "could not write" in agent.state.error_message
                await agent.prompt("again")
                held = list(agent.state.messages)
            data = await store.load(session_id)
            assert [to_json(m) for m in data.messages] == [to_json(m) for m in held]
            assert [m.role for m in held] == ["user", "assistant", "assistant", "user", "assistant"]
