"""Approvals survive the process: a child is killed (SIGKILL) while a call waits for approval;
this process lists the call from the session, answers it, and finishes the run."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import anyio.abc
import pytest

import agentloop as al
from agentloop._sessions import INTERRUPTED_TOOL_TEXT
from agentloop.approvals import ApprovalRequest
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from .approval_tools import LOG, TOOLS
from .helpers import MODEL, check_transcript, make_store

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


async def kill_when_pending(command: list[str]) -> list[str]:
    """Run the child until it reports a pending approval, then SIGKILL it; what it printed."""
    lines: list[str] = []
    pending = anyio.Event()

    async def read(process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        buffer = b""
        async for chunk in process.stdout:
            buffer += chunk
            *done, buffer = buffer.split(b"\n")
            for line in done:
                lines.append(line.decode())
                if line.startswith(b"pending "):
                    pending.set()

    async with await anyio.open_process(command, cwd=ROOT) as process, anyio.create_task_group() as tg:
        tg.start_soon(read, process)
        with anyio.fail_after(60):
            await pending.wait()
        assert process.returncode is None
        process.send_signal(signal.SIGKILL)
        await process.wait()
    assert process.returncode == -signal.SIGKILL
    return lines


def results(messages: tuple[al.AgentMessage, ...] | list[al.AgentMessage]) -> dict[str, tuple[str, bool]]:
    out = {}
    for message in messages:
        if isinstance(message, al.ToolResultMessage):
            text = message.content[0]
            assert isinstance(text, al.TextContent)
            out[message.tool_call_id] = (text.text, message.is_error)
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("answer", ["edited", "denied"])
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_pending_approval_is_answered_by_a_new_process(
    anyio_backend: object, kind: str, answer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]  # type: ignore[index]
    log = tmp_path / "deleted.log"
    monkeypatch.setenv(LOG, str(log))
    async with make_store(kind, tmp_path) as store:
        info = await store.create(agent=al.Agent(model=MODEL, tools=TOOLS))
        path = tmp_path / "sessions.db" if kind == "sqlite" else tmp_path / "sessions"
        command = [sys.executable, "-m", "tests.sessions.approval_child", kind, str(path), info.id, str(backend)]
        lines = await kill_when_pending(command)
        assert lines == ["pending c2"]
        assert not log.exists()  # the call waited: the tool did not run

        # A new process (this one): list the pending call from the session, answer it.
        async with store.open(info.id) as session:
            [request] = session.pending_approvals
            assert (request.tool_call_id, request.tool_name, dict(request.arguments)) == (
                "c2",
                "delete",
                {"path": "old.txt"},
            )
            agent = await session.resume(al.Agent(tools=TOOLS, needs_approval=["delete"]))
            assert agent.pending_approvals == [request]
            with pytest.raises(ValueError, match="edited arguments of tool call 'c2' are invalid"):
                await agent.approve("c2", arguments={"path": ["not", "a", "str"]})
            with pytest.raises(ValueError, match="answer them first"):
                await agent.continue_()
            if answer == "edited":
                await agent.approve("c2", arguments={"path": "older.txt"})
            else:
                await agent.approve("c2", False, "keep it")
            assert agent.pending_approvals == [] and session.pending_approvals == []

        # The answer is stored: another agent, later, runs the call and finishes the run.
        async with store.open(info.id) as session:
            agent = await session.resume(al.Agent(tools=TOOLS, stream_fn=ScriptedModel(["Tidied."])))
            await agent.continue_()
            assert agent.state.error_message is None
            check_transcript(agent.state.messages, complete=True)
        data = await store.load(info.id)
        assert data.messages == tuple(agent.state.messages)
        assert "approvals" not in (await store.load(info.id)).info.settings.to_json()
        c1 = (INTERRUPTED_TOOL_TEXT, True)  # the parallel batch had not started when it was killed
        if answer == "edited":
            assert results(data.messages) == {"c1": c1, "c2": ("deleted older.txt", False)}
            assert [json.loads(line) for line in log.read_text().splitlines()] == [
                {"pid": os.getpid(), "path": "older.txt"}
            ]
        else:
            assert results(data.messages) == {"c1": c1, "c2": ("keep it", True)}
            assert not log.exists()
        last = data.messages[-1]
        assert isinstance(last, al.AssistantMessage) and last.content == (al.TextContent("Tidied."),)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_waiting_call_is_stored_until_it_is_answered(
    anyio_backend: object, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG, str(tmp_path / "deleted.log"))
    stored: list[list[str]] = []
    async with make_store(kind, tmp_path) as store:
        info = await store.create(agent=al.Agent(model=MODEL, tools=TOOLS))
        async with store.open(info.id) as session:

            async def answer(request: ApprovalRequest) -> None:
                stored.append([r.tool_call_id for r in session.pending_approvals])
                await agent.approve(request.tool_call_id)
                stored.append([r.tool_call_id for r in session.pending_approvals])

            model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "delete", {"path": "a"})]), "Done."])
            agent = al.Agent(
                model=MODEL, tools=TOOLS, stream_fn=model, needs_approval=["delete"], on_approval_request=answer
            )
            await session.attach(agent)
            await agent.prompt("Tidy up.")
            assert session.pending_approvals == []
        assert stored == [["c1"], []]
        assert results((await store.load(info.id)).messages) == {"c1": ("deleted a", False)}
