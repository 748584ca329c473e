"""`store.list()` lists the sessions it can read, whatever else the folder or database holds.

One corrupt session file or row, or a stray file in the folder, used to make `list()` (and so the
SSE app's session list) fail for every session. The bad ones are now left out, logged, and
handed to the caller's `errors` list.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop._serve._app import AgentSSEApp
from agentloop.sessions import JSONLSessionStore, SessionCorruptError, SQLiteSessionStore

from .test_sse_app import client, factory


async def test_jsonl_list_skips_corrupt_and_stray_files(
    anyio_backend: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            good = await store.create(title="good", messages=[al.UserMessage(content="hi")])
            bad = await store.create(messages=[al.UserMessage(content="1"), al.UserMessage(content="2")])
            path = tmp_path / f"{bad.id}.jsonl"
            lines = path.read_bytes().split(b"\n")
            path.write_bytes(b"\n".join([lines[0], b"garbage", *lines[2:]]))
            (tmp_path / "notes.jsonl").write_text("my notes\nmore notes\n", encoding="utf-8")
            errors: list[SessionCorruptError] = []
            with caplog.at_level(logging.WARNING, logger="agentloop.sessions"):
                listed = await store.list(errors=errors)
            assert [info.id for info in listed] == [good.id]
            assert sorted(str(e).split(":")[0].rsplit("/", 1)[-1] for e in errors) == sorted(
                [f"{bad.id}.jsonl", "notes.jsonl"]
            )
            assert all(isinstance(e, SessionCorruptError) for e in errors)
            assert caplog.text.count("cannot be read") == 2
            assert [info.id for info in await store.list()] == [good.id]  # errors= is optional


async def test_sqlite_list_skips_corrupt_rows(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            good = await store.create(title="good")
            bad = await store.create(title="bad")
            worse = await store.create(title="worse")
            backend: Any = store._backend
            backend._conn.execute("UPDATE sessions SET settings = 'not json' WHERE id = ?", (bad.id,))
            backend._conn.execute("UPDATE sessions SET settings = '{\"model\": 5}' WHERE id = ?", (worse.id,))
            errors: list[SessionCorruptError] = []
            assert [info.id for info in await store.list(errors=errors)] == [good.id]
            assert sorted(bad.id in str(e) or worse.id in str(e) for e in errors) == [True, True]


async def test_the_sse_app_lists_the_good_sessions(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            good = await store.create(title="good")
            (tmp_path / "stray.jsonl").write_text("{}", encoding="utf-8")
            app = AgentSSEApp(factory("x"), store=store)
            async with app.running(), client(app) as http:
                response = await http.get("/sessions")
                assert response.status_code == 200
                assert [s["id"] for s in response.json()["sessions"]] == [good.id]


DEEP = "[" * 100_000 + "]" * 100_000  # JSON too deeply nested for Python's parser


async def test_too_deep_json_in_a_store_is_a_corrupt_session_not_a_recursion_error(
    anyio_backend: object, tmp_path: Path
) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path / "jsonl") as store:
            info = await store.create(messages=[al.UserMessage(content="1"), al.UserMessage(content="2")])
            path = tmp_path / "jsonl" / f"{info.id}.jsonl"
            lines = path.read_bytes().split(b"\n")
            path.write_bytes(b"\n".join([lines[0], DEEP.encode(), *lines[2:]]))
            with pytest.raises(SessionCorruptError, match="line 2 is not a valid record"):
                await store.load(info.id)
        async with SQLiteSessionStore(tmp_path / "s.db") as sqlite_store:
            good = await sqlite_store.create(title="good")
            deep = await sqlite_store.create(title="deep")
            backend: Any = sqlite_store._backend
            backend._conn.execute("UPDATE sessions SET settings = ? WHERE id = ?", (DEEP, deep.id))
            errors: list[SessionCorruptError] = []
            assert [i.id for i in await sqlite_store.list(errors=errors)] == [good.id]
            assert len(errors) == 1 and deep.id in str(errors[0])
            with_message = await sqlite_store.create(messages=[al.UserMessage(content="hi")])
            backend._conn.execute("UPDATE messages SET data = ? WHERE session_id = ?", (DEEP, with_message.id))
            with pytest.raises(SessionCorruptError, match="message 0"):
                await sqlite_store.load(with_message.id)
