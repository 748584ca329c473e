"""A compaction is an entry of the session: stored whole, reloaded into the compacted context,
the history kept, and a SIGKILL during a compaction leaves a consistent session."""

from __future__ import annotations

import dataclasses
import os
import random
import re
from pathlib import Path

import anyio
import anyio.abc
import pytest

import agentloop as al
from agentloop._sessions import missing_tool_results
from agentloop.context import Compaction, CompactionEnd, CompactionEvent, Compactor
from agentloop.sessions import SessionStore

from ..context.windowed import WindowedModel, check_pairs, text_of
from .compaction_child import answer, read
from .helpers import check_transcript, kill_child, make_store

KILLS = int(os.environ.get("AGENTLOOP_COMPACTION_KILLS", "10"))
SUMMARY = re.compile(r"## Goal\nsummary #\d+(\n\n<read-files>\n(src/f\d\.py\n)*src/f\d\.py\n</read-files>)?")
"""A whole summary of the windowed model, with the compacted reads' file list."""


@pytest.fixture(params=["sqlite", "jsonl"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def compacting_agent() -> tuple[al.Agent, Compactor, WindowedModel]:
    model = WindowedModel(answer, window=2048)
    agent = al.Agent(model=model.model, system_prompt="You read files.", tools=[read], stream_fn=model)
    return agent, Compaction(reserve_tokens=400, keep_recent_tokens=500).attach(agent), model


def texts(messages: list[al.AgentMessage]) -> list[tuple[str, str]]:
    return [(m.role, text_of(m) if isinstance(m, al.Message) else "") for m in messages]


def check_context(context: list[al.AgentMessage]) -> None:
    """A context a model accepts (once `resume` answered the calls a crash left open): every
    tool call with its result, the summary whole or absent."""
    llm = [m for m in [*context, *missing_tool_results(context)] if isinstance(m, al.Message)]
    check_pairs(al.Context(system_prompt="", messages=tuple(llm)))
    first = text_of(llm[0])
    if first.startswith("The conversation history before this point was compacted"):
        summary = first.split("<summary>\n", 1)[1].rsplit("\n</summary>", 1)[0]
        assert SUMMARY.fullmatch(summary), f"a summary not whole: {summary!r}"
    else:
        assert "<summary>" not in first


async def run_compacted(store: SessionStore) -> tuple[str, al.Agent, Compactor, list[CompactionEvent]]:
    agent, compactor, _ = compacting_agent()
    info = await store.create(agent=agent)
    events: list[CompactionEvent] = []
    async with store.open(info.id) as session:
        await session.attach(agent, compactor=compactor)
        compactor.subscribe(events.append)
        for step in range(3):
            await agent.prompt(f"Read the files, step {step}.")
            assert agent.state.error_message is None
        assert len(session.compactions) == sum(isinstance(e, CompactionEnd) and e.result is not None for e in events)
    return info.id, agent, compactor, events


async def test_a_compaction_is_stored_and_a_reload_rebuilds_the_compacted_context(
    anyio_backend: object, kind: str, tmp_path: Path
) -> None:
    async with make_store(kind, tmp_path) as store:
        session_id, agent, compactor, events = await run_compacted(store)
        results = [e.result for e in events if isinstance(e, CompactionEnd) and e.result is not None]
        assert len(results) >= 3

        data = await store.load(session_id)
        assert data.messages == tuple(agent.state.messages)  # the whole history stays readable
        assert len(data.compactions) == len(results)
        assert [c.summary for c in data.compactions] == [r.summary for r in results]
        assert data.compaction == compactor.state
        assert texts(data.context()) == texts(compactor.context())
        assert len(data.context()) < len(data.messages)
        check_context(data.context())

        # a new process: the session resumed into a new agent and its compactor
        agent2, compactor2, model2 = compacting_agent()
        async with store.open(session_id) as session:
            assert session.compaction == data.compaction
            await session.resume(agent2, compactor=compactor2)
            assert compactor2.summary == compactor.summary
            assert texts(compactor2.context()) == texts(data.context())
            await agent2.prompt("Read the files again.")
            assert agent2.state.error_message is None
        first = model2.requests[0]
        summary = data.context()[0]
        assert isinstance(summary, al.UserMessage)
        assert text_of(first.messages[0]) == text_of(summary)  # the model saw the summary, not the history
        assert len(first.messages) < len(data.messages)
        reloaded = await store.load(session_id)
        assert len(reloaded.compactions) > len(data.compactions)  # the resumed run compacted, recorded too
        check_context(reloaded.context())


async def test_a_replaced_transcript_drops_its_compactions_and_a_fork_keeps_those_it_holds(
    anyio_backend: object, kind: str, tmp_path: Path
) -> None:
    async with make_store(kind, tmp_path) as store:
        session_id, _, _, _ = await run_compacted(store)
        data = await store.load(session_id)
        first, last = data.compactions[0], data.compactions[-1]

        fork = await store.fork(session_id, at=first.fresh_from_index)
        forked = await store.load(fork.id)
        assert forked.compactions and forked.compaction is not None
        assert forked.compaction.fresh_from_index <= first.fresh_from_index < last.fresh_from_index
        check_context(forked.context())
        bare = await store.fork(session_id, at=first.first_kept_index)
        assert (await store.load(bare.id)).compactions == ()

        async with store.open(session_id) as session:
            await session.replace(data.messages[:4])
            assert session.compaction is None
        reloaded = await store.load(session_id)
        assert reloaded.compactions == () and reloaded.context() == list(data.messages[:4])


async def test_a_compaction_that_does_not_fit_the_stored_transcript_is_refused(
    anyio_backend: object, kind: str, tmp_path: Path
) -> None:
    async with make_store(kind, tmp_path) as store:
        session_id, _, compactor, _ = await run_compacted(store)
        state = compactor.state
        assert state is not None
        async with store.open(session_id) as session:
            count = len(session.messages)
            with pytest.raises(ValueError, match="first_kept_index"):
                await session.record_compaction(dataclasses.replace(state, first_kept_index=count))
            with pytest.raises(TypeError, match="state must be a CompactionState"):
                await session.record_compaction(state.to_json())  # type: ignore[arg-type]
            other, other_compactor, _ = compacting_agent()
            del other
            with pytest.raises(ValueError, match="the agent's own"):
                await session.resume(al.Agent(), compactor=other_compactor)


@pytest.mark.timeout(600)
async def test_sigkill_during_compactions_leaves_a_consistent_session(
    anyio_backend: object, kind: str, tmp_path: Path
) -> None:
    backend_name = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]  # type: ignore[index]
    rng = random.Random(f"compaction-crash-{kind}-{backend_name}")
    figures = {"kills": 0, "with_compaction": 0, "without": 0, "compactions_max": 0}
    with anyio.fail_after(540):
        async with make_store(kind, tmp_path) as store:
            agent, _, model = compacting_agent()
            info = await store.create(agent=agent)
            path = tmp_path / "sessions.db" if kind == "sqlite" else tmp_path / "sessions"
            for i in range(KILLS):
                args = (kind, str(path), info.id, ("asyncio", "trio")[i % 2])
                compactions = rng.randint(1, 3)
                delay = rng.uniform(0.0, 0.003)  # somewhere in the compaction
                await kill_child(
                    "tests.sessions.compaction_child", *args, within=60, delay=delay, until=("compacting", compactions)
                )
                figures["kills"] += 1
                data = await store.load(info.id)
                check_transcript(data.messages, complete=False)
                context = data.context()
                if data.compaction is None:
                    figures["without"] += 1
                else:
                    figures["with_compaction"] += 1
                    assert context[1:] == list(data.messages[data.compaction.first_kept_index :])
                check_context(context)
                figures["compactions_max"] = max(figures["compactions_max"], len(data.compactions))
    del model
    print(f"\ncompaction crash figures [{kind}, parent on {backend_name}]: {figures}")
    assert figures["kills"] == KILLS and figures["with_compaction"] > 0
