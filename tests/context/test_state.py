"""A compactor's state saved beside a session and restored after the session is reloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentloop as al
from agentloop.context import Compaction, CompactionState
from agentloop.sessions import JSONLSessionStore, SessionStore, SQLiteSessionStore, open_agent

from .windowed import WindowedModel, text_of

pytestmark = pytest.mark.anyio


@al.tool
async def read(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line\n" * 600


def answer(model: list[WindowedModel]) -> WindowedModel:
    def reply(context: al.Context) -> al.AssistantMessage:
        n = len(model[0].requests)
        if n <= 20:
            return al.AssistantMessage(content=(al.ToolCall(f"c{n}", "read", {"path": f"f{n}.py"}),))
        return al.AssistantMessage(content=(al.TextContent("done"),))

    model.append(WindowedModel(reply, window=8192))
    return model[0]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_reloaded_session_with_the_saved_state_gives_the_model_the_same_context(
    kind: str, tmp_path: Path
) -> None:
    store: SessionStore = SQLiteSessionStore(tmp_path / "s.db") if kind == "sqlite" else JSONLSessionStore(tmp_path)
    settings = Compaction(reserve_tokens=2048, keep_recent_tokens=3000)
    model = answer([])
    async with store:
        async with open_agent(store, model=model.model, tools=[read], stream_fn=model) as agent:
            compactor = settings.attach(agent)
            await agent.prompt("Read the files.")
            state = compactor.state
            assert state is not None and state.first_kept_index > 0
            saved = json.dumps(state.to_json())  # kept beside the session (a file, a column of your own)
            before = compactor.context()
            usage = compactor.usage()
        (info,) = await store.list()
        async with open_agent(store, info.id, model=model.model, tools=[read], stream_fn=model) as reloaded:
            restored = settings.attach(reloaded)
            restored.restore(CompactionState.from_json(json.loads(saved)))
            after = restored.context()
            assert after[1:] == before[1:] and text_of(after[0]) == text_of(before[0])  # type: ignore[arg-type]
            assert restored.usage() == usage and restored.state == state
            assert len(reloaded.state.messages) == len(agent.state.messages)  # the history stays readable
            await reloaded.prompt("And the last one?")
            assert text_of(model.requests[-1].messages[0]).startswith("The conversation history before this point")


async def test_a_state_that_does_not_fit_the_transcript_is_refused() -> None:
    agent = al.Agent(messages=[al.UserMessage(content="a"), al.UserMessage(content="b")])
    compactor = Compaction().attach(agent)
    assert compactor.state is None
    with pytest.raises(ValueError, match="first_kept_index must be an index of the agent's 2 messages"):
        compactor.restore(CompactionState("s", 2, 2))
    with pytest.raises(ValueError, match="freshFromIndex must be an int >= 0"):
        CompactionState.from_json({"summary": "s", "firstKeptIndex": 1, "freshFromIndex": -1})
    compactor.restore(CompactionState("s", 1, 2))
    assert [text_of(m) for m in compactor.context()][1:] == ["b"]  # type: ignore[arg-type]
