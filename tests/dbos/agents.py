"""The scripted agents of the DBOS tests, importable by the tests and by worker processes.

What the two engines' tests share (the model, the common tools and scripts, the log of model
calls and tool starts that survives a killed worker) is `tests.durable_scripts`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import timedelta

import anyio
from dbos import DBOSConfig
from dbos import error as dbos_error

import agentloop as al
from agentloop.dbos import DBOSAgent, idempotency_key
from agentloop.testing import Response, ScriptedToolCall
from tests.durable_scripts import (
    FOLLOW_UP,
    MODEL,
    ODD,
    ONE_TOOL,
    PARALLEL,
    SLOW,
    barrier,
    broken,
    gate,
    log,
    lookup,
    odd_details,
    scripted,
)


def dbos_config(url: str) -> DBOSConfig:
    """The DBOS config of the tests' processes: quiet, and quick to notice new stream values."""
    return {
        "name": "agentloop-tests",
        "system_database_url": url,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }


@al.tool
async def slow_lookup(key: str) -> str:
    """Look a key up slowly: until the TOOL_GATE file exists, then for SLOW_TOOL_SECONDS (the kill
    test kills the worker meanwhile)."""
    log("tool_starts", f"slow_lookup {key} {idempotency_key()}")
    await gate("TOOL_GATE")
    await anyio.sleep(float(os.environ.get("SLOW_TOOL_SECONDS", "0")))
    return f"{key}=42"


@al.tool
async def engine_failure(key: str) -> str:
    """A tool that raises DBOS's own exception: it must end the run, not become a tool result."""
    raise dbos_error.DBOSException(f"the engine failed on {key}")


@al.tool(execution_mode="sequential")
async def pay(amount: int) -> str:
    """Pay an amount (waits for a human's approval)."""
    log("tool_starts", f"pay {amount} {idempotency_key()}")
    return f"paid {amount}"


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
odd = DBOSAgent("odd", model=MODEL, tools=[odd_details], stream_fn=scripted(ODD))
payment = DBOSAgent("payment", model=MODEL, tools=[pay], stream_fn=scripted(PAYMENT), needs_approval=["pay"])
LOOKUP_THEN_PAYMENT: list[Response | str] = [
    Response(content=[ScriptedToolCall("l1", "lookup", {"key": "x"}), ScriptedToolCall("m1", "pay", {"amount": 5})]),
    "done",
]
lookup_then_payment = DBOSAgent(
    "lookup_then_payment",
    model=MODEL,
    tools=[lookup, pay],
    stream_fn=scripted(LOOKUP_THEN_PAYMENT),
    needs_approval=["pay"],
)

TWO_PAYMENTS: list[Response | str] = [
    Response(content=[ScriptedToolCall("m1", "pay", {"amount": 5}), ScriptedToolCall("m2", "pay", {"amount": 900})]),
    "done",
]
two_payments = DBOSAgent(
    "two_payments", model=MODEL, tools=[pay], stream_fn=scripted(TWO_PAYMENTS), needs_approval=["pay"]
)
BAD_THEN_GOOD_PAYMENT: list[Response | str] = [
    Response(content=[ScriptedToolCall("m1", "pay", {"amount": "lots"}), ScriptedToolCall("m2", "pay", {"amount": 5})]),
    "done",
]
bad_then_good_payment = DBOSAgent(
    "bad_then_good_payment", model=MODEL, tools=[pay], stream_fn=scripted(BAD_THEN_GOOD_PAYMENT), needs_approval=["pay"]
)
impatient_payment = DBOSAgent(
    "impatient_payment",
    model=MODEL,
    tools=[pay],
    stream_fn=scripted(PAYMENT),
    needs_approval=["pay"],
    approval_timeout=timedelta(milliseconds=200),
)


TOOL_TURNS: list[Response | str] = [
    *(Response(content=[ScriptedToolCall(f"t{i}", "lookup", {"key": str(i)})]) for i in range(4)),
    "done",
]
tool_turns = DBOSAgent("tool_turns", model=MODEL, tools=[lookup], stream_fn=scripted(TOOL_TURNS))


def slow_first_answer(responses: list[Response | str]):  # type: ignore[no-untyped-def]
    """`scripted(responses)` whose first call waits until the MODEL_GATE file exists (a test sends a
    message meanwhile)."""
    answer = scripted(responses)

    async def stream(
        model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        events = answer(model, context, options)  # logs the call
        if not any(m.role == "assistant" for m in context.messages):
            await gate("MODEL_GATE")
        async for event in events:
            yield event

    return stream


# A first answer that calls a tool, one whose only call fails its checks (no tool step), and one
# without tools; then the answer to the message sent during the first call.
SLOW_ANSWERS: dict[str, list[Response | str]] = {
    "slow_tool_answer": [Response(content=[ScriptedToolCall("a1", "lookup", {"key": "x"})]), "and y is 43"],
    "slow_unknown_tool": [Response(content=[ScriptedToolCall("a1", "no_such_tool", {})]), "and y is 43"],
    "slow_text_answer": ["x is 42", "and y is 43"],
}
slow_answers = {
    name: DBOSAgent(name, model=MODEL, tools=[lookup], stream_fn=slow_first_answer(responses))
    for name, responses in SLOW_ANSWERS.items()
}


def failing_model(
    model: al.Model, context: al.Context, options: al.StreamOptions
) -> AsyncIterator[al.AssistantMessageEvent]:
    """A stream function that breaks its contract (raises): the model step records a failed call."""
    log("model_calls", "failing")
    raise RuntimeError("provider exploded")


failing = DBOSAgent("failing", model=MODEL, stream_fn=failing_model)


async def _nap(tool_call_id: str, params: dict[str, float], signal: al.AbortSignal, on_update: object) -> str:
    await anyio.sleep(params["seconds"])
    return "rested"


nap = al.AgentTool(
    name="nap",
    description="Sleep longer than the tool's timeout.",
    parameters={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    execute=_nap,
    timeout=0.2,
)


NAP: list[Response | str] = [Response(content=[ScriptedToolCall("n1", "nap", {"seconds": 5})]), "too slow"]
napping = DBOSAgent("napping", model=MODEL, tools=[nap], stream_fn=scripted(NAP))
