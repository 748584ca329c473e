"""A run that never waits (a fast model, instant tools) still lets the other tasks run."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall

MODEL = al.Model(id="m", api="faux", provider="faux")
DELTAS = 1_000


async def instant(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> str:  # noqa: ASYNC124 - an async tool that never waits: the point of the test
    return "ok"


TOOL = al.AgentTool(name="t", description="", parameters={"type": "object"}, execute=instant)


def script(kind: str) -> ScriptedModel:
    if kind == "long answer":
        return ScriptedModel([Response(content=[ScriptedText(["x"] * DELTAS)])])
    turns = [Response(content=[ScriptedToolCall(f"c{i}", "t", {})]) for i in range(60)]
    return ScriptedModel([*turns, "done"])


async def consume(form: str, model: ScriptedModel) -> None:
    prompts = [al.UserMessage(content="go")]
    context = al.AgentContext(tools=[TOOL])
    config = al.AgentLoopConfig(model=MODEL)
    if form == "run_agent_loop":
        await al.run_agent_loop(prompts, context, config, lambda event: None, None, model)
    elif form == "async with":
        async with al.agent_loop(prompts, context, config, None, model) as events:
            async for _event in events:
                pass
    else:
        async for _event in al.agent_loop(prompts, context, config, None, model):
            pass


@pytest.mark.parametrize("kind", ["long answer", "instant tool turns"])
@pytest.mark.parametrize("form", ["run_agent_loop", "async with", "bare"])
async def test_another_task_runs_while_a_run_never_waits(anyio_backend: object, form: str, kind: str) -> None:
    ticks = 0
    done = False

    async def other() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            await anyio.lowlevel.checkpoint()
            before = ticks
            await consume(form, script(kind))
            during = ticks - before
            done = True
    # at least once every 64 steps: a model event read, a tool call (a tool turn is 6 steps)
    assert during >= (DELTAS // 64 if kind == "long answer" else 60 * 6 // 64) - 1, during
