"""Session stores (SQLite and JSONL): create, list, load, fork, delete, attach, resume, locks."""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop._sessions import INTERRUPTED_TOOL_TEXT, missing_tool_results
from agentloop.sessions import (
    JSONLSessionStore,
    Session,
    SessionCorruptError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
    SessionSettings,
    SessionStore,
    SQLiteSessionStore,
    open_agent,
)
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall
from agentloop.wire import to_json

from ..support import loaded_by_import
from .helpers import MODEL, TOOLS, check_transcript, make_store, step_script

ROOT = Path(__file__).parents[2]


@pytest.fixture(params=["sqlite", "jsonl"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_path(kind: str, tmp_path: Path) -> Path:
    return tmp_path / "sessions.db" if kind == "sqlite" else tmp_path / "sessions"


def store_at(kind: str, path: Path) -> SessionStore:
    return SQLiteSessionStore(path) if kind == "sqlite" else JSONLSessionStore(path)


def new_agent(**options: object) -> al.Agent:
    defaults: dict[str, object] = {"model": MODEL, "system_prompt": "Be brief.", "tools": TOOLS}
    defaults.update(options)
    return al.Agent(**defaults)  # type: ignore[arg-type]


def strip(messages: tuple[al.AgentMessage, ...] | list[al.AgentMessage]) -> list[dict[str, object]]:
    return [to_json(m) for m in messages]


# --- create / list / load / fork / delete ----------------------------------------------------


async def test_create_list_load_fork_delete(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            assert await store.list() == []
            note = al.CustomMessage(role="note", data={"n": 1, "nested": {"ok": [1, 2]}})
            first = al.UserMessage(content="hi")
            reply = al.AssistantMessage(content=(al.TextContent("hello"),), model="m")
            settings = SessionSettings(system_prompt="S", model=MODEL, thinking_level="low", tool_names=("add",))
            a = await store.create(settings=settings, messages=[note, first, reply], title="first")
            await anyio.sleep(0.005)
            b = await store.create(session_id="chosen-id.1")
            assert b.id == "chosen-id.1" and b.title is None and b.message_count == 0
            assert a.message_count == 3 and a.settings == settings and a.title == "first"
            infos = await store.list()
            assert [i.id for i in infos] == [b.id, a.id]  # most recently updated first
            data = await store.load(a.id)
            assert data.messages == (note, first, reply)
            assert data.info == a
            assert await store.info(a.id) == a
            fork = await store.fork(a.id, 2, title="branch")
            assert (fork.parent_id, fork.fork_index, fork.title, fork.message_count) == (a.id, 2, "branch", 2)
            assert fork.settings == settings
            assert (await store.load(fork.id)).messages == (note, first)
            whole = await store.fork(a.id)
            assert whole.message_count == 3 and whole.title == "first"
            empty = await store.fork(a.id, 0)
            assert empty.message_count == 0
            with pytest.raises(ValueError, match="fork index must be an int from 0 to 3"):
                await store.fork(a.id, 4)
            with pytest.raises(SessionError, match="already exists"):
                await store.create(session_id="chosen-id.1")
            await store.delete(a.id)
            with pytest.raises(SessionNotFoundError):
                await store.load(a.id)
            with pytest.raises(SessionNotFoundError):
                await store.delete(a.id)
            with pytest.raises(SessionNotFoundError):
                await store.open(a.id)
            assert {i.id for i in await store.list()} == {b.id, fork.id, whole.id, empty.id}
            assert (await store.load(fork.id)).messages == (note, first)  # forks outlive their parent


async def test_reopening_the_store_sees_everything(anyio_backend: object, kind: str, store_path: Path) -> None:
    with anyio.fail_after(20):
        async with store_at(kind, store_path) as store:
            info = await store.create(messages=[al.UserMessage(content="kept")], title="t")
            async with store.open(info.id) as session:
                await session.append([al.AssistantMessage(content=(al.TextContent("yes"),))])
                await session.set_title("renamed")
        async with store_at(kind, store_path) as store:
            data = await store.load(info.id)
            assert [m.role for m in data.messages] == ["user", "assistant"]
            assert data.info.title == "renamed" and data.info.message_count == 2
            assert data.info.updated >= info.updated


async def test_bad_arguments_raise_at_once(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with make_store(kind, tmp_path) as store:
            with pytest.raises(ValueError, match="session id must be"):
                await store.create(session_id="../escape")
            with pytest.raises(ValueError, match="session id must be"):
                store.open(".hidden")
            with pytest.raises(TypeError, match=r"messages\[0\] must be a UserMessage"):
                await store.create(messages=["hi"])  # type: ignore[list-item]
            with pytest.raises(TypeError, match="title must be a str"):
                await store.create(title=3)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="settings must be a SessionSettings"):
                await store.create(settings={"systemPrompt": ""})  # type: ignore[arg-type]
        with pytest.raises(SessionError, match="closed"):
            await store.list()
        await store.aclose()  # idempotent
    with pytest.raises(ValueError, match="thinking_level"):
        SessionSettings(thinking_level="huge")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool_names"):
        SessionSettings(tool_names="add")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteSessionStore(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]


def test_settings_round_trip_and_drop_headers() -> None:
    model = dataclasses.replace(
        MODEL,
        base_url="u",
        reasoning=True,
        headers={"Authorization": "secret"},
        context_window=10,
        max_tokens=5,
        compat={"x": 1},
        cost=al.ModelCost(input=1.5),
    )
    settings = SessionSettings(system_prompt="s", model=model, thinking_level="high", tool_names=["a", "b"])  # type: ignore[arg-type]
    assert settings.model is not None and settings.model.headers is None and settings.tool_names == ("a", "b")
    assert "secret" not in json.dumps(settings.to_json())
    assert SessionSettings.from_json(json.loads(json.dumps(settings.to_json()))) == settings
    with pytest.raises(ValueError, match="bad session settings"):
        SessionSettings.from_json({"model": {"name": "no id"}})
    with pytest.raises(ValueError, match="must be an object"):
        SessionSettings.from_json([])


# --- attach and resume -----------------------------------------------------------------------


async def test_attached_agent_writes_every_message_before_other_listeners(
    anyio_backend: object, kind: str, tmp_path: Path
) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            agent = new_agent(stream_fn=ScriptedModel(step_script(1, chunk_delay=0)))
            stored_at_end: list[tuple[int, int]] = []
            session_ref: list[Session] = []

            def early(event: al.AgentEvent, signal: al.AbortSignal) -> None:  # subscribed before attach
                if isinstance(event, al.MessageEnd):
                    stored_at_end.append((len(agent.state.messages), len(session_ref[0].messages)))

            agent.subscribe(early)
            info = await store.create(agent=agent, title="run")
            async with store.open(info.id) as session:
                session_ref.append(session)
                await session.attach(agent)
                await agent.prompt("go")
                assert agent.state.error_message is None
                assert session.messages == tuple(agent.state.messages)
                with pytest.raises(SessionError, match="already records an agent"):
                    await session.attach(agent)
            assert stored_at_end and all(a == b for a, b in stored_at_end)
            data = await store.load(info.id)
            assert strip(data.messages) == strip(agent.state.messages)
            check_transcript(data.messages, complete=True)
            assert data.info.settings == SessionSettings.of(agent)
            assert agent._listeners == (early,)  # closing the session detached it


async def test_resume_then_continue_and_prompt(anyio_backend: object, kind: str, store_path: Path) -> None:
    with anyio.fail_after(20):
        # A run stopped between the tool call and its result (as a crash leaves it).
        call = al.AssistantMessage(
            content=(al.ToolCall("c1", "add", {"a": 1, "b": 2}), al.ToolCall("c2", "echo", {"text": "x"})),
            stop_reason="toolUse",
            model="scripted-1",
        )
        done = al.ToolResultMessage(tool_call_id="c1", tool_name="add", content=(al.TextContent("3"),))
        settings = SessionSettings(system_prompt="Stored prompt", model=MODEL, thinking_level="medium")
        async with store_at(kind, store_path) as store:
            info = await store.create(settings=settings, messages=[al.UserMessage(content="q"), call, done])
        async with store_at(kind, store_path) as store, store.open(info.id) as session:
            agent = al.Agent(tools=TOOLS, stream_fn=ScriptedModel(["The answer is 3."]))
            assert await session.resume(agent) is agent
            assert agent.state.system_prompt == "Stored prompt" and agent.state.thinking_level == "medium"
            assert agent.state.model == MODEL
            repaired = agent.state.messages[-1]
            assert isinstance(repaired, al.ToolResultMessage) and repaired.tool_call_id == "c2" and repaired.is_error
            assert repaired.content == (al.TextContent(INTERRUPTED_TOOL_TEXT),)
            await agent.continue_()
            assert agent.state.error_message is None
            agent.stream_fn = ScriptedModel(["Again."])
            await agent.prompt("more")
            assert session.messages == tuple(agent.state.messages)
        async with store_at(kind, store_path) as store:
            data = await store.load(info.id)
            assert [m.role for m in data.messages] == [
                "user",
                "assistant",
                "toolResult",
                "toolResult",
                "assistant",
                "user",
                "assistant",
            ]
            check_transcript(data.messages, complete=True)
            assert data.info.settings.tool_names == ("add", "echo")  # recorded at the run's start


async def test_open_agent_new_and_resumed(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            async with open_agent(
                store, title="chat", model=MODEL, system_prompt="P", tools=TOOLS, stream_fn=ScriptedModel(["Hi!"])
            ) as agent:
                await agent.prompt("Hello")
            (info,) = await store.list()
            assert info.title == "chat" and info.message_count == 2
            async with open_agent(store, info.id, tools=TOOLS, stream_fn=ScriptedModel(["Bye!"])) as again:
                assert again.state.system_prompt == "P" and again.state.model == MODEL
                assert [m.role for m in again.state.messages] == ["user", "assistant"]
                await again.prompt("Bye")
            other = al.Model(id="other")
            async with open_agent(
                store, info.id, model=other, system_prompt="Q", title="renamed", stream_fn=ScriptedModel(["x"])
            ) as third:
                assert third.state.model == other and third.state.system_prompt == "Q"
                await third.prompt("x")
            data = await store.load(info.id)
            assert data.info.title == "renamed" and data.info.message_count == 6
            assert data.info.settings.model is not None and data.info.settings.model.id == "other"
            assert data.info.settings.system_prompt == "Q"
            with pytest.raises(TypeError, match="store must be a SessionStore"):
                async with open_agent(object()):  # type: ignore[arg-type]
                    pass


async def test_leaving_open_agent_aborts_a_running_run(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            slow = ScriptedModel([al.testing.Response(content=["a", "b"], chunk_delay=5)])
            async with anyio.create_task_group() as tg, open_agent(store, model=MODEL, stream_fn=slow) as agent:
                tg.start_soon(agent.prompt, "slow")
                await anyio.sleep(0.05)
                assert agent.signal is not None
            (info,) = await store.list()
            data = await store.load(info.id)
            last = data.messages[-1]
            assert isinstance(last, al.AssistantMessage) and last.stop_reason == "aborted"


async def test_attach_checks_the_transcripts(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            info = await store.create(messages=[al.UserMessage(content="stored")])
            agent = new_agent(stream_fn=ScriptedModel(["ok"]))
            async with store.open(info.id) as session:
                with pytest.raises(ValueError, match=r"use session\.resume"):
                    await session.attach(agent)
                with pytest.raises(TypeError, match=r"agent must be an agentloop\.Agent"):
                    await session.attach(object())  # type: ignore[arg-type]
            # An agent that already has the session's messages and more: the rest is written.
            agent.state.messages = [*(await store.load(info.id)).messages, al.UserMessage(content="new")]
            async with store.open(info.id) as session:
                await session.attach(agent)
                assert len(session.messages) == 2
                session.detach()
                session.detach()
            with pytest.raises(SessionError, match="closed"):
                await session.append([al.UserMessage(content="late")])
            with pytest.raises(SessionError, match="closed"):
                await session.attach(agent)
            assert "closed" in repr(session)


async def test_reset_and_replaced_transcripts_are_recorded(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            agent = new_agent(stream_fn=ScriptedModel(["one", "two", "three"]))
            info = await store.create(agent=agent)
            async with store.open(info.id) as session:
                await session.attach(agent)
                await agent.prompt("1")
                agent.reset()
                await agent.prompt("2")
                assert [m.role for m in session.messages] == ["user", "assistant"]
                compacted = [al.CustomMessage(role="summary", data={"text": "earlier: 1, 2"})]
                agent.state.messages = compacted
                await agent.prompt("3")
            data = await store.load(info.id)
            assert strip(data.messages) == strip(agent.state.messages)
            assert [m.role for m in data.messages] == ["summary", "user", "assistant"]


async def test_odd_details_are_stored_not_fatal(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    when = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)

    @al.tool
    async def stamp() -> al.AgentToolResult:
        """Return details JSON cannot hold directly."""
        return al.AgentToolResult(content=(al.TextContent("ok"),), details={"when": when, "tags": {"a"}, "raw": b"x"})

    with anyio.fail_after(20):
        async with make_store(kind, tmp_path) as store:
            model = ScriptedModel([Response(content=[ScriptedToolCall("t1", "stamp", {})]), "done"])
            async with open_agent(store, model=MODEL, tools=[stamp], stream_fn=model) as agent:
                await agent.prompt("stamp it")
                assert agent.state.error_message is None
            (info,) = await store.list()
            result = (await store.load(info.id)).messages[2]
            assert isinstance(result, al.ToolResultMessage)
            assert result.details == {"when": str(when), "tags": ["a"], "raw": "x"}


def test_missing_tool_results() -> None:
    call = al.AssistantMessage(content=(al.ToolCall("a", "t"), al.ToolCall("b", "t")), stop_reason="toolUse")
    result_a = al.ToolResultMessage(tool_call_id="a", tool_name="t")
    assert [r.tool_call_id for r in missing_tool_results([call])] == ["a", "b"]
    assert [r.tool_call_id for r in missing_tool_results([call, result_a])] == ["b"]
    aborted = al.AssistantMessage(content=(al.ToolCall("a", "t"),), stop_reason="aborted")
    assert missing_tool_results([aborted]) == []
    assert missing_tool_results([al.UserMessage(content="x")]) == []
    assert missing_tool_results([call, result_a, al.ToolResultMessage(tool_call_id="b", tool_name="t")]) == []


# --- concurrent writers ----------------------------------------------------------------------


async def test_a_second_writer_gets_a_clear_error(anyio_backend: object, kind: str, store_path: Path) -> None:
    with anyio.fail_after(20):
        async with store_at(kind, store_path) as store, store_at(kind, store_path) as other_store:
            info = await store.create()
            async with store.open(info.id) as session:
                with pytest.raises(SessionLockedError, match="is open for writing by another Session"):
                    await store.open(info.id)
                with pytest.raises(SessionLockedError):
                    await other_store.open(info.id)  # another connection / file handle
                with pytest.raises(SessionLockedError):
                    await store.delete(info.id)
                await session.append([al.UserMessage(content="still mine")])
            async with other_store.open(info.id) as session:  # released: the next writer gets it
                assert len(session.messages) == 1


async def test_another_process_holding_the_session(anyio_backend: object, kind: str, store_path: Path) -> None:
    code = (
        "import sys, anyio\n"
        "from pathlib import Path\n"
        "from agentloop.sessions import SQLiteSessionStore, JSONLSessionStore\n"
        "async def main():\n"
        "    kind, path, sid = sys.argv[1:4]\n"
        "    store = SQLiteSessionStore(path) if kind == 'sqlite' else JSONLSessionStore(Path(path))\n"
        "    async with store, store.open(sid):\n"
        "        print('locked', flush=True)\n"
        "        await anyio.sleep(60)\n"
        "anyio.run(main)\n"
    )
    with anyio.fail_after(30):
        async with store_at(kind, store_path) as store:
            info = await store.create(messages=[al.UserMessage(content="x")])
            async with await anyio.open_process(
                [sys.executable, "-c", code, kind, str(store_path), info.id], cwd=ROOT, stderr=subprocess.STDOUT
            ) as process:
                assert process.stdout is not None
                out = await process.stdout.receive()
                assert b"locked" in out, out
                with pytest.raises(SessionLockedError, match="open for writing"):
                    await store.open(info.id)
                with pytest.raises(SessionLockedError):
                    await store.delete(info.id)
                process.kill()  # a crashed writer leaves no lock behind
                await process.wait()
            async with store.open(info.id) as session:
                await session.append([al.UserMessage(content="after the crash")])
            assert len((await store.load(info.id)).messages) == 2


async def test_sqlite_lease_lost_is_reported(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            info = await store.create()
            session = await store.open(info.id)
            backend: Any = store._backend
            assert backend is not None and backend._conn is not None
            backend._conn.execute("DELETE FROM leases")  # as a break-in would
            with pytest.raises(SessionLockedError, match="lost its write lease"):
                await session.append([al.UserMessage(content="x")])
            assert len(session.messages) == 0
            await session.aclose()


async def test_closing_the_store_releases_open_sessions(anyio_backend: object, kind: str, store_path: Path) -> None:
    with anyio.fail_after(20):
        store = store_at(kind, store_path)
        info = await store.create()
        session = await store.open(info.id)
        await store.aclose()
        assert session.closed
        async with store_at(kind, store_path) as again, again.open(info.id):
            pass


# --- files and databases as a crash leaves them ------------------------------------------------


async def test_jsonl_torn_last_line_is_ignored_then_repaired(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create(messages=[al.UserMessage(content="one")])
            path = tmp_path / f"{info.id}.jsonl"
            whole = path.read_bytes()
            line = b'{"type":"message","index":1,"time":1,"message":{"role":"user","content":"two","timestamp":1}}\n'
            for cut in (1, 20, len(line) - 1):
                path.write_bytes(whole + line[:cut])  # a write torn by a crash
                assert [m.role for m in (await store.load(info.id)).messages] == ["user"]
                assert (await store.list())[0].message_count == 1
            path.write_bytes(whole + b'{"type":"message","ind\n')  # a garbled last line
            assert len((await store.load(info.id)).messages) == 1
            path.write_bytes(whole + line[:30])
            async with store.open(info.id) as session:
                assert path.read_bytes() == whole  # the torn tail is cut before appending
                await session.append([al.UserMessage(content="three")])
            assert [m.content for m in (await store.load(info.id)).messages] == ["one", "three"]  # type: ignore[union-attr]


async def test_jsonl_corruption_in_the_middle_is_an_error(anyio_backend: object, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with JSONLSessionStore(tmp_path) as store:
            info = await store.create(messages=[al.UserMessage(content="one"), al.UserMessage(content="two")])
            path = tmp_path / f"{info.id}.jsonl"
            lines = path.read_bytes().split(b"\n")
            path.write_bytes(b"\n".join([lines[0], b"garbage", *lines[2:]]))
            with pytest.raises(SessionCorruptError, match="line 2 is not a valid record"):
                await store.load(info.id)
            path.write_bytes(b"\n".join([lines[0], lines[2], lines[2], b""]))
            with pytest.raises(SessionCorruptError, match="holds message 1, expected 0"):
                await store.load(info.id)
            path.write_bytes(lines[1] + b"\n" + lines[2] + b"\n")
            with pytest.raises(SessionCorruptError, match="not the session header"):
                await store.load(info.id)
            path.write_bytes(b"")
            with pytest.raises(SessionCorruptError, match="no session header"):
                await store.load(info.id)
            path.write_bytes(lines[0].replace(b'"version":1', b'"version":9') + b"\n")
            with pytest.raises(SessionCorruptError, match="unknown session file version 9"):
                await store.load(info.id)
            bad = json.loads(lines[1])
            bad["message"] = {"role": "", "timestamp": 1}
            path.write_bytes(lines[0] + b"\n" + json.dumps(bad).encode() + b"\n" + lines[2] + b"\n")
            with pytest.raises(SessionCorruptError, match="message 0"):
                await store.load(info.id)
            (tmp_path / "stray.txt").write_text("not a session")
            (tmp_path / ".tmpfile.jsonl").write_text("ignored")


async def test_sqlite_rejects_a_newer_schema(anyio_backend: object, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=7")
    conn.close()
    with anyio.fail_after(10):
        async with SQLiteSessionStore(path) as store:
            with pytest.raises(SessionError, match="schema version 7"):
                await store.list()


def test_importing_sessions_loads_no_database_or_lock_module() -> None:
    # The standard library modules the sessions need load first: on Python 3.10, `uuid` loads
    # `fcntl` itself (through `platform` and `subprocess`), which is not the sessions' doing.
    loaded = ("sqlite3", "fcntl", "agentloop._sessions._sqlite")
    assert loaded_by_import("agentloop, agentloop.sessions", loaded, before="uuid, pathlib, logging") == []


def test_reprs() -> None:
    assert repr(SQLiteSessionStore("x.db")) == "SQLiteSessionStore('x.db')"
    assert repr(JSONLSessionStore("d")) == "JSONLSessionStore('d')"


async def test_lone_surrogates_and_non_finite_numbers_are_stored_and_read_back(
    anyio_backend: object, kind: str, store_path: Path
) -> None:
    # Text that is not valid UTF-8 (a lone surrogate from a bad decoder) and arguments with NaN
    # and infinities (a provider's `1e999`) must not stop a session from being written.
    messages: list[al.AgentMessage] = [
        al.UserMessage(content="broken \ud800 text", timestamp=1),
        al.AssistantMessage(
            content=(al.ToolCall("c1", "echo", {"n": float("nan"), "i": float("inf"), "s": "\udfff"}),),
            stop_reason="toolUse",
            model="scripted-1",
        ),
    ]
    settings = SessionSettings(system_prompt="prompt \ud800", model=MODEL)
    with anyio.fail_after(10):
        async with store_at(kind, store_path) as store:
            info = await store.create(settings=settings, messages=messages)
        async with store_at(kind, store_path) as store:
            data = await store.load(info.id)
    assert data.messages[0].content == "broken \ud800 text"  # type: ignore[union-attr]
    assert data.messages[1].tool_calls[0].arguments == {"n": None, "i": None, "s": "\udfff"}  # type: ignore[union-attr]
    assert data.info.settings.system_prompt == "prompt \ud800"
