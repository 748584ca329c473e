"""pi-ai-python 1.7.0 workloads (module `pi_agent`), driven through its stream-function hook.

The scripted model does what pi's own providers do (`pi_ai/api/openai_completions.py`): it
returns an `AssistantMessageEventStream` whose producer task pushes pi's native events, growing
one mutable partial `AssistantMessage` in place (`append_text`, the linear append) and pushing it
with every event, without awaiting between deltas. Like the agentloop model it is stateless: the
turn number is read from the last tool result of the transcript it is given.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

from pi_agent import (
    Agent,
    AgentContext,
    AgentInitialState,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    TurnEndEvent,
    agent_loop,
    default_convert_to_llm,
)
from pi_ai import (
    AssistantMessage,
    AssistantMessageEventStream,
    DoneEvent,
    Model,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TranscriptContext,
    Usage,
    UserMessage,
)
from pi_ai.utils.text import append_text

BACKENDS = ("asyncio",)
MODEL = Model(
    id="scripted",
    name="scripted",
    api="scripted",
    provider="bench",
    base_url="",
    reasoning=False,
    input=["text"],
    context_window=0,
    max_tokens=0,
)
DELTA = "abc "
W2_TURNS_FOR_W6 = 20


def turn_number(messages: Sequence[Any]) -> int:
    last = messages[-1] if messages else None
    if getattr(last, "role", None) == "toolResult":
        call_id: str = last.tool_call_id
        return int(call_id[1 : call_id.index("_")]) + 1
    return 0


def scripted_model(*, deltas: int = 1, turns: int = 0, calls: int = 1, tool: str = "ok"):
    def stream(model: Model, context: TranscriptContext, options: Any) -> AssistantMessageEventStream:
        out = AssistantMessageEventStream()

        async def run() -> None:
            output = AssistantMessage(
                [], api=model.api, provider=model.provider, model=model.id, usage=Usage(), stop_reason="pending"
            )
            turn = turn_number(context.messages)
            out.push(StartEvent(output))
            if turn < turns:
                for j in range(calls):
                    call_id = f"c{turn}_{j}"
                    block = ToolCall(call_id, tool, {})
                    output.content.append(block)
                    index = len(output.content) - 1
                    out.push(ToolCallStartEvent(index, output))
                    out.push(ToolCallDeltaEvent(index, "{}", output))
                    block.arguments = {}
                    out.push(ToolCallEndEvent(index, block, output))
                output.stop_reason = "toolUse"
            else:
                block = TextContent("")
                output.content.append(block)
                index = len(output.content) - 1
                out.push(TextStartEvent(index, output))
                push = out.push
                for _ in range(deltas):
                    append_text(block, DELTA)
                    push(TextDeltaEvent(index, DELTA, output))
                out.push(TextEndEvent(index, block.text, output))
                output.stop_reason = "stop"
            out.push(DoneEvent(output.stop_reason, output))
            out.end()

        out.start(run())
        return out

    return stream


# --- tools -----------------------------------------------------------------------------------

_EMPTY_SCHEMA = {"type": "object", "properties": {}}


async def _ok(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
    return AgentToolResult([TextContent("ok")])


async def _ok_checkpoint(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
    await asyncio.sleep(0)
    return AgentToolResult([TextContent("ok")])


async def _sleep(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
    await asyncio.sleep(0.01)
    return AgentToolResult([TextContent("ok")])


OK = AgentTool(name="ok", description="Returns ok.", parameters=_EMPTY_SCHEMA, execute=_ok)
OK_CHECKPOINT = AgentTool(name="ok", description="Returns ok.", parameters=_EMPTY_SCHEMA, execute=_ok_checkpoint)
SLEEP = AgentTool(name="sleep", description="Sleeps 10 ms.", parameters=_EMPTY_SCHEMA, execute=_sleep)
CONFIG = AgentLoopConfig(model=MODEL, convert_to_llm=default_convert_to_llm)


# --- the consumers ---------------------------------------------------------------------------


async def _consume(stream_fn: Any, tools: Sequence[Any], kind: type, messages: Sequence[Any] = ()) -> int:
    context = AgentContext(messages=list(messages), tools=list(tools))
    seen = 0
    async for event in agent_loop([UserMessage("go")], context, CONFIG, stream_fn=stream_fn):
        if type(event) is kind:
            seen += 1
    return seen


async def w1_loop(n: int) -> int:
    return await _consume(scripted_model(deltas=n), (), MessageUpdateEvent) - 2


async def w1_agent(n: int) -> int:
    seen = 0

    def listener(event: Any, signal: Any) -> None:
        nonlocal seen
        if type(event) is MessageUpdateEvent:
            seen += 1

    agent = Agent(initial_state=AgentInitialState(model=MODEL), stream_fn=scripted_model(deltas=n))
    agent.subscribe(listener)
    await agent.prompt("go")
    return seen - 2


async def w1_model(n: int) -> int:
    stream = scripted_model(deltas=n)(MODEL, TranscriptContext([UserMessage("go")]), {})
    seen = 0
    async for event in stream:
        if type(event) is TextDeltaEvent:
            seen += 1
    return seen


async def w2_turns(turns: int) -> int:
    return await _consume(scripted_model(turns=turns), (OK,), TurnEndEvent) - 1


async def w3_parallel(calls: int) -> int:
    return await _consume(scripted_model(turns=1, calls=calls, tool="sleep"), (SLEEP,), ToolExecutionEndEvent)


async def w4_agents(agents: int) -> int:
    stream_fn = scripted_model(turns=5)
    done = 0

    def listener(event: Any, signal: Any) -> None:
        nonlocal done
        if type(event) is TurnEndEvent:
            done += 1

    async def one() -> None:
        agent = Agent(initial_state=AgentInitialState(model=MODEL, tools=[OK_CHECKPOINT]), stream_fn=stream_fn)
        agent.subscribe(listener)
        await agent.prompt("go")

    await asyncio.gather(*(one() for _ in range(agents)))
    return done // 6


async def w4_loops(agents: int) -> int:
    stream_fn = scripted_model(turns=5)
    done = 0

    async def one() -> None:
        nonlocal done
        seen = await _consume(stream_fn, (OK_CHECKPOINT,), TurnEndEvent)
        done += seen

    await asyncio.gather(*(one() for _ in range(agents)))
    return done // 6


@functools.cache
def transcript(length: int) -> tuple[Any, ...]:
    out: list[Any] = []
    for i in range(length):
        if i % 2 == 0:
            out.append(UserMessage(f"question {i}"))
        else:
            out.append(
                AssistantMessage([TextContent(f"answer {i}")], api="scripted", provider="bench", model="scripted")
            )
    return tuple(out)


async def w6_transcript(length: int) -> int:
    return await _consume(scripted_model(turns=W2_TURNS_FOR_W6), (OK,), TurnEndEvent, transcript(length))


WORKLOADS = {
    "w1_loop": w1_loop,
    "w1_agent": w1_agent,
    "w1_model": w1_model,
    "w2_turns": w2_turns,
    "w3_parallel": w3_parallel,
    "w4_agents": w4_agents,
    "w4_loops": w4_loops,
    "w6_transcript": w6_transcript,
}
