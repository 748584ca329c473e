"""Two of issue 16's smaller items that live in core files (`_execution.py`, `_stream.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

MODEL = al.Model(id="scripted", api="scripted", provider="test")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be shown")


async def test_a_tool_exception_whose_str_raises_becomes_an_error_result(anyio_backend: object) -> None:
    @al.tool
    async def odd() -> str:
        """Fail oddly."""
        raise Unprintable

    model = ScriptedModel([Response(content=[ScriptedToolCall("c1", "odd", {})]), "done"])
    context = al.AgentContext(tools=[odd])
    config = al.AgentLoopConfig(model=MODEL)
    with anyio.fail_after(10):
        async with al.agent_loop([al.UserMessage(content="go")], context, config, stream_fn=model) as events:
            seen = [event async for event in events]
    ends = [e for e in seen if isinstance(e, al.ToolExecutionEnd)]
    assert len(ends) == 1 and ends[0].is_error
    assert seen[-1].type == "agent_end"


async def test_the_consumers_exception_wins_over_a_failing_stream_cleanup(anyio_backend: object) -> None:
    async def stream(model: al.Model, context: Any, options: al.StreamOptions) -> AsyncIterator[Any]:
        builder = al.AssistantMessageBuilder(api="scripted", provider="test", model="scripted")
        try:
            yield builder.start()
            await anyio.sleep(10)
        finally:
            raise RuntimeError("the stream's cleanup failed")

    config = al.AgentLoopConfig(model=MODEL)
    with anyio.fail_after(10), pytest.raises(KeyError) as caught:
        async with al.agent_loop([al.UserMessage(content="go")], al.AgentContext(), config, stream_fn=stream) as events:
            async for event in events:
                if event.type == "message_start" and event.message.role == "assistant":
                    raise KeyError("the consumer's own")
    assert "the stream's cleanup failed" in repr(caught.value.__context__)
