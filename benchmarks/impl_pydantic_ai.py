"""pydantic-ai-slim workloads, driven through `FunctionModel(stream_function=...)`.

The stream function yields text chunks and `DeltaToolCall`s; pydantic-ai's own streamed response
(`FunctionStreamedResponse` and its parts manager) keeps the partial response up to date and makes
the native events. Nothing is awaited between deltas. The turn number is read from the last tool
return of the transcript. One `Agent` definition per process (fairness rule 5); the consumer is
`run_stream_events`. Tools are `async def` (a plain `def` tool would run in a worker thread).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import UsageLimits

BACKENDS = ("asyncio",)
DELTA = "abc "
W2_TURNS_FOR_W6 = 20
NO_LIMITS = UsageLimits(request_limit=None, tool_calls_limit=None)


def turn_number(messages: list[ModelMessage]) -> int:
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest):
        for part in reversed(last.parts):
            if isinstance(part, ToolReturnPart):
                call_id = part.tool_call_id
                return int(call_id[1 : call_id.index("_")]) + 1
    return 0


def scripted_model(*, deltas: int = 1, turns: int = 0, calls: int = 1, tool: str = "ok") -> FunctionModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        turn = turn_number(messages)
        if turn < turns:
            for j in range(calls):
                yield {j: DeltaToolCall(name=tool, json_args="{}", tool_call_id=f"c{turn}_{j}")}
        else:
            for _ in range(deltas):
                yield DELTA

    return FunctionModel(stream_function=stream)


async def ok() -> str:
    """Returns ok."""
    return "ok"


async def ok_checkpoint() -> str:
    """Returns ok."""
    await asyncio.sleep(0)
    return "ok"


async def sleep() -> str:
    """Sleeps 10 ms."""
    await asyncio.sleep(0.01)
    return "ok"


@functools.cache
def agent(tool: str | None) -> Agent[None, str]:
    """One Agent definition per process and tool set; the model is given per run."""
    tools = {"ok": [ok], "ok_checkpoint": [ok_checkpoint], "sleep": [sleep], None: []}[tool]
    return Agent(tools=tools)  # type: ignore[arg-type]


async def _consume(model: FunctionModel, tool: str | None, kinds: tuple[type, ...], history: Any = None) -> int:
    seen = 0
    async with agent(tool).run_stream_events(
        "go", model=model, usage_limits=NO_LIMITS, message_history=history
    ) as events:
        async for event in events:
            if type(event) in kinds:
                seen += 1
    return seen


async def w1_loop(n: int) -> int:
    return await _consume(scripted_model(deltas=n), None, (PartStartEvent, PartDeltaEvent))


async def w1_model(n: int) -> int:
    model = scripted_model(deltas=n)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")])]
    seen = 0
    async with model.request_stream(messages, None, ModelRequestParameters()) as response:
        async for event in response:
            if type(event) in (PartStartEvent, PartDeltaEvent):
                seen += 1
    return seen


async def w2_turns(turns: int) -> int:
    return await _consume(scripted_model(turns=turns), "ok", (FunctionToolResultEvent,))


async def w3_parallel(calls: int) -> int:
    return await _consume(scripted_model(turns=1, calls=calls, tool="sleep"), "sleep", (FunctionToolResultEvent,))


async def w4_agents(agents: int) -> int:
    model = scripted_model(turns=5, tool="ok_checkpoint")
    results = await asyncio.gather(
        *(_consume(model, "ok_checkpoint", (FunctionToolResultEvent,)) for _ in range(agents))
    )
    return sum(1 for r in results if r == 5)


@functools.cache
def transcript(length: int) -> tuple[ModelMessage, ...]:
    out: list[ModelMessage] = []
    for i in range(length):
        if i % 2 == 0:
            out.append(ModelRequest(parts=[UserPromptPart(f"question {i}")]))
        else:
            out.append(ModelResponse(parts=[TextPart(f"answer {i}")]))
    return tuple(out)


async def w6_transcript(length: int) -> int:
    history = list(transcript(length))
    if history and isinstance(history[-1], ModelRequest):
        history.pop()  # the history must end with a response before a new prompt
    return await _consume(scripted_model(turns=W2_TURNS_FOR_W6), "ok", (FunctionToolResultEvent,), history) + 1


WORKLOADS = {
    "w1_loop": w1_loop,
    "w1_model": w1_model,
    "w2_turns": w2_turns,
    "w3_parallel": w3_parallel,
    "w4_agents": w4_agents,
    "w6_transcript": w6_transcript,
}
