"""The process the compaction crash test kills: an agent whose context is compacted again and
again, recording into a session.

    python -m tests.sessions.compaction_child KIND PATH SESSION_ID ANYIO_BACKEND

It resumes the session with its compactor (the latest stored compaction restored), prints
`ready`, then runs prompt after prompt of large tool results against a model with a 2,048-token
window, printing `compacting N` when a compaction starts and `compacted N` once it is stored. It
never stops by itself: the test kills it with SIGKILL.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import anyio

import agentloop as al
from agentloop.context import Compaction, CompactionEnd, CompactionEvent
from agentloop.sessions import JSONLSessionStore, SessionStore, SQLiteSessionStore

from ..context.windowed import WindowedModel

_IDS = itertools.count()
STEPS = 6
"""Tool calls per prompt before the model answers in words."""


@al.tool
async def read(path: str) -> str:
    """Read a file."""
    return f"{path}:\n" + "line of code\n" * 60  # about 220 of the model's tokens


def answer(context: al.Context) -> al.AssistantMessage:
    calls = 0
    for message in reversed(context.messages):
        if isinstance(message, al.UserMessage):
            break
        calls += isinstance(message, al.AssistantMessage)
    if calls < STEPS:
        call = al.ToolCall(f"p{os.getpid()}-{next(_IDS)}", "read", {"path": f"src/f{calls}.py"})
        return al.AssistantMessage(content=(al.TextContent("Reading."), call))
    return al.AssistantMessage(content=(al.TextContent("Done reading."),))


async def main(kind: str, path: str, session_id: str) -> None:
    store: SessionStore = SQLiteSessionStore(path) if kind == "sqlite" else JSONLSessionStore(Path(path))
    model = WindowedModel(answer, window=2048)
    async with store, store.open(session_id) as session:
        agent = al.Agent(model=model.model, system_prompt="You read files.", tools=[read], stream_fn=model)
        compactor = Compaction(reserve_tokens=400, keep_recent_tokens=500).attach(agent)
        await session.resume(agent, compactor=compactor)
        count = 0

        def report(event: CompactionEvent) -> None:
            nonlocal count
            if isinstance(event, CompactionEnd):
                print(f"compacted {count}", flush=True)
            else:
                count += 1
                print(f"compacting {count}", flush=True)

        compactor.subscribe(report)  # after the session's listener: printed once stored
        print(f"ready {len(agent.state.messages)}", flush=True)
        step = 0
        while True:
            step += 1
            messages = agent.state.messages
            if messages and messages[-1].role != "assistant":
                await agent.continue_()
            else:
                await agent.prompt(f"Read the files, step {step}.")
            if agent.state.error_message:
                raise SystemExit(f"run failed: {agent.state.error_message}")


if __name__ == "__main__":
    kind, path, session_id, backend = sys.argv[1:5]
    anyio.run(main, kind, path, session_id, backend=backend)
