"""Shared pieces of the session tests: tools, a scripted multi-turn run, a transcript checker."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

import agentloop as al
from agentloop._sessions import JSONLSessionStore, SessionStore, SQLiteSessionStore
from agentloop.testing import Response, ScriptedText, ScriptedThinking, ScriptedToolCall

MODEL = al.Model(id="scripted-1", name="Scripted", api="scripted", provider="test")


@al.tool
async def add(a: int, b: int) -> str:
    """Add two integers (slowly, so a crash can land while it runs)."""
    await anyio.sleep(0.02)
    return str(a + b)


@al.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    await anyio.sleep(0.01)
    return text


TOOLS = [add, echo]


def step_script(step: int, chunk_delay: float = 0.004, prefix: str = "") -> list[Response]:
    """One prompt's worth of responses: parallel tool calls, a second tool turn, a final answer."""
    return [
        Response(
            content=[
                ScriptedThinking(["Let me ", "use ", "the tools."]),
                ScriptedText([f"Step {step}: ", "adding ", "and ", "echoing."]),
                ScriptedToolCall(f"{prefix}s{step}-a", "add", args_chunks=['{"a": ', f"{step}, ", '"b": 2}']),
                ScriptedToolCall(f"{prefix}s{step}-b", "echo", {"text": f"hello {step}"}),
            ],
            chunk_delay=chunk_delay,
        ),
        Response(content=[ScriptedToolCall(f"{prefix}s{step}-c", "echo", {"text": "again"})], chunk_delay=chunk_delay),
        Response(content=[ScriptedText(["All ", "done ", f"with step {step}."])], chunk_delay=chunk_delay),
    ]


def make_store(kind: str, root: Path) -> SessionStore:
    if kind == "sqlite":
        return SQLiteSessionStore(root / "sessions.db")
    return JSONLSessionStore(root / "sessions")


def check_transcript(messages: Sequence[al.AgentMessage], *, complete: bool) -> None:
    """Assert `messages` is a valid transcript (a valid prefix of one when not `complete`).

    Every tool result answers a call of the latest assistant message before it, at most once;
    every call of an assistant message is answered before the next assistant message (and, when
    `complete`, also for the last one).
    """
    open_calls: dict[str, str] = {}
    answered: set[str] = set()
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        assert isinstance(message, (al.UserMessage, al.AssistantMessage, al.ToolResultMessage, al.CustomMessage))
        if isinstance(message, al.AssistantMessage):
            assert not open_calls, f"message {i}: calls {sorted(open_calls)} unanswered before the next response"
            if message.stop_reason not in ("error", "aborted"):
                open_calls = {c.id: c.name for c in message.tool_calls}
                for call_id in open_calls:
                    assert call_id not in seen_ids, f"message {i}: tool call id {call_id!r} reused"
                    seen_ids.add(call_id)
            answered = set()
        elif isinstance(message, al.ToolResultMessage):
            call_id = message.tool_call_id
            assert call_id not in answered, f"message {i}: tool call {call_id!r} answered twice"
            assert call_id in open_calls, f"message {i}: result for unknown or closed call {call_id!r}"
            assert open_calls.pop(call_id) == message.tool_name
            answered.add(call_id)
    if complete:
        assert not open_calls, f"calls {sorted(open_calls)} unanswered at the end"
