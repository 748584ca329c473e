"""The scripted agents of the Temporal tests, importable by the tests and by worker processes.

What the two engines' tests share (the model, the common tools and scripts, the log of model
calls and tool starts that survives a killed worker) is `tests.durable_scripts`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

import agentloop as al
from agentloop.temporal import (
    PAYLOAD_LIMIT,
    ActivityOptions,
    FileContextStore,
    MemoryContextStore,
    TemporalAgent,
    idempotency_key,
)
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall
from agentloop.wire import dumps
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


@al.tool
async def slow_lookup(key: str) -> str:
    """Look a key up slowly: until the TOOL_GATE file exists, then for SLOW_TOOL_SECONDS (the kill
    test kills the worker meanwhile)."""
    log("tool_starts", f"slow_lookup {key} {idempotency_key()}")
    await gate("TOOL_GATE")
    await anyio.sleep(float(os.environ.get("SLOW_TOOL_SECONDS", "0")))
    return f"{key}=42"


@al.tool
async def delete(path: str) -> str:
    """Delete a file: a call waits for a person's approval."""
    log("tool_starts", f"delete {path}")
    return f"deleted {path}"


MANY_TURNS: list[Response | str] = [
    *(Response(content=[ScriptedToolCall(f"t{i}", "lookup", {"key": str(i)})]) for i in range(5)),
    "five lookups done",
]

GUARDED: list[Response | str] = [
    Response(
        content=[
            ScriptedToolCall("g1", "delete", {"path": "/tmp/a"}),
            ScriptedToolCall("g2", "lookup", {"key": "x"}),
            ScriptedToolCall("g3", "delete", {"path": "/etc"}),
        ]
    ),
    "done",
]

FAST_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5)

one_tool = TemporalAgent("one_tool", model=MODEL, tools=[lookup], stream_fn=scripted(ONE_TOOL))
parallel = TemporalAgent("parallel", model=MODEL, tools=[lookup, barrier, broken], stream_fn=scripted(PARALLEL))
slow = TemporalAgent(
    "slow",
    model=MODEL,
    tools=[slow_lookup],
    stream_fn=scripted(SLOW),
    tool_abort_grace=0.2,
    tool_activities={"slow_lookup": ActivityOptions(heartbeat_timeout=timedelta(seconds=1), retry_policy=FAST_RETRY)},
)
follow_up = TemporalAgent("follow_up", model=MODEL, tools=[slow_lookup], stream_fn=scripted(FOLLOW_UP))
many_turns = TemporalAgent(
    "many_turns", model=MODEL, tools=[lookup], stream_fn=scripted(MANY_TURNS), turns_per_history=2
)

capped = TemporalAgent(
    "capped", model=MODEL, tools=[lookup], stream_fn=scripted(MANY_TURNS), turns_per_history=2, max_turns=4
)


class SharedStore:
    """A context store in `AGENTLOOP_TEST_LOG`/contexts when that is set (shared by worker
    processes), else in this process's memory; counts its reads, and forgets everything while
    `forgetting` is set."""

    def __init__(self) -> None:
        self.memory = MemoryContextStore()
        self.reads = 0
        self.forgetting = False

    def _store(self) -> FileContextStore | MemoryContextStore:
        directory = os.environ.get("AGENTLOOP_TEST_LOG")
        return FileContextStore(Path(directory) / "contexts") if directory else self.memory

    async def put(self, key: str, data: bytes) -> None:
        await self._store().put(key, data)

    async def get(self, key: str) -> bytes | None:
        self.reads += 1
        return None if self.forgetting else await self._store().get(key)


STORE = SharedStore()
by_reference = TemporalAgent(
    "by_reference",
    model=MODEL,
    tools=[lookup],
    stream_fn=scripted(MANY_TURNS),
    turns_per_history=4,
    context_store=STORE,
)
slow_by_reference = TemporalAgent(
    "slow_by_reference",
    model=MODEL,
    tools=[slow_lookup],
    stream_fn=scripted(SLOW),
    tool_activities={"slow_lookup": ActivityOptions(heartbeat_timeout=timedelta(seconds=1), retry_policy=FAST_RETRY)},
    context_store=STORE,
)
guarded = TemporalAgent(
    "guarded", model=MODEL, tools=[delete, lookup], stream_fn=scripted(GUARDED), needs_approval=["delete"]
)
impatient = TemporalAgent(
    "impatient",
    model=MODEL,
    tools=[delete, lookup],
    stream_fn=scripted(GUARDED),
    needs_approval=lambda call: call.arguments.get("path") == "/etc",
    approval_timeout=timedelta(seconds=1),
)

ALL = [capped, one_tool, parallel, slow, follow_up, many_turns, guarded, impatient, by_reference, slow_by_reference]


def failing_model(
    model: al.Model, context: al.Context, options: al.StreamOptions
) -> AsyncIterator[al.AssistantMessageEvent]:
    """A stream function that breaks its contract (raises): the model activity fails, every attempt."""
    log("model_calls", "failing")
    raise RuntimeError("provider exploded")


failing = TemporalAgent(
    "failing",
    model=MODEL,
    stream_fn=failing_model,
    model_activity=ActivityOptions(
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=2)
    ),
)
ALL.append(failing)

newcomer = TemporalAgent("newcomer", model=MODEL, tools=[lookup], stream_fn=scripted(ONE_TOOL))
"""Held by no worker until the rolling-deploy test starts one with it (not in ALL)."""


@al.tool
async def freeze(account: str) -> str:
    """Freeze an account: refused for good (a non-retryable ApplicationError)."""
    raise ApplicationError(f"account {account} is closed", non_retryable=True)


REFUSED: list[Response | str] = [Response(content=[ScriptedToolCall("f1", "freeze", {"account": "a-1"})]), "ok"]
refused_beating = TemporalAgent(
    "refused_beating",
    model=MODEL,
    tools=[freeze],
    stream_fn=scripted(REFUSED),
    default_tool_activity=ActivityOptions(heartbeat_timeout=timedelta(seconds=10)),
)
refused_quiet = TemporalAgent(
    "refused_quiet",
    model=MODEL,
    tools=[freeze],
    stream_fn=scripted(REFUSED),
    default_tool_activity=ActivityOptions(heartbeat_timeout=None),
)
ALL.extend([refused_beating, refused_quiet])


# --- payload sizes (tests/temporal/test_payload_limits.py) ---------------------------------------


@al.tool
async def blob(size: int) -> str:
    """A result of `size` characters."""
    log("tool_starts", f"blob {size}")
    return "x" * size


def blobs(name: str, *sizes: int, store: SharedStore | None = None) -> TemporalAgent:
    """An agent that calls `blob` once per size, all in one turn, then says "done"."""
    calls = [ScriptedToolCall(f"b{i}", "blob", {"size": size}) for i, size in enumerate(sizes)]
    script: list[Response | str] = [Response(content=calls), "done"]
    return TemporalAgent(name, model=MODEL, tools=[blob], stream_fn=scripted(script), context_store=store)


# The model call after the tool's result carries the prompt, the call and the result: about 900
# bytes of JSON around the result's text, where the tool's own result adds about 50. So a result
# of PAYLOAD_LIMIT - 400 characters fits, and the call after it does not.

blob_600k = blobs("blob_600k", 600_000)
blob_just_under = blobs("blob_just_under", PAYLOAD_LIMIT - 2_000)
blob_just_over = blobs("blob_just_over", PAYLOAD_LIMIT - 400)
TOOL_OVERHEAD = len(dumps(al.AgentToolResult(content=(al.TextContent(""),))))
"""The JSON bytes of a tool's text result around its text."""
blob_too_big = blobs("blob_too_big", PAYLOAD_LIMIT - TOOL_OVERHEAD + 1)  # one byte over
two_blobs = blobs("two_blobs", 1_200_000, 1_200_000)
two_blobs_stored = blobs("two_blobs_stored", 1_200_000, 1_200_000, store=STORE)
odd = TemporalAgent(
    "odd",
    model=MODEL,
    tools=[odd_details],
    stream_fn=scripted(ODD),
)
ALL.extend([blob_600k, blob_just_under, blob_just_over, blob_too_big, two_blobs, two_blobs_stored, odd])


# --- local activities (tests/temporal/test_local_activities.py) -----------------------------------

LOCAL = ActivityOptions(local=True)
local_calls = TemporalAgent(
    "local_calls",
    model=MODEL,
    tools=[lookup, barrier, broken],
    stream_fn=scripted(PARALLEL),
    model_activity=LOCAL,
    default_tool_activity=LOCAL,
)
local_slow = TemporalAgent(
    "local_slow",
    model=MODEL,
    tools=[slow_lookup],
    stream_fn=scripted(SLOW),
    tool_abort_grace=0.2,
    model_activity=LOCAL,
    default_tool_activity=LOCAL,
)
ALL.extend([local_calls, local_slow])


# --- an abort while the model speaks (tests/temporal/test_abort_keeps_partial_text.py) ------------


async def half_answer(
    model: al.Model, context: al.Context, options: al.StreamOptions
) -> AsyncIterator[al.AssistantMessageEvent]:
    """Streams "Hello, wor", logs `streamed` (in `model_calls`), then waits ten minutes before "ld"."""
    deltas = 0
    answer = Response(content=[ScriptedText(["Hello", ", wor", "ld"])])
    async for event in ScriptedModel([answer])(model, context, options):
        if event.type == "text_delta":
            deltas += 1
            if deltas == 3:
                log("model_calls", "streamed")
                await anyio.sleep(600)
        yield event


talker = TemporalAgent("talker", model=MODEL, stream_fn=half_answer)
deaf_talker = TemporalAgent(
    "deaf_talker", model=MODEL, stream_fn=half_answer, model_activity=ActivityOptions(heartbeat_timeout=None)
)
local_talker = TemporalAgent("local_talker", model=MODEL, stream_fn=half_answer, model_activity=LOCAL)
ALL.extend([talker, deaf_talker, local_talker])

UNSTORED = [agent for agent in ALL if agent.contexts is None]
"""The agents without a store: a worker of only these keeps every payload in the history."""
STORED = [agent for agent in ALL if agent.contexts is not None]
"""The agents with the store: a worker holds these or the others (one store for all its payloads)."""
