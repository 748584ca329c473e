"""openai-agents workloads, driven through its model hook (a `Model` subclass).

The scripted model streams what the Responses API streams (the SDK's default model): created,
output item added, content part added, one `response.output_text.delta` per chunk, text done,
part done, item done, completed with the final `Response`. Events are built the way the openai
SDK builds parsed stream events (`model_construct`, no validation); the text is accumulated in a
list and joined once. Nothing is awaited between deltas. The turn number is read from the last
`function_call_output` of the input. One `Agent` definition per process; the consumer is
`Runner.run_streamed(...).stream_events()`, tracing off and `max_turns` raised (rule 3).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

BACKENDS = ("asyncio",)
DELTA = "abc "
MAX_TURNS = 1_000_000
set_tracing_disabled(True)


def turn_number(items: Any) -> int:
    if isinstance(items, list) and items:
        last = items[-1]
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            call_id: str = last["call_id"]
            return int(call_id[1 : call_id.index("_")]) + 1
    return 0


def _response(output: list[Any], status: str) -> Response:
    return Response.model_construct(
        id="resp_bench",
        created_at=time.time(),
        model="scripted",
        object="response",
        output=output,
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        status=status,
        usage=None,
    )


class ScriptedModel(Model):
    """`turns` turns of `calls` tool calls, then a text of `deltas` deltas."""

    def __init__(self, *, deltas: int = 1, turns: int = 0, calls: int = 1, tool: str = "ok") -> None:
        self.deltas, self.turns, self.calls, self.tool = deltas, turns, calls, tool

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError("the benchmark streams")

    async def stream_response(  # type: ignore[override]
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        turn = turn_number(input)
        seq = 0
        yield ResponseCreatedEvent.model_construct(
            response=_response([], "in_progress"), sequence_number=seq, type="response.created"
        )
        output: list[Any] = []
        if turn < self.turns:
            for j in range(self.calls):
                call_id = f"c{turn}_{j}"
                item = ResponseFunctionToolCall.model_construct(
                    id=f"fc_{call_id}",
                    call_id=call_id,
                    name=self.tool,
                    arguments="",
                    type="function_call",
                    status="in_progress",
                )
                seq += 1
                yield ResponseOutputItemAddedEvent.model_construct(
                    item=item, output_index=j, sequence_number=seq, type="response.output_item.added"
                )
                seq += 1
                yield ResponseFunctionCallArgumentsDeltaEvent.model_construct(
                    delta="{}",
                    item_id=item.id,
                    output_index=j,
                    sequence_number=seq,
                    type="response.function_call_arguments.delta",
                )
                seq += 1
                yield ResponseFunctionCallArgumentsDoneEvent.model_construct(
                    arguments="{}",
                    item_id=item.id,
                    name=self.tool,
                    output_index=j,
                    sequence_number=seq,
                    type="response.function_call_arguments.done",
                )
                done = ResponseFunctionToolCall.model_construct(
                    id=item.id,
                    call_id=call_id,
                    name=self.tool,
                    arguments="{}",
                    type="function_call",
                    status="completed",
                )
                output.append(done)
                seq += 1
                yield ResponseOutputItemDoneEvent.model_construct(
                    item=done, output_index=j, sequence_number=seq, type="response.output_item.done"
                )
        else:
            item_id = "msg_bench"
            message = ResponseOutputMessage.model_construct(
                id=item_id, content=[], role="assistant", status="in_progress", type="message"
            )
            seq += 1
            yield ResponseOutputItemAddedEvent.model_construct(
                item=message, output_index=0, sequence_number=seq, type="response.output_item.added"
            )
            seq += 1
            yield ResponseContentPartAddedEvent.model_construct(
                content_index=0,
                item_id=item_id,
                output_index=0,
                sequence_number=seq,
                part=ResponseOutputText.model_construct(text="", annotations=[], type="output_text"),
                type="response.content_part.added",
            )
            chunks: list[str] = []
            for _ in range(self.deltas):
                chunks.append(DELTA)
                seq += 1
                yield ResponseTextDeltaEvent.model_construct(
                    content_index=0,
                    delta=DELTA,
                    item_id=item_id,
                    logprobs=[],
                    output_index=0,
                    sequence_number=seq,
                    type="response.output_text.delta",
                )
            text = "".join(chunks)
            part = ResponseOutputText.model_construct(text=text, annotations=[], type="output_text")
            seq += 1
            yield ResponseTextDoneEvent.model_construct(
                content_index=0,
                item_id=item_id,
                logprobs=[],
                output_index=0,
                sequence_number=seq,
                text=text,
                type="response.output_text.done",
            )
            seq += 1
            yield ResponseContentPartDoneEvent.model_construct(
                content_index=0,
                item_id=item_id,
                output_index=0,
                part=part,
                sequence_number=seq,
                type="response.content_part.done",
            )
            done_message = ResponseOutputMessage.model_construct(
                id=item_id, content=[part], role="assistant", status="completed", type="message"
            )
            output.append(done_message)
            seq += 1
            yield ResponseOutputItemDoneEvent.model_construct(
                item=done_message, output_index=0, sequence_number=seq, type="response.output_item.done"
            )
        seq += 1
        yield ResponseCompletedEvent.model_construct(
            response=_response(output, "completed"), sequence_number=seq, type="response.completed"
        )


@function_tool
async def ok() -> str:
    """Returns ok."""
    return "ok"


@function_tool(name_override="ok")
async def ok_checkpoint() -> str:
    """Returns ok."""
    await asyncio.sleep(0)
    return "ok"


@function_tool(name_override="sleep")
async def sleep() -> str:
    """Sleeps 10 ms."""
    await asyncio.sleep(0.01)
    return "ok"


@functools.cache
def agent(tool: str | None) -> Agent[Any]:
    """One Agent definition per process and tool set; the model is given per run."""
    tools = {"ok": [ok], "ok_checkpoint": [ok_checkpoint], "sleep": [sleep], None: []}[tool]
    return Agent(name="bench", tools=tools, model_settings=ModelSettings(parallel_tool_calls=True))


def _is_text_delta(event: Any) -> bool:
    return type(event) is RawResponsesStreamEvent and type(event.data) is ResponseTextDeltaEvent


def _is_tool_output(event: Any) -> bool:
    return type(event) is RunItemStreamEvent and event.name == "tool_output"


async def _consume(model: ScriptedModel, tool: str | None, check: Any, history: Any = "go") -> int:
    result = Runner.run_streamed(
        agent(tool), history, max_turns=MAX_TURNS, run_config=RunConfig(model=model, tracing_disabled=True)
    )
    seen = 0
    async for event in result.stream_events():
        if check(event):
            seen += 1
    return seen


async def w1_loop(n: int) -> int:
    return await _consume(ScriptedModel(deltas=n), None, _is_text_delta)


async def w1_model(n: int) -> int:
    seen = 0
    async for event in ScriptedModel(deltas=n).stream_response(None, "go"):
        if type(event) is ResponseTextDeltaEvent:
            seen += 1
    return seen


async def w2_turns(turns: int) -> int:
    return await _consume(ScriptedModel(turns=turns), "ok", _is_tool_output)


async def w3_parallel(calls: int) -> int:
    return await _consume(ScriptedModel(turns=1, calls=calls, tool="sleep"), "sleep", _is_tool_output)


async def w4_agents(agents: int) -> int:
    model = ScriptedModel(turns=5)
    results = await asyncio.gather(*(_consume(model, "ok_checkpoint", _is_tool_output) for _ in range(agents)))
    return sum(1 for r in results if r == 5)


WORKLOADS = {
    "w1_loop": w1_loop,
    "w1_model": w1_model,
    "w2_turns": w2_turns,
    "w3_parallel": w3_parallel,
    "w4_agents": w4_agents,
}
