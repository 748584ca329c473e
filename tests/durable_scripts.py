"""What the scripted agents of the durable-engine tests (tests/temporal, tests/dbos) share.

Each model answers a call with the n-th scripted response, n being the number of assistant
messages in the context (so a fresh worker process answers as the first one would). When
`AGENTLOOP_TEST_LOG` names a directory, model calls and tool starts are appended to files there
(`model_calls`, `tool_starts`): the counts survive a killed worker.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio

import agentloop as al
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

MODEL = al.Model(id="scripted", api="scripted", provider="scripted")


def log(name: str, line: str) -> None:
    """Append `line` to the file `name` of `AGENTLOOP_TEST_LOG`, when it is set."""
    directory = os.environ.get("AGENTLOOP_TEST_LOG")
    if directory:
        with open(Path(directory) / name, "a") as f:
            f.write(line + "\n")


async def gate(variable: str) -> None:
    """When the environment variable `variable` names a file, wait until the test creates it: a
    tool or model call held open until the test has sent its message (whatever the machine's speed)."""
    path = os.environ.get(variable)
    if path:
        while not await anyio.Path(path).exists():  # noqa: ASYNC110 (the test creates it, from another thread or process)
            await anyio.sleep(0.02)


def scripted(responses: Sequence[Response | str]):  # type: ignore[no-untyped-def]
    def stream(
        model: al.Model, context: al.Context, options: al.StreamOptions
    ) -> AsyncIterator[al.AssistantMessageEvent]:
        n = sum(1 for m in context.messages if m.role == "assistant")
        log("model_calls", str(n))
        return ScriptedModel([responses[n]] if n < len(responses) else [])(model, context, options)

    return stream


@al.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    log("tool_starts", f"lookup {key}")
    return f"{key}=42"


@al.tool(execution_mode="sequential")
async def barrier(note: str) -> str:
    """A tool that runs alone in a batch."""
    log("tool_starts", f"barrier {note}")
    return f"noted {note}"


@al.tool
async def broken(key: str) -> str:
    """A tool that fails."""
    raise KeyError(f"no such key: {key}")


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
FOLLOW_UP: list[Response | str] = [*SLOW, "y is 43"]


class Opaque:
    """A value JSON cannot carry (and a client without this module could not unpickle)."""


@al.tool
async def odd_details(key: str) -> al.AgentToolResult:
    """A result whose details are not JSON values."""
    log("tool_starts", f"odd_details {key}")
    return al.AgentToolResult(content=(al.TextContent("ok"),), details={"value": Opaque()})


ODD: list[Response | str] = [Response(content=[ScriptedToolCall("o1", "odd_details", {"key": "k"})]), "done"]
