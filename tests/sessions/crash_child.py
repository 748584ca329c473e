"""The process the durability test kills: an Agent recording into a session, run after run.

    python -m tests.sessions.crash_child KIND PATH SESSION_ID ANYIO_BACKEND

It resumes the session (repairing what the last kill left), prints `ready`, then prompts the
agent step after step, printing `ended N` once message N is stored (its listener runs after
the session's). It never stops by itself: the test kills it with SIGKILL.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

import agentloop as al
from agentloop.sessions import JSONLSessionStore, SessionStore, SQLiteSessionStore, open_agent
from agentloop.testing import ScriptedModel

from .helpers import TOOLS, step_script


async def main(kind: str, path: str, session_id: str) -> None:
    store: SessionStore = SQLiteSessionStore(path) if kind == "sqlite" else JSONLSessionStore(Path(path))
    async with store, open_agent(store, session_id, tools=TOOLS) as agent:

        def report(event: al.AgentEvent, signal: al.AbortSignal) -> None:
            if isinstance(event, al.MessageEnd):
                print(f"ended {len(agent.state.messages) - 1}", flush=True)

        agent.subscribe(report)
        print(f"ready {len(agent.state.messages)}", flush=True)
        step = len(agent.state.messages)
        while True:
            step += 1
            agent.stream_fn = ScriptedModel(step_script(step, prefix=f"p{os.getpid()}"))
            messages = agent.state.messages
            if messages and messages[-1].role != "assistant":
                await agent.continue_()
            else:
                note = al.CustomMessage(role="note", data={"step": step, "text": "ünïcode ✓"})
                await agent.prompt([note, al.UserMessage(content=f"step {step}")])
            if agent.state.error_message:
                raise SystemExit(f"run failed: {agent.state.error_message}")


if __name__ == "__main__":
    kind, path, session_id, backend = sys.argv[1:5]
    anyio.run(main, kind, path, session_id, backend=backend)
