"""The scripted agents of the DBOS tests, importable by the tests and by worker processes.

Each agent's model answers a call with the n-th scripted response, n being the number of
assistant messages in the context (so a fresh worker process answers as the first one would).
When `AGENTLOOP_TEST_LOG` names a directory, model calls and tool starts are appended to files
there (`model_calls`, `tool_starts`): the counts survive a killed worker.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
from dbos._error import DBOSException

import agentloop as al
from agentloop.dbos import DBOSAgent, idempotency_key
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

MODEL = al.Model(id="scripted", api="scripted", provider="scripted")


def _log(name: str, line: str) -> None:
    directory = os.environ.get("AGENTLOOP_TEST_LOG")
    if directory:
        with open(Path(directory) / name, "a") as f:
            f.write(line + "\n")


def scripted(responses: Sequence[Response | str]):  # type: ignore[no-untyped-def]
    def stream(
        model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        n = sum(1 for m in context.messages if m.role == "assistant")
        _log("model_calls", str(n))
        return ScriptedModel([responses[n]] if n < len(responses) else [])(model, context, options)

    return stream


@al.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    _log("tool_starts", f"lookup {key}")
    return f"{key}=42"


@al.tool
async def slow_lookup(key: str) -> str:
    """Look a key up slowly: for SLOW_TOOL_SECONDS (the kill test kills the worker meanwhile)."""
    _log("tool_starts", f"slow_lookup {key} {idempotency_key()}")
    await anyio.sleep(float(os.environ.get("SLOW_TOOL_SECONDS", "0")))
    return f"{key}=42"


@al.tool(execution_mode="sequential")
async def barrier(note: str) -> str:
    """A tool that runs alone in a batch."""
    _log("tool_starts", f"barrier {note}")
    return f"noted {note}"


@al.tool
async def broken(key: str) -> str:
    """A tool that fails."""
    raise KeyError(f"no such key: {key}")


@al.tool
async def engine_failure(key: str) -> str:
    """A tool that raises DBOS's own exception: it must end the run, not become a tool result."""
    raise DBOSException(f"the engine failed on {key}")


@al.tool(execution_mode="sequential")
async def pay(amount: int) -> str:
    """Pay an amount (waits for a human's approval)."""
    _log("tool_starts", f"pay {amount} {idempotency_key()}")
    return f"paid {amount}"


ONE_TOOL: list[Response | str] = [
    Response(content=[ScriptedToolCall("c1", "lookup", {"key": "x"})]),
    "x is 42",
]
PARALLEL: list[Response | str] = [
    Response(
        content=[
            ScriptedToolCall("p1", "lookup", {"key": "a"}),
            ScriptedToolCall("p2", "barrier", {"note": "b"}),
            ScriptedToolCall("p3", "lookup", {"key": "c"}),
            ScriptedToolCall("p4", "broken", {"key": "d"}),
        ]
    ),
    "all done",
]
SLOW: list[Response | str] = [
    Response(content=[ScriptedToolCall("s1", "slow_lookup", {"key": "x"})]),
    "x is 42",
]
SLOW_PARALLEL: list[Response | str] = [
    Response(
        content=[
            ScriptedToolCall("q1", "lookup", {"key": "a"}),
            ScriptedToolCall("q2", "slow_lookup", {"key": "b"}),
            ScriptedToolCall("q3", "lookup", {"key": "c"}),
        ]
    ),
    "a, b and c are 42",
]
ENGINE: list[Response | str] = [
    Response(content=[ScriptedToolCall("e1", "engine_failure", {"key": "x"})]),
    "not reached",
]
FOLLOW_UP: list[Response | str] = [*SLOW, "y is 43"]
PAYMENT: list[Response | str] = [
    Response(content=[ScriptedToolCall("m1", "pay", {"amount": 5})]),
    "done",
]

one_tool = DBOSAgent("one_tool", model=MODEL, tools=[lookup], stream_fn=scripted(ONE_TOOL))
parallel = DBOSAgent("parallel", model=MODEL, tools=[lookup, barrier, broken], stream_fn=scripted(PARALLEL))
slow = DBOSAgent("slow", model=MODEL, tools=[slow_lookup], stream_fn=scripted(SLOW), tool_abort_grace=0.2)
slow_parallel = DBOSAgent("slow_parallel", model=MODEL, tools=[lookup, slow_lookup], stream_fn=scripted(SLOW_PARALLEL))
engine = DBOSAgent("engine", model=MODEL, tools=[engine_failure], stream_fn=scripted(ENGINE))
follow_up = DBOSAgent("follow_up", model=MODEL, tools=[slow_lookup], stream_fn=scripted(FOLLOW_UP))
payment = DBOSAgent("payment", model=MODEL, tools=[pay], stream_fn=scripted(PAYMENT), approval=["pay"])


def failing_model(
    model: al.Model, context: al.Context, options: al.StreamOptions
) -> AsyncIterator[al.AssistantMessageEvent]:
    """A stream function that breaks its contract (raises): the model step records a failed call."""
    _log("model_calls", "failing")
    raise RuntimeError("provider exploded")


failing = DBOSAgent("failing", model=MODEL, stream_fn=failing_model)
