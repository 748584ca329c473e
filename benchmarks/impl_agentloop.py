"""agentloop workloads: the scripted model and one async function per workload.

Every workload function takes its size and returns how many items the consumer saw (text deltas,
turns, tool results...), which the runner checks against the size. The scripted model builds its
events with `AssistantMessageBuilder`, as the providers do: the partial message is kept up to date
for every delta, nothing is awaited between deltas, and the turn number is read from the
transcript it is given (the id of the last tool result), never from state of its own.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence

import anyio
import anyio.lowlevel

from agentloop import (
    AbortSignal,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    AssistantMessageBuilder,
    AssistantMessageEvent,
    Context,
    MessageUpdate,
    Model,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    ToolCall,
    ToolExecutionEnd,
    TurnEnd,
    UserMessage,
    agent_loop,
)

BACKENDS = ("asyncio", "trio")
MODEL = Model(id="scripted", name="scripted", api="scripted", provider="bench")
DELTA = "abc "
W2_TURNS_FOR_W6 = 20


# --- the scripted model ----------------------------------------------------------------------


def turn_number(messages: Sequence[object]) -> int:
    """The turn the model is asked for: 0 after the prompt, k + 1 after the results of turn k."""
    last = messages[-1] if messages else None
    if getattr(last, "role", None) == "toolResult":
        call_id: str = last.tool_call_id  # type: ignore[union-attr]
        return int(call_id[1 : call_id.index("_")]) + 1
    return 0


def scripted_model(*, deltas: int = 1, turns: int = 0, calls: int = 1, tool: str = "ok"):
    """A stream function: `turns` turns of `calls` tool calls, then a text of `deltas` deltas."""

    async def stream(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
        builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        turn = turn_number(context.messages)
        yield builder.start()
        if turn < turns:
            for j in range(calls):
                call_id = f"c{turn}_{j}"
                yield builder.tool_call_start(call_id, tool)
                yield builder.tool_call_delta("{}", {})
                yield builder.tool_call_end(ToolCall(call_id, tool, {}))
            yield builder.done("toolUse")
        else:
            yield builder.text_start()
            text_delta = builder.text_delta
            for _ in range(deltas):
                yield text_delta(DELTA)
            yield builder.text_end()
            yield builder.done("stop")

    return stream


# --- tools -----------------------------------------------------------------------------------

_EMPTY_SCHEMA = {"type": "object", "properties": {}}


async def _ok(tool_call_id: str, params: object, signal: AbortSignal, on_update: object) -> AgentToolResult:
    return AgentToolResult.from_text("ok")


async def _ok_checkpoint(tool_call_id: str, params: object, signal: AbortSignal, on_update: object) -> AgentToolResult:
    await anyio.lowlevel.checkpoint()
    return AgentToolResult.from_text("ok")


async def _sleep(tool_call_id: str, params: object, signal: AbortSignal, on_update: object) -> AgentToolResult:
    await anyio.sleep(0.01)
    return AgentToolResult.from_text("ok")


OK = AgentTool(name="ok", description="Returns ok.", parameters=_EMPTY_SCHEMA, execute=_ok)
OK_CHECKPOINT = AgentTool(name="ok", description="Returns ok.", parameters=_EMPTY_SCHEMA, execute=_ok_checkpoint)
SLEEP = AgentTool(name="sleep", description="Sleeps 10 ms.", parameters=_EMPTY_SCHEMA, execute=_sleep)
CONFIG = AgentLoopConfig(model=MODEL)


# --- the consumers ---------------------------------------------------------------------------


async def _consume(stream_fn: object, tools: Sequence[AgentTool], kind: type, messages: Sequence[object] = ()) -> int:
    """Run `agent_loop` and count the events of `kind` (the consumer's trivial work)."""
    context = AgentContext(messages=tuple(messages), tools=tuple(tools))  # type: ignore[arg-type]
    seen = 0
    async with agent_loop([UserMessage(content="go")], context, CONFIG, stream_fn=stream_fn) as events:  # type: ignore[arg-type]
        async for event in events:
            if type(event) is kind:
                seen += 1
    return seen


async def _consume_bare(stream_fn: object, tools: Sequence[AgentTool], kind: type) -> int:
    """The same consumer through a bare `async for event in agent_loop(...)`."""
    context = AgentContext(tools=tuple(tools))
    seen = 0
    async for event in agent_loop([UserMessage(content="go")], context, CONFIG, stream_fn=stream_fn):  # type: ignore[arg-type]
        if type(event) is kind:
            seen += 1
    return seen


async def w1_bare(n: int) -> int:
    """W1b: W1 consumed bare."""
    return await _consume_bare(scripted_model(deltas=n), (), MessageUpdate) - 2


async def w2_bare(turns: int) -> int:
    """W2b: W2 consumed bare."""
    return await _consume_bare(scripted_model(turns=turns), (OK,), TurnEnd) - 1


async def w1_loop(n: int) -> int:
    """W1: one answer of `n` deltas; the `agent_loop` consumer counts its `message_update`s."""
    updates = await _consume(scripted_model(deltas=n), (), MessageUpdate)
    return updates - 2  # text_start and text_end are updates too


async def w1_agent(n: int) -> int:
    """W1: the same answer seen by an `Agent` listener."""
    seen = 0

    def listener(event: object, signal: AbortSignal) -> None:
        nonlocal seen
        if type(event) is MessageUpdate:
            seen += 1

    agent = Agent(model=MODEL, stream_fn=scripted_model(deltas=n))
    agent.subscribe(listener)
    await agent.prompt("go")
    return seen - 2


async def w1_model(n: int) -> int:
    """W1m: the scripted model iterated alone."""
    stream = scripted_model(deltas=n)
    context = Context(messages=(UserMessage(content="go"),))
    options = StreamOptions(signal=AbortSignal())
    seen = 0
    async for event in stream(MODEL, context, options):
        if type(event) is TextDeltaEvent:
            seen += 1
    return seen


async def w2_turns(turns: int) -> int:
    """W2: `turns` turns of one "ok" tool call, then a text turn; counts `turn_end`s."""
    return await _consume(scripted_model(turns=turns), (OK,), TurnEnd) - 1


async def w3_parallel(calls: int) -> int:
    """W3: one turn of `calls` tool calls that each sleep 10 ms; counts `tool_execution_end`s."""
    return await _consume(scripted_model(turns=1, calls=calls, tool="sleep"), (SLEEP,), ToolExecutionEnd)


async def w4_agents(agents: int) -> int:
    """W4: `agents` Agents at once, 5 tool turns each (the tool yields once so they interleave)."""
    stream_fn = scripted_model(turns=5)
    done = 0

    def listener(event: object, signal: AbortSignal) -> None:
        nonlocal done
        if type(event) is TurnEnd:
            done += 1

    async def one() -> None:
        agent = Agent(model=MODEL, tools=[OK_CHECKPOINT], stream_fn=stream_fn)
        agent.subscribe(listener)
        await agent.prompt("go")

    async with anyio.create_task_group() as tg:
        for _ in range(agents):
            tg.start_soon(one)
    return done // 6


async def w4_loops(agents: int) -> int:
    """W4l: `agents` `agent_loop` runs at once, 5 tool turns each, each read by `async with ... async for`."""
    stream_fn = scripted_model(turns=5)
    done = 0

    async def one() -> None:
        nonlocal done
        seen = await _consume(stream_fn, (OK_CHECKPOINT,), TurnEnd)
        done += seen

    async with anyio.create_task_group() as tg:
        for _ in range(agents):
            tg.start_soon(one)
    return done // 6


@functools.cache
def transcript(length: int) -> tuple[object, ...]:
    """A pre-filled conversation of `length` messages (questions and answers), built once."""
    out: list[object] = []
    for i in range(length):
        if i % 2 == 0:
            out.append(UserMessage(content=f"question {i}"))
        else:
            out.append(
                AssistantMessage(
                    content=(TextContent(f"answer {i}"),), api="scripted", provider="bench", model="scripted"
                )
            )
    return tuple(out)


async def w6_transcript(length: int) -> int:
    """W6: W2 with 20 turns after a pre-filled transcript of `length` messages."""
    stream_fn = scripted_model(turns=W2_TURNS_FOR_W6)
    return await _consume(stream_fn, (OK,), TurnEnd, transcript(length))


WORKLOADS = {
    "w1_loop": w1_loop,
    "w1_agent": w1_agent,
    "w1_model": w1_model,
    "w1_bare": w1_bare,
    "w2_turns": w2_turns,
    "w2_bare": w2_bare,
    "w3_parallel": w3_parallel,
    "w4_agents": w4_agents,
    "w4_loops": w4_loops,
    "w6_transcript": w6_transcript,
}
