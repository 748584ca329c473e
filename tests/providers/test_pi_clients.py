"""The real TypeScript `streamProxy` clients against `proxy_app`, compared with agentloop's own client.

pi-agent-core 0.73.1 and 1.6.0 (installed from npm into a cache directory on first use, as the
MCP tests install server-everything) each run one conversation through an Agent whose stream
function is their `streamProxy`: thinking, text and a streamed tool call, the tool's result, a
model error, and an abort mid-stream. agentloop's `Agent` with `stream_proxy` runs the same
conversation against a fresh server. Every event is compared field by field; the fields that only
pi 1.x has (`durationMs`, `thinkingLevel`) are named, and the codec reads every TypeScript event.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    MessageUpdate,
    ModelCost,
    TextContent,
)
from agentloop.providers._proxy._client import stream_proxy
from agentloop.providers._proxy._server import proxy_app
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedThinking, ScriptedToolCall, check_events
from agentloop.wire import from_json, to_json

from .. import support

DRIVER = Path(__file__).with_name("pi_wire") / "pi_agent.mjs"
TOKEN = "pi-client-token"
MODEL = dataclasses.replace(
    support.SCRIPTED, reasoning=True, cost=ModelCost(input=1, output=2), context_window=100000, max_tokens=1000
)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ONLY_IN_1X = {"durationMs", "thinkingLevel"}
"""What pi-agent-core 1.x adds to these events: the codec reads and drops them (see `_codec`)."""


def script() -> list[Response]:
    """What the server's model answers, call by call (the same for every client)."""
    return [
        Response(
            content=[
                ScriptedThinking(["Let me ", "check."]),
                ScriptedText(["Checking ", "now."]),
                ScriptedToolCall("call_1", "get_weather", args_chunks=['{"ci', 'ty": "Pa', 'ris"}']),
            ]
        ),
        Response(content=[ScriptedText(["It is ", "sunny."])]),
        Response(content=[ScriptedText("Par")], stop_reason="error", error_message="The model is overloaded"),
        Response(content=[ScriptedText(["Once ", "upon ", "a time"])], chunk_delay=0.3),
    ]


@asynccontextmanager
async def served() -> AsyncIterator[tuple[str, ScriptedModel]]:
    """A fresh `proxy_app` over hypercorn on a loopback port; yields its URL and its model."""
    model = ScriptedModel(script())
    async with support.served(proxy_app(model, token=TOKEN)) as url:
        yield url, model


async def typescript_events(version: str, modules: Path) -> tuple[list[dict[str, Any]], ScriptedModel]:
    async with served() as (url, model):
        done = await anyio.run_process(
            ["node", str(DRIVER), version, url, TOKEN], env={**os.environ, "NODE_PATH": str(modules)}, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().split("\n") if line], model


def weather_tool() -> AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=(TextContent(f"sunny in {params['city']}"),), details={"city": params["city"]})

    return AgentTool(
        name="get_weather", label="Weather", description="The weather in a city.", parameters=SCHEMA, execute=execute
    )


async def agentloop_events() -> tuple[list[AgentEvent], ScriptedModel]:
    async with served() as (url, model):
        agent = Agent(
            model=MODEL,
            system_prompt="You are terse.",
            tools=[weather_tool()],
            thinking_level="high",
            stream_fn=stream_proxy(url, TOKEN),
        )
        events: list[AgentEvent] = []
        abort_on_text = False

        def listen(event: AgentEvent, signal: AbortSignal) -> None:
            nonlocal abort_on_text
            events.append(event)
            if (
                abort_on_text
                and isinstance(event, MessageUpdate)
                and event.assistant_message_event.type == "text_delta"
            ):
                abort_on_text = False
                agent.abort()

        agent.subscribe(listen)
        await agent.prompt("What is the weather in Paris?")
        await agent.prompt("And tomorrow?")
        abort_on_text = True
        await agent.prompt("Tell me a long story")
    return events, model


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    """An event's JSON without timestamps and 1.x-only fields; updates without their snapshots.

    The TypeScript listeners see partial messages that the stream keeps changing (and a
    `message_start` of an assistant message may already hold later text), so streamed
    snapshots are compared through the event that made them, and whole messages at their end.
    """
    event = _without(event, {"timestamp", *ONLY_IN_1X})
    if event["type"] == "message_update":
        return {
            "type": "message_update",
            "assistantMessageEvent": _without(event["assistantMessageEvent"], {"partial"}),
        }
    if event["type"] == "message_start" and event["message"]["role"] == "assistant":
        return {"type": "message_start", "role": "assistant"}
    return event


def extra_keys(value: Any) -> set[str]:
    """The 1.x-only keys anywhere in a JSON value."""
    if isinstance(value, dict):
        return (set(value) & ONLY_IN_1X).union(*(extra_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(extra_keys(v) for v in value))
    return set()


@pytest.mark.parametrize("version", ["0.73.1", "1.6.0"])
async def test_the_typescript_client_gets_what_agentloops_client_gets(
    anyio_backend: object, version: str, pi_node_modules: Path
) -> None:
    with anyio.fail_after(60):
        theirs, their_server = await typescript_events(version, pi_node_modules)
        ours, our_server = await agentloop_events()
    starts = [i for i, e in enumerate(ours) if e.type == "agent_start"]
    for start, end in zip(starts, [*starts[1:], len(ours)], strict=True):
        check_events(ours[start:end])  # three runs, one a prompt
    assert [comparable(e) for e in theirs] == [comparable(to_json(e)) for e in ours]
    assert extra_keys(theirs) == (ONLY_IN_1X if version == "1.6.0" else set())
    # The server's model saw the same requests: prompt, tools and transcript (1.x sends the
    # prompt and tools as a system message, 0.73 as systemPrompt and tools; the server keeps the
    # fields only 1.x sets in the messages' `extra`).
    assert len(their_server.calls) == len(our_server.calls) == 4
    for them, us in zip(their_server.calls, our_server.calls, strict=True):
        assert them.system_prompt == us.system_prompt == "You are terse."
        assert [(t.name, t.description, dict(t.parameters)) for t in them.tools] == [
            ("get_weather", "The weather in a city.", SCHEMA)
        ]
        assert [_without(to_json(m), {"timestamp", *ONLY_IN_1X}) for m in them.messages] == [
            _without(to_json(m), {"timestamp"}) for m in us.messages
        ]
    # The codec reads every TypeScript event and writes it back whole: the fields agentloop does
    # not model (and 0.73.1's `partialJson`, which its client leaves on a streaming tool call of a
    # snapshot that a listener may see) are kept in the values' `extra`.
    for i, event in enumerate(theirs):
        assert to_json(from_json(event)) == event, (i, event)
    ends = [e["message"] for e in theirs if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert [(m["stopReason"], m.get("errorMessage")) for m in ends] == [
        ("toolUse", None),
        ("stop", None),
        ("error", "The model is overloaded"),
        ("aborted", "Request aborted by user"),
    ]
