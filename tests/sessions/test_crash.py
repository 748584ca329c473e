"""Durability: SIGKILL a process in the middle of real runs, many times, and resume each time.

A child process (`crash_child.py`) resumes the session, then runs the agent step after step
(parallel tool calls, streamed chunks with delays, custom messages) and prints `ended N` once
message N is stored. The test kills it with SIGKILL at a random moment (seeded), then checks:

* the session loads: no corrupt record (a torn last line is allowed, and counted);
* the transcript is a valid prefix: every tool result answers a call of the response before it,
  exactly once;
* nothing the child reported as stored is missing (a crash loses at most the message in flight);
* the run continues: every few kills the test itself resumes the session and runs it to a
  complete transcript; every child start is a resume too.

`AGENTLOOP_CRASH_KILLS` sets the number of kills per test (default 15; 4 tests).
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import anyio
import pytest

import agentloop as al
from agentloop.sessions import SessionCorruptError, open_agent
from agentloop.testing import ScriptedModel

from .helpers import MODEL, TOOLS, Child, check_transcript, kill_child, make_store

KILLS = int(os.environ.get("AGENTLOOP_CRASH_KILLS", "15"))

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def stored(child: Child) -> int:
    """How many messages the child knew were stored (its last `ended N` plus one)."""
    return max([n + 1 for n in child.numbers("ended")] + child.numbers("ready") + [0])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_sigkill_at_random_points(anyio_backend: object, kind: str, tmp_path: Path) -> None:
    backend_name = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]  # type: ignore[index]
    rng = random.Random(f"crash-{kind}-{backend_name}")
    figures = {"kills": 0, "resumes": 0, "continued_runs": 0, "corrupt": 0, "torn_tails": 0, "max_messages": 0}
    with anyio.fail_after(240):
        async with make_store(kind, tmp_path) as store:
            agent = al.Agent(model=MODEL, system_prompt="Durable.", tools=TOOLS)
            info = await store.create(agent=agent, title="crash test")
            path = tmp_path / "sessions.db" if kind == "sqlite" else tmp_path / "sessions"
            for i in range(KILLS):
                child_backend = ("asyncio", "trio")[i % 2]
                args = (kind, str(path), info.id, child_backend)
                child = await kill_child("tests.sessions.crash_child", *args, within=30, delay=rng.uniform(0.0, 0.5))
                figures["resumes"] += 1
                figures["kills"] += 1
                if kind == "jsonl":
                    raw = (path / f"{info.id}.jsonl").read_bytes()
                    figures["torn_tails"] += not raw.endswith(b"\n")
                try:
                    data = await store.load(info.id)
                except SessionCorruptError:  # pragma: no cover - what the test is here to catch
                    figures["corrupt"] += 1
                    raise
                check_transcript(data.messages, complete=False)
                assert len(data.messages) >= stored(child), "a message the child saw stored is missing"
                figures["max_messages"] = max(figures["max_messages"], len(data.messages))
                if i % 3 == 2:  # the run continues from here, to a complete transcript
                    async with open_agent(store, info.id, tools=TOOLS, stream_fn=ScriptedModel(["Resumed."])) as agent:
                        figures["resumes"] += 1
                        if agent.state.messages[-1].role == "assistant":
                            await agent.prompt("Go on.")
                        else:
                            await agent.continue_()
                        assert agent.state.error_message is None
                        check_transcript(agent.state.messages, complete=True)
                        figures["continued_runs"] += 1
                    assert (await store.load(info.id)).messages == tuple(agent.state.messages)
    print(f"\ncrash figures [{kind}, parent on {backend_name}]: {figures}")
    assert figures["kills"] == KILLS and figures["corrupt"] == 0
