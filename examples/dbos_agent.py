"""A durable agent on DBOS: a worker process and a client, runnable as written.

    pip install 'anyio-agentloop[dbos]'
    python examples/dbos_agent.py worker                 # one terminal (or several: they share the queue)
    python examples/dbos_agent.py client                 # another: starts a run and streams its events
    python examples/dbos_agent.py client --id ID --after SEQ   # reconnect to a run, from an event on

DBOS keeps everything in one database: SQLite by default (`dbos_example.sqlite` here), or
PostgreSQL with `DBOS_DATABASE_URL=postgresql://user@host:5432/agents`. No server to start for
SQLite; the worker and the client must see the same file.

Kill the worker (kill -9) while the `add` tool sleeps and start it again: launching DBOS recovers
the run; the model is not called again for the finished turn, the tool runs again (with the same
`idempotency_key()`), and the client, still reading, sees every event once.

The model is scripted so that the example runs without a key. For a real provider, give the agent
its model (`al.Model(id="gpt-4o-mini", api="openai-completions", provider="openai")`) and no
`stream_fn`: the model step reads the key on the worker (OPENAI_API_KEY); keys never enter DBOS's
database.
"""

from __future__ import annotations

import argparse
import asyncio  # noqa: TID251 (DBOS runs async workflows on asyncio only)
import contextlib
import os
import threading
import uuid
from collections.abc import AsyncIterator

from dbos import DBOS, DBOSClient

import agentloop as al
from agentloop.dbos import (
    DBOSAgent,
    idempotency_key,
    listen_queues,
    register_queues,
    result,
    start_agent,
    stream_events,
)
from agentloop.testing import Response, ScriptedModel, ScriptedToolCall

DATABASE_URL = os.environ.get("DBOS_DATABASE_URL", "sqlite:///dbos_example.sqlite")
TOOL_SECONDS = float(os.environ.get("EXAMPLE_TOOL_SECONDS", "5"))


@al.tool
async def add(a: int, b: int) -> str:
    """Add two integers (slowly: time to kill the worker)."""
    print(f"add({a}, {b}) with idempotency key {idempotency_key()}", flush=True)
    await asyncio.sleep(TOOL_SECONDS)
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


# Defined at import time, before DBOS.launch(): a worker that recovers a run finds it by name.
calculator = DBOSAgent(
    "calculator",
    model=al.Model(id="scripted", api="scripted"),
    tools=[add],
    stream_fn=scripted_model,
    system_prompt="You add numbers with the add tool.",
)


def run_worker() -> None:
    DBOS(config={"name": "agentloop-example", "system_database_url": DATABASE_URL})
    listen_queues()  # dequeue only the runs of the agents this worker holds
    DBOS.launch()  # recovers the runs a killed worker left unfinished
    queues = register_queues(polling_interval_sec=0.2)  # where clients enqueue runs, one per agent
    print(f"worker on {DATABASE_URL}, queues {queues}; Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    finally:
        DBOS.destroy()


async def run_client(workflow_id: str | None, after: int) -> None:
    client = DBOSClient(system_database_url=DATABASE_URL)
    try:
        if workflow_id is None:
            prompt = al.UserMessage(content="What is 2 + 3?")
            workflow_id = await start_agent(
                "calculator", [prompt], id=f"calculator-{uuid.uuid4().hex[:8]}", client=client
            )
            print(f"started {workflow_id}", flush=True)
        async for envelope in stream_events(workflow_id, after_seq=after, client=client):
            event = envelope.event
            line = f"{envelope.seq:3} turn {envelope.turn} {event.type}"
            if isinstance(event, al.MessageEnd) and isinstance(event.message, al.AssistantMessage):
                line += f": {event.message.text!r}"
            elif isinstance(event, al.ToolExecutionEnd):
                line += f": {event.tool_name} -> {event.result.content[0].text}"  # type: ignore[union-attr]
            print(line, flush=True)
        print([m.role for m in await result(workflow_id, client=client)], flush=True)
    finally:
        client.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["worker", "client"])
    parser.add_argument("--id", help="the workflow id of a run to reconnect to")
    parser.add_argument("--after", type=int, default=-1, help="the seq of the last event already seen")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops the worker quietly
        if args.role == "worker":
            run_worker()
        else:
            asyncio.run(run_client(args.id, args.after))


if __name__ == "__main__":
    main()
