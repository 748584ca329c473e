"""The process the approval test kills: an Agent recording into a session, stopped at a call
that waits for approval.

    python -m tests.sessions.approval_child KIND PATH SESSION_ID ANYIO_BACKEND

It prompts the agent: the model asks for `look` (no approval needed) and `delete` (approval
needed) in one batch; it prints `pending CALL_ID` once the call waits (and is stored), then
waits for ever: the test kills it with SIGKILL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from agentloop.approvals import ApprovalRequest
from agentloop.sessions import JSONLSessionStore, SessionStore, SQLiteSessionStore, open_agent
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

from .approval_tools import TOOLS
from .helpers import MODEL


async def main(kind: str, path: str, session_id: str) -> None:
    store: SessionStore = SQLiteSessionStore(path) if kind == "sqlite" else JSONLSessionStore(Path(path))
    model = ScriptedModel(
        [
            Response(
                content=[
                    ScriptedToolCall("c1", "look", {"path": "notes.txt"}),
                    ScriptedToolCall("c2", "delete", {"path": "old.txt"}),
                ]
            )
        ]
    )

    def report(request: ApprovalRequest) -> None:
        print(f"pending {request.tool_call_id}", flush=True)

    async with (
        store,
        open_agent(
            store,
            session_id,
            model=MODEL,
            tools=TOOLS,
            stream_fn=model,
            needs_approval=["delete"],
            on_approval_request=report,
        ) as agent,
    ):
        await agent.prompt("Tidy up.")
        raise SystemExit(f"the run ended: {agent.state.messages[-1]}")


if __name__ == "__main__":
    kind, path, session_id, backend = sys.argv[1:5]
    anyio.run(main, kind, path, session_id, backend=backend)
